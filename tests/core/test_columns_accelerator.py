"""The C reader of the columns path (``gateway.core._columns``) gives what its Python
specification ``insert_columns._add_insert_py`` gives: the same rows, column by column, the same
refusals (the row path then takes the window), and it never reads outside damaged bytes."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import insert_columns as ic
from gateway.v1 import statement_pb2, value_pb2

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.core import _columns as accel
else:
    accel = pytest.importorskip("gateway.core._columns")

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


def _run(add: Any, bodies: list) -> tuple:
    groups: dict = {}
    seen: dict = {}
    results = []
    for body in bodies:
        n = add(body, groups, seen)
        results.append(n)
        if n is None:
            return results, None, None
    return results, groups, seen


@settings(max_examples=400, deadline=None)
@given(st.lists(_statement(key_space=8), min_size=1, max_size=4))
def test_the_c_reader_gives_the_rows_and_the_refusals_of_the_specification(bodies):
    want = _run(ic._add_insert_py, bodies)
    got = _run(ic._add_insert_c, bodies)
    assert got[0] == want[0]
    assert _same(got[1], want[1]) and _same(got[2], want[2])


def test_well_formed_windows_are_read_by_the_c_reader_not_refused():
    """Not a reader that refuses everything: a plain insert of every column case is taken."""
    body = statement_pb2.InsertStatement()
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
    assert ic._add_insert_c(body, groups, seen) == 3
    ((key_lists, val_lists),) = groups.values()
    assert key_lists == [[-(2**63), 0, 2**63 - 1]]
    assert _same(val_lists, [[True] * 3, [2**64 - 1] * 3, [-0.0] * 3, ["é\x00"] * 3,
                             [b"\x00\xff"] * 3, [-5] * 3, [None] * 3])


@settings(max_examples=300, deadline=None)
@given(_statement(key_space=1000), st.data())
def test_damaged_bytes_are_refused_or_read_as_the_message_they_parse_to(body, data):
    """Truncated or overwritten bytes: ``head``/``fill`` never crash or read past the end;
    when the damage still parses as a statement and ``fill`` takes it, its rows are the
    specification's for that statement."""
    raw = bytearray(body.SerializeToString())
    if raw:
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    raw = bytes(raw)
    head = accel.head(raw)
    assert head is None or isinstance(head, bytes)
    nk = len(body.key_fields)
    codes = [3] * (nk + len(body.fields))
    if nk:
        key_lists = [[] for _ in range(nk)]
        val_lists: list[list] = [[] for _ in body.fields]
        n = accel.fill(raw, codes, nk, key_lists, val_lists, set())
        assert n is None or n >= 0
    try:
        parsed = statement_pb2.InsertStatement.FromString(raw)
    except DecodeError:  # damaged beyond parsing: refused or not, no crash is all to ask
        return
    want = _run(ic._add_insert_py, [parsed])
    got = _run(ic._add_insert_c, [parsed])
    if got[1] is not None:
        assert got[0] == want[0] and _same(got[1], want[1])


def test_fill_rejects_column_lists_that_disagree_with_the_codes():
    with pytest.raises(ValueError):
        accel.fill(b"", [3, 3], 1, [[]], [], set())
