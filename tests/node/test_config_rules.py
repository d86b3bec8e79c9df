"""The configuration's rules for addresses (shared with ``AddNode``) and the one request-size
limit, ``max_request_bytes``."""

from __future__ import annotations

import pytest

from gateway.node.base.config import ConfigError, NodeConfig, address_problem, parse_address


@pytest.mark.parametrize("text", ["127.0.0.1:7100", "localhost:1", "node-1.example.com:65535",
                                  "gateway_1:7070", "[::1]:7100", "[fe80::1%eth0]:80",
                                  "0.0.0.0:7070"])
def test_valid_addresses(text):
    assert address_problem(text) is None


@pytest.mark.parametrize(("text", "words"), [
    ("::::", "port"), ("127.0.0.1:99999", "65535"), ("not an address", "HOST:PORT"),
    ("127.0.0.1:0", "from 1"), (":7100", "HOST:PORT"), ("host:", "port"), ("host:-1", "port"),
    ("host:\u0663", "port"), ("::1:7100", "brackets"), ("[::1", "IPv6"), ("[::x]:1", "IPv6"),
    ("256.0.0.1:1", "IPv4"), ("a b:1", "host name"), ("-a:1", "host name"),
    ("a..b:1", "host name"), ("x" * 64 + ":1", "host name"),
])
def test_invalid_addresses(text, words):
    reason = address_problem(text)
    assert reason is not None and words in reason, reason


def test_listening_addresses_may_use_port_zero():
    assert address_problem("127.0.0.1:0", any_port=True) is None
    assert parse_address("[::1]:0", "listen") == ("[::1]", 0)
    with pytest.raises(ConfigError, match=r"^api: 'x y:1' is not HOST:PORT"):
        parse_address("x y:1", "api")


@pytest.mark.parametrize("value", [0, -1, 1023, (32 << 20) + 1, 1 << 40])
def test_max_request_bytes_out_of_bounds_is_refused(value):
    with pytest.raises(ConfigError, match=r"^max_request_bytes: must be between 1024 and"):
        NodeConfig(max_request_bytes=value).validate()


def test_max_request_bytes_bounds_are_valid():
    for value in (1024, 4 << 20, 32 << 20):
        NodeConfig(max_request_bytes=value).validate()
