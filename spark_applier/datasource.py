"""The ``gateway_wal`` PySpark data source: batch and streaming reads of a log by byte range.

::

    from spark_applier.datasource import register
    register(spark)
    df = (spark.read.format("gateway_wal")
          .option("partition_bytes", 32 << 20)      # size of one input partition (optional)
          .option("index_from", 100).option("index_to", 5000)   # inclusive, optional
          .option("gtids", "1:20-80")               # origin 1, trans ids 20..80, optional
          .option("report_dir", "/tmp/report")      # where damage reports go, optional
          .load("/var/lib/gateway/wal"))            # a WAL directory or a log file
    # or a running node's log over its LogRead RPC (executors need no access to its files):
    df = (spark.read.format("gateway_wal").option("token", "s3cret").option("ca", "ca.pem")
          .load("gateway://10.0.0.5:7070"))

Options: ``partition_bytes`` (default: the bytes to read over ``min_partitions``, between 4 MiB
and 128 MiB -- ``auto_partition_bytes``), ``min_partitions`` (default twice the CPU count of
the planning host), ``index_from``/``index_to``, ``gtids``
(``SERVER:FIRST-LAST``), ``committed_only`` (default true: WAL entries up to the commit index
in ``meta``), ``report_dir`` (each partition writes a JSON ``RangeReport`` there; read them
with ``damage_summary``), and for a ``gateway://HOST:PORT`` source ``token`` (a bearer token
with the ``read`` permission; default ``$GATEWAY_TOKEN``) and ``ca`` (the CA certificate of a
TLS API, read on the driver and shipped to the tasks as bytes). Rows: ``spark_applier.schema``.

Streaming (``spark.readStream.format("gateway_wal")``): offsets are
``{"segment": S, "byte": B}`` -- everything before byte ``B`` of segment ``S`` (a WAL segment's
first index; 0 for a log file) has been read. ``latestOffset`` is the position of the last
separator of the newest file (only complete records lie before it), or for a WAL the position
of the first entry past the commit index, whichever is first.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

from gateway.formats import SEPARATOR

from . import layout, remote
from .decode import RangeReport, read_range, write_report
from .layout import LogLayout, ReadRange
from .schema import SCHEMA_DDL

__all__ = ["GatewayWalDataSource", "damage_summary", "register"]

MIN_PARTITION_BYTES = 4 << 20
MAX_PARTITION_BYTES = 128 << 20


def auto_partition_bytes(total: int, min_partitions: int) -> int:
    """The default partition size for ``total`` bytes to read: ``total / min_partitions``
    (so every core has work, with slack for uneven partitions) but at least 4 MiB (per-task
    cost) and at most 128 MiB (memory, retries), like Spark's own file sources."""
    per = -(-total // max(1, min_partitions))
    return max(MIN_PARTITION_BYTES, min(MAX_PARTITION_BYTES, per))


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """An input partition: one ``ReadRange``."""

    range: ReadRange


class _Options:
    """The parsed options of one read; ``ValueError`` with a one-line message if bad."""

    def __init__(self, options: Any) -> None:
        opts = {k.lower(): v for k, v in dict(options).items()}
        path = opts.get("path")
        if not path:
            raise ValueError("gateway_wal: no path given (spark.read.format(...).load(PATH))")
        # Resolved where the read is planned (the driver): tasks run in other directories.
        self.path = layout.resolve_path(path)
        self.remote: remote.RemoteSource | None = None
        if remote.is_remote(self.path):
            self.remote = remote.source_of(self.path, opts)
        given = opts.get("partition_bytes")
        self.partition_bytes: int | None = (
            _int(opts, "partition_bytes", 0) if given not in (None, "") else None)
        self.min_partitions = _int(opts, "min_partitions", 2 * (os.cpu_count() or 1))
        self.index_from = _int(opts, "index_from", 1)
        to = opts.get("index_to")
        self.index_to = _int(opts, "index_to", 0) if to not in (None, "") else None
        gt = opts.get("gtids")
        self.gtids = layout.parse_gtid_range(gt) if gt else None
        self.committed_only = str(opts.get("committed_only", "true")).lower() != "false"
        self.report_dir = opts.get("report_dir") or None

    def layout(self, *, narrowed: bool = True) -> LogLayout:
        """The layout of the source; a node's is narrowed to the index options by the node
        when ``narrowed``."""
        if self.remote is not None:
            return remote.fetch_layout(
                self.remote, committed_only=self.committed_only,
                index_from=self.index_from if narrowed else 1,
                index_to=self.index_to if narrowed else None)
        return layout.discover(self.path, committed_only=self.committed_only)

    def plan(self, lay: LogLayout, partition_bytes: int, *, filtered: bool = True,
             bounds: dict[int, tuple[int, int]] | None = None) -> list[ReadRange]:
        """``layout.plan_ranges`` (or ``remote.plan_ranges`` for a node's layout) with the
        index and GTID options when ``filtered``."""
        kw: dict[str, Any] = dict(index_from=self.index_from, index_to=self.index_to,
                                  gtids=self.gtids) if filtered else {}
        if isinstance(lay, remote.RemoteLayout):
            return remote.plan_ranges(lay, partition_bytes=partition_bytes, bounds=bounds,
                                      **kw)
        return layout.plan_ranges(lay, partition_bytes=partition_bytes, bounds=bounds, **kw)

    def split_bytes(self, total: int) -> int:
        """``partition_bytes`` if given, else ``auto_partition_bytes(total, ...)``."""
        if self.partition_bytes is not None:
            return self.partition_bytes
        return auto_partition_bytes(total, self.min_partitions)


def _int(opts: dict[str, Any], name: str, default: int) -> int:
    value = opts.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"gateway_wal: option {name} must be an integer, not {value!r}") from None


def _read(options: _Options, rr: ReadRange) -> Iterator[Any]:
    report = RangeReport(rr.file.path, rr.start, rr.stop)
    buffer = remote.read_window(options.remote, rr) if options.remote is not None else None
    yield from read_range(rr, report, buffer=buffer)
    if options.report_dir:
        write_report(options.report_dir, report)


class GatewayWalReader(DataSourceReader):
    """Batch reader: one partition per ``partition_bytes`` of each file."""

    def __init__(self, options: _Options) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        o = self.options
        lay = o.layout()
        ranges = o.plan(lay, o.split_bytes(sum(f.size for f in lay.files)))
        return [RangePartition(r) for r in ranges] or [RangePartition(None)]  # type: ignore[arg-type]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        rr = partition.range  # type: ignore[attr-defined]
        if rr is None:
            return iter(())
        return _read(self.options, rr)


class GatewayWalStreamReader(DataSourceStreamReader):
    """Streaming reader over a growing log; offsets are ``{"segment", "byte"}``."""

    def __init__(self, options: _Options) -> None:
        self.options = options

    def initialOffset(self) -> dict[str, int]:
        files = self.options.layout().files
        return {"segment": files[0].segment, "byte": 0}

    # PySpark 4.0 and 4.1 call it without arguments; 4.2 on read the signature and keep
    # calling it so (the arguments serve admission control, which this reader has not).
    def latestOffset(self) -> dict[str, int]:  # type: ignore[override]
        lay = self.options.layout(narrowed=False)
        if lay.commit is not None:
            committed = self.options.plan(lay, 1 << 62, filtered=False)
            if not committed:
                return {"segment": lay.files[0].segment, "byte": 0}
            last = committed[-1]
            return {"segment": last.file.segment, "byte": last.stop}
        newest = lay.files[-1]
        if isinstance(lay, remote.RemoteLayout):
            return {"segment": newest.segment, "byte": lay.last_separator}
        buf = layout.open_buffer(newest.path)
        try:
            end = buf.rfind(SEPARATOR) if len(buf) else 0
        finally:
            if not isinstance(buf, bytes):
                buf.close()
        return {"segment": newest.segment, "byte": max(end, 0)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        lay = self.options.layout()
        bounds: dict[int, tuple[int, int]] = {}
        for f in lay.files:
            if f.segment < start["segment"] or f.segment > end["segment"]:
                continue
            lo = start["byte"] if f.segment == start["segment"] else 0
            hi = end["byte"] if f.segment == end["segment"] else f.size
            bounds[f.segment] = (lo, hi)
        o = self.options
        total = sum(hi - lo for lo, hi in bounds.values())
        ranges = o.plan(lay, o.split_bytes(total), bounds=bounds)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition.range)  # type: ignore[attr-defined]

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the log is only read."""


class GatewayWalDataSource(DataSource):
    """``spark.read.format("gateway_wal")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "gateway_wal"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return GatewayWalReader(_Options(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return GatewayWalStreamReader(_Options(self.options))


def register(spark: SparkSession) -> None:
    """Register ``gateway_wal``, ``gateway_wal_schema`` (``schema_events``) and
    ``gateway_store`` with ``spark`` (idempotent)."""
    from .schema_events import GatewaySchemaEventsSource
    from .store_source import GatewayStoreDataSource

    spark.dataSource.register(GatewayWalDataSource)
    spark.dataSource.register(GatewaySchemaEventsSource)
    spark.dataSource.register(GatewayStoreDataSource)


def damage_summary(report_dir: str) -> dict[str, Any]:
    """Totals of the range reports in ``report_dir``: records, transactions, rows, skipped,
    and the lists of damaged ranges, undecodable records and rejected transactions (each
    with its file)."""
    out: dict[str, Any] = {"records": 0, "transactions": 0, "rows": 0, "skipped": 0,
                           "damaged": [], "undecodable": [], "rejected": []}
    for name in sorted(glob.glob(os.path.join(report_dir, "*.json"))):
        with open(name) as f:
            rep = json.load(f)
        for k in ("records", "transactions", "rows", "skipped"):
            out[k] += rep[k]
        for k in ("damaged", "undecodable", "rejected"):
            out[k].extend([rep["file"], *item] for item in rep[k])
    return out
