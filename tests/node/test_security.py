"""TLS on the API, mutual TLS between peers, bearer tokens, refusing half-configured TLS."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from gateway.client import AsyncGatewayClient, GatewayError, row_insert
from gateway.node import NodeConfig
from gateway.node.api.security import make_test_ca
from gateway.node.base.config import ConfigError, TlsConfig

from .conftest import leader_of, node_configs, run, running


@pytest.fixture(scope="module")
def cas(tmp_path_factory):
    base = tmp_path_factory.mktemp("ca")
    return make_test_ca(str(base / "a")), make_test_ca(str(base / "b"))


def _tls(ca: dict[str, str]) -> TlsConfig:
    return TlsConfig(api_cert=ca["node"], api_key=ca["node_key"], peer_cert=ca["node"],
                     peer_key=ca["node_key"], peer_ca=ca["ca"])


def test_tokens_read_token_cannot_write_and_no_token_is_refused(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[token]]\nname = "reader"\ntoken = "r"\npermissions = ["read"]\n'
                      '[[token]]\nname = "app"\ntoken = "w"\npermissions = ["read", "write"]\n'
                      '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["admin"]\n')
    cfg = node_configs(tmp_path, 1, tokens_file=str(tokens))[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            stmt = [row_insert("t.s", {"id": 1}, {"v": "x"})]
            for token, code in (("", grpc.StatusCode.UNAUTHENTICATED),
                                ("nope", grpc.StatusCode.UNAUTHENTICATED),
                                ("r", grpc.StatusCode.PERMISSION_DENIED),
                                ("a", grpc.StatusCode.PERMISSION_DENIED)):
                async with AsyncGatewayClient(cfg.api, token=token) as c:
                    with pytest.raises(GatewayError) as ei:
                        await c.write(stmt)
                    assert ei.value.code == code, token
            assert node.sm.last_trans_id == 0
            async with AsyncGatewayClient(cfg.api, token="w") as c:
                await c.write(stmt)
            async with AsyncGatewayClient(cfg.api, token="r") as c:
                assert await c.get("t.s", 1) == {"id": 1, "v": "x"}
                with pytest.raises(GatewayError) as ei:
                    await c.snapshot()
                assert ei.value.code == grpc.StatusCode.PERMISSION_DENIED
            async with AsyncGatewayClient(cfg.api, token="a") as c:
                assert (await c.status()).role == "leader"

    run(go())


def test_tls_api_and_mutual_tls_cluster(tmp_path, cas):
    a, _ = cas
    cfgs = node_configs(tmp_path, 3, tls=_tls(a))

    async def go() -> None:
        async with running(*cfgs) as nodes:
            await leader_of(nodes)
            with open(a["ca"], "rb") as f:
                root = f.read()
            async with AsyncGatewayClient(cfgs[0].api, root_certificates=root) as c:
                r = await c.write([row_insert("t.tls", {"id": 1}, {"v": "secret"})])
                assert r.gtid.trans_id == 1
            async with AsyncGatewayClient(cfgs[0].api, timeout=1.0,
                                          attempt_timeout=0.5) as c:  # plaintext: refused
                with pytest.raises(GatewayError):
                    await c.status()

    run(go(), 90)


def test_peer_with_a_certificate_from_another_ca_cannot_join(tmp_path, cas):
    a, b = cas
    cfgs = node_configs(tmp_path, 3, tls=_tls(a))
    cfgs[2] = NodeConfig(**{**{f: getattr(cfgs[2], f) for f in cfgs[2].__dataclass_fields__},
                            "tls": _tls(b)})

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes[:2], 20)
            async with AsyncGatewayClient(leader.config.api, root_certificates=open(
                    a["ca"], "rb").read()) as c:
                await c.write([row_insert("t.m", {"id": 1}, {"v": "x"})])
            await asyncio.sleep(1.0)
            outsider = nodes[2]
            assert outsider.sm.applied_index <= 1  # nothing reached it
            assert outsider.driver.leader_id == 0
            assert not outsider.driver.is_leader

    run(go(), 90)


@pytest.mark.parametrize(("tls", "key"), [
    (TlsConfig(api_cert="x.pem"), "tls.api_key"),
    (TlsConfig(api_key="x.key"), "tls.api_cert"),
    (TlsConfig(peer_cert="x.pem", peer_key="x.key"), "tls.peer_ca"),
    (TlsConfig(api_client_ca="ca.pem"), "tls.api_client_ca"),
])
def test_half_configured_tls_is_refused(tls, key):
    with pytest.raises(ConfigError) as ei:
        NodeConfig(tls=tls).validate()
    assert str(ei.value).startswith(key)
