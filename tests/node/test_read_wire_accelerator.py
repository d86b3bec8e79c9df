"""A read batch's keys read from the request's bytes (``read_wire.batch_keys``,
``batch_table``) and its response framed around the stored rows (``read_batch_response``): the
C twins in ``gateway.node.api._read_wire`` answer exactly what their Python specifications
answer, on valid requests and on any corruption of them; and the bytes path never accepts a
key the general path (``reads.coerce_key``: a write's key rules) refuses, and reads the
store key the general path reads."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.node.api import read_wire
from gateway.node.api.reads import coerce_key
from gateway.node.base.validation import InvalidRequest, TableSchema
from gateway.node.state import keys
from gateway.node.state.wire import column_code
from gateway.v1 import gateway_pb2, reads_pb2, value_pb2
from tests.harness.debug_alloc import run_under_debug_allocator

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.node.api import _read_wire as c_wire
else:
    c_wire = pytest.importorskip("gateway.node.api._read_wire")

FT = value_pb2.FieldType
#: Key column types, with the values a client may send for each (right case or not, valid
#: for the type's rule or not).
_TYPES = [FT.FIELD_TYPE_INTEGER, FT.FIELD_TYPE_UNSIGNED, FT.FIELD_TYPE_VARCHAR,
          FT.FIELD_TYPE_BLOB, FT.FIELD_TYPE_BOOLEAN, FT.FIELD_TYPE_DOUBLE,
          FT.FIELD_TYPE_TIMESTAMP, FT.FIELD_TYPE_UUID, FT.FIELD_TYPE_DATE, FT.FIELD_TYPE_TIME,
          FT.FIELD_TYPE_DATETIME, FT.FIELD_TYPE_DECIMAL]
_BITS = st.integers(0, 2**64 - 1) | st.sampled_from(
    [0, 1 << 63, 0x7FF0000000000000, 0x7FF8000000000000, 0x7FF0000000000001])
_TEXT = st.text(max_size=8) | st.sampled_from(
    ["2024-02-29", "2023-02-29", "12:00:00", "24:00:00", "12:00:00.5", "2024-01-01T00:00:00",
     "2024-01-01 00:00:00", "17", "-3", "true", "1.5", "ab\x00c"])
_VALUES = st.one_of(
    st.builds(lambda v: value_pb2.Value(int_value=v), st.integers(-2**63, 2**63 - 1)),
    st.builds(lambda v: value_pb2.Value(uint_value=v), st.integers(0, 2**64 - 1)),
    st.builds(lambda v: value_pb2.Value(string_value=v), _TEXT),
    st.builds(lambda v: value_pb2.Value(bytes_value=v),
              st.binary(max_size=18) | st.binary(min_size=16, max_size=16)),
    st.builds(lambda v: value_pb2.Value(bool_value=v), st.booleans()),
    st.builds(lambda b: value_pb2.Value(
        double_value=struct.unpack("<d", b.to_bytes(8, "little"))[0]), _BITS),
    st.builds(lambda v: value_pb2.Value(timestamp_ns=v), st.integers(-2**63, 2**63 - 1)),
    st.builds(lambda v: value_pb2.Value(decimal_value=v), st.sampled_from(["1", "-2.50"])),
    st.just(value_pb2.Value(null_value=value_pb2.NULL_VALUE)),
    st.just(value_pb2.Value()),
)
_PREFIX = keys.table_prefix("s", "t")


def _shape(types: list[int]) -> TableSchema:
    return TableSchema(tuple((f"k{i}", t) for i, t in enumerate(types)), {})


def _general(values: list[value_pb2.Value], shape: TableSchema) -> bytes | None:
    """The store key the general path reads for ``values``, or None where it refuses them."""
    try:
        return _PREFIX + keys.encode_key(coerce_key(values, shape, "key"))
    except (InvalidRequest, ValueError):
        return None


@st.composite
def _requests(draw: st.DrawFn) -> tuple[list[int], reads_pb2.ReadBatchRequest]:
    types = draw(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3))
    rks = []
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.sampled_from([len(types)] * 4 + [0, len(types) + 1]))
        rks.append(reads_pb2.ReadKey(
            table=draw(st.sampled_from([""] * 6 + ["s.t", "o.u"])),
            key=[draw(_VALUES) for _ in range(n)]))
    return types, reads_pb2.ReadBatchRequest(
        table=draw(st.sampled_from(["s.t", "s.t", "", "o.u"])), keys=rks,
        consistency=draw(st.sampled_from([0, 1, 2, 3])))


@settings(max_examples=600, deadline=None)
@given(_requests(), st.data())
def test_c_and_python_read_the_same_keys_and_never_accept_what_the_general_path_refuses(
        drawn, data_st):
    types, req = drawn
    raw = req.SerializeToString()
    kcodes = bytes(column_code(t) for t in types)
    table = c_wire.batch_table(raw)
    assert table == read_wire.batch_table_py(raw)
    tables = {rk.table or req.table for rk in req.keys}
    one = len(tables) == 1 and "" not in tables and all(len(rk.key) > 0 for rk in req.keys)
    assert table == (tables.pop().encode() if one else None)
    plain = table == b"s.t"
    got = c_wire.batch_keys(raw, _PREFIX, kcodes)
    assert got == read_wire.batch_keys_py(raw, _PREFIX, kcodes)
    shape = _shape(types)
    if got is not None:
        # A key read from the bytes is the one the general path reads, never one it refuses.
        assert got == [_general(list(rk.key), shape) for rk in req.keys]
    elif plain and not any(t == FT.FIELD_TYPE_DECIMAL for t in types):
        # Plain keys the general path takes as they are (no text converted) are read here.
        taken = all(
            _general(list(rk.key), shape) is not None
            and all(v.WhichOneof("kind") == coerce_key(list(rk.key), shape, "key")[i]
                    .WhichOneof("kind") for i, v in enumerate(rk.key))
            for rk in req.keys)
        assert not taken, "a plain batch the general path accepts unchanged went there"
    # Any corruption: both answer the same, and neither reads outside the bytes.
    data = bytearray(raw)
    for _ in range(data_st.draw(st.integers(0, 3))):
        if data:
            data[data_st.draw(st.integers(0, len(data) - 1))] = data_st.draw(st.integers(0, 255))
    blob = bytes(data[:data_st.draw(st.integers(0, len(data)))])
    assert c_wire.batch_table(blob) == read_wire.batch_table_py(blob)
    assert c_wire.batch_keys(blob, _PREFIX, kcodes) == \
        read_wire.batch_keys_py(blob, _PREFIX, kcodes)


def test_a_plain_batch_of_every_key_type_is_read_from_its_bytes():
    """Every key type the bytes path takes (all but DECIMAL), valid keys: keys read, equal to
    the general path's."""
    cases = [
        (FT.FIELD_TYPE_INTEGER, value_pb2.Value(int_value=-5)),
        (FT.FIELD_TYPE_UNSIGNED, value_pb2.Value(uint_value=2**64 - 1)),
        (FT.FIELD_TYPE_VARCHAR, value_pb2.Value(string_value="a\x00b")),
        (FT.FIELD_TYPE_BLOB, value_pb2.Value(bytes_value=b"\x00\xff")),
        (FT.FIELD_TYPE_BOOLEAN, value_pb2.Value(bool_value=True)),
        (FT.FIELD_TYPE_DOUBLE, value_pb2.Value(double_value=-1.5)),
        (FT.FIELD_TYPE_TIMESTAMP, value_pb2.Value(timestamp_ns=-1)),
        (FT.FIELD_TYPE_UUID, value_pb2.Value(bytes_value=bytes(range(16)))),
        (FT.FIELD_TYPE_DATE, value_pb2.Value(string_value="2024-02-29")),
        (FT.FIELD_TYPE_TIME, value_pb2.Value(string_value="23:59:59.123")),
        (FT.FIELD_TYPE_DATETIME, value_pb2.Value(string_value="2024-01-01T00:00:00")),
    ]
    types = [t for t, _ in cases]
    values = [v for _, v in cases]
    req = reads_pb2.ReadBatchRequest(table="s.t", keys=[
        reads_pb2.ReadKey(key=values), reads_pb2.ReadKey(table="s.t", key=values),
        reads_pb2.ReadKey(key=values)], consistency=gateway_pb2.CONSISTENCY_STALE)
    kcodes = bytes(column_code(t) for t in types)
    want = [_general(values, _shape(types))] * 3
    assert want[0] is not None
    for fn in (c_wire.batch_keys, read_wire.batch_keys_py):
        assert fn(req.SerializeToString(), _PREFIX, kcodes) == want
    # The coalescing clients name the table on every key and none on the request.
    for r in (req, reads_pb2.ReadBatchRequest(keys=[reads_pb2.ReadKey(table="s.t", key=values)])):
        assert c_wire.batch_table(r.SerializeToString()) == b"s.t"
        assert read_wire.batch_table_py(r.SerializeToString()) == b"s.t"


def test_a_varint_past_64_bits_sends_the_batch_to_the_parsed_path():
    raw = reads_pb2.ReadBatchRequest(table="s.t", keys=[
        reads_pb2.ReadKey(key=[value_pb2.Value(int_value=1)])]).SerializeToString()
    kcodes = bytes((column_code(FT.FIELD_TYPE_INTEGER),))
    assert c_wire.batch_keys(raw, _PREFIX, kcodes) is not None
    bad = raw + b"\x18" + b"\xff" * 10 + b"\x01"  # consistency: an 11-byte varint
    for table in (c_wire.batch_table, read_wire.batch_table_py):
        assert table(bad) is None
    for keys_of in (c_wire.batch_keys, read_wire.batch_keys_py):
        assert keys_of(bad, _PREFIX, kcodes) is None


_ROWS = st.lists(st.none() | st.builds(
    lambda n, size: gateway_pb2.Row(key_values=[value_pb2.Value(int_value=n)], values=[
        value_pb2.Value(string_value="x" * size)]).SerializeToString(),
    st.integers(-9, 9), st.sampled_from([0, 1, 100, 200, 300])), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_ROWS, st.integers(0, 2**64 - 1) | st.integers(0, 300), st.integers(0, 3000))
def test_c_frames_the_response_python_frames_and_stops_where_it_raises(rows, index, limit):
    try:
        want: bytes | None = read_wire.read_batch_response_py(rows, index, limit)
    except InvalidRequest:
        want = None
    assert c_wire.batch_response(rows, index, limit) == want
    if want is not None:  # and the bytes are the message's
        assert reads_pb2.ReadBatchResponse.FromString(want).applied_index == index
        assert len(reads_pb2.ReadBatchResponse.FromString(want).results) == len(rows)


def test_the_accelerator_is_clean_under_the_debug_allocator():
    out = run_under_debug_allocator("""
from gateway.node.api import _read_wire as w
from gateway.node.state.wire import column_code
from gateway.v1 import reads_pb2, value_pb2
req = reads_pb2.ReadBatchRequest(table="s.t", keys=[reads_pb2.ReadKey(key=[
    value_pb2.Value(string_value="k%d" % i), value_pb2.Value(int_value=i)]) for i in range(50)])
raw = req.SerializeToString()
codes = bytes((column_code(6), column_code(2)))
for cut in range(len(raw) + 1):
    w.batch_table(raw[:cut]); w.batch_keys(raw[:cut], b"r", codes)
got = w.batch_keys(raw, b"r", codes)
rows = [None if i % 3 else bytes(i) for i in range(200)]
for limit in (0, 100, 10**6):
    w.batch_response(rows, 7, limit)
print(len(got))
""")
    assert out.strip() == "50"
