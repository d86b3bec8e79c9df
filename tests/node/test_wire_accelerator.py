"""The C accelerator of the apply fast path (``gateway.node._wire.insert_rows``) returns exactly
what its Python specification (``state_machine._insert_rows_py``) returns -- the same store
operations, or None for the general path -- on valid records and on any corruption of them."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.node import keys, state_machine
from gateway.v1 import statement_pb2, value_pb2

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.node import _wire as wire
else:
    wire = pytest.importorskip("gateway.node._wire")

_VALUES = st.one_of(
    st.builds(lambda v: value_pb2.Value(int_value=v), st.integers(-2**63, 2**63 - 1)),
    st.builds(lambda v: value_pb2.Value(uint_value=v), st.integers(0, 2**64 - 1)),
    st.builds(lambda v: value_pb2.Value(string_value=v), st.text(max_size=12)),
    st.builds(lambda v: value_pb2.Value(bytes_value=v), st.binary(max_size=12)),
    st.builds(lambda v: value_pb2.Value(bool_value=v), st.booleans()),
    st.builds(lambda v: value_pb2.Value(double_value=v), st.floats(allow_nan=False)),
    st.builds(lambda v: value_pb2.Value(timestamp_ns=v), st.integers(-2**63, 2**63 - 1)),
    st.builds(lambda v: value_pb2.Value(decimal_value=v), st.sampled_from(["1", "-2.50"])),
    st.just(value_pb2.Value(null_value=value_pb2.NULL_VALUE)),
)
_RECORDS = st.lists(st.builds(
    lambda k, v: statement_pb2.InsertRecord(key_values=k, after_values=v),
    st.lists(_VALUES, min_size=1, max_size=3), st.lists(_VALUES, max_size=3)),
    min_size=1, max_size=4)
_ARGS = (b"r\x01", b"\x0a\x03abc", b"\x22\x01v", b"\x30\x07", 5 << 32 | 1, 7, 10**18)


def _records_bytes(recs: list[statement_pb2.InsertRecord]) -> bytes:
    return statement_pb2.InsertStatement(records=recs).SerializeToString()


def _both(data: bytes, pos: int, end: int):  # type: ignore[no-untyped-def]
    return (wire.insert_rows(data, pos, end, *_ARGS),
            state_machine._insert_rows_py(data, pos, end, *_ARGS))


@settings(max_examples=400, deadline=None)
@given(_RECORDS)
def test_c_and_python_build_the_same_operations(recs):
    data = b"junk" + _records_bytes(recs) + b"tail"
    c, py = _both(data, 4, len(data) - 4)
    assert c == py
    null_key = any(v.WhichOneof("kind") == "null_value" for r in recs for v in r.key_values)
    if not null_key:
        assert c is not None and len(c) == len(recs)
        for (key, *_), rec in zip(c, recs, strict=True):
            assert key == b"r\x01" + keys.encode_key(rec.key_values)


@settings(max_examples=600, deadline=None)
@given(_RECORDS, st.data())
def test_corrupted_records_agree_and_never_crash(recs, data_st):
    data = bytearray(_records_bytes(recs))
    for _ in range(data_st.draw(st.integers(1, 4))):
        i = data_st.draw(st.integers(0, len(data) - 1))
        data[i] = data_st.draw(st.integers(0, 255))
    cut = data_st.draw(st.integers(0, len(data)))
    blob = bytes(data[:cut]) + b"\xff\xff"  # bytes after the range must never be read
    c, py = _both(blob, 0, cut)
    assert c == py


def test_range_outside_the_data_is_an_error():
    with pytest.raises(ValueError):
        wire.insert_rows(b"\x22\x00", 0, 5, *_ARGS)


_TAG = {"int_value": 0x18, "uint_value": 0x20, "string_value": 0x3A, "bytes_value": 0x42,
        "bool_value": 0x10, "double_value": 0x29, "timestamp_ns": 0x49,
        "decimal_value": 0x32, "null_value": 0x08}


def _tags(values: list[value_pb2.Value]) -> bytes:
    return bytes(_TAG[v.WhichOneof("kind")] for v in values)


@settings(max_examples=400, deadline=None)
@given(_RECORDS, st.data())
def test_record_checks_agree_on_valid_and_corrupted_records(recs, data_st):
    from gateway.node import validation

    first = recs[0]
    ktags, vtags = _tags(first.key_values), _tags(first.after_values)
    raw = _records_bytes(recs)
    args = (0, len(raw), ktags, vtags)
    c, py = wire.check_records(raw, *args), validation._check_records_py(raw, *args)
    assert c == py
    same_shape = all(_tags(r.key_values) == ktags and len(r.after_values) == len(vtags) and all(
        t in (w, 0x08) for t, w in zip(_tags(r.after_values), vtags, strict=True)) for r in recs)
    assert c == (same_shape and all(v.WhichOneof("kind") for r in recs for v in r.key_values))
    data = bytearray(raw)
    for _ in range(data_st.draw(st.integers(1, 4))):
        data[data_st.draw(st.integers(0, len(data) - 1))] = data_st.draw(st.integers(0, 255))
    cut = data_st.draw(st.integers(0, len(data)))
    blob = bytes(data[:cut]) + b"\xff\xff"
    args = (0, cut, ktags, vtags)
    assert wire.check_records(blob, *args) == validation._check_records_py(blob, *args)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
       st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.booleans(), st.text(max_size=20),
       _RECORDS, st.data())
def test_transaction_headers_parse_the_same(sid, tid, epoch, author, ts, rollback, idem, recs,
                                            data_st):
    from gateway.node.state_machine import encode_transaction
    from gateway.v1 import gtid_pb2, transaction_pb2

    stmt = statement_pb2.Statement(insert=statement_pb2.InsertStatement(records=recs))
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=sid, trans_id=tid), epoch=epoch, author=author,
        start_timestamp_ns=ts // 2, commit_timestamp_ns=ts, segment_id=1, end_segment=True,
        statements=[stmt, stmt], rollback=transaction_pb2.Rollback() if rollback else None)
    payload = encode_transaction(txn, idem)
    c, py = wire.parse_txn(payload), state_machine._parse_txn_py(payload)
    assert c == py
    if not rollback:
        assert c is not None and c[:5] == (sid, tid, epoch, author, ts) and c[6] == idem
        assert [payload[a:b] for a, b in c[5]] == [stmt.SerializeToString()] * 2
    data = bytearray(payload)
    for _ in range(data_st.draw(st.integers(1, 4))):
        data[data_st.draw(st.integers(0, len(data) - 1))] = data_st.draw(st.integers(0, 255))
    cut = bytes(data[:data_st.draw(st.integers(0, len(data)))])
    assert wire.parse_txn(cut) == state_machine._parse_txn_py(cut)
