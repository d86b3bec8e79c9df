"""``SnapshotTaker``: the node's own snapshots, taken off the Raft loop.

A snapshot of a store of some tens of MB took long enough to depose a leader when its tables were
packed into an archive file (docs/benchmarks.md, "A node's own snapshot is its export's directory of
links"); now (flush the LSM store, link its tables, checksum those it opened from disk, move the
directory) it is mostly the flush, which can still wait behind a busy compaction. The Raft loop must
not wait for that: a leader that stops ticking and heartbeating for a second is deposed by
check-quorum. So the driver only *schedules* snapshots; the work runs in a job on the taker's own
thread (not the driver's I/O thread, which must stay free for the WAL fsyncs of every Ready) while
the loop keeps ticking, persisting, sending and applying::

    job:  export (snapshot thread): flush the store, link its tables -> (index i, directory)
          describe (event loop):    term = storage.term(i), conf = ConfHistory.at(i)
          record (snapshot thread): move the directory into the snapshot files (its files
                                    are links: nothing copied), switch CURRENT
    then, in the Raft loop between Ready cycles: compact the log (on the I/O thread)

Contracts:

- **Consistency.** The archive is the store's state at exactly index ``i`` although applies
  continue (``gateway.core.lsm.export.export_snapshot`` states why), and ``i`` is at least
  the applied index when the job started. The term is the term of entry ``i``: ``i`` is
  committed, so its term never changes; it is read on the event-loop thread, from the
  storage's cache or the WAL, both of which allow reads concurrent with the I/O thread's one
  writer. If entry ``i`` is gone from the log anyway (only a received snapshot can do that,
  and installing one aborts the job first) the job is dropped. The configuration is the one
  in effect at ``i``, not the current one: the driver records every configuration change in
  a :class:`ConfHistory` when it applies it -- before the store write carrying its index, so
  any index the export can return is covered -- and the job looks ``i`` up there.
- **One job at a time.** A request (``request``: ``snapshot_now``, the admin ``Snapshot``
  RPC, the snapshot forced by a configuration change) names the applied index it must cover.
  It is answered by the first snapshot recorded at that index or later: the running job if
  its result covers it (joining it), otherwise a new job started as soon as the running one
  ends. A request whose index the newest snapshot already covers is answered at once with
  that snapshot's index. A failed job fails the requests waiting at that moment.
- **Exclusion.** ``abort`` waits for the running job's thread to finish its current step and
  drops the job's result (an export in progress cannot be interrupted; the job stops before
  its next step). The driver calls it before it persists a received snapshot (installing
  replaces the store directory and the snapshot files) and when it stops. A running job is
  never cancelled as an asyncio task: that would leave its thread running unobserved.
- **When.** Besides requests, a snapshot is due once ``every`` entries were applied since the
  newest one *and* the log has grown, since that one was started, by at least
  ``log_percent`` % of its archive's size (0: by entries alone). Snapshots used to copy the
  whole store, so taken every ``every`` entries alone their cost grew with the store (system
  time on every row of every node in ``bench_threads.py --cell go-stream``);
  weighed against the log, at most ~2 bytes copied per byte of log at 100 %. They copy
  nothing now, but each still forces a flush of a memtable that is not full (smaller
  level-0 tables, more compaction), which the weighing keeps rare, at the price of a log on
  disk about as large as the store before it is compacted. The log bytes are those appended
  since the storage was opened (a restart waits for the same growth again).
- **Log compaction** (``step``) happens in the Raft loop between Ready cycles, on the driver's
  I/O thread, like every other log write: the core never reads the log while it changes.

Everything except the job's thread steps runs on the event-loop thread.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.storage.storage import RaftLogStorage
from gateway.raft import CompactedError, ConfState, SnapshotMetadata, UnavailableError

__all__ = ["ConfHistory", "SnapshotTaker"]

log = logging.getLogger("gateway.node.storage.snapshot_files")


class ConfHistory:
    """The cluster configurations the applied log went through, by the index of the entry
    that made each one (the newest snapshot's configuration at its index first).

    ``at(i)`` is the configuration in effect once entry ``i`` is applied, for any ``i`` at or
    after the first recorded index."""

    def __init__(self, index: int, conf: ConfState) -> None:
        self._indexes = [index]
        self._confs = [conf]

    def record(self, index: int, conf: ConfState) -> None:
        """Configuration ``conf`` took effect with entry ``index`` (increasing indexes)."""
        if index < self._indexes[-1]:
            raise ValueError(f"configuration at {index} recorded after {self._indexes[-1]}")
        self._indexes.append(index)
        self._confs.append(conf)

    def at(self, index: int) -> ConfState:
        k = bisect.bisect_right(self._indexes, index) - 1
        return self._confs[max(k, 0)]

    def forget_before(self, index: int) -> None:
        """Drop what no lookup at ``index`` or later needs."""
        k = bisect.bisect_right(self._indexes, index) - 1
        if k > 0:
            del self._indexes[:k]
            del self._confs[:k]

    def reset(self, index: int, conf: ConfState) -> None:
        """Start over from a snapshot installed at ``index`` with configuration ``conf``."""
        self._indexes = [index]
        self._confs = [conf]


@dataclass(slots=True)
class _Job:
    start_applied: int
    start_log_bytes: int  # the storage's appended_bytes when the job started
    task: asyncio.Task[int | None] | None = None
    aborted: bool = False
    size: int = 0  # bytes of the recorded archive


class SnapshotTaker:
    """Takes this node's snapshots in the background; see the module docstring.

    ``wake()`` is called when a job ends (the driver then calls :meth:`step`);
    ``compact_floor()`` bounds log compaction (the slowest applier's durable position);
    a snapshot is due every ``every`` applied entries.
    """

    def __init__(self, node_id: int, storage: RaftLogStorage, sm: StoreStateMachine,
                 io: ThreadPoolExecutor, *, every: int, wake: Callable[[], None],
                 compact_floor: Callable[[], int], log_percent: int = 100) -> None:
        self._storage = storage
        self._sm = sm
        self._io = io
        self._every = every
        self._log_percent = log_percent
        # The newest snapshot's archive size, and the log bytes appended when it was started.
        self._last_size = storage.snapshots.size()
        self._log_at_last = storage.appended_bytes
        self._wake = wake
        self._compact_floor = compact_floor
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"raft-snap-{node_id}")
        meta = storage.snapshots.metadata
        self.confs = ConfHistory(meta.index, meta.conf_state)
        self._job: _Job | None = None
        self._requests: list[tuple[int, asyncio.Future[int] | None]] = []
        self._failed_at = 0  # automatic snapshots wait for ``every`` entries after a failure

    @property
    def last_index(self) -> int:
        """Index of the newest snapshot (taken or installed)."""
        return self._storage.snapshots.metadata.index

    @property
    def running(self) -> bool:
        return self._job is not None

    # -- inputs (event-loop thread) -------------------------------------------------------------

    def request(self, index: int, fut: asyncio.Future[int] | None = None) -> None:
        """Ask for a snapshot covering applied index ``index``; ``fut`` (if any) gets the index
        of the snapshot that answers it (see the module docstring)."""
        self._requests.append((index, fut))

    def conf_applied(self, index: int, conf: ConfState) -> None:
        """The entry at ``index`` changed the configuration to ``conf``: record it, and ask
        for a snapshot covering it (a node added now refuses older snapshots)."""
        self.confs.record(index, conf)
        self.request(index)

    def installed(self, meta: SnapshotMetadata) -> None:
        """A received snapshot ``meta`` was installed and the store restored from it. A
        snapshot of this node's own is requested for the next applied entry: the received
        archive is a second copy of the whole store on disk, which a snapshot of links to
        the store's tables replaces (and removes) as soon as there is an index past it."""
        self.confs.reset(meta.index, meta.conf_state)
        self._last_size = self._storage.snapshots.size()
        self._log_at_last = self._storage.appended_bytes
        self.request(meta.index + 1)

    # -- driving (the Raft loop, between Ready cycles) -------------------------------------------

    async def step(self, applied: int) -> None:
        """Finish a job that ended (answer requests, compact the log), then start one if a
        request or ``every`` applied entries call for it. ``applied``: the applied index."""
        job = self._job
        if job is not None:
            if job.task is None or not job.task.done():
                return
            self._job = None
            await self._finish(job)
        last = self.last_index
        self._answer(last)
        if applied <= last:
            return
        if self._requests or (applied - max(last, self._failed_at) >= self._every
                              and self._log_grown()):
            self._start(applied)

    def _log_grown(self) -> bool:
        """Whether the log grew enough since the newest snapshot for another (see "When")."""
        grown = self._storage.appended_bytes - self._log_at_last
        return grown * 100 >= self._last_size * self._log_percent

    async def abort(self) -> None:
        """Wait until no job runs; a running job's result is dropped (see the module
        docstring). Requests stay queued."""
        job = self._job
        if job is None:
            return
        job.aborted = True
        if job.task is not None:
            await asyncio.wait([job.task])
        if self._job is job:
            self._job = None
        if job.task is not None and not job.task.cancelled() and job.task.exception():
            log.info("aborted snapshot failed: %s", job.task.exception())

    async def close(self, error: BaseException) -> None:
        """Abort the running job, fail every request with ``error`` and stop the thread."""
        try:
            await self.abort()
        finally:
            reqs, self._requests = self._requests, []
            for _, fut in reqs:
                if fut is not None and not fut.done():
                    fut.set_exception(error)
            self._thread.shutdown(wait=True)

    # -- the job ----------------------------------------------------------------------------------

    def _start(self, applied: int) -> None:
        job = _Job(applied, self._storage.appended_bytes)
        job.task = asyncio.get_running_loop().create_task(self._take(job), name="raft-snapshot")
        job.task.add_done_callback(lambda _: self._wake())
        self._job = job

    async def _take(self, job: _Job) -> int | None:
        loop = asyncio.get_running_loop()
        index, directory = await loop.run_in_executor(self._thread, self._sm.export_dir)
        try:
            if job.aborted or index <= self.last_index:
                return None
            try:
                term = self._storage.term(index)
            except (CompactedError, UnavailableError) as exc:
                log.warning("snapshot at index %d dropped: its entry is gone (%s)", index, exc)
                return None
            meta = SnapshotMetadata(self.confs.at(index), index, term)
            if job.aborted:
                return None
            # The export directory itself becomes the snapshot (moved, not copied: its tables
            # are links); the archive a follower needs is built from it when it is sent.
            size = await loop.run_in_executor(self._thread, self._storage.record_snapshot,
                                              meta, directory)
            if size is None:
                return None
            job.size = size
            return index
        finally:
            await loop.run_in_executor(self._thread, shutil.rmtree, directory, True)

    async def _finish(self, job: _Job) -> None:
        assert job.task is not None
        try:
            index = job.task.result()
        except Exception as exc:
            log.error("snapshot failed: %s", exc, exc_info=exc)
            self._failed_at = self._sm.applied_index
            reqs, self._requests = self._requests, []
            for _, fut in reqs:
                if fut is not None and not fut.done():
                    fut.set_exception(exc)
            return
        if index is None:
            return
        self.confs.forget_before(index)
        self._last_size, self._log_at_last = job.size, job.start_log_bytes
        floor = min(index - self._every // 2, self._compact_floor())
        size = job.size
        if floor >= self._storage.first_index():
            await asyncio.get_running_loop().run_in_executor(self._io, self._storage.compact,
                                                             floor)
            self._sm.forget_outcomes(floor)  # what conflicts left of entries now gone
            log.info("snapshot at index %d (%d bytes, started at applied index %d); log "
                     "compacted up to %d", index, size, job.start_applied, floor)
        else:
            log.info("snapshot at index %d (%d bytes, started at applied index %d)", index,
                     size, job.start_applied)

    def _answer(self, last: int) -> None:
        """Answer the requests the newest snapshot (at ``last``) covers."""
        if not self._requests:
            return
        keep = []
        for need, fut in self._requests:
            if need <= last:
                if fut is not None and not fut.done():
                    fut.set_result(last)
            elif fut is None or not fut.done():
                keep.append((need, fut))
        self._requests = keep
