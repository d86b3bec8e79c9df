"""Bad input through the real gRPC API of a running node (issue 12, items 3-9 and the same
classes of defect in every RPC): each refusal is INVALID_ARGUMENT naming the field (or
RESOURCE_EXHAUSTED naming the size limit), and nothing of a refused write is applied.

One node serves the whole module (in its own event-loop thread); tests that need a node of
their own configuration start one."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from gateway.client import GatewayClient, GatewayError, row_insert
from gateway.node import GatewayNode
from gateway.v1 import gateway_pb2, gateway_pb2_grpc, statement_pb2, value_pb2

from .conftest import node_configs, running

FT = value_pb2.FieldType
V = value_pb2.Value
NULL = value_pb2.NULL_VALUE


@dataclass
class Api:
    """The module's node: its API address, the node and the loop it runs in."""

    address: str
    node: GatewayNode
    loop: asyncio.AbstractEventLoop

    def stub(self) -> gateway_pb2_grpc.GatewayStub:
        ch = grpc.insecure_channel(self.address, options=[("grpc.max_send_message_length", -1)])
        return gateway_pb2_grpc.GatewayStub(ch)

    def on_loop(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    cfg = node_configs(tmp_path_factory.mktemp("api"), 1)[0]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    node = GatewayNode(cfg)

    async def start() -> None:
        await node.start()
        while not node.driver.is_leader:
            await asyncio.sleep(0.02)

    asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    with GatewayClient(cfg.api) as c:  # the tables the tests read
        c.write([row_insert("t.items", {"id": 1}, {"name": "a"})])
    try:
        yield Api(cfg.api, node, loop)
    finally:
        asyncio.run_coroutine_threadsafe(node.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def _refused(api: Api, method: str, request: Any, field: str, words: str = "",
             code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT) -> str:
    """Call ``method``; assert it fails with ``code`` naming ``field`` (message ``field: …``,
    trailing ``gateway-field``) and that no transaction was applied. Returns the message."""
    before = api.node.sm.last_trans_id
    with pytest.raises(grpc.RpcError) as ei:
        getattr(api.stub(), method)(request, timeout=20)
    err = ei.value
    assert err.code() == code, err.details()
    assert err.details().startswith(f"{field}: "), err.details()
    assert ("gateway-field", field) in tuple(err.trailing_metadata() or ())
    assert words in err.details()
    assert api.node.sm.last_trans_id == before  # nothing applied
    return err.details()


def _write(*stmts: statement_pb2.Statement) -> gateway_pb2.WriteRequest:
    return gateway_pb2.WriteRequest(statements=list(stmts))


def _typed(table: str, key: tuple[str, int, V], cols: list[tuple[str, int, V]] = ()
           ) -> statement_pb2.Statement:
    """An insert of one row with declared types: ``(name, FieldType, Value)`` per column."""
    schema, _, name = table.partition(".")
    body = statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name=schema, table_name=name),
        key_fields=[statement_pb2.FieldMetadata(name=key[0], type=key[1])],
        fields=[statement_pb2.FieldMetadata(name=n, type=t) for n, t, _ in cols])
    body.records.add(key_values=[key[2]], after_values=[v for _, _, v in cols])
    return statement_pb2.Statement(insert=body)


def _table(schema: str, table: str) -> statement_pb2.Statement:
    return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name=schema, table_name=table),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
        records=[statement_pb2.InsertRecord(key_values=[V(int_value=1)])]))


# -- item 3: names with a dot ---------------------------------------------------------------------

def test_dot_in_a_table_name_is_refused(api):
    _refused(api, "Write", _write(_table("t", "a.b")), "statements[0].insert.table.table_name",
             "'.'")


def test_dot_in_a_schema_name_is_refused(api):
    """``t.a`` + ``b`` would be the same ``t.a.b`` as ``t`` + ``a.b``."""
    _refused(api, "Write", _write(_table("t.a", "b")), "statements[0].insert.table.schema_name",
             "'.'")


def test_read_of_a_name_with_two_dots_is_refused(api):
    _refused(api, "Read", gateway_pb2.ReadRequest(table="t.a.b", key=[V(int_value=1)]),
             "table", "'.'")
    _refused(api, "Scan", gateway_pb2.ScanRequest(table="t.a.b"), "table", "'.'")


def test_client_splits_table_names_at_the_first_dot_like_the_node(api):
    with GatewayClient(api.address) as c, pytest.raises(GatewayError) as ei:
        c.write([row_insert("t.a.b", {"id": 1})])
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.field == "statements[0].insert.table.table_name"


def test_dollar_in_a_table_name_is_accepted(api):
    """``$`` is a name character; only the ``$EX`` suffix is the gateway's
    (``test_reserved_names``)."""
    with GatewayClient(api.address) as c:
        c.write([row_insert("t.price$usd", {"id": 7}, {"cause": "x"})])
        assert c.get("t.price$usd", 7) == {"id": 7, "cause": "x"}


# -- item 4: StreamWrite sequence numbers ----------------------------------------------------------

def test_stream_write_seq_numbering_past_2_64_is_refused_before_applying(api):
    writes = [_write(row_insert("t.items", {"id": i}, {"name": "s"})) for i in (50, 51)]
    reqs = [gateway_pb2.StreamWriteRequest(seq=2**64 - 1, writes=writes)]
    before = api.node.sm.last_trans_id
    with pytest.raises(grpc.RpcError) as ei:
        list(api.stub().StreamWrite(iter(reqs), timeout=20))
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.details().startswith("seq: ")
    assert api.node.sm.last_trans_id == before
    with GatewayClient(api.address) as c:
        assert c.get("t.items", 50) is None


def test_stream_write_last_seq_2_64_minus_1_is_acknowledged(api):
    reqs = [gateway_pb2.StreamWriteRequest(
        seq=2**64 - 2, writes=[_write(row_insert("t.items", {"id": i}, {"name": "s"}))
                               for i in (52, 53)])]
    acks = [a for r in api.stub().StreamWrite(iter(reqs), timeout=20) for a in r.acks]
    assert sorted(a.seq for a in acks) == [2**64 - 2, 2**64 - 1]
    assert all(a.code == 0 for a in acks)


def test_stream_write_acks_every_taken_write_before_ending_with_an_error(api):
    """A bad request ends the stream, but a write taken before it may be applied: its ack must
    still arrive (it used to be dropped when the error ended the stream first)."""
    drv = api.node.driver
    real = drv.submit_write

    def slow(*args: Any, **kw: Any) -> asyncio.Future[Any]:
        fut, out = real(*args, **kw), api.loop.create_future()

        def later(f: asyncio.Future[Any]) -> None:
            api.loop.call_later(0.3, out.set_result, f.result())

        fut.add_done_callback(later)
        return out

    reqs = [gateway_pb2.StreamWriteRequest(seq=1, writes=[_write(
                row_insert("t.items", {"id": 90}, {"name": "taken"}))]),
            gateway_pb2.StreamWriteRequest(seq=2)]  # no writes: ends the stream
    got = []
    drv.submit_write = slow
    try:
        with pytest.raises(grpc.RpcError) as ei:
            for resp in api.stub().StreamWrite(iter(reqs), timeout=20):
                got.extend(resp.acks)
    finally:
        drv.submit_write = real
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.details().startswith("writes: ")
    assert [(a.seq, a.code) for a in got] == [(1, 0)]
    with GatewayClient(api.address) as c:
        assert c.get("t.items", 90) == {"id": 90, "name": "taken"}


def test_stream_write_acks_each_write_of_a_request_once_when_they_finish_out_of_order(api):
    """Within one request the first write finishes last (held 0.3 s), the second fails at
    once (its idempotency key is too long), the third commits: each gets exactly one ack, with
    its own outcome, in the request's order."""
    drv = api.node.driver
    real = drv.submit_write
    calls = 0

    def first_slow(*args: Any, **kw: Any) -> asyncio.Future[Any]:
        nonlocal calls
        calls += 1
        fut = real(*args, **kw)
        if calls != 1:
            return fut
        out = api.loop.create_future()
        fut.add_done_callback(lambda f: api.loop.call_later(0.3, out.set_result, f.result()))
        return out

    writes = [_write(row_insert("t.items", {"id": 95}, {"name": "slow"})),
              gateway_pb2.WriteRequest(
                  statements=[row_insert("t.items", {"id": 96}, {"name": "bad"})],
                  idempotency_key="k" * 200),
              _write(row_insert("t.items", {"id": 97}, {"name": "quick"}))]
    reqs = [gateway_pb2.StreamWriteRequest(seq=40, writes=writes)]
    drv.submit_write = first_slow
    try:
        acks = [a for r in api.stub().StreamWrite(iter(reqs), timeout=20) for a in r.acks]
    finally:
        drv.submit_write = real
    assert [(a.seq, a.code) for a in acks] == [
        (40, 0), (41, grpc.StatusCode.INVALID_ARGUMENT.value[0]), (42, 0)]
    assert "idempotency_key" in acks[1].error
    assert acks[0].result.log_index < acks[2].result.log_index
    with GatewayClient(api.address) as c:
        assert c.get("t.items", 95) == {"id": 95, "name": "slow"}
        assert c.get("t.items", 96) is None
        assert c.get("t.items", 97) == {"id": 97, "name": "quick"}

# -- item 5: requests that do not parse ------------------------------------------------------------

_GARBAGE = b"\xff\xff\xff\x01garbage"


@pytest.mark.parametrize("method", ["Write", "WriteBatch", "Read", "Scan", "Status", "AddNode",
                                    "RemoveNode", "TransferLeader", "Snapshot"])
def test_unparsable_unary_request_is_invalid_argument(api, method):
    ch = grpc.insecure_channel(api.address)
    call = ch.unary_unary(f"/gateway.v1.Gateway/{method}")
    with pytest.raises(grpc.RpcError) as ei:
        call(_GARBAGE, timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
    assert ei.value.details().startswith("request: not a valid gateway.v1.")
    assert ("gateway-field", "request") in tuple(ei.value.trailing_metadata())


def test_unparsable_subscribe_request_is_invalid_argument(api):
    ch = grpc.insecure_channel(api.address)
    call = ch.unary_stream("/gateway.v1.Gateway/Subscribe")
    with pytest.raises(grpc.RpcError) as ei:
        list(call(_GARBAGE, timeout=10))
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.details().startswith("request: ")


def test_unparsable_stream_write_message_ends_the_stream_after_acking_the_earlier_ones(api):
    ch = grpc.insecure_channel(api.address)
    call = ch.stream_stream("/gateway.v1.Gateway/StreamWrite",
                            response_deserializer=gateway_pb2.StreamWriteResponse.FromString)
    good = gateway_pb2.StreamWriteRequest(seq=1, writes=[_write(
        row_insert("t.items", {"id": 60}, {"name": "x"}))]).SerializeToString()
    got = []
    with pytest.raises(grpc.RpcError) as ei:
        for resp in call(iter([good, _GARBAGE]), timeout=20):
            got.extend(resp.acks)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.details().startswith("request: ")
    assert [(a.seq, a.code) for a in got] == [(1, 0)]


# -- item 6: bad reads ---------------------------------------------------------------------------

def test_read_key_of_the_wrong_type_is_refused_not_not_found(api):
    _refused(api, "Read", gateway_pb2.ReadRequest(table="t.items", key=[V(bool_value=True)]),
             "key[0]", "bool_value")


def test_read_table_without_schema_is_refused(api):
    _refused(api, "Read", gateway_pb2.ReadRequest(table="items", key=[V(int_value=1)]),
             "table", "no schema")


def test_read_without_table_names_the_table(api):
    _refused(api, "Read", gateway_pb2.ReadRequest(), "table", "missing table")


def test_read_with_a_null_key_is_refused(api):
    _refused(api, "Read", gateway_pb2.ReadRequest(table="t.items", key=[V(null_value=NULL)]),
             "key[0]", "missing key")


def test_read_text_key_that_does_not_convert_is_refused(api):
    _refused(api, "Read", gateway_pb2.ReadRequest(table="t.items", key=[V(string_value="x")]),
             "key[0]", "wrong type")


def test_read_of_an_unknown_consistency_is_refused(api):
    _refused(api, "Read", gateway_pb2.ReadRequest(table="t.items", key=[V(int_value=1)],
                                                  consistency=99), "consistency")


def test_scan_bounds_of_the_wrong_type_are_refused(api):
    _refused(api, "Scan", gateway_pb2.ScanRequest(table="t.items", start_key=[V(bool_value=1)]),
             "start_key[0]", "bool_value")
    _refused(api, "Scan", gateway_pb2.ScanRequest(table="t.items", end_key=[V(double_value=1)]),
             "end_key[0]", "double_value")


def test_scan_table_without_schema_is_refused(api):
    _refused(api, "Scan", gateway_pb2.ScanRequest(table="items"), "table", "no schema")


def test_read_of_a_valid_text_key_still_converts(api):
    resp = api.stub().Read(gateway_pb2.ReadRequest(table="t.items", key=[V(string_value="1")]),
                           timeout=10)
    assert resp.found


# -- item 7: names -------------------------------------------------------------------------------

@pytest.mark.parametrize(("stmt", "field", "words"), [
    (lambda: _table("t", "a\0b"), "statements[0].insert.table.table_name", "U+0000"),
    (lambda: _table("t", "line\nbreak"), "statements[0].insert.table.table_name", "U+000A"),
    (lambda: _table("t\u202eevil", "x"), "statements[0].insert.table.schema_name", "U+202E"),
    (lambda: _table("t", "zero\u200bwidth"), "statements[0].insert.table.table_name", "U+200B"),
    (lambda: _table("t", "x" * 65), "statements[0].insert.table.table_name", "64"),
    (lambda: _table("t", "x" * 10_000), "statements[0].insert.table.table_name", "64"),
    (lambda: _table("t", "trailing "), "statements[0].insert.table.table_name", "whitespace"),
    (lambda: _table("", "items"), "statements[0].insert.table.schema_name", "missing schema"),
    (lambda: _table("t", "_gateway_applied"), "statements[0].insert.table.table_name",
     "reserved"),
    (lambda: _table("t", "SQLITE_master"), "statements[0].insert.table.table_name", "reserved"),
    (lambda: row_insert("t.c1", {"id": 1}, {"bad\ncolumn": 1}),
     "statements[0].insert.fields[0].name", "U+000A"),
    (lambda: row_insert("t.c2", {"i\u202ed": 1}), "statements[0].insert.key_fields[0].name",
     "U+202E"),
    (lambda: row_insert("t.c3", {"id": 1}, {"c" * 10_000: 1}),
     "statements[0].insert.fields[0].name", "64"),
    (lambda: row_insert("t.c4", {"id": 1}, {"a.b": 1}), "statements[0].insert.fields[0].name",
     "'.'"),
    (lambda: row_insert("t.c5", {"id": 1}, {"name": 1, "NAME": 2}),
     "statements[0].insert.fields[1].name", "only in case"),
    (lambda: row_insert("t.c6", {"id": 1}, {"ID": 2}), "statements[0].insert.fields[0].name",
     "only in case"),
])
def test_invalid_names_are_refused(api, stmt, field, words):
    _refused(api, "Write", _write(stmt()), field, words)


def test_invalid_names_are_refused_in_write_batch_too(api):
    req = gateway_pb2.WriteBatchRequest(writes=[_write(row_insert("t.items", {"id": 70})),
                                                _write(_table("t", "bad\x00"))])
    _refused(api, "WriteBatch", req, "writes[1].statements[0].insert.table.table_name", "U+0000")


def test_invalid_names_are_refused_in_updates_and_deletes(api):
    upd = statement_pb2.Statement(update=statement_pb2.UpdateStatement(
        table=statement_pb2.TableMetadata(schema_name="t", table_name="a\nb"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
        records=[statement_pb2.UpdateRecord(key_values=[V(int_value=1)])]))
    _refused(api, "Write", _write(upd), "statements[0].update.table.table_name", "U+000A")
    dele = statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
        table=statement_pb2.TableMetadata(schema_name="", table_name="items"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
        records=[statement_pb2.DeleteRecord(key_values=[V(int_value=1)])]))
    _refused(api, "Write", _write(dele), "statements[0].delete.table.schema_name")


@pytest.mark.parametrize(("sql", "field", "words"), [
    (statement_pb2.SqlStatement(query="INSERT INTO x VALUES (1)\0"), "statements[0].sql.query",
     "NUL"),
    (statement_pb2.SqlStatement(query="SELECT @a", variables=[
        statement_pb2.SessionVariable(name="a\nb", value=V(int_value=1))]),
     "statements[0].sql.variables[0].name", "U+000A"),
    (statement_pb2.SqlStatement(query="SELECT @a", variables=[
        statement_pb2.SessionVariable(name="a")]),
     "statements[0].sql.variables[0].value", "no case"),
    (statement_pb2.SqlStatement(query="SELECT @a", variables=[
        statement_pb2.SessionVariable(name="a", value=V(int_value=1)),
        statement_pb2.SessionVariable(name="A", value=V(int_value=2))]),
     "statements[0].sql.variables[1].name", "duplicate"),
    (statement_pb2.SqlStatement(query="SELECT 1", default_schema="s.x"),
     "statements[0].sql.default_schema", "'.'"),
])
def test_invalid_sql_statements_are_refused(api, sql, field, words):
    _refused(api, "Write", _write(statement_pb2.Statement(sql=sql)), field, words)


# -- item 7: values, one test per type ------------------------------------------------------------

def _bad_value(api: Api, ftype: int, value: V, words: str, *, key: bool = False) -> None:
    table = f"v.t{ftype}{'k' if key else ''}"
    if key:
        stmt = _typed(table, ("k", ftype, value))
        field = "statements[0].insert.records[0].key_values[0]"
    else:
        stmt = _typed(table, ("id", FT.FIELD_TYPE_INTEGER, V(int_value=1)), [("c", ftype, value)])
        field = "statements[0].insert.records[0].after_values[0]"
    _refused(api, "Write", _write(stmt), field, words)


@pytest.mark.parametrize("n", [0, 15, 17])
def test_uuid_of_the_wrong_length_is_refused(api, n):
    _bad_value(api, FT.FIELD_TYPE_UUID, V(bytes_value=bytes(n)), f"not {n}")


@pytest.mark.parametrize("text", ["2024-13-45", "2023-02-29", "2024-1-1", "01/02/2024"])
def test_invalid_date_is_refused(api, text):
    _bad_value(api, FT.FIELD_TYPE_DATE, V(string_value=text), "not a valid DATE")


@pytest.mark.parametrize("text", ["24:00:00", "12:61:00", "12:00", "12:00:00Z"])
def test_invalid_time_is_refused(api, text):
    _bad_value(api, FT.FIELD_TYPE_TIME, V(string_value=text), "not a valid TIME")


@pytest.mark.parametrize("text", ["2024-01-01 12:00:00", "2024-02-30T00:00:00",
                                  "2024-01-01T00:00:00+01:00"])
def test_invalid_datetime_is_refused(api, text):
    _bad_value(api, FT.FIELD_TYPE_DATETIME, V(string_value=text), "not a valid DATETIME")


@pytest.mark.parametrize("text", ["1e5", "01.50", "NaN", " 1", "-0"])
def test_non_canonical_decimal_is_refused(api, text):
    _bad_value(api, FT.FIELD_TYPE_DECIMAL, V(decimal_value=text), "DECIMAL")


@pytest.mark.parametrize("text", ["{bad", "[1] [2]", "NaN", ""])
def test_invalid_json_is_refused(api, text):
    _bad_value(api, FT.FIELD_TYPE_JSON, V(string_value=text), "JSON")


def test_nan_double_key_is_refused(api):
    _bad_value(api, FT.FIELD_TYPE_DOUBLE, V(double_value=math.nan), "NaN", key=True)


def test_negative_zero_double_key_is_refused(api):
    _bad_value(api, FT.FIELD_TYPE_DOUBLE, V(double_value=-0.0), "-0.0", key=True)


def test_nan_double_value_is_refused(api):
    _bad_value(api, FT.FIELD_TYPE_DOUBLE, V(double_value=math.nan), "NaN")


def test_value_in_the_wrong_case_is_refused(api):
    _bad_value(api, FT.FIELD_TYPE_UUID, V(string_value="x" * 16), "string_value")


def test_valid_values_of_every_type_are_accepted_and_read_back(api):
    cols = [("b", FT.FIELD_TYPE_BOOLEAN, V(bool_value=True)),
            ("i", FT.FIELD_TYPE_INTEGER, V(int_value=-5)),
            ("u", FT.FIELD_TYPE_UNSIGNED, V(uint_value=2**64 - 1)),
            ("d", FT.FIELD_TYPE_DOUBLE, V(double_value=math.inf)),
            ("z", FT.FIELD_TYPE_DOUBLE, V(double_value=-0.0)),
            ("m", FT.FIELD_TYPE_DECIMAL, V(decimal_value="-12.50")),
            ("s", FT.FIELD_TYPE_VARCHAR, V(string_value="any\0text\u202e")),
            ("bl", FT.FIELD_TYPE_BLOB, V(bytes_value=b"\0\xff")),
            ("dt", FT.FIELD_TYPE_DATE, V(string_value="2024-02-29")),
            ("tm", FT.FIELD_TYPE_TIME, V(string_value="23:59:59.999999999")),
            ("dtm", FT.FIELD_TYPE_DATETIME, V(string_value="2024-02-29T23:59:59")),
            ("ts", FT.FIELD_TYPE_TIMESTAMP, V(timestamp_ns=-1)),
            ("id2", FT.FIELD_TYPE_UUID, V(bytes_value=bytes(range(16)))),
            ("j", FT.FIELD_TYPE_JSON, V(string_value='{"a": [1, 2.5, null]}')),
            ("n", FT.FIELD_TYPE_JSON, V(null_value=NULL))]
    stub = api.stub()
    for _ in range(2):  # the second write of the shape takes the leader's wire check
        stub.Write(_write(_typed("v.every", ("k", FT.FIELD_TYPE_DOUBLE, V(double_value=1.5)),
                                 cols)), timeout=10)
    resp = stub.Read(gateway_pb2.ReadRequest(table="v.every", key=[V(double_value=1.5)]),
                     timeout=10)
    assert resp.found and list(resp.row.values) == [v for _, _, v in cols]


# -- item 8: one request-size limit ---------------------------------------------------------------

def test_write_batch_over_max_request_bytes_is_resource_exhausted(api):
    big = "x" * (1 << 20)
    req = gateway_pb2.WriteBatchRequest(writes=[_write(row_insert("t.big", {"id": i}, {"v": big}))
                                                for i in range(10)])
    before = api.node.sm.last_trans_id
    with pytest.raises(grpc.RpcError) as ei:
        api.stub().WriteBatch(req, timeout=20)
    assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert str(4 << 20) in ei.value.details()  # the limit, max_request_bytes
    assert api.node.sm.last_trans_id == before


def test_forwarded_request_over_the_leaders_limit_is_resource_exhausted(api):
    """The follower's API enforces its own limit; the leader applies its own to what a
    follower forwards."""

    class Context:
        code: Any = None

        def set_trailing_metadata(self, meta: Any) -> None:
            pass

        def time_remaining(self) -> float:
            return 5.0

        async def abort(self, code: Any, details: str) -> None:
            self.code, self.details = code, details
            raise RuntimeError("aborted")

    ctx = Context()
    payload = _write(row_insert("t.big", {"id": 1}, {"v": "x" * (5 << 20)})).SerializeToString()
    with pytest.raises(RuntimeError):
        api.on_loop(api.node.servicer.forwarded("Write", payload, ctx))
    assert ctx.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "max_request_bytes (4194304)" in ctx.details
    with pytest.raises(RuntimeError):
        api.on_loop(api.node.servicer.forwarded("Write", _GARBAGE, ctx))
    assert ctx.code == grpc.StatusCode.INVALID_ARGUMENT and ctx.details.startswith("request: ")


def test_configured_max_request_bytes_is_the_limit(tmp_path):
    cfg = node_configs(tmp_path, 1, max_request_bytes=64 << 10)[0]

    async def go() -> None:
        async with running(cfg) as (node,):
            while not node.driver.is_leader:
                await asyncio.sleep(0.02)
            async with grpc.aio.insecure_channel(cfg.api) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)
                await stub.Write(_write(row_insert("t.s", {"id": 1}, {"v": "x" * (60 << 10)})),
                                 timeout=10)
                with pytest.raises(grpc.aio.AioRpcError) as ei:
                    await stub.Write(_write(row_insert("t.s", {"id": 2},
                                                       {"v": "x" * (70 << 10)})), timeout=10)
                assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert str(64 << 10) in ei.value.details()

    asyncio.run(asyncio.wait_for(go(), 60))


# -- item 9: membership changes --------------------------------------------------------------------

@pytest.mark.parametrize(("req", "field", "words"), [
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="::::"), "peer_address", "port"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="127.0.0.1:99999"), "peer_address",
     "65535"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="not an address"), "peer_address",
     "HOST:PORT"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="bad host:7100"), "peer_address",
     "host name"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="::1:7100"), "peer_address",
     "brackets"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="[::g]:7100"), "peer_address", "IPv6"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="300.1.1.1:7100"), "peer_address",
     "IPv4"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="127.0.0.1:0"), "peer_address", "port"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="127.0.0.1:+80"), "peer_address",
     "port"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address=""), "peer_address", "missing"),
    (gateway_pb2.AddNodeRequest(node_id=0, peer_address="127.0.0.1:7100"), "node_id",
     "positive"),
    (gateway_pb2.AddNodeRequest(node_id=5, peer_address="127.0.0.1:7100", api_address="x y:1"),
     "api_address", "host name"),
])
def test_add_node_checks_its_input_before_proposing(api, req, field, words):
    members = set(api.node.driver.raw.raft.trk.config.all_voters())
    _refused(api, "AddNode", req, field, words)
    cfg = api.node.driver.raw.raft.trk.config
    assert set(cfg.all_voters()) == members and not cfg.learners


def test_add_node_refuses_the_address_of_a_member(api):
    _refused(api, "AddNode", gateway_pb2.AddNodeRequest(
        node_id=9, peer_address=api.node.config.listen), "peer_address", "member 1")


def test_removing_the_last_voter_is_refused_and_the_node_keeps_serving(api):
    _refused(api, "RemoveNode", gateway_pb2.RemoveNodeRequest(node_id=1), "node_id",
             "removed all voters")
    with GatewayClient(api.address) as c:
        c.write([row_insert("t.items", {"id": 80}, {"name": "alive"})])
        assert c.get("t.items", 80) == {"id": 80, "name": "alive"}


# -- other RPCs ------------------------------------------------------------------------------------

def test_subscribe_with_two_start_positions_is_refused(api):
    req = gateway_pb2.SubscribeRequest(from_log_index=2)
    req.after_gtid.server_id, req.after_gtid.trans_id = 1, 1
    with pytest.raises(grpc.RpcError) as ei:
        list(api.stub().Subscribe(req, timeout=10))
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.details().startswith("after_gtid: ")


def test_client_subscribe_errors_are_gateway_errors_with_the_field(api):
    with GatewayClient(api.address) as c, pytest.raises(GatewayError) as ei:
        next(c.subscribe(from_log_index=2, after_gtid=(1, 1), timeout=10))
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert ei.value.field == "after_gtid"


class _Delegate:
    """``real`` with some attributes replaced."""

    def __init__(self, real: Any, **replaced: Any) -> None:
        self._real = real
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_subscribe_ends_when_the_log_is_compacted_past_it(api):
    """A subscriber that fell behind compaction gets an error, not a stream that silently
    skips the compacted transactions. The feed is shown a log compacted past the reader (the
    node's own Raft log is left alone); a write wakes the waiting stream."""
    feed = api.node.change_feed
    real = feed._driver
    call = api.stub().Subscribe(gateway_pb2.SubscribeRequest(from_log_index=1), timeout=20)
    first = next(call)
    storage = _Delegate(real.storage, first_index=lambda: first.log_index + 10**6)
    feed._driver = _Delegate(real, storage=storage)
    try:
        with GatewayClient(api.address) as c:
            c.write([row_insert("t.items", {"id": 95}, {"name": "wake"})])
        with pytest.raises(grpc.RpcError) as ei:
            for _ in call:
                pass
    finally:
        feed._driver = real
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "compacted" in ei.value.details()
    assert ei.value.details().startswith("from_log_index: ")


def test_scan_response_stays_under_clients_receive_limit(api):
    big = "x" * (900 << 10)
    with GatewayClient(api.address) as c:
        for i in range(6):
            c.write([row_insert("t.wide", {"id": i}, {"v": big})])
        resp = c.scan("t.wide")  # a default client receives at most 4 MiB
    assert resp.more and 1 <= len(resp.rows) < 6
    assert resp.ByteSize() < 4 << 20
