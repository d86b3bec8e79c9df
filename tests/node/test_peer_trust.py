"""The peer port is no way around the API's tokens: a forwarded call carries the caller's
bearer token and the leader checks it as its API would; a peer port reachable from other
hosts needs mutual TLS or an explicit ``insecure_peer``."""

from __future__ import annotations

import dataclasses
import logging

import grpc
import pytest

from gateway.client import AsyncGatewayClient, GatewayError, row_insert
from gateway.node import GatewayNode, NodeConfig
from gateway.node.api.security import make_test_ca
from gateway.node.base.config import ConfigError, TlsConfig, load_config
from gateway.node.server import NodeStartError
from gateway.v1 import gateway_pb2, peer_pb2, peer_pb2_grpc

from .conftest import free_ports, leader_of, node_configs, run, running, wait_for

_TOKENS = ('[[token]]\nname = "reader"\ntoken = "r"\npermissions = ["read"]\n'
           '[[token]]\nname = "app"\ntoken = "w"\npermissions = ["read", "write"]\n'
           '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["admin"]\n')


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


def _write_request(key: int) -> bytes:
    (stmt,) = [row_insert("t.peer", {"id": key}, {"v": "forwarded"})]
    return gateway_pb2.WriteRequest(statements=[stmt]).SerializeToString()


def test_forwarded_calls_need_the_token_the_api_would(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_TOKENS)
    cfgs = node_configs(tmp_path, 3, tokens_file=str(tokens))

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            async with grpc.aio.insecure_channel(leader.config.listen) as ch:
                peer = peer_pb2_grpc.PeerStub(ch)

                async def forward(method: str, payload: bytes, token: str) -> grpc.StatusCode:
                    try:
                        await peer.Forward(peer_pb2.ForwardRequest(
                            method=method, request=payload), metadata=_bearer(token),
                            timeout=20)
                    except grpc.aio.AioRpcError as exc:
                        return exc.code()
                    return grpc.StatusCode.OK

                add = gateway_pb2.AddNodeRequest(node_id=9, peer_address="127.0.0.1:1",
                                                 learner=True).SerializeToString()
                refused = {
                    ("Write", ""): grpc.StatusCode.UNAUTHENTICATED,
                    ("Write", "nope"): grpc.StatusCode.UNAUTHENTICATED,
                    ("Write", "r"): grpc.StatusCode.PERMISSION_DENIED,
                    ("Write", "a"): grpc.StatusCode.PERMISSION_DENIED,
                    ("AddNode", ""): grpc.StatusCode.UNAUTHENTICATED,
                    ("AddNode", "w"): grpc.StatusCode.PERMISSION_DENIED,
                    ("RemoveNode", ""): grpc.StatusCode.UNAUTHENTICATED,
                    ("TransferLeader", "r"): grpc.StatusCode.PERMISSION_DENIED,
                    ("Conflicts", "w"): grpc.StatusCode.PERMISSION_DENIED,
                }
                for (method, token), code in refused.items():
                    payload = _write_request(1) if method == "Write" else add
                    assert await forward(method, payload, token) == code, (method, token)
                assert leader.sm.last_trans_id == 0
                assert 9 not in leader.transport.address_of  # no learner was added
                assert await forward("Write", _write_request(2), "w") == grpc.StatusCode.OK
                assert leader.sm.last_trans_id == 1

            # A follower's API forwards with the caller's token: the right one works, a
            # read-only one is refused (by the follower's API, and the leader would too).
            follower = next(n for n in nodes if n is not leader)
            async with AsyncGatewayClient(follower.config.api, token="w") as c:
                r = await c.write([row_insert("t.peer", {"id": 3}, {"v": "via follower"})])
                assert r.gtid.trans_id == 2
            async with AsyncGatewayClient(follower.config.api, token="r") as c:
                with pytest.raises(GatewayError) as ei:
                    await c.write([row_insert("t.peer", {"id": 4}, {"v": "no"})])
                assert ei.value.code == grpc.StatusCode.PERMISSION_DENIED
            await wait_for(lambda: follower.sm.applied_index >= leader.sm.applied_index)
            assert leader.sm.last_trans_id == 2

    run(go(), 90)


def test_a_forwarded_write_keeps_its_token_through_stream_write(tmp_path):
    """StreamWrite on a follower forwards each write with the stream's token."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_TOKENS)
    cfgs = node_configs(tmp_path, 3, tokens_file=str(tokens))

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            follower = next(n for n in nodes if n is not leader)
            async with grpc.aio.insecure_channel(follower.config.api) as ch:
                from gateway.v1 import gateway_pb2_grpc
                stub = gateway_pb2_grpc.GatewayStub(ch)
                req = gateway_pb2.StreamWriteRequest(seq=1, writes=[
                    gateway_pb2.WriteRequest(statements=[row_insert(
                        "t.peer", {"id": 5}, {"v": "streamed"})])])
                acks = [a async for resp in stub.StreamWrite(iter([req]),
                                                              metadata=_bearer("w"),
                                                              timeout=20)
                        for a in resp.acks]
            assert [(a.seq, a.code, a.error) for a in acks] == [(1, 0, "")]
            assert leader.sm.last_trans_id == 1

    run(go(), 90)


def test_a_peer_port_reachable_from_other_hosts_needs_mutual_tls_or_insecure_peer(tmp_path):
    port = free_ports(1)[0]
    exposed = f"0.0.0.0:{port}"
    with pytest.raises(ConfigError) as ei:
        load_config(flags={"listen": exposed, "data_dir": str(tmp_path / "d")}, env={})
    assert str(ei.value).startswith(f"listen: {exposed} is reachable from other hosts")
    assert "insecure_peer" in str(ei.value) and "\n" not in str(ei.value)
    for env in ({"GATEWAY_INSECURE_PEER": "true"},):
        assert load_config(flags={"listen": exposed}, env=env).insecure_peer
    ca = make_test_ca(str(tmp_path / "ca"))
    tls = TlsConfig(peer_cert=ca["node"], peer_key=ca["node_key"], peer_ca=ca["ca"])
    NodeConfig(listen=exposed, tls=tls).validate()  # mutual TLS: fine
    NodeConfig(listen=f"127.0.0.1:{port}").validate()  # loopback: fine

    # A config made without validate() is refused by the node itself, leaving nothing.
    cfg = dataclasses.replace(node_configs(tmp_path, 1)[0], listen=exposed, peers={})
    with pytest.raises(NodeStartError, match=r"^listen: 0\.0\.0\.0:"):
        run(GatewayNode(cfg).start())
    assert not (tmp_path / "n1").exists()


def test_the_node_says_at_start_how_its_peer_port_is_protected(tmp_path, caplog):
    cfg = node_configs(tmp_path, 1)[0]
    port = cfg.listen.rpartition(":")[2]
    insecure = dataclasses.replace(cfg, listen=f"0.0.0.0:{port}", peers={},
                                   insecure_peer=True)

    async def body(c: NodeConfig) -> None:
        async with running(c):
            pass

    with caplog.at_level(logging.INFO, logger="gateway.node"):
        run(body(cfg))
        run(body(insecure))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("peer port")]
    assert lines == [f"peer port {cfg.listen}: plaintext, loopback only",
                     f"peer port 0.0.0.0:{port}: PLAINTEXT, reachable from other hosts "
                     f"(insecure_peer)"]
