"""``PreparedInsert``: its bytes are the serialized write ``row_insert`` gives, it refuses what
it cannot encode by naming the column, and every client write method (the stream, ``write``,
``write_batch``, sync and asyncio) takes them; the client's own request encoding and its
idempotency keys (fresh by default, given, or none)."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import grpc
import pytest
from google.protobuf.internal.encoder import _VarintBytes

from gateway.client import (
    AsyncGatewayClient,
    GatewayClient,
    GatewayError,
    PreparedInsert,
    row_insert,
)
from gateway.client.prepared import varint
from gateway.client.stream import _stream_request
from gateway.v1 import gateway_pb2, statement_pb2, value_pb2

from .conftest import leader_of, node_configs, run, running

FT = value_pb2.FieldType


def reference(table: str, key: dict, values: dict) -> bytes:
    return gateway_pb2.WriteRequest(statements=[row_insert(table, key, values)]
                                    ).SerializeToString()


@pytest.mark.parametrize("value", [
    0, 1, -1, 63, -64, 64, (1 << 63) - 1, -(1 << 63), 3.25, -0.0, float("inf"), True, False,
    "", "x", "héllo ✓", "y" * 20_000, b"", b"\x00\xff" * 9_000, Decimal("-12.50"),
])
def test_a_prepared_row_is_the_bytes_row_insert_serializes(value):
    ins = PreparedInsert("shop.items", key={"id": int, "sku": str}, values={"v": type(value)})
    got = ins.encode((7, "a-1"), (value,))
    assert got == reference("shop.items", {"id": 7, "sku": "a-1"}, {"v": value})


def test_field_types_take_the_value_kind_of_the_log_model():
    ins = PreparedInsert("s.t", key={"id": FT.FIELD_TYPE_UUID}, values={
        "day": FT.FIELD_TYPE_DATE, "at": FT.FIELD_TYPE_TIMESTAMP, "n": FT.FIELD_TYPE_UNSIGNED,
        "doc": FT.FIELD_TYPE_JSON})
    uid = bytes(range(16))
    stmt = gateway_pb2.WriteRequest.FromString(
        ins.encode((uid,), ("2026-11-27", -5, (1 << 64) - 1, '{"a": 1}'))).statements[0].insert
    assert [f.type for f in stmt.key_fields] == [FT.FIELD_TYPE_UUID]
    assert [(f.name, f.type) for f in stmt.fields] == [
        ("day", FT.FIELD_TYPE_DATE), ("at", FT.FIELD_TYPE_TIMESTAMP),
        ("n", FT.FIELD_TYPE_UNSIGNED), ("doc", FT.FIELD_TYPE_JSON)]
    rec = stmt.records[0]
    assert rec.key_values[0].bytes_value == uid
    assert [v.WhichOneof("kind") for v in rec.after_values] == [
        "string_value", "timestamp_ns", "uint_value", "string_value"]
    assert rec.after_values[1].timestamp_ns == -5
    assert rec.after_values[2].uint_value == (1 << 64) - 1


def test_null_values_and_many_rows_in_one_write():
    ins = PreparedInsert("s.t", key={"id": int}, values={"a": str, "b": float})
    got = ins.encode_many([((1,), ("x", None)), ((2,), (None, 2.0)), ((3,), (None, None))])
    expected = statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
        fields=[statement_pb2.FieldMetadata(name="a", type=FT.FIELD_TYPE_VARCHAR),
                statement_pb2.FieldMetadata(name="b", type=FT.FIELD_TYPE_DOUBLE)],
        records=[statement_pb2.InsertRecord(
            key_values=[value_pb2.Value(int_value=k)],
            after_values=[value_pb2.Value(null_value=value_pb2.NULL_VALUE) if v is None
                          else value_pb2.Value(**{kind: v})
                          for v, kind in zip(vals, ("string_value", "double_value"), strict=True)])
            for k, vals in ((1, ("x", None)), (2, (None, 2.0)), (3, (None, None)))]))
    assert got == gateway_pb2.WriteRequest(statements=[expected]).SerializeToString()
    assert len(gateway_pb2.WriteRequest.FromString(got).statements) == 1  # one transaction


def test_a_key_only_table_needs_no_values():
    ins = PreparedInsert("s.tags", key={"name": str})
    assert ins.encode(("red",)) == reference("s.tags", {"name": "red"}, {})


@pytest.mark.parametrize(("declared", "value", "message"), [
    (int, "1", "column 'v': '1' (str) is of the wrong type"),
    (int, True, "column 'v': True (bool) is of the wrong type"),
    (int, 1.5, "of the wrong type"),
    (int, 1 << 63, "out of range"),
    (FT.FIELD_TYPE_UNSIGNED, -1, "out of range"),
    (str, b"x", "of the wrong type"),
    (bytes, "x", "of the wrong type"),
    (bool, 1, "of the wrong type"),
    (float, "1.0", "of the wrong type"),
])
def test_a_value_of_another_type_is_refused_naming_its_column(declared, value, message):
    ins = PreparedInsert("shop.items", key={"id": int}, values={"v": declared})
    with pytest.raises(TypeError, match=r"shop\.items") as ei:
        ins.encode((1,), (value,))
    assert message in str(ei.value)


def test_text_subclasses_are_text_and_unencodable_text_is_refused_naming_its_column():
    from enum import StrEnum

    class Color(StrEnum):
        RED = "red"

    ins = PreparedInsert("s.t", key={"id": int}, values={"v": str})
    assert ins.encode((1,), (Color.RED,)) == reference("s.t", {"id": 1}, {"v": "red"})
    with pytest.raises(TypeError, match=r"column 'v': '\\ud800' \(str\) is not encodable"):
        ins.encode((1,), ("\ud800",))


def test_malformed_rows_and_declarations_are_refused():
    ins = PreparedInsert("s.t", key={"id": int}, values={"v": str})
    with pytest.raises(TypeError, match="key column 'id' cannot be NULL"):
        ins.encode((None,), ("a",))
    with pytest.raises(ValueError, match="1 key and 2 values given, the insert has 1 key and 1"):
        ins.encode((1,), ("a", "b"))
    with pytest.raises(TypeError, match="the row's values must be a tuple or list in the "
                       "prepared column order, not dict"):
        ins.encode((1,), {"v": "a"})  # its keys are not the values
    with pytest.raises(TypeError, match=r"the row's key must be a tuple or list .* not int"):
        ins.encode(1, ("a",))
    assert ins.encode([1], ["a"]) == ins.encode((1,), ("a",))
    with pytest.raises(ValueError, match="at least one row"):
        ins.encode_many([])
    with pytest.raises(ValueError, match="at least one key column"):
        PreparedInsert("s.t", key={})
    with pytest.raises(TypeError, match="column 'v': no column type for Python type list"):
        PreparedInsert("s.t", key={"id": int}, values={"v": list})
    with pytest.raises(TypeError, match="column 'id': 0 is not a column type"):
        PreparedInsert("s.t", key={"id": FT.FIELD_TYPE_UNSPECIFIED})


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16383, 16384, 2_097_151, 2_097_152,
                               (1 << 63), (1 << 64) - 1])
def test_varint_is_protobufs(n):
    assert varint(n) == _VarintBytes(n)


def test_a_stream_request_is_the_serialized_message():
    writes = [gateway_pb2.WriteRequest(statements=[row_insert("s.t", {"id": i}, {"v": "x" * i})],
                                       idempotency_key=f"k{i}").SerializeToString()
              for i in (1, 200)]
    msg = gateway_pb2.StreamWriteRequest.FromString(_stream_request(300, writes))
    assert msg.seq == 300
    assert [w.SerializeToString() for w in msg.writes] == writes


class FakeCall:
    """A ``StreamWrite`` call that records the request bytes and acks every write."""

    def __init__(self) -> None:
        self.requests: list[gateway_pb2.StreamWriteRequest] = []
        self.acks: asyncio.Queue = asyncio.Queue()

    async def write(self, data: bytes) -> None:
        req = gateway_pb2.StreamWriteRequest.FromString(data)
        self.requests.append(req)
        await self.acks.put(gateway_pb2.StreamWriteResponse(acks=[
            gateway_pb2.StreamWriteAck(seq=req.seq + i, result=gateway_pb2.WriteResult(
                log_index=req.seq + i)) for i in range(len(req.writes))]))

    async def read(self):
        item = await self.acks.get()
        return grpc.aio.EOF if item is None else item

    async def done_writing(self) -> None:
        await self.acks.put(None)

    def cancel(self) -> None:
        pass


def test_the_stream_numbers_its_writes_and_sends_each_idempotency_key_as_asked():
    from gateway.client import WriteStream

    ins = PreparedInsert("s.t", key={"id": int})

    async def go() -> FakeCall:
        call = FakeCall()
        async with WriteStream(call, window=4, max_per_request=3) as s:
            futs = [await s.send(ins.encode((i,))) for i in range(5)]
            futs.append(await s.send(ins.encode((5,)), idempotency_key=""))
            futs.append(await s.send([row_insert("s.t", {"id": 6}, {})],
                                     idempotency_key="mine"))
            results = await asyncio.gather(*futs)
        assert [r.log_index for r in results] == list(range(1, 8))
        return call

    call = asyncio.run(go())
    writes = [w for req in call.requests for w in req.writes]
    seqs = [req.seq + i for req in call.requests for i in range(len(req.writes))]
    assert seqs == list(range(1, 8)) and all(len(r.writes) <= 3 for r in call.requests)
    assert [w.statements[0].insert.records[0].key_values[0].int_value for w in writes] == \
        list(range(7))
    keys = [w.idempotency_key for w in writes]
    assert len(set(keys[:5])) == 5 and all(len(k) > 32 for k in keys[:5])
    assert keys[5:] == ["", "mine"]


class BrokenCall(FakeCall):
    """A call that takes writes, never acks them, and breaks when told to."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = asyncio.Event()

    async def write(self, data: bytes) -> None:
        self.requests.append(gateway_pb2.StreamWriteRequest.FromString(data))

    async def read(self):
        await self.broken.wait()
        raise ConnectionError("the node went away")


def test_a_send_waiting_for_room_fails_when_the_stream_breaks():
    from gateway.client import WriteStream

    ins = PreparedInsert("s.t", key={"id": int})

    async def go() -> None:
        call = BrokenCall()
        s = WriteStream(call, window=2)
        first = [await s.send(ins.encode((i,))) for i in range(2)]
        waiting = asyncio.create_task(s.send(ins.encode((2,))))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done() and s.in_flight == 2  # the window is full
        call.broken.set()
        with pytest.raises(ConnectionError, match="went away"):
            await asyncio.wait_for(waiting, 10)
        for fut in first:
            with pytest.raises(ConnectionError):
                await fut
        with pytest.raises(ConnectionError):
            await s.send(ins.encode((3,)))
        await s.close()
        assert sum(len(r.writes) for r in call.requests) == 2

    asyncio.run(go())


def test_prepared_writes_through_the_stream_write_and_write_batch(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]
    ins = PreparedInsert("t.p", key={"id": int}, values={"v": str, "n": int})

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                async with c.stream(window=32, max_per_request=8) as s:
                    keyed = [await s.send(ins.encode((i,), (f"r{i}", i))) for i in range(100)]
                    bare = await s.send(ins.encode((100,), ("bare", None)), idempotency_key="")
                    named = await s.send(ins.encode((101,), ("named", 1)),
                                         idempotency_key="order-101")
                    mixed = await s.send([row_insert("t.p", {"id": 102}, {"v": "list"})])
                    wrong = await s.send(PreparedInsert("t.p", key={"id": int},
                                                        values={"v": int}).encode((103,), (5,)))
                    results = await asyncio.gather(*keyed, bare, named, mixed)
                    with pytest.raises(GatewayError) as ei:
                        await wrong
                assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
                keys = [f.idempotency_key for f in keyed]
                assert len(set(keys)) == 100 and all(16 < len(k) <= 128 for k in keys)
                assert bare.idempotency_key == "" and named.idempotency_key == "order-101"
                assert [r.log_index for r in results] == sorted(r.log_index for r in results)
                assert await c.get("t.p", 42) == {"id": 42, "v": "r42", "n": 42}
                assert await c.get("t.p", 100) == {"id": 100, "v": "bare", "n": None}
                assert await c.get("t.p", 103) is None
                # The streamed writes' keys were recorded: a retry is a duplicate...
                again = await c.write(ins.encode((5,), ("r5", 5)), idempotency_key=keys[5])
                assert again.duplicate and again.gtid == results[5].gtid
                named_again = await c.write(ins.encode((101,), ("named", 1)),
                                            idempotency_key="order-101")
                assert named_again.duplicate
                one = await c.write(ins.encode((200,), ("unary", 2)))
                batch = await c.write_batch([ins.encode((201,), ("b", 1)),
                                             ins.encode_many([((202,), ("c", 2)),
                                                              ((203,), ("d", 3))])])
                assert batch[1].log_index > batch[0].log_index > one.log_index
                assert await c.get("t.p", 203) == {"id": 203, "v": "d", "n": 3}
                # A batch's keys, one per write; "" sends none, so only the keyed one is a
                # duplicate when the batch is sent again.
                twice = [ins.encode((300,), ("k", 1)), [row_insert("t.p", {"id": 301}, {})]]
                first = await c.write_batch(twice, idempotency_keys=["batch-300", ""])
                again = await c.write_batch(twice, idempotency_keys=["batch-300", ""])
                assert again[0].duplicate and again[0].gtid == first[0].gtid
                assert not again[1].duplicate and again[1].log_index > first[1].log_index
                with pytest.raises(ValueError, match="1 idempotency keys given for 2 writes"):
                    await c.write_batch(twice, idempotency_keys=["x"])
                unkeyed = [await c.write(ins.encode((302,), ("u", 0)), idempotency_key="")
                           for _ in range(2)]
                assert not unkeyed[1].duplicate
                assert unkeyed[1].log_index > unkeyed[0].log_index

            def sync_client() -> tuple[gateway_pb2.WriteResult, list[gateway_pb2.WriteResult]]:
                with GatewayClient(cfg.api) as sc:
                    res = sc.write(ins.encode((400,), ("sync", 4)), idempotency_key="sync-400")
                    batch = sc.write_batch([ins.encode((401,), ("s", 1)),
                                            [row_insert("t.p", {"id": 402}, {"v": "s"})]])
                    assert sc.write(ins.encode((400,), ("sync", 4)),
                                    idempotency_key="sync-400").duplicate
                    return res, batch

            res, batch = await asyncio.to_thread(sync_client)
            assert batch[0].log_index > res.log_index
            async with AsyncGatewayClient(cfg.api) as c:
                assert await c.get("t.p", 400) == {"id": 400, "v": "sync", "n": 4}
                # n never written: every column is stored, the missing one as NULL
                assert await c.get("t.p", 402) == {"id": 402, "v": "s", "n": None}

    run(go())
