"""``Scan`` with ``shared_shape``: the rows' common table and columns come once, in the
response's ``shape``, and every row read back by the documented rule (a row without a table
takes the shape) is the row a plain ``Scan`` returns -- across pages, in a table whose rows
of another shape (written without a column), and for a scan that finds nothing."""

from __future__ import annotations

import grpc

from gateway.client import AsyncGatewayClient, row_insert
from gateway.v1 import gateway_pb2, gateway_pb2_grpc, value_pb2

from .conftest import leader_of, node_configs, run, running


def _read_back(resp: gateway_pb2.ScanResponse) -> list[gateway_pb2.Row]:
    """The rows of a shared-shape response as whole rows (the clients' rule)."""
    out = []
    for r in resp.rows:
        row = gateway_pb2.Row()
        row.CopyFrom(r)
        if not row.HasField("table"):
            if resp.shape.HasField("table"):
                row.table.CopyFrom(resp.shape.table)
            row.key_fields.extend(resp.shape.key_fields)
            row.fields.extend(resp.shape.fields)
        out.append(row)
    return out


def test_a_shared_shape_scan_reads_back_as_the_plain_scan_page_by_page(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write([row_insert("t.items", {"id": i}, {"v": f"x{i}"})
                               for i in range(0, 30)])
                # rows of another shape in the same table: a column left out
                await c.write([row_insert("t.items", {"id": i}, {}) for i in range(30, 45)])
                await c.write([row_insert("t.items", {"id": i}, {"v": "z"})
                               for i in range(45, 50)])
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)
                start: list[value_pb2.Value] = []
                pages = 0
                while True:
                    plain = await stub.Scan(gateway_pb2.ScanRequest(
                        table="t.items", start_key=start, limit=7), timeout=10)
                    shared = await stub.Scan(gateway_pb2.ScanRequest(
                        table="t.items", start_key=start, limit=7, shared_shape=True),
                        timeout=10)
                    assert not plain.HasField("shape")
                    assert shared.HasField("shape") and shared.shape.table.table_name == "items"
                    assert _read_back(shared) == list(plain.rows)
                    assert shared.more == plain.more
                    # the node may apply its own entries (an epoch closing) between the
                    # two reads: the index never goes back, the rows stay the same
                    assert shared.applied_index >= plain.applied_index
                    # the rows shaped like the page's first leave their shape out
                    first = plain.rows[0]
                    for p, s in zip(plain.rows, shared.rows, strict=True):
                        same = list(p.fields) == list(first.fields)
                        assert s.HasField("table") is not same
                    if len(plain.rows) > 1:
                        assert shared.ByteSize() < plain.ByteSize()
                    pages += 1
                    if not plain.more:
                        break
                    start = list(plain.rows[-1].key_values)
                    start[0].int_value += 1
                assert pages == 8
                empty = await stub.Scan(gateway_pb2.ScanRequest(
                    table="t.nothing", shared_shape=True), timeout=10)
                assert list(empty.rows) == [] and not empty.HasField("shape")

    run(go())
