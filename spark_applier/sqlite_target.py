"""The SQLite target of the bulk apply: reduced rows, column by column, into ``SqliteApplier``.

A unit's reduced rows (at most one operation per row) are grouped by table, kind and *shape*
-- the key columns in order and the set of value columns, each with its type, hashed in Spark
into ``_shape`` -- and every group becomes one ``gateway.appliers.sqlite.ColumnOps``: one
list of Python values per column, taken from the Arrow cells column-wise
(``convert.column_values``), which the applier runs with ``executemany`` and the very
statements, conversions, table creation and GTID bookkeeping of its per-operation ``apply``.
No ``RowOp`` is built per row. A group whose rows turn out not to share the shape (a hash
collision) goes through ``op_of_row`` and the per-operation path instead, in the same
transaction.

Where the writing happens (``mode``):

- ``"driver"`` (default): the unit is collected to the driver as Arrow (``DataFrame.toArrow``;
  Spark converts to Arrow in its tasks, so no Python worker is involved) and written through
  one connection in one transaction per chunk of at most ``chunk_rows`` rows (a unit larger
  than that is split by a hash of the row, each chunk collected alone, which bounds the
  driver's memory). SQLite has one writer at a time anyway.
- ``"tasks"``: every Spark task writes its partition (``mapInArrow``), one transaction per
  Arrow batch; tasks take turns on SQLite's write lock.

Every commit is ``synchronous=FULL`` by default (one fsync per transaction, cheap in bulk), so
a unit is durable before ``apply_log`` saves the position after it. Writes are idempotent
(INSERT OR REPLACE, UPDATE and DELETE by key), so re-running a unit gives the same rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from gateway import Column, OpKind, RowOp, SchemaEvent, TableRef

from .convert import column_values, op_of_row

__all__ = ["SqliteTarget", "column_ops"]

_NEEDED = ["op", "schema", "table", "key", "values", "server_id", "trans_id", "log_index",
           "epoch", "author", "commit_ts_ns", "statement"]
_MODES = ("driver", "tasks")


def _with_shape(rows: DataFrame) -> DataFrame:
    """The columns a writer needs, plus ``_shape``: a hash of the key columns (in order) and
    the value columns (sorted), names and types."""
    def name_type(c: Any) -> Any:
        return F.struct(c["name"], c["type"])

    shape = F.xxhash64(F.transform("key", name_type),
                       F.array_sort(F.transform("values", name_type)))
    return rows.select(*_NEEDED, shape.alias("_shape"))


def _fields(cells: pa.Array) -> tuple[list[str], list[int]]:
    return (pc.struct_field(cells, "name").to_pylist(),
            pc.struct_field(cells, "type").to_pylist())


def _all(mask: pa.Array) -> bool:
    return len(mask) == 0 or bool(pc.all(mask).as_py())


def _group_ops(sub: pa.Table) -> Any:
    """One ``ColumnOps`` for rows of one table, kind and shape; ``None`` if they differ in
    shape after all."""
    from gateway import ColumnOps

    m = sub.num_rows
    keys, vals = sub["key"].combine_chunks(), sub["values"].combine_chunks()
    klen, vlen = keys.value_lengths(), vals.value_lengths()
    k, v = klen[0].as_py(), vlen[0].as_py()
    if not (_all(pc.equal(klen, k)) and _all(pc.equal(vlen, v))):
        return None
    kf, vf = keys.flatten(), vals.flatten()
    key_names, key_types = _fields(kf.slice(0, k))
    key = []
    for j, (name, ftype) in enumerate(zip(key_names, key_types, strict=True)):
        cells = kf.take(pa.array(np.arange(j, m * k, k))) if k > 1 else kf
        if not (_all(pc.equal(pc.struct_field(cells, "name"), name))
                and _all(pc.equal(pc.struct_field(cells, "type"), ftype))):
            return None
        key.append(column_values(cells, ftype))
    names, types = _fields(vf.slice(0, v))
    columns: list[Column] = []
    values = []
    if v:
        parents = pc.list_parent_indices(vals)
        all_names = pc.struct_field(vf, "name")
        rows = np.arange(m)
        for name, ftype in sorted(zip(names, types, strict=True)):
            mask = pc.equal(all_names, name)
            cells = vf.filter(mask)
            if not (len(cells) == m
                    and np.array_equal(parents.filter(mask).to_numpy(), rows)
                    and _all(pc.equal(pc.struct_field(cells, "type"), ftype))):
                return None
            columns.append(Column(name, ftype))
            values.append(column_values(cells, ftype))
    first = sub.slice(0, 1).to_pylist()[0]
    return ColumnOps(TableRef(first["schema"] or "", first["table"] or ""), OpKind[first["op"]],
                     tuple(Column(n, t) for n, t in zip(key_names, key_types, strict=True)),
                     tuple(columns), key, values)


def column_ops(rows: pa.Table) -> tuple[list[Any], list[tuple[int, int]], list[RowOp]]:
    """Reduced rows with ``_shape`` (Arrow) -> ``(ColumnOps groups, distinct GTIDs, RowOps
    for rows that fit no group)``: the arguments of ``SqliteApplier.apply_columns``."""
    n = rows.num_rows
    if n == 0:
        return [], [], []
    gtids = (pa.table({"s": rows["server_id"], "t": rows["trans_id"]})
             .group_by(["s", "t"], use_threads=False).aggregate([]))
    distinct = list(zip(gtids["s"].to_pylist(), gtids["t"].to_pylist(), strict=True))
    indexed = rows.select(["schema", "table", "op", "_shape"]).append_column(
        "_i", pa.array(np.arange(n)))
    groups = indexed.group_by(["schema", "table", "op", "_shape"],
                              use_threads=False).aggregate([("_i", "list")])
    out: list[Any] = []
    fallback: list[RowOp] = []
    for members in groups["_i_list"].to_pylist():
        sub = rows.take(pa.array(members))
        ops = _group_ops(sub)
        if ops is None:
            fallback.extend(op_of_row(r) for r in sub.to_pylist())
        else:
            out.append(ops)
    return out, distinct, fallback


class SqliteTarget:
    """The built-in SQLite applier fed column by column; see the module docstring."""

    def __init__(self, path: str, *, mode: str = "driver", chunk_rows: int = 1_000_000,
                 synchronous: str = "FULL") -> None:
        if mode not in _MODES:
            raise ValueError(f"SqliteTarget mode must be one of {_MODES}, not {mode!r}")
        self.path = os.path.abspath(path)
        self.name = "sqlite"
        self.mode = mode
        self.chunk_rows = chunk_rows
        self.synchronous = synchronous

    def _applier(self) -> Any:
        from gateway import SqliteApplier

        return SqliteApplier(self.path, busy_timeout_ms=120_000, synchronous=self.synchronous)

    def write_unit(self, rows: DataFrame) -> int:
        shaped = _with_shape(rows)
        if self.mode == "tasks":
            return self._write_in_tasks(shaped)
        applier = self._applier()
        try:
            chunks = 1
            if self.chunk_rows:
                total = shaped.count()
                if not total:
                    return 0
                chunks = -(-total // self.chunk_rows)
            written = 0
            for i in range(chunks):
                part = shaped if chunks == 1 else shaped.filter(
                    F.pmod(F.xxhash64("schema", "table", "key"), F.lit(chunks)) == i)
                written += applier.apply_columns(*column_ops(part.toArrow()))
            return written
        finally:
            applier.close()

    def _write_in_tasks(self, shaped: DataFrame) -> int:
        make = self._applier

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            applier = make()
            n = 0
            try:
                for batch in batches:
                    n += applier.apply_columns(*column_ops(pa.Table.from_batches([batch])))
            finally:
                applier.close()
            yield pa.RecordBatch.from_pydict({"n": [n]})

        self._applier().close()  # create the system tables once, before the tasks race
        return sum(r.n for r in shaped.mapInArrow(write, "n bigint").collect())

    def apply_barrier(self, op: RowOp, write_ts: int = 0) -> None:
        applier = self._applier()
        try:
            applier.apply([op])
        finally:
            applier.close()

    def apply_schema(self, event: SchemaEvent) -> None:
        """A schema event, between the units before and after it (``schema_events``): the
        applier's own ``apply_schema`` -- the same DDL, version record and fitting of older
        rows as the streaming SQLite applier."""
        applier = self._applier()
        try:
            applier.apply_schema(event)
        finally:
            applier.close()
