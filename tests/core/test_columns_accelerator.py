"""The C reader of the columns path (``gateway.core._columns``) gives what its Python
specification ``insert_columns._add_transaction_py`` gives: the same rows, column by column, the
same refusals (the row path then takes the window), and it never reads outside damaged
bytes."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import insert_columns as ic
from gateway.core.reducer import AssembledTransaction
from gateway.core.rowops import Gtid
from gateway.v1 import statement_pb2, transaction_pb2, value_pb2

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.core import _columns as accel
else:
    accel = pytest.importorskip("gateway.core._columns")
if ic._C is None:  # GATEWAY_PURE_PYTHON=1: insert_columns runs its Python specification
    pytest.skip("the C reader is switched off (GATEWAY_PURE_PYTHON)", allow_module_level=True)

FT = value_pb2.FieldType
V = value_pb2.Value

_TYPES = [FT.FIELD_TYPE_BOOLEAN, FT.FIELD_TYPE_INTEGER, FT.FIELD_TYPE_UNSIGNED,
          FT.FIELD_TYPE_DOUBLE, FT.FIELD_TYPE_VARCHAR, FT.FIELD_TYPE_BLOB,
          FT.FIELD_TYPE_TIMESTAMP, FT.FIELD_TYPE_UUID, FT.FIELD_TYPE_DATE, FT.FIELD_TYPE_DECIMAL]

_VALUES = {
    "bool_value": st.booleans(),
    "int_value": st.integers(-(2**63), 2**63 - 1),
    "uint_value": st.integers(0, 2**64 - 1),
    "double_value": st.floats(allow_nan=False),
    "decimal_value": st.just("1.5"),
    "string_value": st.text(max_size=12),
    "bytes_value": st.binary(max_size=12),
    "timestamp_ns": st.integers(-(2**63), 2**63 - 1),
}


@st.composite
def _value(draw: st.DrawFn, case: str) -> V:
    """Mostly a value of the column's case; sometimes null, another case or no case at all."""
    roll = draw(st.integers(0, 19))
    if roll == 0:
        return V(null_value=value_pb2.NULL_VALUE)
    if roll == 1:
        return V()
    if roll == 2:
        case = draw(st.sampled_from(sorted(_VALUES)))
    return V(**{case: draw(_VALUES[case])})


@st.composite
def _statement(draw: st.DrawFn, key_space: int) -> statement_pb2.InsertStatement:
    nk = draw(st.integers(0, 2))
    nc = draw(st.integers(0, 3))
    types = [draw(st.sampled_from(_TYPES)) for _ in range(nk + nc)]
    body = statement_pb2.InsertStatement()
    body.table.schema_name = "s"
    body.table.table_name = draw(st.sampled_from(["t", "u", ""]))
    for i, t in enumerate(types):
        (body.key_fields if i < nk else body.fields).add(name=f"c{i}", type=t)
    for _ in range(draw(st.integers(0, 6))):
        rec = body.records.add()
        for i, t in enumerate(types):
            case = ic.CASE_OF_TYPE[t]
            if i < nk and case == "int_value" and draw(st.integers(0, 3)):
                v = V(int_value=draw(st.integers(0, key_space)))  # repeated keys now and then
            else:
                v = draw(_value(case))
            (rec.key_values if i < nk else rec.after_values).add().CopyFrom(v)
        if draw(st.integers(0, 30)) == 0:
            rec.after_values.add(int_value=1)  # a value too many
    return body


def _same(a: Any, b: Any) -> bool:
    """Equal, telling -0.0 from 0.0 and True from 1 (a column's values keep their type)."""
    if isinstance(a, list | tuple | set) and type(a) is type(b):
        items_a, items_b = (sorted(a, key=repr), sorted(b, key=repr)) if isinstance(a, set) \
            else (a, b)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(items_a, items_b,
                                                                     strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return math.copysign(1, a) == math.copysign(1, b) and a == b
    return type(a) is type(b) and a == b


@st.composite
def _transaction(draw: st.DrawFn, key_space: int) -> transaction_pb2.Transaction:
    """A transaction of INSERTs, now and then another kind of statement or a rollback."""
    txn = transaction_pb2.Transaction(segment_id=1, end_segment=True, commit_timestamp_ns=5)
    txn.gtid.server_id, txn.gtid.trans_id = 1, draw(st.integers(1, 10**6))
    for _ in range(draw(st.integers(0, 3))):
        roll = draw(st.integers(0, 24))
        stmt = txn.statements.add()
        if roll == 0:
            stmt.delete.table.table_name = "t"
        elif roll == 1:
            stmt.sql.query = "SELECT 1"
        elif roll == 2:
            pass  # a statement of no kind
        else:
            stmt.insert.CopyFrom(draw(_statement(key_space)))
    if draw(st.integers(0, 40)) == 0:
        txn.rollback.SetInParent()
    return txn


def _assembled(txn: transaction_pb2.Transaction, wire: bool) -> AssembledTransaction:
    return AssembledTransaction(Gtid(1, txn.gtid.trans_id), (1,), (txn,),
                                txn.HasField("rollback"),
                                txn.SerializeToString() if wire else None)


def _run(add: Any, txns: list) -> tuple:
    """Each transaction added in turn: the results, then the groups keyed by table and columns
    (the C reader keys them by head) and the keys seen, or None after a refusal."""
    groups: dict = {}
    seen: dict = {}
    results = []
    for txn in txns:
        n = add(txn, groups, seen)
        results.append(n)
        if n is None:
            return results, None, None
    by_columns = {spec[:3]: (keys, vals) for spec, keys, vals in groups.values()}
    assert len(by_columns) == len(groups)
    return results, by_columns, seen


@settings(max_examples=400, deadline=None)
@given(st.lists(_transaction(key_space=8), min_size=1, max_size=4), st.booleans())
def test_the_c_reader_gives_the_rows_and_the_refusals_of_the_specification(txns, wire):
    _read_alike([_assembled(t, wire) for t in txns if not t.HasField("rollback")])


def _read_alike(txns: list[AssembledTransaction]) -> None:
    """The C reader and the specification give the same results, rows and keys seen."""
    want = _run(ic._add_transaction_py, txns)
    got = _run(ic._add_transaction_c, txns)
    assert got[0] == want[0]
    assert _same(got[1], want[1]) and _same(got[2], want[2])


@st.composite
def _repeating_statement(draw: st.DrawFn) -> statement_pb2.InsertStatement:
    """Records whose values come from a pool of two per column: runs of a value repeated
    row after row (the C reader reuses the object it made for the row before), broken by the
    other value, by null, by another case -- -0.0 after 0.0, True after 1 -- and by a
    value too many."""
    nk = draw(st.integers(1, 2))
    nc = draw(st.integers(1, 3))
    types = [draw(st.sampled_from(_TYPES)) for _ in range(nk + nc)]
    body = statement_pb2.InsertStatement()
    body.table.schema_name, body.table.table_name = "s", "t"
    for i, t in enumerate(types):
        (body.key_fields if i < nk else body.fields).add(name=f"c{i}", type=t)
    pools = []
    for t in types:
        case = ic.CASE_OF_TYPE[t]
        pool = [draw(_value(case)), draw(_value(case))]
        if case == "double_value":
            pool[1] = V(double_value=-0.0) if draw(st.booleans()) else pool[1]
            pool[0] = V(double_value=0.0) if draw(st.booleans()) else pool[0]
        if case == "bool_value" and draw(st.booleans()):
            pool[1] = V(int_value=1)
        pools.append(pool)
    for r in range(draw(st.integers(1, 12))):
        rec = body.records.add()
        for i, pool in enumerate(pools):
            v = pool[draw(st.integers(0, 1))]
            if i == 0:  # distinct keys mostly; a repeated one refuses the window
                v = V(int_value=r) if draw(st.integers(0, 15)) else v
            (rec.key_values if i < nk else rec.after_values).add().CopyFrom(v)
        if draw(st.integers(0, 40)) == 0:
            rec.after_values.add(int_value=1)
    return body


@settings(max_examples=300, deadline=None)
@given(st.lists(_repeating_statement(), min_size=1, max_size=3), st.booleans())
def test_values_repeated_row_after_row_are_read_as_the_specification_reads_them(bodies, wire):
    txns = []
    for n, body in enumerate(bodies):
        txn = transaction_pb2.Transaction(segment_id=1, end_segment=True, commit_timestamp_ns=5)
        txn.gtid.server_id, txn.gtid.trans_id = 1, n + 1
        txn.statements.add().insert.CopyFrom(body)
        txns.append(_assembled(txn, wire))
    _read_alike(txns)


def test_well_formed_windows_are_read_by_the_c_reader_not_refused():
    """Not a reader that refuses everything: a plain insert of every column case is taken."""
    txn = transaction_pb2.Transaction(segment_id=1, end_segment=True)
    body = txn.statements.add().insert
    body.table.table_name = "t"
    body.key_fields.add(name="id", type=FT.FIELD_TYPE_INTEGER)
    cols = [(FT.FIELD_TYPE_BOOLEAN, V(bool_value=True)), (FT.FIELD_TYPE_UNSIGNED,
            V(uint_value=2**64 - 1)), (FT.FIELD_TYPE_DOUBLE, V(double_value=-0.0)),
            (FT.FIELD_TYPE_VARCHAR, V(string_value="é\x00")), (FT.FIELD_TYPE_BLOB,
            V(bytes_value=b"\x00\xff")), (FT.FIELD_TYPE_TIMESTAMP, V(timestamp_ns=-5)),
            (FT.FIELD_TYPE_VARCHAR, V(null_value=value_pb2.NULL_VALUE))]
    for i, (t, _) in enumerate(cols):
        body.fields.add(name=f"c{i}", type=t)
    for k in (-(2**63), 0, 2**63 - 1):
        rec = body.records.add()
        rec.key_values.add(int_value=k)
        for _, v in cols:
            rec.after_values.add().CopyFrom(v)
    groups: dict = {}
    seen: dict = {}
    assert ic._add_transaction_c(_assembled(txn, True), groups, seen) == 3
    ((_, key_lists, val_lists),) = groups.values()
    assert key_lists == [[-(2**63), 0, 2**63 - 1]]
    assert _same(val_lists, [[True] * 3, [2**64 - 1] * 3, [-0.0] * 3, ["é\x00"] * 3,
                             [b"\x00\xff"] * 3, [-5] * 3, [None] * 3])


def test_an_insert_of_an_unknown_shape_is_handed_back_before_anything_is_appended():
    """A head not in the spec cache: ``fill_txn`` names the statement and appends nothing (not
    even the rows of an earlier, known statement); once learned, the same bytes are read."""
    txn = transaction_pb2.Transaction(segment_id=1, end_segment=True)
    for table in ("known", "unknown"):
        body = txn.statements.add().insert
        body.table.table_name = table
        body.key_fields.add(name="id", type=FT.FIELD_TYPE_INTEGER)
        body.records.add().key_values.add(int_value=1)
    data = txn.SerializeToString()
    assert ic._add_transaction_c(_assembled(txn.__class__(statements=txn.statements[:1]), True),
                                 {}, {}) == 1  # teaches the cache the first shape
    specs = dict(ic._SPECS)
    groups: dict = {}
    seen: dict = {}
    head, start, end = accel.fill_txn(data, specs, groups, seen)
    assert groups == {} and seen == {}
    assert statement_pb2.InsertStatement.FromString(data[start:end]).table.table_name == \
        "unknown"
    assert head not in specs
    assert ic._learn(head, data[start:end])
    assert accel.fill_txn(data, ic._SPECS, groups, seen) == 2


@settings(max_examples=300, deadline=None)
@given(_transaction(key_space=1000), st.data())
def test_damaged_bytes_are_refused_or_read_as_the_message_they_parse_to(txn, data):
    """Truncated or overwritten bytes: ``fill_txn`` never crashes or reads past the end; when
    the damage still parses as a transaction and ``fill_txn`` takes it, its rows are the
    specification's for that transaction."""
    raw = bytearray(txn.SerializeToString())
    if raw:
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    raw = bytes(raw)
    try:
        parsed = transaction_pb2.Transaction.FromString(raw)
    except DecodeError:  # damaged beyond parsing: refused or not, no crash is all to ask
        parsed = None
    done = AssembledTransaction(Gtid(1, 1), (1,), (parsed or transaction_pb2.Transaction(),),
                                False, raw)
    got = _run(ic._add_transaction_c, [done])
    if parsed is None or got[1] is None or parsed.HasField("rollback"):
        return
    want = _run(ic._add_transaction_py, [done])
    assert got[0] == want[0] and _same(got[1], want[1])


def test_fill_txn_refuses_a_spec_that_is_not_one():
    txn = transaction_pb2.Transaction()
    body = txn.statements.add().insert
    body.table.table_name = "t"
    body.key_fields.add(name="id", type=FT.FIELD_TYPE_INTEGER)
    body.records.add().key_values.add(int_value=1)
    data = txn.SerializeToString()
    head, _, _ = accel.fill_txn(data, {}, {}, {})
    with pytest.raises(ValueError):
        accel.fill_txn(data, {head: ("not", "a", "spec")}, {}, {})
