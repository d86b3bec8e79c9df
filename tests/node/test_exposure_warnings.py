"""A node reachable from other hosts without TLS or tokens says so loudly at start."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from gateway.node.api.exposure import exposure_warnings, is_loopback
from gateway.node.base.config import TlsConfig

from .conftest import node_configs, run, running


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1:7070", True), ("127.8.9.1:7070", True), ("localhost:7070", True),
    ("[::1]:7070", True), ("0.0.0.0:7070", False), ("[::]:7070", False), (":7070", False),
    ("10.1.2.3:7070", False), ("gw-0.gw:7070", False)])
def test_loopback_addresses(address, loopback):
    assert is_loopback(address) is loopback


def test_non_loopback_api_without_tls_or_tokens_is_warned_at_start(tmp_path, caplog):
    cfg = node_configs(tmp_path, 1)[0]
    port = cfg.api.rpartition(":")[2]
    cfg = dataclasses.replace(cfg, api=f"0.0.0.0:{port}")

    async def body() -> None:
        async with running(cfg):
            pass

    with caplog.at_level(logging.WARNING):
        run(body())
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith("SECURITY: api 0.0.0.0:") and "NO TLS and NO tokens" in m
               for m in lines), lines


def test_loopback_node_starts_without_security_warnings(tmp_path):
    assert exposure_warnings(node_configs(tmp_path, 1)[0]) == []


def test_each_missing_protection_is_named(tmp_path):
    cfg = node_configs(tmp_path, 3)[0]
    exposed = dataclasses.replace(cfg, api="0.0.0.0:7070", listen="0.0.0.0:7100",
                                  metrics="0.0.0.0:9100")
    text = "\n".join(exposure_warnings(exposed))
    assert "NO TLS and NO tokens" in text and "without mutual TLS" in text
    assert "metrics 0.0.0.0:9100" in text
    tokens_only = dataclasses.replace(exposed, tokens_file="/etc/tokens.toml")
    assert "without TLS: bearer tokens" in "\n".join(exposure_warnings(tokens_only))
    tls_only = dataclasses.replace(exposed, tls=TlsConfig(api_cert="c", api_key="k"))
    assert "TLS but no tokens" in "\n".join(exposure_warnings(tls_only))
