"""The node's ``LogRead`` service: the byte-range reads of its WAL that Spark executors on other
machines use (``gateway.node.api.log_read``, docs/spark.md "Running on a cluster")."""

from __future__ import annotations

import os
import threading

import grpc
import pytest

from gateway.client import AsyncGatewayClient, row_insert
from gateway.node.api import log_read
from gateway.v1 import log_read_pb2, log_read_pb2_grpc

from .conftest import leader_of, node_configs, run, running

_TOKENS = ('[[token]]\nname = "reader"\ntoken = "r"\npermissions = ["read"]\n'
           '[[token]]\nname = "app"\ntoken = "w"\npermissions = ["write"]\n')
_READ = (("authorization", "Bearer r"),)


async def _code(call) -> grpc.StatusCode | None:  # type: ignore[no-untyped-def]
    try:
        result = call()
        if hasattr(result, "__aiter__"):
            async for _ in result:
                pass
        else:
            await result
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return None


def test_log_read_serves_the_wal_bytes_and_refuses_calls_without_a_read_token(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_TOKENS)
    cfg = node_configs(tmp_path, 1, tokens_file=str(tokens))[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api, token="w") as c:
                for i in range(20):
                    await c.write([row_insert("t.s", {"id": i}, {"v": "x" * i})])
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = log_read_pb2_grpc.LogReadStub(ch)
                req = log_read_pb2.LogLayoutRequest()
                assert await _code(lambda: stub.Layout(req)) == \
                    grpc.StatusCode.UNAUTHENTICATED
                assert await _code(lambda: stub.Layout(
                    req, metadata=(("authorization", "Bearer w"),))) == \
                    grpc.StatusCode.PERMISSION_DENIED
                rng = log_read_pb2.LogReadRangeRequest(segment="x", offset=0, length=10)
                assert await _code(lambda: stub.ReadRange(rng)) == \
                    grpc.StatusCode.UNAUTHENTICATED

                lay = await stub.Layout(req, metadata=_READ)
                assert lay.has_commit and lay.commit >= 20
                wal = node.storage.wal.directory
                assert [s.name for s in lay.segments] == sorted(
                    n for n in os.listdir(wal) if n.endswith(".wal"))
                seg = lay.segments[-1]
                assert seg.stop > seg.start
                with open(os.path.join(wal, seg.name), "rb") as f:
                    want = f.read()[seg.start:seg.stop]
                got = b"".join([chunk.data async for chunk in stub.ReadRange(
                    log_read_pb2.LogReadRangeRequest(segment=seg.name, offset=seg.start,
                                                     length=seg.stop - seg.start),
                    metadata=_READ)])
                assert got == want

    run(go(), 90)


def test_log_read_refuses_names_outside_the_wal_directory_and_reports_a_gone_segment(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]
    secret = tmp_path / "secret.wal"
    secret.write_bytes(b"not yours")

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            wal = node.storage.wal.directory
            os.symlink(secret, os.path.join(wal, "99999999999999999998.wal"))
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = log_read_pb2_grpc.LogReadStub(ch)
                for name in ("meta", "../meta", "../../n1/raft/wal/meta", "/etc/passwd",
                             "../secret.wal", "00000000000000000001.wal/../meta",
                             "99999999999999999998.wal"):
                    req = log_read_pb2.LogReadRangeRequest(segment=name, offset=0, length=64)
                    with pytest.raises(grpc.aio.AioRpcError) as ei:
                        async for _ in stub.ReadRange(req):
                            pass
                    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
                    assert "segment" in (ei.value.details() or ""), name
                gone = log_read_pb2.LogReadRangeRequest(segment="00000000000000000000.wal",
                                                        offset=0, length=64)
                with pytest.raises(grpc.aio.AioRpcError) as ei:
                    async for _ in stub.ReadRange(gone):
                        pass
                assert ei.value.code() == grpc.StatusCode.NOT_FOUND
                assert "00000000000000000000.wal" in (ei.value.details() or "")
                assert "compacted" in (ei.value.details() or "")

    run(go(), 90)


def test_log_read_does_its_file_work_off_the_event_loop(tmp_path, monkeypatch):
    cfg = node_configs(tmp_path, 1)[0]
    threads: list[str] = []
    real = log_read.wal_layout

    def spy(wal_dir, req):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return real(wal_dir, req)

    monkeypatch.setattr(log_read, "wal_layout", spy)

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                await log_read_pb2_grpc.LogReadStub(ch).Layout(log_read_pb2.LogLayoutRequest())
        assert threads and all(t.startswith("log-read") for t in threads)
        assert threading.main_thread().name not in threads

    run(go(), 90)
