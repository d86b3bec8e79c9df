"""Storage failures reach clients as one line with a code (issue 52, item 12): DATA_LOSS for
damaged bytes, RESOURCE_EXHAUSTED for a full disk, UNAVAILABLE for another I/O failure --
the node and the file relative to the data directory, never UNKNOWN with internal class
names and absolute paths."""

from __future__ import annotations

import errno
import os

import grpc
import pytest

from gateway.client import AsyncGatewayClient, row_insert
from gateway.core.lsm.errors import CorruptionError
from gateway.v1 import gateway_pb2, gateway_pb2_grpc, reads_pb2, reads_pb2_grpc, value_pb2

from .conftest import leader_of, node_configs, run, running


@pytest.mark.parametrize("failure, code, text", [
    (lambda d: CorruptionError(os.path.join(d, "store", "000012.sst"), 4096,
                               "block checksum mismatch"),
     grpc.StatusCode.DATA_LOSS,
     "node 1: damaged data: store/000012.sst: byte 4096: block checksum mismatch"),
    (lambda d: OSError(errno.EIO, "Input/output error", os.path.join(d, "store", "1.sst")),
     grpc.StatusCode.UNAVAILABLE, "node 1: storage failed: store/1.sst: Input/output error"),
])
def test_a_read_over_failing_storage_gets_a_code_and_one_line(tmp_path, failure, code, text):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write([row_insert("t.items", {"id": 1}, {"v": "ok"})])

                def broken(*args):  # type: ignore[no-untyped-def]
                    raise failure(cfg.data_dir)

                # fail where the failure comes from: the store under every read path
                node.sm.store.get = broken
                node.sm.store.scan = broken
                node.sm.store.scan_framed = broken
            # the raw stub: no client retries (an UNAVAILABLE one would be retried)
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)
                reads_stub = reads_pb2_grpc.ReadsStub(ch)
                key = [value_pb2.Value(int_value=1)]
                for call in (lambda: stub.Read(gateway_pb2.ReadRequest(table="t.items",
                                                                       key=key), timeout=10),
                             lambda: stub.Scan(gateway_pb2.ScanRequest(table="t.items"),
                                               timeout=10),
                             lambda: reads_stub.ReadBatch(reads_pb2.ReadBatchRequest(
                                 keys=[reads_pb2.ReadKey(table="t.items", key=key)]),
                                 timeout=10)):
                    with pytest.raises(grpc.aio.AioRpcError) as raw:
                        await call()
                    assert raw.value.code() == code
                    assert raw.value.details().startswith(text), raw.value.details()
                    assert cfg.data_dir not in raw.value.details()

    run(go(), 30)
