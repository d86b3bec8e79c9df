"""The dispatcher: committed entries in, reduced operations out to one applier's workers.

For one applier, ``Dispatcher.run`` loops:

1. read entries from the ``EntrySource`` after the durable position (``PositionStore``),
   skipping transactions already in its applied-GTID set;
2. assemble segments (``SegmentAssembler``; rollbacks discard), reduce each transaction -- or
   a window of ``window`` consecutive transactions -- to one operation per row
   (``gateway.core.reducer``); a transaction the reducer rejects goes whole to the dead-letter
   log;
3. partition the operations by a stable hash of ``(table, key)`` onto ``threads`` workers with
   bounded queues (a full queue blocks reading: backpressure); per-row order is kept because a
   row always lands on the same worker, which applies its queue in order;
4. barriers (SQL, MOVE) wait until every queued operation is done, then run alone;
   a window of plain inserts of distinct rows, for an applier with ``columns`` capability,
   skips steps 2-3: once the queues are empty it goes to ``apply_columns`` column by column in
   one call (``gateway.core.insert_columns``) -- falling back to the row path if that call
   raises, so retries and dead letters stay the row path's. For such an applier the
   transactions of a whole read batch are held (whatever ``window`` says) and each run of
   consecutive insert-only transactions is tried as one columns window: when its rows are
   distinct, one call applies exactly what one call per transaction would, with one store
   transaction instead of hundreds. A run the columns path does not take is tried again in
   windows of ``window`` transactions; other transactions, and those windows it does not
   take either, go to the row path in windows of ``window``, as configured;
5. finished operations complete units in the ``ProgressTracker``, whose contiguous watermark
   (CutHead) and applied-GTID set are saved every ``save_interval`` seconds, after every
   unit (a window, or one columns call) for non-idempotent appliers, and when the run ends.

A schema event (a ``SchemaEntry``) is a barrier of its own: what is held is flushed, every
queued operation is waited for, then ``SchemaDelivery`` hands it to the applier under its
``schema_policy`` on this thread, and only then is its entry done and the next entry admitted
-- so the applier sees it after every earlier transaction and before any later one. A ``stop``
(or a failed change) ends the run with ``DispatcherError``, the entry not done: the saved
position is right before it.

A restart after a crash replays from the saved position; see ``progress`` for why that never
skips or reorders a row's changes. ``run`` returns when the log is exhausted (or at
``max_index``), or, with ``follow``, when ``stop()`` is called. An applier or dead-letter log
failure that cannot be handled raises ``DispatcherError`` after the workers stopped and the
(consistent) position was saved.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from gateway.core.insert_columns import (
    WIRES_IN_C,
    InsertWindow,
    insert_columns,
    insert_columns_of_wires,
)
from gateway.core.reducer import AssembledTransaction, SegmentAssembler, SegmentOrderError
from gateway.core.reducer import reduce_ops as _reduce_ops
from gateway.core.rowops import Gtid, MalformedTransactionError, RowOp
from gateway.v1 import transaction_pb2

from .contract import (
    Applier,
    ColumnsApplier,
    SchemaStopError,
    out_of_space,
    unavailable_text,
)
from .deadletter import DeadLetterLog
from .durable import hold
from .metrics import ApplierMetrics
from .position import ApplierPosition, PositionStore, PositionStoreError
from .progress import ProgressTracker, Unit
from .schema_delivery import SchemaDelivery, SchemaHook
from .source import CommittedEntry, EntrySource, SchemaEntry, WireTransactions
from .workers import STOP, BatchRunner, PartitionWorker, RetryPolicy, Stopped

__all__ = ["LAG_PROBE", "Dispatcher", "DispatcherConfig", "DispatcherError", "first_commit_ns",
           "partition_of", "probe_commit_ns"]

log = logging.getLogger("gateway.appliers")

MetricsSink = Callable[[str, Mapping[str, float]], None]
#: ``(applier name, dead letter number, what was refused: a transaction or an operation, why)``
DeadLetterHook = Callable[[str, int, transaction_pb2.Transaction | RowOp, BaseException], None]
PositionHook = Callable[[ApplierPosition], None]
#: ``Gtid((server_id, trans_id))`` without the named tuple's Python ``__new__`` (hot path).
_gtid = functools.partial(tuple.__new__, Gtid)
#: How long a run woken by ``notify`` waits before it reads (at most ``linger``).
_WAKE_DELAY = 0.002


class DispatcherError(Exception):
    """The dispatcher stopped on a failure it cannot handle; ``str()`` is one line."""


@dataclass(frozen=True, slots=True)
class DispatcherConfig:
    """Tuning of one dispatcher. ``reduce=False`` hands over the original statements, one
    operation per record (``window`` is then ignored). ``poll_interval``: how long a
    following run that has caught up waits for entries when nothing announces them
    (``Dispatcher.notify``). ``linger``: how long it waits, after a read that caught up with
    the log and held transactions, before reading again -- announced or not -- so that under
    a steady trickle of writes the applier gets one batch per ``linger`` instead of one per
    log append (a commit per Raft cycle in SQLite); an idle applier still reads an announced
    entry within ~2 ms."""

    threads: int = 4
    queue_size: int = 1024
    read_batch: int = 256
    reduce: bool = True
    window: int = 1
    elide_insert_delete: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    save_interval: float = 1.0
    poll_interval: float = 0.1
    linger: float = 0.05

    def __post_init__(self) -> None:
        for name in ("threads", "queue_size", "read_batch", "window"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.linger < 0:
            raise ValueError(f"linger must be >= 0, not {self.linger}")


#: Entries read past the watermark to find the oldest transaction not applied (for
#: ``lag_seconds``) when the next ones hold none (epoch markers, configuration).
LAG_PROBE = 64


def first_commit_ns(entries: Sequence[CommittedEntry]) -> int | None:
    """Commit time of the first transaction ``entries`` hold: a local one (its head or
    message) or the first of a replicated epoch's; None when they hold none."""
    for e in entries:
        if e.head is not None:
            return e.head[2]
        if e.replicated:
            return _replicated_commit_ns(e.replicated)
        if e.transaction is not None:
            return e.transaction.commit_timestamp_ns
    return None


def _replicated_commit_ns(txns: Sequence[transaction_pb2.Transaction]) -> int:
    """The commit time of the first of a replicated epoch's transactions (from its head when
    they are kept as bytes: ``WireTransactions``)."""
    if isinstance(txns, WireTransactions):
        head = txns.entries[0].head
        assert head is not None  # WireTransactions' contract
        return head[2]
    return txns[0].commit_timestamp_ns


def _assembled(index: int, txns: Sequence[transaction_pb2.Transaction]
               ) -> list[AssembledTransaction]:
    """A replicated epoch's transactions (entry ``index``) as whole transactions; from their
    heads and bytes, unparsed, when they are kept as bytes (``WireTransactions``)."""
    if isinstance(txns, WireTransactions):
        out = []
        for whole in txns.entries:
            head = whole.head
            assert head is not None  # WireTransactions' contract
            out.append(AssembledTransaction.whole(Gtid(head[0], head[1]), whole))
        return out
    return [AssembledTransaction(Gtid(t.gtid.server_id, t.gtid.trans_id), (index,), (t,))
            for t in txns]


def probe_commit_ns(source: EntrySource, start: int) -> int | None:
    """``first_commit_ns`` of ``source``'s entries from log index ``start`` on, read one at a
    time, at most ``LAG_PROBE`` of them: the first entry holding a transaction ends the
    probe. (A replicated epoch's entry is a whole epoch, parsed when read: asking for
    ``LAG_PROBE`` entries at once parsed up to 64 epochs, at every tick of an applier that
    lags, for one timestamp.) Raises what ``source.read`` raises."""
    for index in range(start, start + LAG_PROBE):
        got = source.read(index, 1)
        if not got:
            return None
        oldest = first_commit_ns(got)
        if oldest is not None:
            return oldest
    return None


def _holds_writes(entries: Sequence[CommittedEntry]) -> bool:
    """Some entry is a transaction or a replicated epoch: ``linger`` is worth it only after
    a read that gave the applier something (the node's own entries -- epoch markers every
    ~100 ms, applier positions -- would otherwise keep an idle applier lingering)."""
    return any(e.wire is not None or e.replicated or e.transaction is not None
               for e in entries)


def partition_of(op: RowOp, partitions: int) -> int:
    """The worker of ``op``'s row: a hash of ``(table, key)`` stable across processes."""
    if partitions == 1:
        return 0
    return zlib.crc32(repr((op.table.schema, op.table.name, op.key)).encode()) % partitions


def _only_inserts(txn: AssembledTransaction) -> bool:
    return not txn.rolled_back and all(
        stmt.WhichOneof("kind") == "insert" for seg in txn.segments for stmt in seg.statements)


def _runs(pending: list[tuple[AssembledTransaction, list[RowOp] | None]]
          ) -> list[tuple[bool, list[tuple[AssembledTransaction, list[RowOp] | None]]]]:
    """``pending`` cut into maximal runs of consecutive transactions that only insert (True)
    or not (False), in order."""
    out: list[tuple[bool, list[tuple[AssembledTransaction, list[RowOp] | None]]]] = []
    for item in pending:
        plain = _only_inserts(item[0])
        if out and out[-1][0] == plain:
            out[-1][1].append(item)
        else:
            out.append((plain, [item]))
    return out


class Dispatcher:
    """Applies the committed log to one applier; see the module docstring."""

    def __init__(self, applier: Applier, source: EntrySource, state_dir: str | Path, *,
                 config: DispatcherConfig | None = None,
                 publish_metrics: MetricsSink | None = None,
                 on_dead_letter: DeadLetterHook | None = None,
                 on_position_saved: PositionHook | None = None,
                 metrics: ApplierMetrics | None = None,
                 on_schema_event: SchemaHook | None = None) -> None:
        """``on_position_saved(position)`` is called after every durable save of the
        position, on the thread that saved it (the node replicates cluster-scoped appliers'
        positions from it); it must return quickly and not raise. ``metrics``: counters to
        continue (a node that runs an applier in several dispatchers one after the other);
        new ones by default. ``on_schema_event(applier, event, outcome)``: told every schema
        event passed, in log order (the ``gateway_schema_event`` hook)."""
        self.applier = applier
        self.source = source
        self.config = config or DispatcherConfig()
        self.positions = PositionStore(state_dir, applier.name)
        self.dead_letters = DeadLetterLog(state_dir, applier.name)
        self.metrics = metrics if metrics is not None else ApplierMetrics(applier.name)
        self._publish = publish_metrics
        self._on_dead_letter = on_dead_letter
        self._on_position_saved = on_position_saved
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by notify() and stop(): read the source now
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._queued = 0
        self._failure: BaseException | None = None
        self._tracker: ProgressTracker | None = None
        self._workers: list[PartitionWorker] = []
        # (transaction, its operations -- None until needed: the columns path never builds them)
        self._window: list[tuple[AssembledTransaction, list[RowOp] | None]] = []
        self._columns = applier.capabilities.columns and self.config.reduce
        # Transactions held before a flush: a read batch for the columns path (step 4).
        self._hold = max(self.config.window, self.config.read_batch) if self._columns \
            else self.config.window
        self._save_lock = threading.Lock()
        self._saved_seq = -1
        self._snapshot_seq = 0
        self._saved_units = 0
        self._last_save = 0.0
        self._no_elide = 0  # log entries up to it are reduced without insert-delete elision
        self._runner = BatchRunner(applier, self.config.retry, self.metrics,
                                   self._dead_letter_op, self._stop)
        self.schema = SchemaDelivery(applier, self.config.retry, self.metrics, self._stop,
                                     on_schema_event)

    # -- control -------------------------------------------------------------------------------

    def apply_outside_log(self, ops: Sequence[RowOp]) -> None:
        """Apply ``ops`` now, on the calling thread, under the retry policy, dead-lettering
        operations that fail for good -- without touching the position. For rebuilding a
        target from a state snapshot while ``run`` is not running."""
        self._runner.run(ops)

    def notify(self) -> None:
        """Entries may have become readable in the source: a ``run(follow=True)`` waiting for
        entries reads again ~2 ms later (``_WAKE_DELAY``, at most ``linger``) instead of after
        ``poll_interval``; one lingering after a read reads when its linger ends. Any thread;
        only sets an event. A source never announced this way is read every
        ``poll_interval``."""
        self._wake.set()

    def stop(self) -> None:
        """Ask ``run`` to return soon: operations in hand are abandoned (replayed later)."""
        self._stop.set()
        self._wake.set()
        with self._drained:
            self._drained.notify_all()

    @property
    def stopped(self) -> bool:
        """``stop()`` was called (and no ``run`` began since): work outside ``run`` -- a
        backfill -- ends at its next chunk."""
        return self._stop.is_set()

    @property
    def position(self) -> ApplierPosition:
        """The position reached so far (what the next save writes)."""
        if self._tracker is None:
            return self.positions.load()
        with self._lock:
            return self._tracker.position()

    def run(self, *, follow: bool = False, max_index: int | None = None) -> ApplierPosition:
        """Apply entries from the durable position; return the saved final position."""
        self._stop.clear()
        self._tracker = tracker = ProgressTracker(self.positions.load())
        backfill = tracker.backfill
        self._no_elide = backfill.replay_until if backfill is not None else 0
        self.metrics.set(watermark=tracker.watermark)
        start_schema = getattr(self.applier, "start_schema", None)
        versions = getattr(self.source, "schema_versions", None)
        if start_schema is not None and versions is not None:
            # the schema events before the position are not read again (contract.py)
            start_schema(versions(tracker.watermark))
        assembler = SegmentAssembler()
        self._workers = [
            PartitionWorker(n, self._runner, self.applier.capabilities.max_batch,
                            self.config.queue_size, self._ops_done, self._fail)
            for n in range(self.config.threads)]
        for w in self._workers:
            w.start()
        next_index = tracker.watermark + 1
        try:
            while not self._stop.is_set():
                want = self.config.read_batch
                if max_index is not None:
                    want = min(want, max_index - next_index + 1)
                entries = self.source.read(next_index, want) if want > 0 else []
                # Caught up as of this read, judged before the read is applied and the
                # position saved: an entry appended while they run (a save's fsync can take
                # longer than a trickle's gap) gathers in the linger with the ones after it
                # instead of being read alone.
                linger = (bool(entries) and follow and self.config.linger > 0
                          and entries[-1].index >= self.source.last_index()
                          and _holds_writes(entries))
                if entries:
                    self._admit_all(entries, assembler)
                    next_index = entries[-1].index + 1
                if self._window:
                    self._flush()
                self._tick()
                if linger:
                    self._stop.wait(self.config.linger)  # caught up: let the next batch gather
                elif not entries:
                    if not follow or (max_index is not None and next_index > max_index):
                        break
                    # Cleared after the wait, before the next read: an entry announced in
                    # between is read then (the source makes entries readable before it
                    # announces them).
                    if self._wake.wait(self.config.poll_interval) and self.config.linger:
                        # Woken: read a moment later, not at once -- the node's event loop that
                        # applied the entry is still answering its writer, and this thread
                        # would take the GIL from it, lengthening an idle node's write
                        # (docs/benchmarks.md, "Apply lag").
                        self._stop.wait(min(self.config.linger, _WAKE_DELAY))
                    self._wake.clear()
            self._wait_drained()
        except Stopped:
            pass
        finally:
            self._shutdown()
        if isinstance(self._failure, SchemaStopError):  # names the applier already
            raise DispatcherError(str(self._failure))
        if self._failure is not None:
            raise DispatcherError(f"applier {self.applier.name!r}: "
                                  f"{type(self._failure).__name__}: {self._failure}")
        return self.position

    # -- reading and reducing ------------------------------------------------------------------

    def _admit_all(self, entries: Sequence[CommittedEntry], assembler: SegmentAssembler
                   ) -> None:
        """Admit a read batch in log order; each run of entries that are not replicated
        epochs goes to ``_admit_run`` whole."""
        start, n = 0, len(entries)
        while start < n:
            if entries[start].replicated:
                self._admit_replicated(entries[start])
                start += 1
                continue
            stop = start + 1
            while stop < n and not entries[stop].replicated:
                stop += 1
            self._admit_run(entries[start:stop], assembler)
            start = stop

    def _admit_run(self, run: Sequence[CommittedEntry], assembler: SegmentAssembler) -> None:
        """Admit consecutive entries holding at most one transaction segment each.

        The bookkeeping is done once for the run, under one lock: every entry is registered
        with the tracker, and each transaction is checked against the applied-GTID set as it
        stands before the run -- which is what an entry-by-entry check sees too, since a
        transaction of the run joins that set only once its unit is applied, and duplicates
        of a GTID never reach an applier (the state machine skips them). Entries that hold no
        transaction, or one already applied, are finished together at the end of the run."""
        tracker = self._tracker
        assert tracker is not None
        gtids: list[Gtid | None] = []
        stamps: list[int] = []
        whole = 0  # entries with a head: whole transactions, not rolled back
        bare = 0  # entries holding no transaction (epoch markers, no-ops, positions...)
        schemas = 0  # schema events among the bare ones
        for entry in run:
            head = entry.head  # the source read these without parsing the transaction
            if head is not None:
                gtids.append(_gtid((head[0], head[1])))
                stamps.append(head[2])
                whole += 1
                continue
            txn = entry.transaction
            if txn is None:
                gtids.append(None)
                stamps.append(0)
                bare += 1
                if type(entry) is SchemaEntry:
                    schemas += 1
            else:
                gtids.append(Gtid(txn.gtid.server_id, txn.gtid.trans_id))
                stamps.append(txn.commit_timestamp_ns)
        skipped = 0
        with self._lock:
            tracker.register_run(run[0].index, run[-1].index, stamps)
            applied = tracker.applied
            present = [g for g in gtids if g is not None]
            if applied.holds_any(present):  # a replay after a restart: find which
                gtids = [None if g is None or g in applied else g for g in gtids]
                skipped = len(present) - (len(gtids) - gtids.count(None))
        self.metrics.add(entries_read=len(run), skipped=skipped)
        if (whole and whole + bare == len(run) and not skipped and self._columns
                and not schemas and WIRES_IN_C and not len(assembler)
                and self._apply_whole_run(run, gtids, bare)):
            return
        finished: list[int] = []
        rolled_back = 0
        try:
            for entry, gtid in zip(run, gtids, strict=True):
                if gtid is None:
                    if schemas and type(entry) is SchemaEntry:
                        self._admit_schema(entry)
                    else:
                        finished.append(entry.index)
                    continue
                try:
                    if entry.head is not None:
                        done = assembler.add_whole(gtid, entry)
                    else:
                        txn = entry.transaction
                        assert txn is not None
                        done = assembler.add(entry.index, txn, gtid, entry.wire)
                except SegmentOrderError as exc:
                    self._reject(exc.segments, exc)
                    continue
                if done is None:
                    continue
                if done.rolled_back:
                    rolled_back += 1
                    finished.extend(done.indexes)
                    continue
                if self._columns:
                    self._window.append((done, None))  # operations built in _flush if needed
                else:
                    try:
                        ops = done.ops()
                    except MalformedTransactionError as exc:
                        self._reject(list(zip(done.indexes, done.segments, strict=True)), exc)
                        continue
                    self._window.append((done, ops))
                if len(self._window) >= self._hold or not self.config.reduce:
                    self._flush()
        finally:
            if rolled_back:
                self.metrics.add(rolled_back=rolled_back)
            if finished:
                self._finish(finished)

    def _admit_schema(self, entry: SchemaEntry) -> None:
        """Deliver a schema event after everything before it and before anything after it
        (module docstring); its entry is done once the applier has taken it."""
        self._deliver_schema(entry)
        self._finish([entry.index])

    def _deliver_schema(self, entry: SchemaEntry) -> None:
        """Hand ``entry``'s schema events over once everything before them is applied; a
        stop (or a failed change) ends the run with the entry not done."""
        self._flush()
        self._wait_drained()
        try:
            for event in entry.events:
                self.schema.deliver(entry.index, event)
        except SchemaStopError as exc:
            self._fail(exc)
            raise Stopped from None

    def _admit_replicated(self, entry: CommittedEntry) -> None:
        """An entry holding several whole transactions (a replicated epoch): one unit, so the
        entry counts as done only when all of them are applied (a window in progress is
        flushed first and this one never shares a unit with others)."""
        tracker = self._tracker
        assert tracker is not None
        reps = entry.replicated
        with self._lock:
            tracker.register(entry.index, _replicated_commit_ns(reps))
        self.metrics.add(entries_read=1)
        if type(entry) is SchemaEntry:  # its schema events first (docs/schema.md)
            self._deliver_schema(entry)
        self._flush()
        fresh: list[AssembledTransaction] = []
        for done in _assembled(entry.index, reps):
            with self._lock:
                seen = done.gtid in tracker.applied
            if seen:
                self.metrics.add(skipped=1)
                continue
            fresh.append(done)
        if fresh and self._columns and self._replicated_columns(fresh):
            return
        for done in fresh:
            txn = done.segments[0]
            try:
                ops = done.ops()
            except MalformedTransactionError as exc:
                self._dead_letter_segment(entry.index, txn, exc)
                continue
            self._window.append((done, ops))
        if self._window:
            self._flush()
        else:
            self._finish([entry.index])

    def _replicated_columns(self, fresh: list[AssembledTransaction]) -> bool:
        """Apply a replicated entry's transactions ``fresh`` (none applied before) as one
        columns window, as a run of local transactions is (``_flush_columns``: the same
        unit, with the entry's index for each); False, with nothing applied, when the row
        path must take them (not plain inserts, or ``apply_columns`` raised)."""
        window = insert_columns(fresh)
        if window is None:
            return False
        return self._apply_window(window, [i for t in fresh for i in t.indexes],
                                  [t.gtid for t in fresh])

    def _reject(self, segments: Sequence[tuple[int, transaction_pb2.Transaction]],
                error: BaseException) -> None:
        for index, segment in segments:
            self._dead_letter_segment(index, segment, error)
        self._finish([i for i, _ in segments])

    def _dead_letter_segment(self, index: int, segment: transaction_pb2.Transaction,
                             error: BaseException) -> None:
        """Record ``segment`` (log entry ``index``) in the dead-letter log and tell the hook;
        the caller decides when its entry counts as done."""
        letter = self.dead_letters.add(segment, error, attempts=0, log_index=index)
        self.metrics.add(dead_letters=1)
        if self._on_dead_letter is not None:
            self._on_dead_letter(self.applier.name, letter, segment, error)

    def _flush(self) -> None:
        if not self._window:
            return
        pending, self._window = self._window, []
        size = self.config.window
        if not self._columns or any(t_ops is not None for _, t_ops in pending):
            # One configured window, or a replicated entry's transactions (operations built:
            # one window, as they were admitted).
            self._flush_rows(pending)
            return
        # A held read batch: tried whole as one columns window, then each run of insert-only
        # transactions; a run it does not take (a row inserted twice, a malformed value...) is
        # tried again in configured windows, and what those do not take goes to the row path.
        if self._flush_columns(pending):
            return
        whole = len(pending)  # a part as long as the batch is the batch: tried already
        for plain, run in _runs(pending):
            if plain and size < len(run) < whole and self._flush_columns(run):
                continue
            for start in range(0, len(run), size):
                chunk = run[start:start + size]
                if not (plain and len(chunk) < whole and self._flush_columns(chunk)):
                    self._flush_rows(chunk)

    def _flush_rows(self, pending: list[tuple[AssembledTransaction, list[RowOp] | None]]
                    ) -> None:
        """The row path for one window (module docstring, steps 2-4)."""
        window: list[tuple[AssembledTransaction, list[RowOp]]] = []
        for done, t_ops in pending:
            if t_ops is None:
                try:
                    t_ops = done.ops()
                except MalformedTransactionError as exc:
                    self._reject(list(zip(done.indexes, done.segments, strict=True)), exc)
                    continue
            window.append((done, t_ops))
        if not window:
            return
        ops = [op for _, t_ops in window for op in t_ops]
        # Up to a resumed backfill's ``replay_until`` some rows already hold later changes
        # than the window's first (read from a newer snapshot): an insert-delete pair elided
        # to nothing would leave such a row behind; a DELETE removes it (docs/appliers.md,
        # "Backfilling a new applier").
        elide = self.config.elide_insert_delete and window[0][0].indexes[0] > self._no_elide
        reduced = _reduce_ops(ops, elide_insert_delete=elide) if self.config.reduce else ops
        self.metrics.add(transactions=len(window), ops_in=len(ops), ops_out=len(reduced))
        barrier = any(op.is_barrier for op in reduced)
        rows = {op.row_id for op in reduced if not op.is_barrier}
        assert self._tracker is not None
        with self._lock:
            unit = self._tracker.start_unit(
                [i for t, _ in window for i in t.indexes], [t.gtid for t, _ in window], rows,
                len(reduced), barrier=barrier)
        self._after_record()
        n = len(self._workers)
        parts: list[list[RowOp]] = [[] for _ in range(n)]
        for op in reduced:
            if op.is_barrier:
                self._send(parts, unit)
                parts = [[] for _ in range(n)]
                self._wait_drained()
                self._runner.run([op])
                self.metrics.add(barriers=1)
                self._ops_done([([op], unit)], queued=False)
            else:
                parts[partition_of(op, n)].append(op)
        self._send(parts, unit)

    def _flush_columns(self, pending: list[tuple[AssembledTransaction, list[RowOp] | None]]
                       ) -> bool:
        """Apply a window of plain inserts column by column (module docstring, step 4); False
        when the row path must take it: not such a window (or a replicated entry's, whose
        operations were built), or ``apply_columns`` raised (its transaction rolled back)."""
        if any(t_ops is not None for _, t_ops in pending):
            return False
        txns = [done for done, _ in pending]
        window = insert_columns(txns)
        if window is None:
            return False
        return self._apply_window(window, [i for t in txns for i in t.indexes],
                                  [t.gtid for t in txns])

    def _apply_whole_run(self, run: Sequence[CommittedEntry], gtids: list[Gtid | None],
                         bare: int) -> bool:
        """Apply ``run`` -- entries of whole transactions (each with a ``head``), none applied
        before, nothing of theirs held by the assembler, and ``bare`` entries holding no
        transaction (``gtids`` None) -- as one columns window straight from the transactions'
        bytes (``insert_columns_of_wires``), recorded as one unit with every index of the run;
        False, with nothing applied, when it is not such a window or ``apply_columns`` raised:
        the caller then admits the run entry by entry, as for any run (which tries the columns
        path again, then the row path).

        The bare entries ride along because the node's own entries (an epoch marker every
        ~100 ms, applier positions) fall in about one read batch of eight under load: with
        them the batch used to take the entry-by-entry path whole.

        The run is what admitting it entry by entry would hold and try first as one window (a
        run never shares a window with the entries before it in practice: a replicated entry
        between them flushes what is held, and each read batch's is flushed after it; if
        anything is held, it is applied first). It builds nothing per transaction: an
        ``AssembledTransaction`` and the window's bookkeeping per entry cost as much as
        reading its rows in C (docs/benchmarks.md, "Columns from the log's bytes")."""
        # An entry with a ``head`` has its ``wire`` and a transaction (a gtid): the casts say
        # what the run's contract guarantees (once per run, not per entry).
        if bare:
            wires = cast("list[bytes]", [e.wire for e in run if e.head is not None])
            present: list[Gtid] = [g for g in gtids if g is not None]
        else:
            wires = cast("list[bytes]", [e.wire for e in run])
            present = cast("list[Gtid]", gtids)
        window = insert_columns_of_wires(wires, present)
        if window is None:
            return False
        self._flush()  # what was held before the run goes first
        return self._apply_window(window, [e.index for e in run], present)

    def _apply_window(self, window: InsertWindow, indexes: list[int], gtids: list[Gtid]
                      ) -> bool:
        """``apply_columns`` of ``window`` (the transactions of log ``indexes`` and ``gtids``)
        once every queued operation is done, recorded as one unit; False when it raised
        (nothing applied: its store transaction rolled back)."""
        self._wait_drained()  # earlier operations of these rows first
        try:
            # ``capabilities.columns`` promised the method (checked before any window is made)
            cast(ColumnsApplier, self.applier).apply_columns(window.batches, window.gtids)
        except Exception:
            return False
        tracker = self._tracker
        assert tracker is not None
        with self._lock:
            unit = tracker.start_unit(indexes, gtids, (), window.rows)
            tracker.op_done(unit, window.rows)
        self.metrics.add(transactions=len(gtids), ops_in=window.rows, ops_out=window.rows,
                         applied_ops=window.rows, batches=1, column_windows=1)
        self._after_record()
        return True

    def _send(self, parts: list[list[RowOp]], unit: Unit) -> None:
        """Queue each partition's operations of ``unit`` (in order) on its worker."""
        for worker, ops in zip(self._workers, parts, strict=True):
            if ops:
                with self._lock:
                    self._queued += len(ops)
                worker.put((ops, unit), self._stop)

    # -- completion ----------------------------------------------------------------------------

    def _ops_done(self, batch: list[tuple[list[RowOp], Unit]], *, queued: bool = True) -> None:
        tracker = self._tracker
        assert tracker is not None
        with self._drained:
            for ops, unit in batch:
                tracker.op_done(unit, len(ops))
                if queued:
                    self._queued -= len(ops)
            self._drained.notify_all()
        self._after_record()

    def _finish(self, indexes: Sequence[int]) -> None:
        assert self._tracker is not None
        with self._lock:
            self._tracker.finish(indexes)
        self._after_record()

    def _after_record(self) -> None:
        if self.applier.capabilities.idempotent:
            return
        assert self._tracker is not None
        if self._tracker.units_recorded != self._saved_units:
            self._save()

    def _wait_drained(self) -> None:
        with self._drained:
            while self._queued and not self._stop.is_set():
                self._drained.wait(0.1)
        if self._stop.is_set():
            raise Stopped

    def _fail(self, exc: BaseException) -> None:
        self._failure = exc
        self.stop()

    def _dead_letter_op(self, op: RowOp, error: BaseException, attempts: int) -> None:
        letter = self.dead_letters.add(op, error, attempts=attempts)
        if self._on_dead_letter is not None:
            self._on_dead_letter(self.applier.name, letter, op, error)

    # -- positions and metrics -----------------------------------------------------------------

    def _save(self) -> None:
        tracker = self._tracker
        assert tracker is not None
        with self._lock:
            self._snapshot_seq += 1
            seq, position = self._snapshot_seq, tracker.position()
            self._saved_units = tracker.units_recorded
        with self._save_lock:
            if seq > self._saved_seq:
                # the target's record first, so the file is never ahead of it
                if not hold(self.applier, position):
                    self._last_save = time.monotonic()  # busy target: next interval
                    return
                if not self._save_position(position):
                    return  # stopping while the disk is full: the older position stands
                self._saved_seq = seq
                self._last_save = time.monotonic()
                if self._on_position_saved is not None:
                    self._on_position_saved(position)

    def _save_position(self, position: ApplierPosition) -> bool:
        """Save ``position``; while its disk is full, wait with backoff (the applier cannot
        record progress, so it does not make any: Status shows ``out of space: <file>``),
        as for a full store. False when ``stop()`` ends the wait; other failures raise."""
        attempt = 0
        while True:
            try:
                self.positions.save(position)
            except PositionStoreError as exc:
                if out_of_space(exc) is None:
                    raise
                attempt += 1
                if attempt == 1:
                    log.warning("applier %s: cannot save its position, retrying until space "
                                "returns: %s", self.applier.name, exc)
                self.metrics.set_unavailable(unavailable_text(exc))
                if self._stop.wait(self.config.retry.delay(attempt)):
                    return False
                continue
            if attempt:
                self.metrics.set_unavailable("")
                log.warning("applier %s: its position is saved again", self.applier.name)
            return True

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._last_save < self.config.save_interval:
            return
        self._save()
        self._update_lag()
        if self._publish is not None:
            self._publish(self.applier.name, self.metrics.snapshot())
        with self._lock:
            assert self._tracker is not None
            self._tracker.forget_recorded_rows()

    def _update_lag(self) -> None:
        assert self._tracker is not None
        last = self.source.last_index()
        with self._lock:
            watermark = self._tracker.watermark
            oldest = self._tracker.oldest_pending_commit_ts()
            queued = self._queued
        lag_s = 0.0
        if watermark < last and oldest is None:  # not read yet: ask the source
            oldest = probe_commit_ns(self.source, watermark + 1)
        if watermark < last and oldest:
            lag_s = max(0.0, time.time() - oldest / 1e9)
        self.metrics.set(lag_entries=max(0, last - watermark), lag_seconds=lag_s,
                         watermark=watermark, queued_ops=queued)

    def _shutdown(self) -> None:
        for w in self._workers:
            if w.is_alive():
                with contextlib.suppress(Stopped):
                    w.put(STOP, self._stop)
        for w in self._workers:
            w.join()
        self._save()
        self._update_lag()
        if self._publish is not None:
            self._publish(self.applier.name, self.metrics.snapshot())
