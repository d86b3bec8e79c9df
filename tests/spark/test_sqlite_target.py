"""The SQLite bulk target: reduced rows column by column into the applier, same database as the
sequential apply (dispatcher + per-operation SQLite applier), in both write modes."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from gateway.appliers.sqlite import SqliteApplier
from spark_applier.bulk import apply_log, read_log, reduce_log
from spark_applier.convert import cell_value, column_values, op_of_row
from spark_applier.position import SparkPositionStore
from spark_applier.schema import CELL
from spark_applier.sqlite_target import SqliteTarget, _with_shape, column_ops
from tests.spark.workload import random_log, reference_state, sqlite_state, write_log_file


def _cell(ftype: int, rng: random.Random) -> dict[str, Any]:
    cell = {"name": "c", "type": ftype, "int_v": None, "double_v": None, "text_v": None,
            "bytes_v": None}
    if rng.random() < 0.2:
        return cell  # null
    if ftype in (1, 2, 3, 11):
        cell["int_v"] = rng.choice([0, 1, -1, 2**63 - 1, -(2**63), 42])
    elif ftype == 4:
        cell["double_v"] = rng.choice([0.0, -1.5, 1e300])
    elif ftype in (7, 12):
        cell["bytes_v"] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 4)))
    else:
        cell["text_v"] = rng.choice(["1.50", "-0.0000001", "1E+3", "0"] if ftype == 5
                                    else ["", "é", "x"])
    return cell


@pytest.mark.parametrize("ftype", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])
def test_column_values_equal_cell_value_for_every_type(ftype: int) -> None:
    rng = random.Random(ftype)
    cells = [_cell(ftype, rng) for _ in range(50)]
    got = column_values(pa.array(cells, type=CELL).slice(3), ftype)
    want = [cell_value(c) for c in cells[3:]]
    assert got == want
    assert [type(v) for v in got] == [type(v) for v in want]
    if ftype == 5:
        assert Decimal("-1E-7") in got


@pytest.mark.parametrize(("mode", "chunk_rows"), [("driver", 1_000_000), ("driver", 10),
                                                  ("tasks", 0)])
def test_sqlite_target_modes_equal_the_sequential_apply(spark, tmp_path: Path, mode: str,
                                                        chunk_rows: int) -> None:
    txns = random_log(5, 200)
    log = write_log_file(tmp_path / "log.bin", txns)
    target = SqliteTarget(str(tmp_path / "out.db"), mode=mode, chunk_rows=chunk_rows)
    report = apply_log(spark, str(log), target, str(tmp_path / "state"), partition_bytes=4096)
    assert report.problems == 0 and report.ops_written > 0
    assert sqlite_state(tmp_path / "out.db") == reference_state(log, tmp_path / "ref.db")


def test_sqlite_target_resumes_after_a_crash_between_units(spark, tmp_path: Path) -> None:
    txns = random_log(34, 160, moves=True)
    log = write_log_file(tmp_path / "log.bin", txns)
    want = reference_state(log, tmp_path / "ref.db")
    target, state = SqliteTarget(str(tmp_path / "out.db")), str(tmp_path / "state")
    first = apply_log(spark, str(log), target, state, index_to=60)
    assert first.end.log_index == 60
    assert sqlite_state(tmp_path / "out.db") == reference_state(log, tmp_path / "ref60.db",
                                                                max_index=60)

    class Crash(Exception):
        pass

    def crash(unit: int) -> None:
        raise Crash(unit)

    with pytest.raises(Crash):  # interrupted after its first unit was committed
        apply_log(spark, str(log), target, state, on_unit=crash)
    assert SparkPositionStore(state, "sqlite").load().log_index == 60
    resumed = apply_log(spark, str(log), target, state)
    assert resumed.start.log_index == 60 and resumed.end.log_index == len(txns)
    assert resumed.barriers > 0
    assert sqlite_state(tmp_path / "out.db") == want
    again = apply_log(spark, str(log), target, state)  # nothing new: a no-op
    assert again.ops_written == 0 and sqlite_state(tmp_path / "out.db") == want


def test_rows_whose_shapes_collide_go_through_the_per_operation_path(spark,
                                                                     tmp_path: Path) -> None:
    log = write_log_file(tmp_path / "log.bin", random_log(6, 120, segments=False))
    rows = reduce_log(read_log(spark, str(log))).rows
    shaped = _with_shape(rows)
    collided = shaped.withColumn("_shape", F.lit(7).cast("bigint")).toArrow()
    groups, gtids, fallback = column_ops(collided)
    assert fallback, "rows of different shapes under one hash fall back to RowOps"
    bulk = SqliteApplier(tmp_path / "bulk.db")
    per_op = SqliteApplier(tmp_path / "ops.db")
    try:
        assert bulk.apply_columns(groups, gtids, fallback) == collided.num_rows
        per_op.apply([op_of_row(r) for r in shaped.toArrow().to_pylist()])
        assert sqlite_state(tmp_path / "bulk.db") == sqlite_state(tmp_path / "ops.db")
        assert list(bulk.applied_gtids().ranges()) == list(per_op.applied_gtids().ranges())
        groups, _, fallback = column_ops(shaped.toArrow())
        assert groups and not fallback
    finally:
        bulk.close()
        per_op.close()
