"""``Reads.ReadBatch`` (many rows in one call) and the read responses framed from the stored
rows' bytes (``read_wire``)."""

from __future__ import annotations

import grpc
import pytest

from gateway.client import AsyncGatewayClient, GatewayError, row_insert
from gateway.node.api import read_wire
from gateway.node.base.validation import InvalidRequest
from gateway.v1 import gateway_pb2, reads_pb2, statement_pb2, value_pb2

from .conftest import leader_of, node_configs, run, running


def _row(i: int, size: int = 10) -> gateway_pb2.Row:
    return gateway_pb2.Row(
        key_fields=[statement_pb2.FieldMetadata(name="id")],
        key_values=[value_pb2.Value(int_value=i)],
        values=[value_pb2.Value(string_value="x" * size)], epoch=3, author=2, log_index=i)


@pytest.mark.parametrize("index", [0, 1, 300, 1 << 40])
def test_framed_read_and_scan_responses_equal_the_message_built_ones(index):
    row = _row(7)
    raw = row.SerializeToString()
    assert read_wire.read_response(raw, index) == gateway_pb2.ReadResponse(
        found=True, row=row, applied_index=index).SerializeToString()
    assert read_wire.read_response(None, index) == gateway_pb2.ReadResponse(
        applied_index=index).SerializeToString()
    rows = [_row(i, size) for i, size in ((1, 0), (2, 10), (3, 300), (4, 70000))]
    for more in (False, True):
        assert read_wire.scan_response([r.SerializeToString() for r in rows], more, index) == \
            gateway_pb2.ScanResponse(rows=rows, more=more,
                                     applied_index=index).SerializeToString()
    assert read_wire.scan_response([], False, index) == \
        gateway_pb2.ScanResponse(applied_index=index).SerializeToString()
    got = read_wire.read_batch_response(
        [rows[0].SerializeToString(), None, rows[3].SerializeToString()], index, 1 << 20)
    assert got == reads_pb2.ReadBatchResponse(
        results=[reads_pb2.ReadBatchResult(found=True, row=rows[0]),
                 reads_pb2.ReadBatchResult(),
                 reads_pb2.ReadBatchResult(found=True, row=rows[3])],
        applied_index=index).SerializeToString()


def test_a_read_batch_past_the_response_limit_names_the_key_where_it_overflowed():
    raws = [_row(i, 400).SerializeToString() for i in range(10)]
    with pytest.raises(InvalidRequest) as ei:
        read_wire.read_batch_response(raws, 1, 2000)
    assert ei.value.field == "keys[4]"


def test_read_batch_returns_every_keys_row_in_order_across_tables(tmp_path):
    """Found and missing keys, keys of another table than the request's, a table never written
    (no rows), in the request's order, at the applied index of a single read; every
    consistency; a bad key fails the whole call naming it."""
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            async with AsyncGatewayClient(leader.config.api) as c:
                await c.write_batch([[row_insert("t.a", {"id": i}, {"v": f"a{i}"})]
                                     for i in range(5)])
                await c.write([row_insert("t.b", {"k": "x"}, {"n": 1})])
            follower = next(n for n in nodes if n is not leader)
            for node, level in ((leader, "linearizable"), (follower, "linearizable"),
                                (leader, "lease"), (leader, "stale")):
                async with AsyncGatewayClient(node.config.api) as c:
                    assert await c.get_many("t.a", [3, 9, 0], level) == [
                        {"id": 3, "v": "a3"}, None, {"id": 0, "v": "a0"}]
            async with AsyncGatewayClient(leader.config.api) as c:
                req = reads_pb2.ReadBatchRequest(table="t.a", keys=[
                    reads_pb2.ReadKey(key=[value_pb2.Value(int_value=1)]),
                    reads_pb2.ReadKey(table="t.b", key=[value_pb2.Value(string_value="x")]),
                    reads_pb2.ReadKey(table="t.never", key=[value_pb2.Value(int_value=1)]),
                    reads_pb2.ReadKey(key=[value_pb2.Value(string_value="2")])])  # text -> int
                resp = await c._stub(raw=True).ReadBatch(req, timeout=10)
                assert [r.found for r in resp.results] == [True, True, False, True]
                assert 0 < resp.applied_index <= leader.sm.applied_index  # epochs seal meanwhile
                assert resp.results[1].row.values[0].int_value == 1
                for keys, field in (
                        ([reads_pb2.ReadKey(key=[value_pb2.Value(int_value=1)]),
                          reads_pb2.ReadKey(key=[value_pb2.Value(string_value="zz")])],
                         "keys[1].key[0]"),
                        ([reads_pb2.ReadKey()], "keys[0].key"),
                        ([reads_pb2.ReadKey(table="nodot", key=[value_pb2.Value(int_value=1)])],
                         "keys[0].table")):
                    with pytest.raises(GatewayError) as ei:
                        await c._call(lambda s, t, k=keys: s.ReadBatch(
                            reads_pb2.ReadBatchRequest(table="t.a", keys=k), timeout=t),
                            raw=True)
                    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
                    assert ei.value.field == field, ei.value
                with pytest.raises(GatewayError) as ei:
                    await c.read_batch("", [1])
                assert ei.value.field == "keys[0].table"
                assert (await c.read_batch("t.a", [])).results == []

    run(go(), 90)


def test_read_batch_needs_a_token_with_the_read_permission(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[token]]\nname = "reader"\ntoken = "r"\npermissions = ["read"]\n'
                      '[[token]]\nname = "ops"\ntoken = "a"\npermissions = ["admin"]\n'
                      '[[token]]\nname = "app"\ntoken = "w"\npermissions = ["write"]\n')
    cfg = node_configs(tmp_path, 1, tokens_file=str(tokens))[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api, token="w") as c:
                await c.write([row_insert("t.s", {"id": 1}, {"v": "x"})])
            for token, code in (("", grpc.StatusCode.UNAUTHENTICATED),
                                ("nope", grpc.StatusCode.UNAUTHENTICATED),
                                ("a", grpc.StatusCode.PERMISSION_DENIED),
                                ("w", grpc.StatusCode.PERMISSION_DENIED)):
                async with AsyncGatewayClient(cfg.api, token=token) as c:
                    with pytest.raises(GatewayError) as ei:
                        await c.get_many("t.s", [1])
                    assert ei.value.code == code, token
            async with AsyncGatewayClient(cfg.api, token="r") as c:
                assert await c.get_many("t.s", [1, 2]) == [{"id": 1, "v": "x"}, None]

    run(go(), 60)


def test_a_batch_of_one_tables_keys_is_read_from_its_bytes_as_the_clients_send_it(
        tmp_path, monkeypatch):
    """The bytes path serves a batch named by the request's table and one whose every key
    names the table (the coalescing clients' shape), with the rows the parsed path reads; a
    batch it cannot read (keys of two tables, text for an integer key, a key to refuse) goes
    to the parsed path with the same answer or error."""
    from gateway.node.api import reads

    served: list[int] = []
    real = reads.read_wire.batch_keys

    def counting(data: bytes, prefix: bytes, kcodes: bytes) -> list[bytes] | None:
        got = real(data, prefix, kcodes)
        served.append(0 if got is None else len(got))
        return got

    monkeypatch.setattr(reads.read_wire, "batch_keys", counting)
    cfg = node_configs(tmp_path, 1)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                await c.write_batch([[row_insert("t.a", {"id": i}, {"v": f"a{i}"})]
                                     for i in range(5)])
                await c.write([row_insert("t.b", {"k": "x"}, {"n": 1})])
                stub = c._stub(raw=True)

                async def batch(req: reads_pb2.ReadBatchRequest) -> list[bool]:
                    return [r.found for r in (await stub.ReadBatch(req, timeout=10)).results]

                def key(v: value_pb2.Value, table: str = "") -> reads_pb2.ReadKey:
                    return reads_pb2.ReadKey(table=table, key=[v])

                one = value_pb2.Value(int_value=1)
                nine = value_pb2.Value(int_value=9)
                assert await batch(reads_pb2.ReadBatchRequest(
                    table="t.a", keys=[key(one), key(nine)])) == [True, False]
                assert await batch(reads_pb2.ReadBatchRequest(
                    keys=[key(one, "t.a"), key(nine, "t.a"), key(one, "t.a")])) == \
                    [True, False, True]
                assert served == [2, 3]
                # Two tables; text for an integer key: the parsed path, the same answers.
                assert await batch(reads_pb2.ReadBatchRequest(table="t.a", keys=[
                    key(one), key(value_pb2.Value(string_value="x"), "t.b")])) == [True, True]
                assert await batch(reads_pb2.ReadBatchRequest(
                    table="t.a", keys=[key(value_pb2.Value(string_value="2"))])) == [True]
                assert served == [2, 3, 0]
                with pytest.raises(GatewayError) as ei:
                    await c._call(lambda s, t: s.ReadBatch(reads_pb2.ReadBatchRequest(
                        keys=[key(one, "t.a"), key(value_pb2.Value(bytes_value=b"z"), "t.a")]),
                        timeout=t), raw=True)
                assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
                assert ei.value.field == "keys[1].key[0]"

    run(go(), 60)
