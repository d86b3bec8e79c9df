"""``gateway.testing.LocalGateway``: the Docker-free backend of the test fixtures."""

from __future__ import annotations

import os

import pytest

from gateway.client import row_insert
from gateway.testing import LocalGateway, gateway_for_tests


def test_a_local_gateway_serves_and_leaves_nothing_behind():
    with LocalGateway() as g:
        data = g._dir
        with g.client(timeout=30) as c:
            c.write([row_insert("s.t", {"id": 1}, {"v": "x"})])
            assert c.get("s.t", 1) == {"id": 1, "v": "x"}
            assert [a.name for a in c.status().appliers] == ["sqlite"]
    assert data is not None and not os.path.exists(data)


def test_a_bad_start_is_an_error_with_the_reason_and_leaves_nothing_behind():
    g = LocalGateway(plugins=["nope"])
    with pytest.raises(RuntimeError, match="unknown plugin 'nope'"):
        g.start()
    assert g._dir is None


def test_the_backend_is_chosen_by_gateway_test_backend(monkeypatch):
    monkeypatch.setenv("GATEWAY_TEST_BACKEND", "local")
    assert isinstance(gateway_for_tests(), LocalGateway)
    monkeypatch.setenv("GATEWAY_TEST_BACKEND", "kubernetes")
    with pytest.raises(ValueError, match="expected auto, docker or local"):
        gateway_for_tests()
