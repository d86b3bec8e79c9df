"""Bulk reduce and apply in Spark: the final state of every row by log order.

``reduce_log(df)`` takes rows of the ``gateway_wal`` source and computes, in Spark, what
``gateway.core.reducer.reduce_ops(..., elide_insert_delete=False)`` computes over the whole
log in one process:

1. **Segments.** Rows of multi-segment transactions are kept only when the transaction's last
   segment is present and carries no rollback, and every segment 1..last is present (else the
   transaction is *rejected*, or *pending* when its last segment is not in the log yet). Each
   row then takes its transaction's commit point -- the last segment's log index -- and
   metadata, and statement numbers continue across segments (a window over the segments).
2. **Order.** An operation's place in the log is ``ord = (commit index, segment, op number)``.
3. **Barriers.** SQL operations and MOVEs (key changes) touch more than one row or rows not
   named, so they split the log into *units*: unit ``u`` holds the operations between barrier
   ``u - 1`` and barrier ``u``. Units are applied in order, each barrier alone after its unit.
4. **Rows.** Within a unit, the operations of each row (table + key) are collected, sorted by
   ``ord`` and folded by the reducer's rules with Spark higher-order functions (one shuffle):
   UPDATE merges columns (later values win; no effect after a DELETE), DELETE clears the row,
   INSERT/UPSERT replace it (INSERT only while the row never existed before the unit). The
   result carries the metadata (GTID, index, epoch, author, time) of the row's last change.

Insert-then-delete is kept as a DELETE rather than elided: a resumed run may find the insert
already applied by the interrupted one, and only the DELETE is exact on every starting state.

``apply_log`` runs the whole job for one target (``spark_applier.writers``): read from the
applied position, reduce, write unit by unit, then save the position (``position``). Writes are
idempotent, so a run interrupted anywhere is repeated safely from the saved position.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from gateway import (
    ApplierPosition,
    ApplyError,
    DeadLetterLog,
    Gtid,
    GtidSet,
    RowOp,
    UnsupportedOperationError,
)
from gateway.cassandra_mapping import write_timestamp

from .convert import op_of_row
from .datasource import damage_summary, register
from .position import SparkPositionStore
from .schema import MARKER_OP

__all__ = ["ApplyReport", "Reduced", "apply_log", "read_log", "reduce_log", "write_ts"]

_GTID = ["server_id", "trans_id"]
_META = ["server_id", "trans_id", "log_index", "epoch", "author", "commit_ts_ns", "statement"]
_BARRIER_OPS = ("SQL", "MOVE")


@dataclass
class Reduced:
    """The reduced log: ``rows`` (one operation per row and unit, column ``unit``), the
    ``barriers`` in order (barrier ``u`` follows unit ``u``), and what was left out."""

    rows: DataFrame
    barriers: list[RowOp]
    barrier_ts: list[int]
    pending_from: int | None  # smallest index of a transaction whose last segment is missing
    rejected: list[str]

    @property
    def units(self) -> int:
        return len(self.barriers) + 1


def read_log(spark: SparkSession, path: str, **options: Any) -> DataFrame:
    """``spark.read.format("gateway_wal").load(path)`` with ``options`` (registers it)."""
    from .layout import resolve_path

    register(spark)
    reader = spark.read.format("gateway_wal")
    for k, v in options.items():
        if v is not None:
            reader = reader.option(k, str(v))
    return reader.load(resolve_path(path))  # absolute on the driver: tasks run elsewhere


def _assemble(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Rows of committed transactions with ``commit_index`` and continued statement numbers,
    and the per-transaction status of multi-segment ones."""
    single = (df.filter("segment_id = 1 AND end_segment AND op <> 'SEGMENT'")
              .withColumn("commit_index", F.col("log_index")))
    marks = df.filter(F.col("op") == MARKER_OP).select(
        *_GTID, "segment_id", "segment_statements", "end_segment", "rollback", "log_index",
        "epoch", "author", "commit_ts_ns")
    by_txn = Window.partitionBy(*_GTID)
    marks = (marks
             .withColumn("stmt_offset", F.coalesce(F.sum("segment_statements").over(
                 by_txn.orderBy("segment_id").rowsBetween(Window.unboundedPreceding, -1)),
                 F.lit(0)))
             .withColumn("n_segments", F.count(F.lit(1)).over(by_txn))
             .withColumn("n_distinct", F.size(F.collect_set("segment_id").over(by_txn))))
    ends = marks.filter("end_segment").select(
        *_GTID, F.col("log_index").alias("c_index"), F.col("epoch").alias("c_epoch"),
        F.col("author").alias("c_author"), F.col("commit_ts_ns").alias("c_ts"),
        F.col("rollback").alias("c_rollback"), F.col("segment_id").alias("c_last"),
        "n_segments", "n_distinct")
    status = (marks.groupBy(*_GTID).agg(F.min("log_index").alias("first_index"))
              .join(ends, _GTID, "left"))
    ok = ends.filter("NOT c_rollback AND n_segments = c_last AND n_distinct = c_last")
    multi = (df.filter("NOT (segment_id = 1 AND end_segment) AND op <> 'SEGMENT'")
             .join(marks.select(*_GTID, "segment_id", "stmt_offset"), [*_GTID, "segment_id"])
             .join(ok, _GTID)
             .withColumn("commit_index", F.col("c_index"))
             .withColumn("log_index", F.col("c_index"))
             .withColumn("epoch", F.col("c_epoch"))
             .withColumn("author", F.col("c_author"))
             .withColumn("commit_ts_ns", F.col("c_ts"))
             .withColumn("statement", F.col("statement") + F.col("stmt_offset"))
             .select(*single.columns))
    return single.unionByName(multi), status


def _fold() -> Column:
    """The reducer's fold (elide_insert_delete=False) over a row's sorted history ``h``."""
    return F.expr("""
      aggregate(h, named_struct('kind', CAST(NULL AS STRING),
                                'cols', map_filter(h[0].m, (k, v) -> false)),
        (acc, x) -> named_struct(
          'kind', CASE WHEN x.op = 'UPDATE' THEN coalesce(acc.kind, 'UPDATE')
                       WHEN x.op = 'DELETE' THEN 'DELETE'
                       WHEN acc.kind IS NULL THEN x.op
                       WHEN acc.kind = 'INSERT' THEN 'INSERT'
                       ELSE 'UPSERT' END,
          'cols', CASE WHEN x.op = 'UPDATE' THEN
                         CASE WHEN acc.kind = 'DELETE' THEN acc.cols
                              ELSE map_concat(
                                map_filter(acc.cols, (k, v) -> NOT map_contains_key(x.m, k)),
                                x.m) END
                       WHEN x.op = 'DELETE' THEN map_filter(acc.cols, (k, v) -> false)
                       ELSE x.m END))""")


def write_ts(commit_index: int, statement: int, sub: int = 0) -> int:
    """The Cassandra write timestamp of a change (``gateway.cassandra_mapping``, the
    clock the streaming plugin uses too): commit index, statement (continued across
    segments), then ``sub`` (earlier writes of the row by the same statement)."""
    return write_timestamp(commit_index, statement, sub)


def _by_ord(a: Column, b: Column) -> Column:
    return F.when(a["ord"] < b["ord"], -1).when(a["ord"] > b["ord"], 1).otherwise(0)


def reduce_log(df: DataFrame) -> Reduced:
    """Reduce ``gateway_wal`` rows to the final operation of every row per unit."""
    ops, status = _assemble(df)
    ops = ops.withColumn("ord", F.struct("commit_index", "segment_id", "op_no"))
    barrier_rows = (ops.filter(F.col("op").isin(*_BARRIER_OPS))
                    .orderBy("commit_index", "segment_id", "op_no").collect())
    barriers = [op_of_row(r.asDict(recursive=True)) for r in barrier_rows]
    barrier_ts = [write_ts(r.commit_index, r.statement) for r in barrier_rows]
    if barrier_rows:
        marks = F.array(*[F.struct(F.lit(r.commit_index).cast("bigint").alias("commit_index"),
                                   F.lit(r.segment_id).cast("int").alias("segment_id"),
                                   F.lit(r.op_no).cast("int").alias("op_no"))
                          for r in barrier_rows])
        ops = ops.withColumn("unit", F.size(F.filter(marks, lambda b: b < F.col("ord"))))
    else:
        ops = ops.withColumn("unit", F.lit(0))
    hist = F.struct(
        F.col("ord"), F.col("op"),
        F.map_from_arrays(F.transform("values", lambda c: c["name"]), F.col("values")).alias("m"),
        *[F.col(c) for c in _META])
    grouped = (ops.filter(~F.col("op").isin(*_BARRIER_OPS))
               .groupBy("unit", "schema", "table", "key")
               .agg(F.array_sort(F.collect_list(hist), _by_ord).alias("h"))
               .withColumn("r", _fold())
               .withColumn("last", F.element_at("h", -1)))
    rows = grouped.select(
        "unit", F.col("r.kind").alias("op"), "schema", "table", "key",
        F.map_values("r.cols").alias("values"), *[F.col(f"last.{c}").alias(c) for c in _META],
        # ``sub`` of the shared clock: the statement's earlier changes of this row
        (F.size(F.filter("h", lambda x: (x["log_index"] == F.col("last.log_index"))
                         & (x["statement"] == F.col("last.statement")))) - 1)
        .alias("write_sub"))
    pending = status.filter("c_index IS NULL").agg(F.min("first_index")).collect()[0][0]
    rejected = [f"({r.server_id},{r.trans_id}): segments "
                f"{r.n_segments} of {r.c_last}, last at index {r.c_index}"
                for r in status.filter("c_index IS NOT NULL AND NOT c_rollback AND "
                                       "(n_segments <> c_last OR n_distinct <> c_last)")
                .collect()]
    return Reduced(rows, barriers, barrier_ts, pending, rejected)


@dataclass
class ApplyReport:
    """What one ``apply_log`` run did."""

    target: str
    start: ApplierPosition
    end: ApplierPosition
    ops_written: int = 0
    barriers: int = 0
    dead_letters: int = 0
    rejected: list[str] = field(default_factory=list)
    damage: dict[str, Any] = field(default_factory=dict)
    pending_from: int | None = None  # first index of a transaction missing segments

    @property
    def problems(self) -> int:
        d = self.damage
        return (len(d.get("damaged", ())) + len(d.get("undecodable", ()))
                + len(d.get("rejected", ())) + len(self.rejected) + self.dead_letters)


def _skip_applied(df: DataFrame, applied: GtidSet) -> DataFrame:
    ranges = list(applied.ranges())
    if not ranges:
        return df
    cond = F.lit(False)
    for server, first, last in ranges:
        cond = cond | ((F.col("server_id") == server) & F.col("trans_id").between(first, last))
    return df.filter(~cond)


def apply_log(spark: SparkSession, source: str, target: Any, state_dir: str, *,
              partition_bytes: int | None = None, index_to: int | None = None,
              on_unit: Callable[[int], None] | None = None,
              schema: bool = True,
              read_options: Mapping[str, str] | None = None) -> ApplyReport:
    """Apply the log at ``source`` to ``target`` from its durable position; see the module
    docstring. ``index_to`` stops at that index. ``on_unit(u)`` is called after unit ``u``
    is written (tests use it to interrupt a run). ``read_options`` go to ``gateway_wal``
    (``token``, ``ca`` of a ``gateway://`` source). Raises what the target raises; the
    position is then left where it was. Schema events cut the run (``schema_events``:
    each applied between the rows before and after it); ``schema=False`` is one stretch
    without them."""
    if schema:
        from .schema_events import apply_with_schema

        return apply_with_schema(spark, source, target, state_dir, apply_log,
                                 partition_bytes=partition_bytes, index_to=index_to,
                                 on_unit=on_unit, schema=False, read_options=read_options)
    positions = SparkPositionStore(state_dir, target.name)
    start = positions.load()
    report_dir = tempfile.mkdtemp(prefix="gateway-spark-report-")
    try:
        df = read_log(spark, source, partition_bytes=partition_bytes,
                      index_from=start.log_index + 1, index_to=index_to, report_dir=report_dir,
                      **dict(read_options or {}))
        df = _skip_applied(df, start.applied).persist()
        # one row, as every aggregation; also materialises the cache: one read
        last = df.agg(F.max("log_index")).collect()[0][0]
        if last is not None:
            _require_reports(report_dir)
        reduced = reduce_log(df)
        report = ApplyReport(target.name, start, start, rejected=reduced.rejected)
        dead = DeadLetterLog(state_dir, target.name)
        rows = reduced.rows.persist()
        for unit in range(reduced.units):
            part = rows.filter(F.col("unit") == unit) if reduced.units > 1 else rows
            report.ops_written += target.write_unit(part)
            if on_unit is not None:
                on_unit(unit)
            if unit < len(reduced.barriers):
                op = reduced.barriers[unit]
                try:
                    target.apply_barrier(op, reduced.barrier_ts[unit])
                    report.barriers += 1
                except UnsupportedOperationError as exc:
                    dead.add(op, exc, attempts=1, log_index=op.log_index)
                    report.dead_letters += 1
        report.damage = damage_summary(report_dir)
        report.end = _end_position(df, start, last, reduced.pending_from)
        report.pending_from = reduced.pending_from
        positions.save(report.end)
        rows.unpersist()
        df.unpersist()
        return report
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)


def _require_reports(report_dir: str) -> None:
    """``ApplyError`` unless the read's range reports reached ``report_dir``. Rows were read,
    so every partition wrote one -- if none is here, they went to a directory of the same name
    on other machines (a remote Spark Connect server's, an executor's own disk), and damage
    would go unreported: the run stops before writing anything."""
    if not glob.glob(os.path.join(report_dir, "*.json")):
        raise ApplyError(
            f"no range report of the read reached {report_dir}: the executors (with Spark "
            f"Connect, the server's Python workers) must share this host's temporary "
            f"directory; set TMPDIR to a path they share (docs/spark.md, 'Spark Connect')")


def _end_position(df: DataFrame, start: ApplierPosition, last: int | None,
                  pending_from: int | None) -> ApplierPosition:
    """Everything up to the last index read is done, except transactions still waiting for
    segments: the watermark stops before the first of them, and the transactions committed
    after it are recorded in the applied GTID set so a resumed run skips them."""
    if last is None:
        return start
    if pending_from is None:
        return ApplierPosition(max(last, start.log_index), GtidSet())
    watermark = max(pending_from - 1, start.log_index)
    applied = start.applied.copy()
    for r in (df.filter(F.col("log_index") > watermark).filter("end_segment AND NOT rollback")
              .select(*_GTID).distinct().collect()):
        applied.add(Gtid(r.server_id, r.trans_id))
    return ApplierPosition(watermark, applied)
