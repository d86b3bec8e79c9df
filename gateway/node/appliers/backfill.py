"""Backfilling a new applier from the node's store, then following the log after it.

An applier that has never applied anything here (no position, nothing held in its target)
would otherwise replay the whole log from its first entry -- or, once the log was compacted,
stop (or rebuild, for a target it owns). Instead (docs/appliers.md, "Backfilling a new
applier"):

1. a point-in-time view of the store is taken (``LSMStore.snapshot``: atomic with the state
   machine's write batches, so it holds exactly the entries up to its ``applied_index`` I);
   the position ``I`` with a ``BackfillProgress`` is saved before any row is delivered, so
   the log after ``I`` is kept for it (the compaction floor) and a restart knows;
2. the stored rows are read from the view in store key order, ``chunk_rows`` at a time, on
   the applier's own thread (never the Raft loop: writes go on), and each chunk is delivered
   as ``UPSERT`` operations carrying the row's metadata and ``backfill = I``: through
   ``apply_columns`` in one call for an applier with the ``columns`` capability (the SQLite
   applier's bulk path), else partitioned by row onto ``threads`` workers in batches of
   ``max_batch`` through the dispatcher's retry and dead-letter policy;
3. after each chunk the target records the position (``hold``), then the position file:
   ``last_key`` is the chunk's last key. A crash redoes at most the chunk in flight;
4. when every row is delivered the position says ``done`` and the dispatcher follows the log
   from ``I + 1``.

A restart mid-backfill finds the view gone. It takes a new one at ``I2 >= I`` and continues
after ``last_key``: rows up to ``last_key`` hold the state at ``I``, the others the state at
``I2``. The log is still followed from ``I + 1`` for every row, which leaves each row as the
store has it: a row at state ``I`` needs exactly entries ``I+1..``; for a row at state
``I2`` entries ``I+1..I2`` are applied a second time, and applying a row's changes again to a
state that already holds them changes nothing when INSERT and UPSERT replace the row, UPDATE
sets absolute values and DELETE removes it (the last replace or delete of the run decides
the row, later updates set what they set already; with none, the updates set the values the
row has). The one reduction that breaks this is eliding an INSERT followed by a DELETE (it
assumes the row did not exist): up to ``replay_until = I2`` the dispatcher does not elide
(``Dispatcher._flush_rows``). Such replayed changes reach a message-queue applier twice
(at-least-once, as after any crash; their message ids are those of the first publication).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from itertools import islice
from typing import TYPE_CHECKING, cast

from gateway.appliers.dispatcher import partition_of
from gateway.appliers.durable import hold
from gateway.appliers.position import ApplierPosition, BackfillProgress, PositionStore
from gateway.appliers.workers import Stopped
from gateway.core.lsm.format import prefix_end
from gateway.core.rowops import (
    CASE_OF_TYPE,
    Column,
    ColumnOps,
    OpKind,
    RowOp,
    TableRef,
    python_value,
)
from gateway.core.sql_value import SqlValue
from gateway.node.appliers.applier_rebuild import stored_row_ops
from gateway.node.state import keys
from gateway.v1 import gateway_pb2

if TYPE_CHECKING:
    from gateway.appliers.contract import Applier, ColumnsApplier
    from gateway.appliers.dispatcher import Dispatcher
    from gateway.core.lsm import LSMStore
    from gateway.core.lsm.read_snapshot import ReadSnapshot

__all__ = ["CHUNK_ROWS", "needs_backfill", "run_backfill"]

log = logging.getLogger("gateway.node.appliers.backfill")

#: Rows per chunk: a crash redoes at most one; each costs a position save (two fsyncs).
CHUNK_ROWS = 4096
_ROWS = b"r"


def needs_backfill(position: ApplierPosition) -> bool:
    """True for an applier that never applied anything (position 0, nothing applied, no
    backfill record) and for one whose backfill is not done."""
    if position.backfill is not None:
        return not position.backfill.done
    return position.log_index == 0 and not len(position.applied)


def _next_key(key: bytes) -> bytes:
    return key + b"\x00"  # the smallest key after ``key``


def _chunks(view_rows: Iterator[tuple[bytes, bytes]], size: int
            ) -> Iterator[list[tuple[bytes, bytes]]]:
    while chunk := list(islice(view_rows, size)):
        yield chunk


def _table_prefixes(view: ReadSnapshot) -> list[tuple[bytes, str, str]]:
    """``(key prefix, schema, table)`` of every table holding rows in ``view``, in key order:
    one short scan per table (its first row names it, the next starts past its prefix)."""
    out = []
    start: bytes | None = _ROWS
    end = prefix_end(_ROWS)
    while start is not None:
        first = next(iter(view.scan(start, end)), None)
        if first is None:
            break
        row = gateway_pb2.Row.FromString(first[1])
        schema, table = row.table.schema_name, row.table.table_name
        prefix = keys.table_prefix(schema, table)
        out.append((prefix, schema, table))
        start = prefix_end(prefix)
    return out


def table_order(view: ReadSnapshot) -> tuple[bytes, ...]:
    """The tables' key prefixes in the order a backfill reads them when that is not key
    order, else ``()``: tables of one name in several schemas take their key-order places
    oldest first -- by their oldest live row's log index, the order the log created them
    (as ``applier_rebuild`` does: the SQLite applier keeps the first table of a name and
    refuses the others, so a backfill must meet them in the order the log did)."""
    tables = _table_prefixes(view)
    by_name: dict[str, list[int]] = {}
    for i, (_prefix, _schema, table) in enumerate(tables):
        by_name.setdefault(table, []).append(i)
    clashes = [slots for slots in by_name.values() if len(slots) > 1]
    if not clashes:
        return ()
    order = [prefix for prefix, _, _ in tables]
    for slots in clashes:
        oldest = {i: min((gateway_pb2.Row.FromString(v).log_index
                          for _k, v in view.scan_prefix(tables[i][0])), default=0)
                  for i in slots}
        for slot, i in zip(slots, sorted(slots, key=lambda j: (oldest[j], j)), strict=True):
            order[slot] = tables[i][0]
    return tuple(order)


def _rows(view: ReadSnapshot, progress: BackfillProgress) -> Iterator[tuple[bytes, bytes]]:
    """The rows still to deliver: after ``last_key`` in key order, or, with ``tables``,
    table by table in that order from the table holding ``last_key`` (then any table the
    view holds that the list does not: created after it was made, in key order)."""
    after = _next_key(progress.last_key) if progress.last_key else _ROWS
    if not progress.tables:
        yield from view.scan(after, prefix_end(_ROWS))
        return
    listed = set(progress.tables)
    order = [*progress.tables,
             *(p for p, _, _ in _table_prefixes(view) if p not in listed)]
    at = next((i for i, p in enumerate(order)
               if progress.last_key and progress.last_key.startswith(p)), 0)
    for i in range(at, len(order)):
        prefix = order[i]
        yield from view.scan(after if i == at and progress.last_key else prefix,
                             prefix_end(prefix))


def stored_columns(chunk: Sequence[tuple[bytes, bytes]]
                   ) -> tuple[list[ColumnOps], list[tuple[int, int]]]:
    """The stored rows ``chunk`` as ``UPSERT`` ``ColumnOps`` -- one per run of rows of one
    table with the same columns -- and each row's GTID: the rows ``stored_row_ops`` gives,
    without an operation object per row (the columns path of an applier that has one). Raises
    ``ValueError`` for a stored value its column cannot hold, as ``stored_row_ops`` does."""
    batches: list[ColumnOps] = []
    gtids: list[tuple[int, int]] = []
    prev: gateway_pb2.Row | None = None
    key_lists: list[list[SqlValue]] = []
    val_lists: list[list[SqlValue]] = []
    key_spec: list[tuple[int, str]] = []
    val_spec: list[tuple[int, str]] = []
    for _key, data in chunk:
        row = gateway_pb2.Row.FromString(data)
        if prev is None or row.table != prev.table or row.key_fields != prev.key_fields \
                or row.fields != prev.fields:
            key_cols = tuple(Column(f.name, f.type) for f in row.key_fields)
            cols = tuple(Column(f.name, f.type) for f in row.fields)
            key_lists, val_lists = [[] for _ in key_cols], [[] for _ in cols]
            key_spec = [(c.type, CASE_OF_TYPE.get(c.type, "")) for c in key_cols]
            val_spec = [(c.type, CASE_OF_TYPE.get(c.type, "")) for c in cols]
            batches.append(ColumnOps(TableRef(row.table.schema_name, row.table.table_name),
                                     OpKind.UPSERT, key_cols, cols, key_lists, val_lists))
            prev = row
        for out, spec, values in ((key_lists, key_spec, row.key_values),
                                  (val_lists, val_spec, row.values)):
            if len(values) != len(spec):
                raise ValueError(f"stored row of {row.table.schema_name}.{row.table.table_name}"
                                 f": {len(values)} values for {len(spec)} columns")
            for column, (ftype, case), v in zip(out, spec, values, strict=True):
                got = v.WhichOneof("kind")
                # the usual value directly; null, decimals and what is refused as
                # ``python_value`` decides
                column.append(getattr(v, case) if got == case and case != "decimal_value"
                              else python_value(v, ftype))
        gtids.append((row.gtid.server_id, row.gtid.trans_id))
    return batches, gtids


class _Delivery:
    """Delivers one chunk of ``UPSERT`` operations of distinct rows (module docstring, 2)."""

    def __init__(self, applier: Applier, dispatcher: Dispatcher) -> None:
        self.applier = applier
        self.dispatcher = dispatcher
        caps = applier.capabilities
        self.columns = caps.columns
        self.threads = dispatcher.config.threads if caps.thread_safe else 1
        self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"backfill-"
                                       f"{applier.name}") if self.threads > 1 else None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def __call__(self, chunk: Sequence[tuple[bytes, bytes]], index: int) -> None:
        """Deliver the stored rows ``chunk`` (``(key, serialized Row)``) read at ``index``."""
        if self.columns and self._columns(chunk):
            return
        ops = list(stored_row_ops(iter(chunk), backfill=index))
        parts: list[list[RowOp]] = [[] for _ in range(self.threads)]
        for op in ops:
            parts[partition_of(op, self.threads)].append(op)
        size = self.applier.capabilities.max_batch
        batches = [p[i:i + size] for p in parts for i in range(0, len(p), size)]
        run = self.dispatcher.apply_outside_log
        if self.pool is None:
            for b in batches:
                run(b)
            return
        for f in [self.pool.submit(run, b) for b in batches]:
            f.result()  # raises what the runner raised (Stopped, a failure it cannot handle)

    def _columns(self, chunk: Sequence[tuple[bytes, bytes]]) -> bool:
        """One ``apply_columns`` call for the chunk (``stored_columns``); False (nothing
        applied: its store transaction rolled back) when it raised -- the row path then
        retries and dead-letters row by row, as the dispatcher's columns windows do."""
        batches, gtids = stored_columns(chunk)
        try:
            cast("ColumnsApplier", self.applier).apply_columns(batches, gtids)
        except Exception as exc:
            log.warning("applier %s: backfill chunk through apply_columns failed (%s: %s); "
                        "applying it row by row", self.applier.name, type(exc).__name__, exc)
            return False
        return True


def _save(dispatcher: Dispatcher, positions: PositionStore, position: ApplierPosition,
          on_saved: Callable[[ApplierPosition], None] | None) -> None:
    """The target's record first, then the file (``gateway.appliers.durable``); a busy
    target is asked again (the next chunk waits: a position the target does not hold would
    let a lost commit of its rows go unnoticed). Raises ``Stopped`` when stopping."""
    attempt = 0
    while not hold(dispatcher.applier, position):
        attempt += 1
        if dispatcher.stopped:
            raise Stopped
        time.sleep(dispatcher.config.retry.delay(attempt))
    positions.save(position)
    if on_saved is not None:
        on_saved(position)


def run_backfill(applier: Applier, dispatcher: Dispatcher, positions: PositionStore,
                 store: LSMStore, position: ApplierPosition, *,
                 chunk_rows: int | None = None,
                 on_progress: Callable[[BackfillProgress], None] | None = None,
                 on_saved: Callable[[ApplierPosition], None] | None = None
                 ) -> ApplierPosition | None:
    """Backfill ``applier`` from ``store`` starting at ``position`` (module docstring) and
    return the position its dispatcher follows the log from -- or None when
    ``dispatcher.stop()`` was called first (the saved progress stands). ``on_progress`` sees
    the progress after every chunk; ``on_saved`` every saved position (a cluster-scoped
    applier's are replicated). Raises what delivering or saving raises (the saved progress
    then stands and the next start resumes). ``chunk_rows``: ``CHUNK_ROWS`` by default."""
    delivery = _Delivery(applier, dispatcher)
    try:
        return _backfill(applier, dispatcher, positions, store, position, delivery,
                         chunk_rows or CHUNK_ROWS, on_progress, on_saved)
    except Stopped:
        return None
    finally:
        delivery.close()


def _backfill(applier: Applier, dispatcher: Dispatcher, positions: PositionStore,
              store: LSMStore, position: ApplierPosition, delivery: _Delivery,
              chunk_rows: int, on_progress: Callable[[BackfillProgress], None] | None,
              on_saved: Callable[[ApplierPosition], None] | None) -> ApplierPosition | None:
    with store.snapshot() as view:
        index = view.applied_index
        progress = position.backfill
        if progress is None:
            progress = BackfillProgress(index, tables=table_order(view))
            log.info("applier %s: new: backfilling it from the store at log index %d, "
                     "then following the log from index %d", applier.name, index,
                     index + 1)
        else:
            index = max(index, progress.snapshot_index)
            progress = replace(progress, replay_until=max(progress.replay_until, index),
                               resumes=progress.resumes + 1)
            log.info("applier %s: resuming its backfill of log index %d after %d rows "
                     "from a snapshot at log index %d; the log from index %d is applied "
                     "again up to %d", applier.name, progress.snapshot_index,
                     progress.rows, index, progress.snapshot_index + 1, index)
        base = progress.snapshot_index
        _save(dispatcher, positions, ApplierPosition(base, backfill=progress), on_saved)
        if on_progress is not None:
            on_progress(progress)
        for chunk in _chunks(_rows(view, progress), chunk_rows):
            if dispatcher.stopped:
                return None
            delivery(chunk, index)
            progress = replace(progress, last_key=chunk[-1][0],
                               rows=progress.rows + len(chunk))
            _save(dispatcher, positions, ApplierPosition(base, backfill=progress), on_saved)
            if on_progress is not None:
                on_progress(progress)
    done = replace(progress, done=True)
    final = ApplierPosition(base, backfill=done)
    if not done.rows and not done.resumes:
        final = ApplierPosition(base)  # nothing stored: nothing to report
    _save(dispatcher, positions, final, on_saved)
    if on_progress is not None:
        on_progress(done)
    log.info("applier %s: backfilled %d rows; following the log from index %d",
             applier.name, done.rows, base + 1)
    return final
