"""Schema events in the bulk apply (issue 57): found in the log, applied between the rows.

The ``gateway_wal`` data source yields row operations only; the log's schema events
(``SCHEMA_EVENT`` records: a table created, a column added, dropped or renamed, a table
dropped; docs/schema.md) are found by ``schema_events`` -- one small Spark job over the same
byte ranges (``layout.plan_ranges``), each task keeping only the records of that type tag --
and ``apply_with_schema`` cuts the run at each of them: the log up to the event is applied
(``bulk.apply_log`` over ``[position + 1, event - 1]``), then ``target.apply_schema(event)``,
then the position is saved at the event's index, and so on; a log without schema events is
one ``apply_log`` as before. So a target sees each event after every transaction committed
before it and before any committed after it, as the streaming dispatcher hands them over.

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
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import SparkSession

from gateway import (
    ApplierPosition,
    SchemaEvent,
    SchemaStopError,
    TypeTag,
    UnsupportedOperationError,
    decode_schema_event,
)
from gateway.formats import PayloadError, WalTag, decode_wal_entry, records

from .layout import ReadRange, discover, open_buffer, plan_ranges, resolve_path
from .position import SparkPositionStore

__all__ = ["apply_with_schema", "scan_range", "schema_events"]

log = logging.getLogger("spark_applier.schema_events")

_ENTRY_TAG = bytes((WalTag.ENTRY,))
_SCHEMA_TAG = bytes((TypeTag.SCHEMA_EVENT,))


def scan_range(rr: ReadRange) -> Iterator[tuple[int, bytes]]:
    """``(log index, tagged bytes)`` of every schema event record of ``rr``."""
    f = rr.file
    wal = f.kind == "wal"
    buf = open_buffer(f.path)
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


def schema_events(spark: SparkSession, path: str, *, index_from: int = 1,
                  index_to: int | None = None, partition_bytes: int = 64 << 20
                  ) -> list[tuple[int, SchemaEvent]]:
    """The schema events of the log at ``path`` in ``[index_from, index_to]``, in log order.
    Raises ``SchemaStopError`` naming the index for one that does not decode."""
    ranges = plan_ranges(discover(resolve_path(path)), partition_bytes=partition_bytes,
                         index_from=index_from, index_to=index_to)
    if not ranges:
        return []
    found = (spark.sparkContext.parallelize(ranges, len(ranges))
             .flatMap(lambda rr: list(scan_range(rr))).collect())
    out = []
    for index, data in sorted(found):
        try:
            out.append((index, decode_schema_event(data)))
        except ValueError as exc:
            raise SchemaStopError(f"{path}: log entry {index}: schema event: {exc}") from None
    return out


def apply_with_schema(spark: SparkSession, source: str, target: Any, state_dir: str,
                      apply: Callable[..., Any], *, index_to: int | None = None,
                      **options: Any) -> Any:
    """``apply(spark, source, target, state_dir, index_to=..., **options)`` -- the bulk
    apply of one stretch without schema events -- cut at each schema event (module
    docstring); returns the last stretch's report with the counts of all of them."""
    positions = SparkPositionStore(state_dir, target.name)
    start = positions.load()
    events = schema_events(spark, source, index_from=start.log_index + 1, index_to=index_to,
                           partition_bytes=options.get("partition_bytes") or 64 << 20)
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
