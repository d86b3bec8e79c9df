"""Targets of the bulk apply: Parquet, SQLite, Cassandra and Delta Lake.

A target has a ``name``, ``write_unit(rows) -> int`` (apply one unit of reduced rows: at most
one operation per row, any order; return how many) and ``apply_barrier(op)`` (one SQL or MOVE
``RowOp``, alone; ``UnsupportedOperationError`` if the target cannot, which dead-letters it).
Every write is idempotent: applying the same unit twice leaves the same state, which is what
makes resuming after an interrupted run safe.

- ``ParquetTarget(root)``: one dataset directory per table, ``root/table=<schema>.<table>/``,
  holding the table's current rows with typed columns (``schema.typed_value``) and the
  metadata columns ``_server_id, _trans_id, _log_index, _epoch, _author, _commit_ts_ns``. A
  unit is merged into the current rows with a full outer join by key and the result is
  published as the table's next version (``commit``: new data directory, then a commit file,
  through Hadoop's FileSystem API -- no rename, so HDFS, object stores and ``file://`` shared
  by the workers all work; a crash at any step is rolled back or finished by the next run).
  Readers follow the commit log: ``ParquetTarget.read_table`` or ``commit.TableCommits``.
  MOVE is applied the same way; SQL is not supported.
- ``SqliteTarget(path)`` (``spark_applier.sqlite_target``, re-exported here): the built-in
  ``SqliteApplier`` fed column by column (``SqliteApplier.apply_columns``: ``executemany``
  with the statements and conversions of its per-operation path), from the driver in one
  transaction per unit by default; barriers run through the per-operation path.
- ``spark_applier.cassandra.CassandraTarget(contact, keyspace)``: cassandra-driver in each
  task (the Spark Cassandra Connector has no Spark 4 build); every write carries ``USING
  TIMESTAMP`` = its log index, so replays can never let an older change win.
- ``DeltaTarget(root)``: ``MERGE`` into one Delta table per table (needs ``delta-spark`` built
  for the installed Spark: ``delta_support.delta_mismatch`` refuses it otherwise -- on Spark 4.3
  always, no Delta release supports it).
- Through Spark Connect, ``ParquetTarget`` is refused (``connect.refuse_connect``): its commit
  protocol needs the driver's JVM.

Schema events (``apply_schema``, called by ``schema_events.apply_with_schema`` between the
units before and after the event): the Parquet target publishes a new version of the table's
dataset -- ADD COLUMN adds the column with its default in every row (a column a unit names
first is still merged in, null in the older rows), DROP COLUMN leaves it out, RENAME COLUMN
renames it, DROP TABLE publishes an empty version (the rows are gone; earlier versions are
not kept, as after any unit); CREATE needs nothing (the dataset is made by its first rows).
The Delta target adds a column (``ALTER TABLE ADD COLUMNS``; existing rows read null: Delta
has no defaults for existing rows here) and reports DROP and RENAME as not supported (they need
Delta's column mapping mode). The Parquet target keeps each event's definition beside the
table's versions and fits the later units' rows to it (``parquet_schema``: a row written under
an older version that arrives after the change takes the current names and defaults); the
Delta target merges such a row as it is named (an old column name adds that column back).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from gateway import (
    ApplyError,
    FieldType,
    OpKind,
    RowOp,
    SchemaEvent,
    TableRef,
    UnsupportedOperationError,
)

from .commit import NEEDS_JVM, TableCommits, table_uri
from .connect import refuse_connect
from .parquet_schema import Declared, declared_after, fit_ops
from .schema import quoted as _q
from .schema import spark_type_of, typed_value
from .sqlite_target import SqliteTarget

__all__ = ["Columns", "DeltaTarget", "ParquetTarget", "SqliteTarget", "table_columns"]

#: ``(name, FieldType)`` of a table's key or value columns, as ``table_columns`` finds them.
Columns = list[tuple[str, int]]

_META = ["server_id", "trans_id", "log_index", "epoch", "author", "commit_ts_ns"]


def table_columns(rows: DataFrame) -> dict[tuple[str, str], tuple[Columns, Columns]]:
    """``{(schema, table): (key columns, value columns)}`` as ``(name, FieldType)`` lists,
    from the cells of ``rows`` (one small aggregation). ``ApplyError`` if a column has two
    types."""
    found = (rows.select("schema", "table",
                         F.explode(F.concat(
                             F.transform("key", lambda c: F.struct(F.lit(True).alias("k"),
                                                                   c["name"].alias("n"),
                                                                   c["type"].alias("t"))),
                             F.transform("values", lambda c: F.struct(F.lit(False).alias("k"),
                                                                      c["name"].alias("n"),
                                                                      c["type"].alias("t")))))
                         .alias("c"))
             .select("schema", "table", "c.k", "c.n", "c.t").distinct().collect())
    out: dict[tuple[str, str], tuple[Columns, Columns]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    for r in sorted(found, key=lambda r: (r.schema, r.table, not r.k, r.n)):
        ident = (r.schema, r.table, r.n)
        if ident in seen and seen[ident] != r.t:
            raise ApplyError(f"table {r.schema}.{r.table} column {r.n!r} has types "
                             f"{seen[ident]} and {r.t} in the log")
        seen[ident] = r.t
        keys, values = out.setdefault((r.schema, r.table), ([], []))
        (keys if r.k else values).append((r.n, r.t))
    return out


def _typed_ops(rows: DataFrame, schema: str, table: str, keys: Columns, values: Columns
               ) -> DataFrame:
    """The unit's operations on one table with one typed column per key and value column,
    plus ``__has_<c>`` flags (an UPDATE sets only some columns; null is a value)."""
    part = rows.filter((F.col("schema") == schema) & (F.col("table") == table))
    part = part.withColumn("_k", F.map_from_arrays(F.transform("key", lambda c: c["name"]),
                                                   F.col("key")))
    part = part.withColumn("_v", F.map_from_arrays(F.transform("values", lambda c: c["name"]),
                                                   F.col("values")))
    cols = [F.expr(typed_value(f"_k['{_esc(n)}']", t)).alias(n) for n, t in keys]
    for n, t in values:
        cols.append(F.expr(typed_value(f"_v['{_esc(n)}']", t)).alias(n))
        cols.append(F.expr(f"map_contains_key(_v, '{_esc(n)}')").alias(f"__has_{n}"))
    cols += [F.col(m).alias(f"_{m}") for m in _META]
    return part.select(F.col("op"), *cols)


def _esc(name: str) -> str:
    return name.replace("\\", "\\\\").replace("'", "\\'")


class ParquetTarget:
    """Parquet datasets per table, versioned through ``commit.TableCommits``; see the module
    docstring. ``root`` is a local path or a Hadoop URI (``file://``, ``hdfs://``...);
    ``fault(step)`` is the commit protocol's test hook."""

    def __init__(self, spark: SparkSession, root: str, *,
                 fault: Callable[[str], None] | None = None) -> None:
        # refused before any work, not at the first commit
        refuse_connect(spark, "the parquet target", NEEDS_JVM)
        self.spark = spark
        self.root = table_uri(root)
        self.name = "parquet"
        self.fault = fault

    def commits(self, schema: str, table: str) -> TableCommits:
        """The commit log of one table (readers: ``.current()[1]`` is its data)."""
        return TableCommits(self.spark, f"{self.root}/table={schema}.{table}", fault=self.fault)

    def read_table(self, schema: str, table: str) -> DataFrame | None:
        """The table's current rows, or None if it was never written."""
        data = self.commits(schema, table).current()[1]
        return None if data is None else self.spark.read.parquet(data)

    def write_unit(self, rows: DataFrame) -> int:
        count = 0
        for (schema, table), (keys, values) in table_columns(rows).items():
            commits = self.commits(schema, table)
            commits.recover()
            ops = _typed_ops(rows, schema, table, keys, values)
            declared = self._declared(commits)
            if declared is not None:  # rows of older versions under the current one
                ops, values = fit_ops(ops, keys, values, [f"_{m}" for m in _META], declared)
            count += ops.count()
            merged = self._merge(commits.current()[1], ops, keys, values)
            commits.publish(merged.write.mode("errorifexists").parquet)
        return count

    @staticmethod
    def _declared(commits: TableCommits) -> Declared | None:
        doc = commits.declared()
        if doc is None or not doc.get("columns"):  # never declared, or dropped since
            return None
        try:
            return Declared.from_json(doc)
        except ValueError as exc:
            raise ApplyError(f"{commits.uri}/_schema: {exc}") from None

    def _merge(self, path: str | None, ops: DataFrame, keys: Columns, values: Columns
               ) -> DataFrame:
        names = [n for n, _ in values]
        meta = [f"_{m}" for m in _META]
        if path is None:
            return ops.filter(F.col("op").isin("INSERT", "UPSERT")).select(
                *[F.col(n) for n, _ in keys],
                *[F.when(F.col(f"__has_{n}"), F.col(n)).otherwise(
                    F.lit(None).cast(spark_type_of(t))).alias(n) for n, t in values], *meta)
        old = self.spark.read.parquet(path)
        for n, t in values:  # a column first seen in this unit
            if n not in old.columns:
                old = old.withColumn(n, F.lit(None).cast(spark_type_of(t)))
            elif dict(old.dtypes)[n] != ops.select(n).dtypes[0][1]:
                raise ApplyError(f"{path}: column {n!r} is {dict(old.dtypes)[n]} in the dataset "
                                 f"and {ops.select(n).dtypes[0][1]} in the log")
        extra = [c for c in old.columns if c not in names and c not in meta
                 and c not in {n for n, _ in keys}]
        o, n_ = old.alias("o"), ops.alias("n")
        cond = None
        for k, _ in keys:
            same = F.col(f"o.{_q(k)}").eqNullSafe(F.col(f"n.{_q(k)}"))
            cond = same if cond is None else cond & same
        j = o.join(n_, cond, "full_outer")
        op = F.col("n.op")
        exists = F.col("o._log_index").isNotNull()
        keep = (op.isNull() & exists) | op.isin("INSERT", "UPSERT") | ((op == "UPDATE") & exists)
        out = [F.coalesce(F.col(f"n.{_q(k)}"), F.col(f"o.{_q(k)}")).alias(k) for k, _ in keys]
        for n, _t in values:
            new, has = F.col(f"n.{_q(n)}"), F.col(f"n.{_q('__has_' + n)}")
            out.append(F.when(op.isNull(), F.col(f"o.{_q(n)}"))
                       .when(op == "UPDATE", F.when(has, new).otherwise(F.col(f"o.{_q(n)}")))
                       .otherwise(F.when(has, new)).alias(n))
        for c in extra:  # columns of the dataset that this unit never names
            out.append(F.when(op.isNull() | (op == "UPDATE"), F.col(f"o.{_q(c)}")).alias(c))
        out += [F.when(op.isNull(), F.col(f"o.{m}")).otherwise(F.col(f"n.{m}")).alias(m)
                for m in meta]
        return j.filter(keep).select(*out)

    def apply_barrier(self, op: RowOp, write_ts: int = 0) -> None:
        if op.kind is OpKind.SQL:
            raise UnsupportedOperationError("the parquet target cannot execute SQL statements")
        commits = self.commits(op.table.schema, op.table.name)
        commits.recover()
        path = commits.current()[1]
        if path is None:
            return
        old = self.spark.read.parquet(path)
        key_names = [c.name for c in op.key_columns]
        match = F.lit(True)
        for name, v in zip(key_names, op.key, strict=True):
            match = match & F.col(_q(name)).eqNullSafe(F.lit(v))
        if not old.filter(match).limit(1).count():
            return  # moving a missing row is a no-op
        target = F.lit(True)
        for name, v in zip(key_names, op.new_key or (), strict=True):
            target = target & F.col(_q(name)).eqNullSafe(F.lit(v))
        sets = {c.name: v for c, v in zip(op.columns, op.values, strict=True)}
        sets.update(zip(key_names, op.new_key or (), strict=True))
        meta = {"_server_id": op.gtid.server_id, "_trans_id": op.gtid.trans_id,
                "_log_index": op.log_index, "_epoch": op.epoch, "_author": op.author,
                "_commit_ts_ns": op.commit_ts_ns}
        sets.update(meta)
        moved = old.filter(match).select(*[
            (F.lit(sets[c]).cast(t) if c in sets else F.col(_q(c))).alias(c)
            for c, t in old.dtypes])
        merged = old.filter(~match & ~target).unionByName(moved)
        commits.publish(lambda uri: merged.write.mode("errorifexists").parquet(uri))

    def apply_schema(self, event: SchemaEvent) -> None:
        """Publish the table's dataset after the schema change, and keep the definition the
        later units' rows are fitted to (module docstring)."""
        commits = self.commits(*TableRef.parse(event.table))
        commits.recover()
        after = declared_after(self._declared(commits), event)
        commits.declare(event.version, {} if after is None else after.to_json())
        path = commits.current()[1]
        if path is None:
            return  # no rows yet: the first unit makes the dataset
        evolved = _evolved(self.spark.read.parquet(path), event)
        if evolved is not None:
            commits.publish(lambda uri: evolved.write.mode("errorifexists").parquet(uri))


def _evolved(old: DataFrame, event: SchemaEvent) -> DataFrame | None:
    """``old`` after the schema change ``event``, or None when it holds the change already
    (a replay) or needs none."""
    col = event.column
    if event.kind == "add_column" and col is not None and col.name not in old.columns:
        spark_type = spark_type_of(FieldType.Value("FIELD_TYPE_" + col.type))
        return old.withColumn(col.name, F.lit(col.default).cast(spark_type))
    if event.kind == "drop_column" and col is not None and col.name in old.columns:
        return old.drop(col.name)
    if (event.kind == "rename_column" and event.old_name in old.columns
            and event.new_name not in old.columns):
        return old.withColumnRenamed(event.old_name, event.new_name)
    if event.kind == "drop_table":
        return old.limit(0) if old.limit(1).count() else None
    return None


class DeltaTarget:
    """One Delta Lake table per table under ``root`` (``root/table=<schema>.<table>``),
    updated with ``MERGE``; needs ``delta-spark`` and a session configured for it."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        from .delta_support import delta_mismatch

        mismatch = delta_mismatch()
        if mismatch is not None:  # refused before any work: a wrong Delta jar fails mid-job
            raise ApplyError(mismatch)
        try:
            from delta.tables import DeltaTable
        except ImportError:
            raise ApplyError("the delta target needs delta-spark (pip install delta-spark)"
                             ) from None
        self._delta = DeltaTable
        self.spark = spark
        self.root = table_uri(root)  # a URI every executor resolves alike (Delta's own log)
        self.name = "delta"

    def write_unit(self, rows: DataFrame) -> int:
        count = 0
        for (schema, table), (keys, values) in table_columns(rows).items():
            path = f"{self.root}/table={schema}.{table}"
            ops = _typed_ops(rows, schema, table, keys, values)
            count += ops.count()
            cols = [n for n, _ in keys] + [n for n, _ in values] + [f"_{m}" for m in _META]
            if not self._delta.isDeltaTable(self.spark, path):
                ops.limit(0).select(*[F.col(_q(c)) for c in cols]).write.format(
                    "delta").save(path)
            cond = " AND ".join(f"t.{_q(k)} <=> s.{_q(k)}" for k, _ in keys)
            replace = {_q(n): f"IF(s.{_q('__has_' + n)}, s.{_q(n)}, NULL)" for n, _ in values}
            update = {_q(n): f"IF(s.{_q('__has_' + n)}, s.{_q(n)}, t.{_q(n)})"
                      for n, _ in values}
            meta = {f"_{m}": f"s._{m}" for m in _META}
            (self._delta.forPath(self.spark, path).alias("t").merge(ops.alias("s"), cond)
             .whenMatchedDelete(condition="s.op = 'DELETE'")
             .whenMatchedUpdate(condition="s.op = 'UPDATE'", set={**update, **meta})
             .whenMatchedUpdate(condition="s.op IN ('INSERT', 'UPSERT')",
                                set={**replace, **meta})
             .whenNotMatchedInsert(condition="s.op IN ('INSERT', 'UPSERT')",
                                   values={**{_q(k): f"s.{_q(k)}" for k, _ in keys},
                                           **replace, **meta})
             .execute())
        return count

    def apply_barrier(self, op: RowOp, write_ts: int = 0) -> None:
        raise UnsupportedOperationError(f"the delta target cannot apply {op.kind.name} "
                                        f"barriers")

    def apply_schema(self, event: SchemaEvent) -> None:
        """ADD COLUMN as ``ALTER TABLE ADD COLUMNS``; DROP and RENAME are not supported
        (module docstring); CREATE and DROP TABLE need nothing here."""
        schema, table = TableRef.parse(event.table)
        path = f"{self.root}/table={schema}.{table}"
        if not self._delta.isDeltaTable(self.spark, path):
            return
        col = event.column
        if event.kind == "add_column" and col is not None:
            if col.name in self.spark.read.format("delta").load(path).columns:
                return
            spark_type = spark_type_of(FieldType.Value("FIELD_TYPE_" + col.type))
            self.spark.sql(f"ALTER TABLE delta.{_q(path)} ADD COLUMNS ({_q(col.name)} "
                           f"{spark_type})")
        elif event.kind in ("drop_column", "rename_column"):
            raise UnsupportedOperationError(
                f"the delta target cannot {event.kind.replace('_', ' ')} of {event.table} "
                f"(Delta needs column mapping mode for it)")

