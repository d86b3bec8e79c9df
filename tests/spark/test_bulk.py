"""Bulk reduce and apply in Spark against the sequential reference (reducer, SQLite applier)."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gateway.appliers.source import LogFileSource
from gateway.appliers.sqlite import unsigned_blob
from gateway.core.reducer import SegmentAssembler, reduce_ops
from spark_applier.bulk import apply_log, read_log, reduce_log
from spark_applier.convert import op_of_row
from spark_applier.position import SparkPositionStore
from spark_applier.writers import ParquetTarget, SqliteTarget
from tests.spark.workload import (
    TABLES,
    random_log,
    reference_state,
    sqlite_state,
    write_log_file,
    write_wal,
)


def _reference_ops(log: Path) -> list:
    assembler = SegmentAssembler()
    ops = []
    for entry in LogFileSource(log).read(1, 100_000):
        done = assembler.add(entry.index, entry.transaction)
        if done is not None:
            ops.extend(done.ops())
    return reduce_ops(ops, elide_insert_delete=False)


@pytest.mark.parametrize("seed", [1, 2])
def test_bulk_reduce_equals_the_reducer_on_random_workloads(spark, tmp_path: Path,
                                                            seed: int) -> None:
    log = write_log_file(tmp_path / "log.bin", random_log(seed, 150))
    reduced = reduce_log(read_log(spark, str(log), partition_bytes=3000))
    assert reduced.barriers == [] and reduced.pending_from is None and not reduced.rejected
    got = {(op.table, op.key): op for op in
           (op_of_row(r.asDict(recursive=True)) for r in reduced.rows.collect())}
    want = {(op.table, op.key): op for op in _reference_ops(log)}
    assert got.keys() == want.keys()
    for row, op in want.items():
        g = got[row]
        assert (g.kind, g.gtid, g.log_index, g.epoch, g.commit_ts_ns, g.statement) == \
            (op.kind, op.gtid, op.log_index, op.epoch, op.commit_ts_ns, op.statement), row
        assert dict(zip(g.columns, g.values, strict=True)) == \
            dict(zip(op.columns, op.values, strict=True)), row


def _with_audit(db: Path) -> Path:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE IF NOT EXISTS audit (n INTEGER)")
    conn.commit()
    conn.close()
    return db


@pytest.mark.parametrize("mode", ["driver", "tasks"])
def test_sqlite_target_equals_the_sequential_apply_with_moves_and_sql(spark, tmp_path: Path,
                                                                      mode: str) -> None:
    txns = random_log(21, 150, moves=True, sql=True)
    log = write_log_file(tmp_path / "log.bin", txns)
    want = reference_state(log, _with_audit(tmp_path / "ref.db"))
    assert want["audit"], "the workload has SQL statements"
    wal = write_wal(tmp_path / "wal", txns)
    report = apply_log(spark, str(wal),
                       SqliteTarget(str(_with_audit(tmp_path / "out.db")), mode=mode),
                       str(tmp_path / "state"), partition_bytes=4096)
    assert report.barriers > 0 and report.problems == 0
    assert sqlite_state(tmp_path / "out.db") == want
    assert report.end.log_index == len(txns)


def _normal(v: Any) -> Any:
    """A Parquet value as the SQLite applier stores it (booleans 0/1, decimals as text,
    unsigned values past 2**63 - 1 as their 8-byte big-endian BLOB: ``unsigned_blob``)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, Decimal):
        return unsigned_blob(int(v)) if v > 2**63 - 1 else int(v)
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def parquet_state(spark, root: Path | str) -> dict[str, list[dict[str, Any]]]:
    """Every table's current rows under ``root`` (a path or URI), following its commit log."""
    out = {}
    target = ParquetTarget(spark, str(root))
    for (schema, table) in TABLES:
        df = target.read_table(schema, table)
        if df is None:
            continue
        rows = [{k: _normal(v) for k, v in r.asDict().items()
                 if v is not None and not k.startswith("_")}
                for r in df.collect()]
        out[table] = sorted(rows, key=repr)
    return out


def test_parquet_target_equals_the_sequential_apply_and_resumes(spark, tmp_path: Path) -> None:
    txns = random_log(33, 160, moves=True)
    log = write_log_file(tmp_path / "log.bin", txns)
    want = reference_state(log, tmp_path / "ref.db")
    target = ParquetTarget(spark, str(tmp_path / "out"))
    state = str(tmp_path / "state")
    first = apply_log(spark, str(log), target, state, index_to=60)
    assert first.end.log_index == 60
    assert parquet_state(spark, tmp_path / "out") == reference_state(
        log, tmp_path / "ref60.db", max_index=60)

    class Crash(Exception):
        pass

    def crash(unit: int) -> None:
        raise Crash(unit)

    with pytest.raises(Crash):  # interrupted after its first unit was written
        apply_log(spark, str(log), target, state, on_unit=crash)
    assert SparkPositionStore(state, "parquet").load().log_index == 60
    resumed = apply_log(spark, str(log), target, state)
    assert resumed.start.log_index == 60 and resumed.end.log_index == len(txns)
    assert parquet_state(spark, tmp_path / "out") == {k: v for k, v in want.items()}
    again = apply_log(spark, str(log), target, state)  # nothing new: a no-op
    assert again.ops_written == 0
    assert parquet_state(spark, tmp_path / "out") == want


def test_a_transaction_missing_its_last_segment_holds_the_position(spark,
                                                                   tmp_path: Path) -> None:
    txns = random_log(8, 40, segments=False)
    head = txns[:20]
    multi = [t for t in random_log(9, 3) if t.statements][:1][0]
    multi.gtid.trans_id = 1000
    first, second = type(multi)(), type(multi)()
    first.CopyFrom(multi)
    second.CopyFrom(multi)
    first.segment_id, first.end_segment = 1, False
    second.segment_id, second.end_segment = 2, True
    log = tmp_path / "log.bin"
    write_log_file(log, [*head, first, *txns[20:30]])
    db = str(tmp_path / "out.db")
    report = apply_log(spark, str(log), SqliteTarget(db), str(tmp_path / "state"))
    assert report.end.log_index == 20  # the open transaction is entry 21
    write_log_file(log, [*head, first, *txns[20:30], second, *txns[30:]])
    report = apply_log(spark, str(log), SqliteTarget(db), str(tmp_path / "state"))
    assert report.end.log_index == 42 and report.problems == 0
    assert sqlite_state(Path(db)) == reference_state(log, tmp_path / "ref.db")
