"""Schema events in the bulk apply (issue 57): found in the log, applied between the rows.

The ``gateway_wal`` data source yields row operations only; the log's schema events
(``SCHEMA_EVENT`` records: a table created, a column added, dropped or renamed, a table
dropped; docs/schema.md) are found by ``schema_events`` -- one small read of the
``gateway_wal_schema`` data source (``GatewaySchemaEventsSource``): the ``gateway_wal`` source's
options and partitions (a path, or a ``gateway://`` node read over ``LogRead``), each task keeping
only the records of that type tag (``scan_range``); a DataFrame read, so it works through Spark
Connect too -- and ``apply_with_schema`` cuts the run at each of them: the log up to the event
is applied (``bulk.apply_log`` over ``[position + 1, event - 1]``), then
``target.apply_schema(event)``, then the position is saved at the event's index, and so on; a
log without schema events is one ``apply_log`` as before. So a target sees each event after
every transaction committed before it and before any committed after it, as the streaming
dispatcher hands them over.

A target without ``apply_schema`` passes events by (its rows keep their own shape), as does one
whose ``schema_policy`` is ``ignore``; ``UnsupportedOperationError`` from ``apply_schema`` (a
change the target cannot make) is logged as one warning line and passed by, as the streaming
dispatcher does; with ``stop``, or when ``apply_schema`` fails otherwise, the run stops with
``SchemaStopError`` (one line naming the table, version and change), its position saved right
before the event: a schema event is not a row to dead-letter.

A WAL directory holds every proposed event, including one its state machine refused (a
losing concurrent change): the bulk apply of a WAL applies what the WAL holds, as it does for
transactions; apply a node's log through the node's appliers where that matters.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from gateway import (
    ApplierPosition,
    SchemaEvent,
    SchemaStopError,
    TypeTag,
    UnsupportedOperationError,
    decode_schema_event,
)
from gateway.formats import PayloadError, WalTag, decode_wal_entry, records

from . import remote
from .datasource import GatewayWalReader, _Options, register
from .layout import ReadRange, open_buffer, resolve_path
from .position import SparkPositionStore

if TYPE_CHECKING:  # bulk imports this module when it runs
    from .bulk import ApplyReport

__all__ = ["GatewaySchemaEventsSource", "apply_with_schema", "scan_range", "schema_events"]

log = logging.getLogger("spark_applier.schema_events")

_ENTRY_TAG = bytes((WalTag.ENTRY,))
_SCHEMA_TAG = bytes((TypeTag.SCHEMA_EVENT,))


def scan_range(rr: ReadRange, *, buffer: Any = None) -> Iterator[tuple[int, bytes]]:
    """``(log index, tagged bytes)`` of every schema event record of ``rr``. ``buffer``
    (closed here when done) holds the file's bytes at their offsets instead of the file at
    ``rr.file.path``, as for ``decode.read_range`` (``remote.read_window``)."""
    f = rr.file
    wal = f.kind == "wal"
    buf = open_buffer(f.path) if buffer is None else buffer
    try:
        ordinal, counted = rr.ordinal_base, rr.start
        for rec in records.scan(buf, rr.start, rr.stop):
            payload = rec.payload
            if wal:
                if payload[:1] != _ENTRY_TAG or rec.generation != f.generation:
                    continue
                try:
                    entry = decode_wal_entry(payload)
                except PayloadError:
                    continue  # the row reader reports damage
                if entry.type != 0:
                    continue
                index, payload = entry.index, entry.data
            else:
                if rec.position > counted:
                    ordinal += buf[counted:rec.position + 1].count(b"\xfe\xfd")
                    counted = rec.position
                index = ordinal + 1
            if payload[:1] != _SCHEMA_TAG:
                continue
            if index < rr.index_from or (rr.index_to is not None and index > rr.index_to):
                continue
            yield index, bytes(payload)
    finally:
        if not isinstance(buf, bytes):
            buf.close()


class GatewaySchemaEventsSource(DataSource):
    """``spark.read.format("gateway_wal_schema")``: the schema event records of a log, one
    row ``(log_index, event)`` each (``event``: the tagged bytes ``decode_schema_event``
    reads), with the options and partitions of ``gateway_wal`` (``datasource``)."""

    @classmethod
    def name(cls) -> str:
        return "gateway_wal_schema"

    def schema(self) -> str:
        return "log_index bigint, event binary"

    def reader(self, schema: Any) -> DataSourceReader:
        return _SchemaEventsReader(_Options(self.options))


class _SchemaEventsReader(GatewayWalReader):
    """The partitions of the ``gateway_wal`` batch reader; each yields its schema events."""

    def read(self, partition: InputPartition) -> Iterator[tuple[int, bytes]]:
        rr = partition.range  # type: ignore[attr-defined]  # (RangePartition)
        if rr is None:
            return iter(())
        o = self.options
        return scan_range(rr, buffer=None if o.remote is None else remote.read_window(o.remote, rr))


def schema_events(spark: SparkSession, path: str, *, index_from: int = 1,
                  index_to: int | None = None, partition_bytes: int | None = None,
                  read_options: Mapping[str, str] | None = None
                  ) -> list[tuple[int, SchemaEvent]]:
    """The schema events of the log at ``path`` (a path or ``gateway://HOST:PORT``, with
    ``read_options`` such as ``token`` and ``ca``) in ``[index_from, index_to]``, in log order.
    Raises ``SchemaStopError`` naming the index for one that does not decode."""
    register(spark)
    reader = spark.read.format("gateway_wal_schema")
    opts = {**dict(read_options or {}), "index_from": index_from, "index_to": index_to,
            "partition_bytes": partition_bytes}
    for k, v in opts.items():
        if v is not None:
            reader = reader.option(k, str(v))
    found = [(r.log_index, bytes(r.event)) for r in reader.load(resolve_path(path)).collect()]
    out = []
    for index, data in sorted(found):
        try:
            out.append((index, decode_schema_event(data)))
        except ValueError as exc:
            raise SchemaStopError(f"{path}: log entry {index}: schema event: {exc}") from None
    return out


def apply_with_schema(spark: SparkSession, source: str, target: Any, state_dir: str,
                      apply: Callable[..., ApplyReport], *, index_to: int | None = None,
                      **options: Any) -> ApplyReport:
    """``apply(spark, source, target, state_dir, index_to=..., **options)`` -- the bulk
    apply of one stretch without schema events -- cut at each schema event (module
    docstring); returns the last stretch's report with the counts of all of them."""
    positions = SparkPositionStore(state_dir, target.name)
    start = positions.load()
    events = schema_events(spark, source, index_from=start.log_index + 1, index_to=index_to,
                           partition_bytes=options.get("partition_bytes"),
                           read_options=options.get("read_options"))
    reports = []
    for index, event in events:
        report = apply(spark, source, target, state_dir, index_to=index - 1, **options)
        reports.append(report)
        if report.pending_from is not None:
            break  # a transaction before the event waits for its segments: stop before it
        method = getattr(target, "apply_schema", None)
        if getattr(target, "schema_policy", "apply") == "stop":
            raise SchemaStopError(f"target {target.name}: schema change at log index {index}, "
                                  f"table {event.table} version {event.version} "
                                  f"({event.kind}): stopped by schema_policy 'stop'")
        where = (f"target {target.name}: schema change at log index {index}, table "
                 f"{event.table} version {event.version} ({event.kind})")
        if method is not None and getattr(target, "schema_policy", "apply") == "apply":
            try:
                method(event)
            except UnsupportedOperationError as exc:
                log.warning("%s: not applied: %s", where, exc)
            except (ValueError, OSError) as exc:
                raise SchemaStopError(f"{where}: not applied: {exc}") from None
        positions.save(ApplierPosition(index, report.end.applied))
    else:
        reports.append(apply(spark, source, target, state_dir, index_to=index_to, **options))
    last = reports[-1]
    last.start = start
    for r in reports[:-1]:
        last.ops_written += r.ops_written
        last.barriers += r.barriers
        last.dead_letters += r.dead_letters
        last.rejected = [*r.rejected, *last.rejected]
    return last
