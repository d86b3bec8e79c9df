"""The C decoder (``spark_applier._txndecode``) must give the batches and reports of the Python
decoder (``decode._Batch``, the specification) on every input, valid, invalid or damaged."""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core import messages, records
from gateway.core.rowops import CASE_OF_TYPE
from gateway.v1 import transaction_pb2
from spark_applier import decode, layout
from tests.spark.workload import random_log, write_log_file, write_wal

cdecode = decode._cdecode

if cdecode is None:
    if os.environ.get("GATEWAY_REQUIRE_ACCEL"):
        raise RuntimeError("GATEWAY_REQUIRE_ACCEL is set but spark_applier._txndecode is absent")
    pytest.skip("C decoder not built", allow_module_level=True)

_SETTINGS = settings(max_examples=120, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _read(path: Path, partition_bytes: int, *, c: bool, **kw: Any
          ) -> tuple[list[pa.RecordBatch], list[dict[str, Any]]]:
    saved = decode._cdecode
    decode._cdecode = cdecode if c else None
    try:
        batches, reports = [], []
        for rr in layout.plan_ranges(layout.discover(path), partition_bytes=partition_bytes,
                                     **kw):
            rep = decode.RangeReport(rr.file.path, rr.start, rr.stop)
            batches += list(decode.read_range(rr, rep))
            reports.append(asdict(rep))
        return batches, reports
    finally:
        decode._cdecode = saved


def _assert_same(path: Path, partition_bytes: int = 1 << 30, **kw: Any) -> list[pa.RecordBatch]:
    """Read ``path`` with and without the C decoder: same batches (NaN-aware), same reports."""
    got, got_reports = _read(path, partition_bytes, c=True, **kw)
    want, want_reports = _read(path, partition_bytes, c=False, **kw)
    assert got_reports == want_reports
    assert [b.num_rows for b in got] == [b.num_rows for b in want]
    for g, w in zip(got, want, strict=True):
        g.validate(full=True)
        assert g.schema == w.schema
        assert repr(g.to_pylist()) == repr(w.to_pylist())  # repr: nan == nan, -0.0 != 0.0
    return got


#: One directory for the logs the property tests write (hypothesis runs many examples per
#: test and refuses function-scoped fixtures): removed when the test process ends.
_LOGS = tempfile.TemporaryDirectory(prefix="cdecode-")


def _log(txns: list[bytes]) -> Path:
    fd, name = tempfile.mkstemp(suffix=".bin", dir=_LOGS.name)
    os.close(fd)
    path = Path(name)
    path.write_bytes(records.SEPARATOR + records.encode_records(txns))
    return path


def test_case_table_is_rowops_case_of_type() -> None:
    assert cdecode.case_of_type() == CASE_OF_TYPE


# ---------------------------------------------------------------- whole workloads


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["log", "wal"])
def test_random_workloads_read_the_same(tmp_path: Path, seed: int, kind: str) -> None:
    txns = random_log(seed, 120, moves=seed % 2 == 0, sql=seed >= 2)
    path = (write_log_file(tmp_path / "log.bin", txns) if kind == "log"
            else write_wal(tmp_path / "wal", txns, segment_bytes=2048))
    for partition_bytes in (257, 4000, 1 << 30):
        _assert_same(path, partition_bytes)


def test_gtid_and_index_filters_read_the_same(tmp_path: Path) -> None:
    path = write_log_file(tmp_path / "log.bin", random_log(5, 150, moves=True, sql=True))
    servers = {t.gtid.server_id for t in random_log(5, 150, moves=True, sql=True)}
    for server in servers:
        _assert_same(path, 3000, gtids=layout.GtidRange(server, 20, 90))
    _assert_same(path, 3000, index_from=30, index_to=100)


def test_a_mix_of_c_and_python_transactions_keeps_log_order(tmp_path: Path) -> None:
    txns = random_log(11, 200, moves=True, sql=True)
    batches = _assert_same(write_log_file(tmp_path / "log.bin", txns))
    index = [i for b in batches for i in b.column("log_index").to_pylist()]
    assert index == sorted(index)


# ---------------------------------------------------------------- random transactions

_NAMES = st.sampled_from(["id", "a", "b", "é", ""])  # "id" is also a key name: MOVE
_TYPES = st.one_of(st.integers(1, 13), st.sampled_from([0, -1, 14, 2**31 - 1]))
_DECIMALS = st.one_of(st.sampled_from(["1.50", "-12.25", "0", "+1", "1.", ".5", "1e5", "2E-3",
                                       " 1", "1_0", "NaN", "Infinity", "1e9999999999", "",
                                       "abc", "1.2.3", "-", "٣"]),
                      st.decimals(allow_nan=False).map(str))


def _value(case: str | None) -> Any:
    strategies: dict[str, Any] = {
        "null_value": st.just(0),
        "bool_value": st.booleans(),
        "int_value": st.integers(-(2**63), 2**63 - 1),
        "uint_value": st.integers(0, 2**64 - 1),
        "double_value": st.floats(allow_nan=True, allow_infinity=True),
        "decimal_value": _DECIMALS,
        "string_value": st.text(max_size=8),
        "bytes_value": st.binary(max_size=8),
        "timestamp_ns": st.integers(-(2**63), 2**63 - 1),
    }
    if case is None:
        return st.just({})
    return strategies[case].map(lambda v: {case: v})


_CASES = st.sampled_from(sorted(set(CASE_OF_TYPE.values()) | {"null_value"}))


@st.composite
def _values(draw: Any, types: list[int], clean: bool) -> list[dict[str, Any]]:
    """Values for columns of ``types``: of the right case or null; unless ``clean``, sometimes
    another case or no case, sometimes one too many or too few."""
    out = []
    for t in types:
        pick = draw(st.integers(0, 19))
        case = (CASE_OF_TYPE.get(t, "int_value") if pick < 15 or (clean and pick < 18)
                else "null_value" if pick < 18 or clean
                else None if pick < 19 else draw(_CASES))
        out.append(draw(_value(case)))
    change = 2 if clean else draw(st.integers(0, 29))
    if change == 0 and out:
        out.pop()
    elif change == 1:
        out.append(draw(_value(draw(_CASES))))
    return out


@st.composite
def _statement(draw: Any, clean: bool) -> dict[str, Any]:
    """A statement; unless ``clean``, maybe one the log model rejects or C hands to Python."""
    kinds = ["insert"] * 4 + ["update"] * 3 + ["delete"] * 2 + ["apply_status"]
    kind = draw(st.sampled_from(kinds if clean else [*kinds, "sql", "empty"]))
    if kind == "empty":
        return {}
    if kind == "apply_status":
        return {"apply_status": {"server_id": draw(st.integers(0, 2**32 - 1)),
                                 "epoch": draw(st.integers(0, 2**64 - 1)),
                                 "applied_by": draw(st.integers(0, 2**32 - 1))}}
    if kind == "sql":
        return {"sql": {"query": draw(st.text(max_size=6)), "session_id": 3,
                        "variables": [{"name": "v", "value": draw(_value(draw(_CASES)))}]}}
    types = st.integers(1, 13) if clean else st.one_of(st.integers(1, 13), _TYPES)
    names = st.sampled_from(["id", "k"]) if clean else _NAMES
    keys = draw(st.lists(st.tuples(names, types), min_size=1 if clean else 0, max_size=2))
    cols = draw(st.lists(st.tuples(st.sampled_from(["a", "b", "é"]) if clean else _NAMES, types),
                         max_size=3))
    body: dict[str, Any] = {
        "table": {"schema_name": draw(st.sampled_from(["s", ""])),
                  "table_name": draw(st.sampled_from(["t", "é"] if clean else ["t", "é", ""]))},
        "key_fields": [{"name": n, "type": t} for n, t in keys],
        ("set_fields" if kind == "update" else "fields"): [{"name": n, "type": t}
                                                          for n, t in cols],
    }
    recs = []
    for _ in range(draw(st.integers(0, 3))):
        rec: dict[str, Any] = {"key_values": draw(_values([t for _, t in keys], clean))}
        if kind != "delete":
            rec["after_values"] = draw(_values([t for _, t in cols], clean))
        if kind != "insert" and draw(st.booleans()):
            rec["before_values"] = draw(_values([t for _, t in cols], clean))
        recs.append(rec)
    body["records"] = recs
    return {kind: body}


_SMALL = st.sampled_from([0, 1, 7, 2**63 - 1])
_BIG = st.sampled_from([0, 1, 7, 2**63 - 1, 2**63, 2**64 - 1])


@st.composite
def _transaction(draw: Any, clean: bool | None = None) -> bytes:
    """A tagged transaction payload; ``clean``: one the C decoder should take (None: either)."""
    if clean is None:
        clean = draw(st.booleans())
    big = _SMALL if clean else _BIG
    t = {
        "gtid": {"server_id": draw(st.integers(0, 3)), "trans_id": draw(big)},
        "epoch": draw(big), "author": draw(st.integers(0, 2**32 - 1)),
        "start_timestamp_ns": draw(_BIG), "commit_timestamp_ns": draw(big),
        "segment_id": draw(st.sampled_from([1, 1, 1, 0, 2, 2**31 - 1])),
        "end_segment": draw(st.booleans()),
        "statements": draw(st.lists(_statement(clean), max_size=4)),
        "idempotency_key": draw(st.sampled_from(["", "k", "é"])),
    }
    if not clean and draw(st.integers(0, 4)) == 0:
        t["rollback"] = {"reason": "r"}
    msg = transaction_pb2.Transaction()
    _fill(msg, t)
    return messages.pack(msg)


def _fill(msg: Any, d: dict[str, Any]) -> None:
    for k, v in d.items():
        if isinstance(v, dict):
            sub = getattr(msg, k)
            sub.SetInParent()
            _fill(sub, v)
        elif isinstance(v, list):
            for item in v:
                sub = getattr(msg, k).add()
                if isinstance(item, dict):
                    sub.SetInParent()
                _fill(sub, item)
        else:
            setattr(msg, k, v)


@_SETTINGS
@given(st.lists(_transaction(), min_size=1, max_size=6))
def test_random_transactions_decode_the_same(txns: list[bytes]) -> None:
    _assert_same(_log(txns))


@_SETTINGS
@given(st.lists(_transaction(), min_size=1, max_size=4), st.integers(0, 3), st.integers(0, 9),
       st.integers(0, 2**63))
def test_the_gtid_filter_decodes_the_same(txns: list[bytes], server: int, first: int,
                                          span: int) -> None:
    _assert_same(_log(txns), gtids=layout.GtidRange(server, first, first + span))


# ---------------------------------------------------------------- damaged payloads


@st.composite
def _mutated(draw: Any) -> bytes:
    """A transaction payload with some bytes flipped, cut, inserted or duplicated."""
    data = bytearray(draw(_transaction()))
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.integers(0, 4))
        at = draw(st.integers(1, max(1, len(data) - 1)))
        if how == 0 and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif how == 1 and at < len(data):
            data[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x0A, 0x08, 0x12]))
        elif how == 2:
            del data[at:]
        elif how == 3:
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        else:
            n = draw(st.integers(1, 12))
            data[at:at] = data[at : at + n]
    return bytes(data)


@_SETTINGS
@given(st.lists(_mutated(), min_size=1, max_size=5))
def test_damaged_transactions_decode_the_same(txns: list[bytes]) -> None:
    _assert_same(_log(txns))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=200), _mutated()))
def test_malformed_payloads_never_crash_the_c_decoder(payload: bytes) -> None:
    dec = cdecode.Decoder()
    n = dec.add(payload, 1, 0, 0, 0)
    assert n in (cdecode.FALLBACK, cdecode.FILTERED) or n >= 0
    if n >= 0:  # what C accepts, upb parses
        transaction_pb2.Transaction.FromString(payload[1:])
    batch = decode._c_batch(dec.flush())
    batch.validate(full=True)
    assert batch.num_rows == max(n, 0)


# ---------------------------------------------------------------- what stays in C


def _txn(**statement: Any) -> bytes:
    msg = transaction_pb2.Transaction(segment_id=1, end_segment=True)
    msg.gtid.server_id, msg.gtid.trans_id = 1, 5
    _fill(msg, {"statements": [statement]})
    return messages.pack(msg)


_INSERT = {"table": {"schema_name": "s", "table_name": "t"},
           "key_fields": [{"name": "id", "type": 2}], "fields": [{"name": "x", "type": 6}],
           "records": [{"key_values": [{"int_value": 1}], "after_values": [{"string_value": "a"}]},
                       {"key_values": [{"int_value": 2}], "after_values": [{"null_value": 0}]}]}


@pytest.mark.parametrize(("statement", "rows"), [
    ({"insert": _INSERT}, 2),
    ({"delete": {**{k: v for k, v in _INSERT.items() if k != "records"},
                 "records": [{"key_values": [{"int_value": 1}]}]}}, 1),
    ({"update": {"table": _INSERT["table"], "key_fields": _INSERT["key_fields"],
                 "set_fields": [{"name": "x", "type": 6}],
                 "records": [{"key_values": [{"int_value": 1}],
                              "after_values": [{"string_value": "b"}]}]}}, 1),
    ({"apply_status": {"server_id": 2, "epoch": 9, "applied_by": 1}}, 1),
])
def test_common_statements_are_decoded_in_c(statement: dict[str, Any], rows: int) -> None:
    assert cdecode.Decoder().add(_txn(**statement), 1, 0, 0, 0) == rows


@pytest.mark.parametrize("statement", [
    {"sql": {"query": "DELETE FROM t"}},
    {"update": {"table": _INSERT["table"], "key_fields": _INSERT["key_fields"],
                "set_fields": [{"name": "id", "type": 2}],
                "records": [{"key_values": [{"int_value": 1}],
                             "after_values": [{"int_value": 2}]}]}},
    {"insert": {**_INSERT, "fields": [{"name": "x", "type": 2}]}},  # wrong case: rejected
])
def test_sql_key_changes_and_rejections_fall_back_to_python(statement: dict[str, Any]) -> None:
    dec = cdecode.Decoder()
    assert dec.add(_txn(**statement), 1, 0, 0, 0) == cdecode.FALLBACK
    assert dec.rows == 0


def test_a_fallback_undoes_the_rows_of_earlier_statements() -> None:
    msg = transaction_pb2.Transaction.FromString(_txn(insert=_INSERT)[1:])
    msg.statements.add().sql.query = "SELECT 1"
    dec = cdecode.Decoder()
    dec.add(_txn(insert=_INSERT), 1, 0, 0, 0)
    assert dec.add(messages.pack(msg), 2, 0, 0, 0) == cdecode.FALLBACK
    batch = decode._c_batch(dec.flush())
    assert batch.num_rows == 2 and batch.column("log_index").to_pylist() == [1, 1]


def test_nan_and_negative_zero_survive() -> None:
    ins = {**_INSERT, "fields": [{"name": "x", "type": 4}],
           "records": [{"key_values": [{"int_value": 1}], "after_values": [{"double_value": v}]}
                       for v in (math.nan, -0.0)]}
    path = _log([_txn(insert=ins)])
    (batch,) = _assert_same(path)
    got = [row["values"][0]["double_v"] for row in batch.to_pylist()]
    assert math.isnan(got[0]) and math.copysign(1, got[1]) == -1


_UPDATE = {"table": _INSERT["table"], "key_fields": _INSERT["key_fields"],
           "set_fields": [{"name": "x", "type": 6}],
           "records": [{"key_values": [{"int_value": 1}], "after_values": [{"string_value": "b"}],
                        "before_values": [{"string_value": "a"}, {"string_value": "z"}]}]}


def test_an_update_with_a_wrong_count_of_before_values_is_rejected_by_both() -> None:
    dec = cdecode.Decoder()
    assert dec.add(_txn(update=_UPDATE), 1, 0, 0, 0) == cdecode.FALLBACK
    _, reports = _read(_log([_txn(update=_UPDATE)]), 1 << 30, c=True)
    assert len(reports[0]["rejected"]) == 1


def test_a_segment_id_past_the_int32_column_is_rejected_not_a_crash() -> None:
    msg = transaction_pb2.Transaction.FromString(_txn(insert=_INSERT)[1:])
    msg.segment_id = 2**32 - 128  # uint32 on the wire; the Arrow column is int32
    payload = messages.pack(msg)
    assert cdecode.Decoder().add(payload, 1, 0, 0, 0) == cdecode.FALLBACK
    _assert_same(_log([payload, _txn(insert=_INSERT)]))
    _, reports = _read(_log([payload]), 1 << 30, c=True)
    assert "segment_id 4294967168 exceeds" in reports[0]["rejected"][0][1]


@pytest.mark.parametrize("where", ["value", "decimal", "schema", "table", "field", "key"])
def test_invalid_utf8_in_any_string_is_undecodable_for_both(where: str) -> None:
    ins = {"table": {"schema_name": "s", "table_name": "t"},
           "key_fields": [{"name": "id", "type": 2}],
           "fields": [{"name": "x", "type": 6}, {"name": "d", "type": 5}],
           "records": [{"key_values": [{"int_value": 1}],
                        "after_values": [{"string_value": "a"}, {"decimal_value": "1.5"}]}]}
    marked = {"value": ("after_values", 0), "decimal": ("after_values", 1)}
    if where in marked:
        field, i = marked[where]
        case = "string_value" if where == "value" else "decimal_value"
        ins["records"][0][field][i] = {case: "Zq"}
    elif where in ("schema", "table"):
        ins["table"][f"{where}_name"] = "Zq"
    elif where == "field":
        ins["fields"][0]["name"] = "Zq"
    msg = transaction_pb2.Transaction.FromString(_txn(insert=ins)[1:])
    if where == "key":
        msg.idempotency_key = "Zq"
    payload = messages.pack(msg)
    assert payload.count(b"Zq") == 1
    bad = payload.replace(b"Zq", b"Z\xff")
    assert cdecode.Decoder().add(bad, 1, 0, 0, 0) == cdecode.FALLBACK
    assert cdecode.Decoder().add(payload, 1, 0, 0, 0) == (1 if where != "decimal" else
                                                          cdecode.FALLBACK)
    _, reports = _read(_log([bad]), 1 << 30, c=True)
    assert len(reports[0]["undecodable"]) == 1
