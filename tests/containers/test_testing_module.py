"""``gateway.testing.GatewayContainer`` and the pytest plugin's ``gateway`` fixture on Docker:
a healthy container with a connected client; a container that cannot start is an error with
its output; and nothing is left running, also when the test using the fixture fails (no
testcontainers reaper: it is an image from a registry)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from gateway.client import row_insert


def _containers() -> set[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", "ancestor=gateway:dev"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_a_gateway_container_serves_with_a_connected_client():
    from gateway.testing import GatewayContainer

    before = _containers()
    with GatewayContainer(plugins=["sqlite"]) as g, g.client(timeout=30) as c:
        c.write([row_insert("s.t", {"id": 1}, {"v": "x"})])
        assert c.get("s.t", 1) == {"id": 1, "v": "x"}
    assert not _containers() - before  # none of this test's containers is left


def test_a_container_that_cannot_start_is_an_error_with_its_output():
    from gateway.testing import GatewayContainer

    before = _containers()
    with pytest.raises(RuntimeError, match="unknown plugin 'nope'"):
        GatewayContainer(plugins=["nope"]).start()
    assert not _containers() - before  # none of this test's containers is left


def test_the_fixture_removes_its_container_when_the_test_fails(tmp_path):
    (tmp_path / "test_app.py").write_text(textwrap.dedent("""
        def test_fails(gateway):
            with gateway.client(timeout=30) as c:
                c.status()
            raise AssertionError("the application is broken")
    """))
    before = _containers()
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path)], capture_output=True, text=True,
                         env={**os.environ, "GATEWAY_TEST_BACKEND": "docker"},
                         timeout=300)
    assert res.returncode == 1 and "the application is broken" in res.stdout, res.stdout
    assert not _containers() - before  # none of this test's containers is left
