"""The gateway_wal data source: byte-range splits, rows, filters, damage, committed entries."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from gateway.core.reducer import SegmentAssembler
from spark_applier import layout
from spark_applier.convert import op_of_row
from spark_applier.decode import RangeReport, read_range
from spark_applier.schema import MARKER_OP
from tests.spark.workload import random_log, write_log_file, write_wal

INT = 2


def _rows(path: Path, partition_bytes: int, **kw: object) -> tuple[list[dict], list[RangeReport]]:
    ranges = layout.plan_ranges(layout.discover(path), partition_bytes=partition_bytes, **kw)
    rows, reports = [], []
    for rr in ranges:
        rep = RangeReport(rr.file.path, rr.start, rr.stop)
        for batch in read_range(rr, rep):
            rows.extend(batch.to_pylist())
        reports.append(rep)
    return rows, reports


def _ident(rows: list[dict]) -> Counter:
    return Counter((r["log_index"], r["segment_id"], r["op_no"]) for r in rows)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("logs")
    txns = random_log(7, 120, moves=True, sql=True)
    return {"log": write_log_file(d / "log.bin", txns),
            "wal": write_wal(d / "wal", txns, segment_bytes=2048)}


@pytest.mark.parametrize("kind", ["log", "wal"])
def test_random_splits_read_every_record_exactly_once(logs: dict[str, Path], kind: str) -> None:
    whole, _ = _rows(logs[kind], 1 << 30)
    assert whole
    rng = random.Random(kind)
    for _ in range(12):
        split, reports = _rows(logs[kind], rng.randint(64, 3000))
        assert _ident(split) == _ident(whole)
        assert sorted(map(repr, split)) == sorted(map(repr, whole))
        assert not any(r.problems for r in reports)


def test_rows_are_the_original_statements_of_every_transaction(logs: dict[str, Path]) -> None:
    from gateway.appliers.source import LogFileSource

    rows, _ = _rows(logs["log"], 5000)
    got = sorted((r["log_index"], r["segment_id"], r["op_no"], op_of_row(r))
                 for r in rows if r["op"] != MARKER_OP and r["segment_id"] == 1
                 and r["end_segment"])
    want = []
    src = LogFileSource(logs["log"])
    assembler = SegmentAssembler()
    for entry in src.read(1, 10_000):
        done = assembler.add(entry.index, entry.transaction)
        if done is not None and len(done.segments) == 1:
            want.extend((entry.index, 1, n, op) for n, op in enumerate(done.ops()))
    assert [g[3] for g in got] == [w[3] for w in sorted(want, key=lambda w: w[:3])]


def test_spark_reads_the_same_rows_with_any_partition_size(spark, logs) -> None:
    whole = {(r.log_index, r.segment_id, r.op_no) for r in
             spark.read.format("gateway_wal").load(str(logs["wal"]))
             .select("log_index", "segment_id", "op_no").collect()}
    df = (spark.read.format("gateway_wal").option("partition_bytes", 700)
          .load(str(logs["wal"])))
    assert df.rdd.getNumPartitions() > 5
    rows = df.select("log_index", "segment_id", "op_no").collect()
    assert len(rows) == len(whole)
    assert {(r.log_index, r.segment_id, r.op_no) for r in rows} == whole


def test_index_and_gtid_filters_narrow_by_search(logs: dict[str, Path]) -> None:
    for kind in ("log", "wal"):
        rows, _ = _rows(logs[kind], 900, index_from=20, index_to=35)
        assert {r["log_index"] for r in rows} == set(range(20, 36)) - _empty(logs[kind], 20, 35)
        rows, _ = _rows(logs[kind], 900, gtids=layout.parse_gtid_range("1:50-60"))
        assert rows and all(50 <= r["trans_id"] <= 60 for r in rows)
        whole, _ = _rows(logs[kind], 1 << 30)
        assert _ident(rows) == _ident([r for r in whole if 50 <= r["trans_id"] <= 60])


def _empty(path: Path, lo: int, hi: int) -> set[int]:
    whole, _ = _rows(path, 1 << 30)
    present = {r["log_index"] for r in whole}
    return {i for i in range(lo, hi + 1) if i not in present}


def test_a_wal_is_read_only_up_to_its_commit_index(tmp_path: Path) -> None:
    wal = write_wal(tmp_path / "wal", random_log(3, 40), commit=25)
    rows, _ = _rows(wal, 1000)
    assert max(r["log_index"] for r in rows) <= 25
    assert layout.last_index(layout.discover(wal)) == 25
    assert max(r["log_index"] for r in _rows(wal, 1000)[0]) >= 20
    rows = [r for rr in layout.plan_ranges(layout.discover(wal, committed_only=False),
                                            partition_bytes=1000) for b in read_range(rr)
            for r in b.to_pylist()]
    assert max(r["log_index"] for r in rows) > 25


def test_a_corrupted_segment_reports_the_damage_and_never_yields_wrong_rows(
        spark, tmp_path: Path) -> None:
    txns = random_log(11, 80, segments=False)
    wal = write_wal(tmp_path / "wal", txns, segment_bytes=4096)
    clean, _ = _rows(wal, 1 << 30)
    seg = sorted(wal.glob("*.wal"))[1]
    data = bytearray(seg.read_bytes())
    for pos in (300, 301, 1500, len(data) // 2):
        data[pos] ^= 0x5A
    seg.write_bytes(bytes(data))
    report_dir = tmp_path / "report"
    df = (spark.read.format("gateway_wal").option("partition_bytes", 1500)
          .option("report_dir", str(report_dir)).load(str(wal)))
    got = [r.asDict(recursive=True) for r in df.collect()]
    from spark_applier.datasource import damage_summary

    summary = damage_summary(str(report_dir))
    assert summary["damaged"]
    lost = {r["log_index"] for r in clean} - {r["log_index"] for r in got}
    assert lost and len(lost) <= 4
    clean_by_ident = {(r["log_index"], r["op_no"]): repr(sorted(r.items())) for r in clean}
    for r in got:
        assert clean_by_ident[(r["log_index"], r["op_no"])] == repr(sorted(r.items()))


def test_a_transaction_that_breaks_the_log_model_is_rejected_whole(tmp_path: Path) -> None:
    txns = random_log(5, 10, segments=False)
    bad = txns[4]
    stmt = bad.statements.add().insert
    stmt.table.table_name = "t"
    stmt.key_fields.add(name="id", type=INT)
    stmt.records.add().key_values.add(string_value="not an int")
    log = write_log_file(tmp_path / "log.bin", txns)
    rows, reports = _rows(log, 1 << 30)
    assert 5 not in {r["log_index"] for r in rows}
    assert {r["log_index"] for r in rows} >= {1, 2, 3, 4, 6}
    (rejected,) = [x for rep in reports for x in rep.rejected]
    assert "statement" in rejected[1] and "'id'" in rejected[1]
