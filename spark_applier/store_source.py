"""The ``gateway_store`` data source: an LSM store snapshot read by byte ranges of its SSTables.

SSTables are stuffed record streams like the WAL (docs/formats/sstable.md), so the same trick
applies: each table file is cut into byte ranges and a range reads the data blocks (tag ``E1``)
whose separator lies in it. Every stored version of every key comes out once, with the level
and table it lives in::

    df = spark.read.format("gateway_store").load(path)          # every stored version
    latest = latest_versions(df)                                 # what a get() would return

``path`` is a snapshot export (a directory with ``SNAPSHOT``, ``gateway.core.lsm.export``) or
a store directory (its ``MANIFEST`` names the live tables; memtables that were not flushed are
not in any table and are not read). Rows: ``key binary, value binary (null for a tombstone),
tombstone boolean, epoch bigint, author bigint, commit_ts bigint, level int, table_number
bigint``. A block that fails its CRC or does not parse is counted in the range report
(``report_dir`` option) and skipped; its keys are missing from the result, never wrong.

Newest wins as in the store (``gateway.core.lsm.version``): level 0 tables newest (highest
number) first, then level 1, 2, ...; ``latest_versions`` applies exactly that order with a
window and drops tombstones.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from gateway.formats import (
    FLAG_META,
    FLAG_TOMBSTONE,
    SNAPSHOT_NAME,
    TAG_BLOCK,
    decode_block,
    read_manifest,
    read_snapshot_manifest,
    records,
)

from .decode import RangeReport, write_report
from .layout import open_buffer, resolve_path

__all__ = ["STORE_SCHEMA", "GatewayStoreDataSource", "latest_versions"]

STORE_SCHEMA = ("key binary, value binary, tombstone boolean, epoch bigint, author bigint, "
                "commit_ts bigint, level int, table_number bigint")
_ARROW = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("tombstone", pa.bool_()),
                    ("epoch", pa.int64()), ("author", pa.int64()), ("commit_ts", pa.int64()),
                    ("level", pa.int32()), ("table_number", pa.int64())])
_META = struct.Struct("<BQIQ")
_I63 = 1 << 63


@dataclass(frozen=True)
class TableRange(InputPartition):
    """Records of table ``path`` whose separator lies in ``[start, stop)``."""

    path: str
    level: int
    number: int
    start: int
    stop: int


def store_tables(path: str) -> list[tuple[str, int, int]]:
    """``(file, level, number)`` of every live table of a snapshot export or store dir."""
    if os.path.exists(os.path.join(path, SNAPSHOT_NAME)):
        _, files = read_snapshot_manifest(path)
        return [(os.path.join(path, f["name"]), int(f["level"]), int(f["number"]))
                for f in files]
    manifest = os.path.join(path, "MANIFEST")
    if not os.path.exists(manifest):
        raise ValueError(f"gateway_store: {path}: neither a snapshot export (SNAPSHOT) nor a "
                         f"store directory (MANIFEST)")
    state, _, _ = read_manifest(manifest)
    return [(os.path.join(path, f"{num:06d}.sst"), lvl, num)
            for lvl, tables in enumerate(state.levels) for num in sorted(tables)]


def _cells_columns(cells: list[bytes]) -> tuple[list[Any], ...]:
    values, tomb, epochs, authors, ts = [], [], [], [], []
    for cell in cells:
        flags = cell[0]
        if flags & FLAG_META:
            _, e, a, t = _META.unpack_from(cell)
            body = cell[_META.size:]
        else:
            e = a = t = 0
            body = cell[1:]
        dead = bool(flags & FLAG_TOMBSTONE)
        values.append(None if dead else body)
        tomb.append(dead)
        epochs.append(e - (1 << 64) if e >= _I63 else e)
        authors.append(a)
        ts.append(t - (1 << 64) if t >= _I63 else t)
    return values, tomb, epochs, authors, ts


def read_table_range(part: TableRange, report: RangeReport) -> Iterator[pa.RecordBatch]:
    """Yield the key/cell pairs of the data blocks of ``part`` as record batches."""
    buf = open_buffer(part.path)
    try:
        expected = None
        for rec in records.scan(buf, part.start, part.stop):
            if expected is not None and rec.position != expected:
                report.damaged.extend((d.start, d.end) for d in
                                      records.verify(buf, expected, rec.position).damaged)
            expected = rec.end
            report.records += 1
            if rec.payload[:1] != bytes((TAG_BLOCK,)):
                continue
            try:
                keys, cells = decode_block(rec.payload)
            except (ValueError, struct.error) as exc:
                report.undecodable.append((rec.offset, f"data block: {exc}"))
                continue
            values, tomb, epochs, authors, ts = _cells_columns(cells)
            n = len(keys)
            report.rows += n
            yield pa.RecordBatch.from_arrays(
                [pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                 pa.array(tomb, pa.bool_()), pa.array(epochs, pa.int64()),
                 pa.array(authors, pa.int64()), pa.array(ts, pa.int64()),
                 pa.array([part.level] * n, pa.int32()),
                 pa.array([part.number] * n, pa.int64())], schema=_ARROW)
        if expected is not None and expected < part.stop:
            report.damaged.extend((d.start, d.end) for d in
                                  records.verify(buf, expected, part.stop).damaged)
    finally:
        if not isinstance(buf, bytes):
            buf.close()


class GatewayStoreReader(DataSourceReader):
    """One partition per ``partition_bytes`` of every live table."""

    def __init__(self, options: dict[str, Any]) -> None:
        path = options.get("path")
        if not path:
            raise ValueError("gateway_store: no path given")
        # Resolved where the read is planned (the driver): tasks run in other directories.
        self.path = resolve_path(path)
        self.partition_bytes = int(options.get("partition_bytes", 32 << 20))
        self.report_dir = options.get("report_dir") or None

    def partitions(self) -> list[InputPartition]:
        out: list[InputPartition] = []
        for path, level, number in store_tables(self.path):
            size = os.path.getsize(path)
            cuts = [*range(0, size, self.partition_bytes), size]
            out.extend(TableRange(path, level, number, a, b)
                       for a, b in itertools.pairwise(cuts))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part = partition
        assert isinstance(part, TableRange)
        report = RangeReport(part.path, part.start, part.stop)
        yield from read_table_range(part, report)
        if self.report_dir:
            write_report(self.report_dir, report)


class GatewayStoreDataSource(DataSource):
    """``spark.read.format("gateway_store")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "gateway_store"

    def schema(self) -> str:
        return STORE_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return GatewayStoreReader({k.lower(): v for k, v in dict(self.options).items()})


def latest_versions(df: DataFrame, *, keep_tombstones: bool = False) -> DataFrame:
    """The newest version of every key (what ``LSMStore.get`` returns), tombstones dropped
    unless ``keep_tombstones``."""
    w = Window.partitionBy("key").orderBy(F.col("level").asc(), F.col("table_number").desc())
    out = df.withColumn("_rank", F.row_number().over(w)).filter("_rank = 1").drop("_rank")
    return out if keep_tombstones else out.filter(~F.col("tombstone"))
