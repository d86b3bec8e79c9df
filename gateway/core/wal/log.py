"""`SegmentedWal`: Raft log storage on segment files, with group commit and recovery.

Contracts (indexes are 1-based; the log holds ``[first_index(), last_index()]``, empty when
``last_index() == first_index() - 1``):

- ``append_batch(entries, hard_state)``: entries and hard state as one atomic batch (entry
  records + one commit marker in one write); after a crash all of it is recovered or none
  (``docs/formats/wal.md``, "Batches and commit markers"). ``append`` and ``save_hard_state``
  are batches too; ``reset`` replaces the log and hard state atomically.
- ``append(entries)``: entries must continue the log (``entries[0].index == last_index() + 1``,
  consecutive indexes, non-decreasing terms); Raft conflicts are resolved by the caller with
  ``truncate_suffix`` first. The entries are visible to readers when ``append`` returns and
  durable when the durable index reaches them (immediately under ``FsyncPolicy.ALWAYS``).
- Durability: ``durable_index()`` only grows, except that ``truncate_suffix(i)`` lowers it to
  ``i - 1``. ``on_durable(index)`` is called each time it grows, in increasing order, never
  concurrently with itself, from the thread that completed the fsync; it must be quick and
  must not call ``append``, ``sync``, ``truncate_suffix``, ``compact`` or ``close`` (hand the
  index to another thread or event loop instead).
- ``truncate_suffix(i)`` and ``compact(i)`` are durable when they return. ``compact(i)``
  follows etcd: entries ``<= i`` go, ``term(i)`` stays answerable.
- Readers (``term``, ``entries``, ``first_index``, ``last_index``) may run on any thread
  concurrently with one writer thread; they see only entries whose bytes were fully written.
- After any failed write, fsync or file operation the WAL is inoperable: every mutating call
  raises `WalFailedError` (an fsync error is not retryable: the kernel may have dropped the
  pages it could not write).

Locks, outermost first: ``_append_lock`` (one writer operation at a time), ``_sync_lock`` (one
fsync round or structural change at a time), ``_lock`` (in-memory state; held only briefly, never
across I/O except the small writes of segment creation). Appends write outside ``_lock`` and
publish the new offsets under it, so readers never wait for a write and an fsync in flight never
blocks the next append: that is what lets many appends share one fsync.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from gateway.core.fileio import FileSystem, OsFileSystem, ReadableFile, WritableFile
from gateway.core.records import SEPARATOR, decode_record
from gateway.core.wal.codec import (
    LogStart,
    Marker,
    PayloadError,
    WalEntry,
    WalHardState,
    decode_wal_entry,
)
from gateway.core.wal.errors import (
    WalClosedError,
    WalCompactedError,
    WalCorruptionError,
    WalError,
    WalFailedError,
    WalIndexError,
    WalUnavailableError,
)
from gateway.core.wal.meta import META_NAME, MetaFile
from gateway.core.wal.recovery import load_segment, segment_first_index
from gateway.core.wal.report import RecoveryEvent, RecoveryEventKind, RecoveryReport
from gateway.core.wal.segment import MAX_SEGMENT_OFFSET, LogEntry, Segment

__all__ = ["EntryLike", "FsyncPolicy", "SegmentedWal", "WalOptions"]

#: Largest entry payload accepted (offsets inside a segment are uint32).
MAX_ENTRY_BYTES = 1 << 30
_PUNCH_ALIGN = 4096


class FsyncPolicy(Enum):
    """When appended entries are fsynced."""

    ALWAYS = "always"
    """``append`` returns after its entries are durable. Concurrent appenders share fsyncs."""
    BATCH = "batch"
    """A background thread fsyncs as soon as there is unsynced data; every append made while
    an fsync is in flight is covered by the next one (group commit)."""
    INTERVAL = "interval"
    """A background thread fsyncs every ``fsync_interval`` seconds if there is unsynced data."""
    NEVER = "never"
    """Only ``sync()`` and ``close()`` fsync (and sealing a full segment)."""


@dataclass(frozen=True)
class WalOptions:
    """Tuning of a `SegmentedWal`."""

    max_segment_bytes: int = 64 << 20
    """A segment is sealed and a new one started when the next append would pass this size
    (a segment always takes at least one entry). At most 2 GiB."""
    fsync: FsyncPolicy = FsyncPolicy.BATCH
    fsync_interval: float = 0.05
    """Seconds between fsyncs under ``FsyncPolicy.INTERVAL``."""
    batch_delay: float = 0.0
    """Seconds the ``BATCH`` syncer waits after waking, to gather more appends per fsync."""
    punch_holes: bool = True
    """Free the compacted head of the first segment with ``punch_hole`` (where supported)."""
    meta_rewrite_bytes: int = 64 << 10
    """Size at which the meta file is rewritten with only its latest records."""
    drop_cache_bytes: int = 1 << 20
    """After an fsync, give the OS page cache's copy of the active segment's synced bytes
    back once at least this many have gathered, and all of a segment when it is sealed
    (`WritableFile.drop_cache`); 0 keeps them cached (the OS default). A log is written once
    and read rarely: a node serves recent entries from its in-memory tail
    (``gateway.node.storage.storage``), so only a follower catching up from far behind, a subscriber
    far behind or a restart read segments back, from disk. Dropped pages go straight back to
    the next writes instead of growing the page cache by the whole log
    (docs/formats/wal.md, "Page cache")."""


#: What ``append`` accepts: `WalEntry` or ``gateway.raft``'s entry type (``Segment`` writes
#: them, so the Protocol lives there).
EntryLike = LogEntry


class HardStateLike(Protocol):
    """What ``append_batch``, ``save_hard_state`` and ``reset`` read of a hard state:
    ``gateway.raft``'s ``HardState`` or a `WalHardState`."""

    @property
    def term(self) -> int: ...
    @property
    def vote(self) -> int: ...
    @property
    def commit(self) -> int: ...


class SegmentedWal:
    """The Raft log of one node, in the directory ``directory`` (created if missing).

    Opening recovers: see ``docs/formats/wal.md`` and `gateway.core.wal.recovery`. What
    recovery cut or noticed is in ``recovery_report`` (and was passed to
    ``on_recovery_event`` as it happened); damage it may not resolve raises
    `WalCorruptionError` naming the file and byte offset.
    """

    def __init__(
        self,
        directory: str,
        *,
        fs: FileSystem | None = None,
        options: WalOptions | None = None,
        on_durable: Callable[[int], None] | None = None,
        on_recovery_event: Callable[[RecoveryEvent], None] | None = None,
    ) -> None:
        self.directory = directory
        self._fs = fs if fs is not None else OsFileSystem()
        self._opts = options if options is not None else WalOptions()
        if not 1024 <= self._opts.max_segment_bytes <= 1 << 31:
            raise ValueError("max_segment_bytes must be between 1 KiB and 2 GiB")
        if self._opts.drop_cache_bytes < 0:
            raise ValueError("drop_cache_bytes must be 0 (keep cached) or more")
        self._on_durable = on_durable
        self._append_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._dirty: dict[int, WritableFile] = {}
        self._dir_dirty = False
        self._epoch = 0
        self._failed: BaseException | None = None
        self._closed = False
        self._stopping = False
        self.recovery_report = RecoveryReport()
        self._recover(on_recovery_event)
        self._syncer: threading.Thread | None = None
        if self._opts.fsync in (FsyncPolicy.BATCH, FsyncPolicy.INTERVAL):
            self._syncer = threading.Thread(
                target=self._run_syncer, name=f"wal-sync:{directory}", daemon=True
            )
            self._syncer.start()

    # ================================================================ recovery

    def _recover(self, on_event: Callable[[RecoveryEvent], None] | None) -> None:
        fs, directory = self._fs, self.directory
        report = self.recovery_report
        fs.makedirs(directory)
        meta_path = os.path.join(directory, META_NAME)
        if not fs.exists(meta_path):
            # The meta file is made (and made durable) by the first open, before any segment:
            # segments without it lost the log's start and hard state. A fresh meta file would
            # silently make them a log starting at index 1 (its compacted head then "damage").
            found = [n for n in fs.listdir(directory) if segment_first_index(n) is not None]
            if found:
                raise WalCorruptionError(
                    meta_path, 0, f"missing, but {len(found)} segments are here (from "
                    f"{found[0]}): the log's start and hard state are lost")
        self._meta = MetaFile(fs, directory, report, rewrite_bytes=self._opts.meta_rewrite_bytes)
        self._log_start = self._meta.log_start
        first = self._log_start.first_index
        names = sorted(
            (idx, name) for name in fs.listdir(directory)
            if (idx := segment_first_index(name)) is not None
        )
        kept: list[tuple[int, str]] = []
        removed = False
        for k, (idx, name) in enumerate(names):
            if k + 1 < len(names) and names[k + 1][0] <= first:
                path = os.path.join(directory, name)
                fs.remove(path)
                removed = True
                report.events.append(RecoveryEvent(
                    RecoveryEventKind.STALE_SEGMENT_REMOVED, path, 0, 0,
                    f"wholly below the first index {first}"))
            else:
                kept.append((idx, name))
        segments = [
            load_segment(fs, os.path.join(directory, name), idx, is_last=k == len(kept) - 1,
                         log_first=first, report=report)
            for k, (idx, name) in enumerate(kept)
        ]
        for seg in segments:
            if seg.base < first:
                seg.drop_head(min(first, seg.last_index + 1))
        newest_marker = segments[-1].last_marker if segments else None
        if segments and segments[-1].count == 0 and segments[-1].name_index < first and (
            newest_marker is None or newest_marker.seq <= self._meta.marker.seq
        ):  # (a segment holding the newest hard state stays, empty or not)
            stale = segments.pop()  # an interrupted compaction of the whole log
            if stale.writer is not None:
                stale.writer.close()
            fs.remove(stale.path)
            removed = True
            report.events.append(RecoveryEvent(
                RecoveryEventKind.STALE_SEGMENT_REMOVED, stale.path, 0, 0,
                f"no entries at or above the first index {first}"))
        if removed:
            fs.sync_dir(directory)
        self._segments = segments
        self._bases = [s.base for s in segments]
        self._cut_stale(report)  # before the join-up checks: stale entries may not join up
        segments = self._segments
        expected, prev_term = first, self._log_start.prev_term
        for k, seg in enumerate(segments):
            if seg.base != expected or (seg.count == 0 and k != len(segments) - 1):
                raise WalCorruptionError(
                    seg.path, seg.bounds[0],
                    f"segment holds entries from {seg.base} to {seg.last_index}; the log "
                    f"needs entry {expected} next (missing or damaged entries)")
            if seg.count and seg.terms[0] < prev_term:
                raise WalCorruptionError(
                    seg.path, seg.bounds[0],
                    f"entry {seg.base} has term {seg.terms[0]} below the previous {prev_term}")
            if seg.count:
                prev_term = seg.terms[-1]
            expected = seg.last_index + 1
        self._segments = segments
        self._bases = [s.base for s in segments]
        self._last = expected - 1
        self._finish_batches(report)
        # Data recovered from the page cache after a process crash may not be on disk yet.
        if segments and segments[-1].writer is not None:
            segments[-1].writer.sync()
        fs.sync_dir(directory)
        self._durable = self._last
        if on_event is not None:
            for event in report.events:
                on_event(event)

    def _cut_stale(self, report: RecoveryReport) -> None:
        """Cut entries a structural operation (truncation, reset) had committed to removing
        before the crash: after the meta file's ``log_end``, in a segment whose newest marker
        is not newer than the meta file's hard state (``docs/formats/wal.md``)."""
        meta = self._meta.marker
        floor = max(meta.log_end, self._log_start.first_index - 1)
        segs = self._segments
        # 1. An interrupted truncation or reset: entries after ``floor`` in a segment whose
        #    newest marker predates the meta record were to be removed.
        for k, seg in enumerate(segs):
            if seg.last_index <= floor:
                continue
            newest = seg.last_marker.seq if seg.last_marker is not None else 0
            if newest <= meta.seq:
                cut_at = max(floor + 1, seg.base)
                self._recovery_cut(k, cut_at, report, RecoveryEventKind.STALE_ENTRIES_CUT,
                                   f"entries from {cut_at} predate the meta file's hard state "
                                   f"(seq {meta.seq}, log end {meta.log_end}): an interrupted "
                                   "truncation or reset is finished")
                if seg.scan_markers is not None:
                    kept = [m for n, m in seg.scan_markers if n <= seg.count]
                    seg.last_marker = kept[-1] if kept else None
                else:
                    seg.last_marker = None
            break

    def _finish_batches(self, report: RecoveryReport) -> None:
        """Cut a torn batch (entries after the newest segment's last marker and after the
        meta file's ``log_end``) and pick the hard state with the highest ``seq``
        (``docs/formats/wal.md``, "Batches and commit markers")."""
        meta = self._meta.marker
        floor = max(meta.log_end, self._log_start.first_index - 1)
        segs = self._segments
        # 2. A torn batch in the newest segment: entries after its last marker (and after
        #    ``floor``, below which every entry was complete) were never acknowledged.
        if segs and not segs[-1].sealed and segs[-1].scan_markers is not None:
            seg = segs[-1]
            done = seg.scan_markers[-1][0] if seg.scan_markers else 0
            keep = max(done, min(seg.count, floor - seg.base + 1))
            if keep < seg.count:
                self._recovery_cut(len(segs) - 1, seg.base + keep, report,
                                   RecoveryEventKind.TORN_BATCH,
                                   f"entries {seg.base + keep}..{seg.last_index} have no commit "
                                   "marker (an interrupted batch)")
        # 3. The hard state: the highest seq among the meta file and the segments' markers.
        current = meta
        for seg in reversed(segs):
            if seg.last_marker is not None:
                if seg.last_marker.seq > current.seq:
                    current = seg.last_marker
                break
        self._marker = current
        for seg in segs:
            seg.scan_markers = None

    def _recovery_cut(self, k: int, index: int, report: RecoveryReport,
                      kind: RecoveryEventKind, detail: str) -> None:
        """During open: remove entries ``>= index`` (held by segment ``k``) durably, as
        ``truncate_suffix`` does, and report it."""
        fs = self._fs
        keep = self._segments[k]
        doomed = self._segments[k + 1 :]
        del self._segments[k + 1 :]
        del self._bases[k + 1 :]
        for seg in reversed(doomed):
            if seg.writer is not None:
                seg.writer.close()
            seg.forget_reader()
            fs.remove(seg.path)
            report.events.append(RecoveryEvent(kind, seg.path, 0, seg.file_size or 0,
                                               detail + "; segment removed"))
        if doomed:
            fs.sync_dir(self.directory)
        size = keep.file_size if keep.sealed else keep.end
        cut = keep.truncate_entries(index)
        if keep.writer is None:
            keep.writer = fs.open_writable(keep.path)
            size = keep.writer.size()
        report.events.append(RecoveryEvent(kind, keep.path, cut, max(0, size - cut), detail))
        keep.writer.truncate(cut)
        keep.writer.sync()
        self._last = index - 1

    # ================================================================ readers

    def first_index(self) -> int:
        """Index of the first entry in the log (``last_index() + 1`` when it is empty)."""
        return self._log_start.first_index

    def last_index(self) -> int:
        """Index of the last entry appended (not necessarily durable)."""
        return self._last

    def bytes_from(self, index: int) -> int:
        """Bytes of the records of entries ``index`` to the last one in the segment files (0
        when none is held at or after ``index``; the whole log below its first index)."""
        with self._lock:
            segs = self._segments
            if not segs or index > self._last:
                return 0
            k = max(self._position_of(max(index, segs[0].base)), 0)
            seg = segs[k]
            lo = max(index, seg.base)
            total = seg.end - seg.bounds[lo - seg.base] if lo <= seg.last_index else 0
            for later in segs[k + 1:]:
                total += later.end - later.bounds[0]
            return total

    def durable_index(self) -> int:
        """Highest index known to be on disk (see the module docstring)."""
        return self._durable

    def term(self, index: int) -> int:
        """Term of entry ``index``, for ``first_index() - 1 <= index <= last_index()``; the term
        of ``first_index() - 1`` is kept by compaction (0 for an empty log starting at 1).
        Raises `WalCompactedError` below that range and `WalUnavailableError` above it."""
        with self._lock:
            start = self._log_start
            if index == start.first_index - 1:
                return start.prev_term
            if index < start.first_index:
                raise WalCompactedError(f"term of {index}: compacted up to {start.first_index - 1}")
            if index > self._last:
                raise WalUnavailableError(f"term of {index}: last index is {self._last}")
            return self._segment_of(index).term(index)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[WalEntry]:
        """Entries ``[lo, hi)``; with ``max_bytes``, the longest prefix whose ``data`` fits in
        that many bytes, but never empty when ``lo < hi`` (as ``gateway.raft``'s
        ``limit_size``). Raises `WalCompactedError` if ``lo < first_index()``,
        `WalUnavailableError` if ``hi > last_index() + 1``, `WalCorruptionError` if a stored
        record no longer verifies."""
        for _attempt in range(8):
            plan, epoch = self._plan_read(lo, hi, max_bytes)
            try:
                out = self._read_plan(plan, max_bytes)
            except WalCorruptionError:
                if self._epoch == epoch:
                    raise
                continue  # truncated or compacted under us: plan again
            if self._epoch == epoch:
                return out
        with self._append_lock:  # a busy writer kept moving the log; read while it waits
            plan, _ = self._plan_read(lo, hi, max_bytes)
            return self._read_plan(plan, max_bytes)

    def hard_state(self) -> WalHardState:
        """The last saved hard state (zeros if none was saved)."""
        return self._marker.hard_state

    # ================================================================ writers

    def append(self, entries: Sequence[EntryLike]) -> int:
        """Append ``entries`` as one batch, closed by a marker carrying the current hard state
        (see `append_batch`); return the new last index."""
        if not entries:
            return self._last
        return self.append_batch(entries, None)

    def append_batch(self, entries: Sequence[EntryLike], hard_state: HardStateLike | None = None, *,
                     sync: bool | None = None) -> int:
        """Append ``entries`` (possibly none) and ``hard_state`` (any object with ``term``,
        ``vote``, ``commit``; ``None`` keeps the current one) as **one atomic batch**: the
        entries' records followed by one commit marker, in one write to the active segment.
        After a crash either the whole batch is recovered (entries and hard state) or none of
        it. Entries must continue the log (see the module docstring).

        ``sync``: ``True`` returns once the batch is durable (one fsync, shared with concurrent
        callers), ``False`` leaves it to later syncs, ``None`` follows the fsync policy. A
        batch never spans segments: when it does not fit in the active one, that segment is
        sealed first (a batch larger than ``max_segment_bytes`` gets a segment of its own).
        Returns the new last index."""
        with self._append_lock:
            self._check_usable()
            if entries:
                self._validate_append(entries)
            hs = hard_state if hard_state is not None else self._marker
            marker = Marker(hs.term, hs.vote, hs.commit, self._marker.seq + 1)
            est = 64 + sum(len(e.data) + 48 + len(e.data) // 16000 for e in entries)
            nxt = entries[0].index if entries else self._last + 1
            seg = self._writable_segment(nxt)
            if seg.count > 0 and seg.end + est > self._opts.max_segment_bytes and entries:
                self._rotate(nxt)
                seg = self._segments[-1]
            parts, lengths, mlen = seg.encode(entries, marker)
            size = sum(lengths) + mlen
            if seg.end + size > MAX_SEGMENT_OFFSET:
                raise WalIndexError(f"append: a batch of {size} bytes does not fit in a "
                                    "segment (offsets are uint32)")
            writer = seg.writer
            assert writer is not None
            with self._io():
                writer.write_parts(parts)
            with self._lock:
                seg.publish(entries, lengths, mlen, marker)
                self._marker = marker
                if entries:
                    self._last = entries[-1].index
                self._dirty[id(writer)] = writer
                self._cond.notify_all()
            last = self._last
        if sync or (sync is None and self._opts.fsync is FsyncPolicy.ALWAYS):
            self._sync_until(None)
        return last

    def sync(self) -> int:
        """Make everything appended so far durable (any policy); return the durable index."""
        return self._sync_until(None)

    def truncate_suffix(self, index: int) -> None:
        """Remove entries ``>= index`` (a Raft conflict), durably. No-op above the last index;
        `WalCompactedError` below the first index."""
        with self._append_lock:
            self._check_usable()
            if index > self._last:
                return
            if index < self._log_start.first_index:
                raise WalCompactedError(
                    f"truncate at {index}: compacted up to {self._log_start.first_index - 1}")
            # The commit point: every entry below ``index`` is complete and durable (synced
            # first, so a batch cut in the middle keeps its head) and the current hard state
            # is saved with a new seq. After it, recovery finishes the truncation.
            self._sync_until(None)
            marker = self._marker._replace(seq=self._marker.seq + 1, log_end=index - 1)
            with self._io():
                self._meta.save_state(marker)
            self._truncate_locked(index, marker)

    def _truncate_locked(self, index: int, marker: Marker) -> None:
        """The physical part of `truncate_suffix` (under ``_append_lock``)."""
        with self._sync_lock:
            with self._lock:
                self._marker = marker
                self._epoch += 1
                k = self._position_of(index)
                keep = self._segments[k]
                doomed = self._segments[k + 1 :]
                del self._segments[k + 1 :]
                del self._bases[k + 1 :]
                cut = keep.truncate_entries(index)
                keep.last_marker = marker
                self._last = index - 1
                self._durable = min(self._durable, index - 1)
                for seg in doomed:
                    if seg.writer is not None:
                        self._dirty.pop(id(seg.writer), None)
            with self._io():
                # newest first: a crash leaves a shorter log
                self._remove_segments(list(reversed(doomed)))
                if keep.writer is None:
                    keep.writer = self._fs.open_writable(keep.path)
                keep.writer.truncate(cut)
                keep.writer.sync()

    def compact(self, index: int) -> None:
        """Discard entries ``<= index`` durably; afterwards ``first_index() == index + 1`` and
        ``term(index)`` still answers. Whole segments are deleted; the freed head of the
        first remaining one is hole-punched where supported. No-op at or below
        ``first_index() - 1``; `WalUnavailableError` above ``last_index()``."""
        with self._append_lock:
            self._check_usable()
            if index < self._log_start.first_index:
                return
            if index > self._last:
                raise WalUnavailableError(f"compact {index}: last index is {self._last}")
            # Everything appended is made durable and the current hard state is saved with the
            # log start in one meta write: the hole punched below may zero markers.
            self._sync_until(None)
            start = LogStart(index + 1, self.term(index))
            marker = self._marker._replace(seq=self._marker.seq + 1, log_end=self._last)
            with self._io():
                self._meta.save_state(marker, start)
            with self._lock:
                self._marker = marker
            punch: tuple[str, int, int] | None = None
            with self._sync_lock:
                with self._lock:
                    self._epoch += 1
                    self._log_start = start
                    k = 0
                    while k < len(self._segments) and self._segments[k].last_index <= index:
                        k += 1
                    doomed = self._segments[:k]
                    del self._segments[:k]
                    del self._bases[:k]
                    for seg in doomed:
                        if seg.writer is not None:
                            self._dirty.pop(id(seg.writer), None)
                    if self._segments and self._segments[0].base <= index:
                        head = self._segments[0]
                        lo = -(-head.data_start // _PUNCH_ALIGN) * _PUNCH_ALIGN
                        hi = (head.bounds[index + 1 - head.base] - 2) // _PUNCH_ALIGN * _PUNCH_ALIGN
                        head.drop_head(index + 1)
                        self._bases[0] = head.base
                        if hi > lo:
                            punch = (head.path, lo, hi - lo)
                with self._io():
                    self._remove_segments(doomed)
                    if punch is not None and self._opts.punch_holes:
                        self._fs.punch_hole(*punch)

    def _remove_segments(self, doomed: Sequence[Segment]) -> None:
        """Close and delete ``doomed`` in the given order, then fsync the directory.

        Callers hold the I/O section (``self._io()``) and have already dropped the segments
        from the in-memory state.
        """
        for seg in doomed:
            if seg.writer is not None:
                seg.writer.close()
                seg.writer = None
            seg.forget_reader()
            self._fs.remove(seg.path)
        if doomed:
            self._fs.sync_dir(self.directory)

    def save_hard_state(self, hs: HardStateLike, *, sync: bool = True) -> None:
        """Save Raft's hard state (any object with ``term``, ``vote``, ``commit``) as a batch
        without entries (one marker). With ``sync`` (the default) it is durable when this
        returns, so messages that depend on it may be sent; ``sync=False`` suits
        commit-index-only updates."""
        self.append_batch((), hs, sync=sync)

    def reset(self, first_index: int, prev_term: int, hard_state: HardStateLike) -> None:
        """Replace the whole log by an empty one starting at ``first_index`` (the entry before
        it has term ``prev_term``: a snapshot's index and term) and save ``hard_state``,
        atomically and durably: one meta-file write (log start + hard state) is the commit
        point; the segments are deleted after it, and recovery finishes a reset interrupted
        in between (entries older than that hard state are cut)."""
        with self._append_lock:
            self._check_usable()
            hs = hard_state
            marker = Marker(hs.term, hs.vote, hs.commit, self._marker.seq + 1, first_index - 1)
            start = LogStart(first_index, prev_term)
            with self._sync_lock:
                with self._io():
                    self._meta.save_state(marker, start)
                with self._lock:
                    self._epoch += 1
                    doomed = self._segments[:]
                    self._segments.clear()
                    self._bases.clear()
                    self._dirty.clear()
                    self._dir_dirty = False
                    self._log_start = start
                    self._marker = marker
                    self._last = first_index - 1
                    self._durable = self._last
                with self._io():
                    for seg in reversed(doomed):  # newest first: a crash leaves a prefix
                        if seg.writer is not None:
                            seg.writer.close()
                            seg.writer = None
                        seg.forget_reader()
                        self._fs.remove(seg.path)
                    if doomed:
                        self._fs.sync_dir(self.directory)
        if self._on_durable is not None:
            self._on_durable(self._durable)

    def close(self) -> None:
        """Stop the syncer, make everything durable (unless the WAL failed) and release files.
        Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._stopping = True
            self._cond.notify_all()
        if self._syncer is not None:
            self._syncer.join()
        try:
            if self._failed is None:
                self._sync_until(None)
                self._meta.sync()
        finally:
            with self._lock:
                self._closed = True
            for seg in self._segments:
                if seg.writer is not None:
                    seg.writer.close()
                seg.forget_reader()
            self._meta.close()

    def __enter__(self) -> SegmentedWal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ================================================================ internals: state

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise WalFailedError("the WAL failed earlier and accepts no more calls") from (
                self._failed
            )
        if self._closed or self._stopping:
            raise WalClosedError("the WAL is closed")

    @contextmanager
    def _io(self) -> Iterator[None]:
        """Turn any I/O failure into `WalFailedError` and make the WAL inoperable."""
        try:
            yield
        except WalError:
            raise
        except Exception as exc:
            with self._lock:
                if self._failed is None:
                    self._failed = exc
                self._cond.notify_all()
            raise WalFailedError(f"{type(exc).__name__}: {exc}") from exc

    def _position_of(self, index: int) -> int:
        """Position in ``_segments`` of the segment holding ``index`` (held). Under ``_lock``."""
        segs = self._segments
        if segs[-1].base <= index:
            return len(segs) - 1
        return bisect.bisect_right(self._bases, index) - 1

    def _segment_of(self, index: int) -> Segment:
        return self._segments[self._position_of(index)]

    def _validate_append(self, entries: Sequence[EntryLike]) -> None:
        expected = self._last + 1
        if entries[0].index != expected:
            raise WalIndexError(
                f"append at {entries[0].index}: the log ends at {self._last}; entries must "
                f"continue it (truncate_suffix first on a conflict)")
        prev = self.term(self._last)
        for e in entries:
            if e.index != expected:
                raise WalIndexError(f"append: entry {e.index} where {expected} was expected")
            if e.term < prev:
                raise WalIndexError(f"append: entry {e.index} has term {e.term} below {prev}")
            if len(e.data) > MAX_ENTRY_BYTES:
                raise WalIndexError(f"append: entry {e.index} is larger than 1 GiB")
            prev = e.term
            expected += 1

    def _writable_segment(self, index: int) -> Segment:
        """The active segment, creating one starting at ``index`` if there is none."""
        if self._segments and self._segments[-1].writer is not None:
            return self._segments[-1]
        with self._sync_lock, self._io():
            seg = Segment.create(self._fs, self.directory, index)
            with self._lock:
                self._segments.append(seg)
                self._bases.append(seg.base)
                self._dir_dirty = True
                assert seg.writer is not None
                self._dirty[id(seg.writer)] = seg.writer
        return seg

    def _rotate(self, next_index: int) -> None:
        """Seal the active segment (index + footer, synced) and start one at ``next_index``."""
        with self._sync_lock, self._io():
            old = self._segments[-1]
            writer = old.writer
            assert writer is not None
            seal = old.seal_bytes()
            writer.write(seal)
            writer.sync()
            if self._opts.drop_cache_bytes:
                writer.drop_cache(whole=True)
            writer.close()
            with self._lock:
                self._dirty.pop(id(writer), None)
                old.writer = None
                old.sealed = True
                old.file_size = old.end + len(seal)
        self._writable_segment(next_index)

    # ================================================================ internals: durability

    def _sync_until(self, target: int | None) -> int:
        """Fsync until ``target`` (default: everything appended) is durable; return the
        durable index. Concurrent callers share fsyncs (group commit)."""
        with self._sync_lock:
            with self._lock:
                if self._failed is not None:
                    raise WalFailedError("the WAL failed earlier") from self._failed
                if target is None:
                    target = self._last
                # Covered already (by a sync another caller made: group commit)? A full sync
                # (target == last) still flushes a pending directory entry or dirty file.
                if self._durable >= target and (
                    target < self._last or not (self._dirty or self._dir_dirty)
                ):
                    return self._durable
                files = list(self._dirty.values())
                self._dirty.clear()
                dir_dirty, self._dir_dirty = self._dir_dirty, False
                upto = self._last
            drop = self._opts.drop_cache_bytes
            with self._io():
                for f in files:
                    f.sync()
                    if drop:
                        f.drop_cache(drop)
                if dir_dirty:
                    self._fs.sync_dir(self.directory)
            with self._lock:
                advanced = upto > self._durable
                if advanced:
                    self._durable = upto
                    self._cond.notify_all()
            if advanced and self._on_durable is not None:
                self._on_durable(upto)
            return self._durable

    def _run_syncer(self) -> None:
        interval = self._opts.fsync is FsyncPolicy.INTERVAL
        while True:
            with self._lock:
                if interval:
                    self._cond.wait(self._opts.fsync_interval)
                while not self._stopping and self._failed is None and (
                    self._last <= self._durable
                ):
                    self._cond.wait(self._opts.fsync_interval if interval else None)
                if self._stopping or self._failed is not None:
                    return
            if self._opts.batch_delay and not interval:
                threading.Event().wait(self._opts.batch_delay)
            try:
                self._sync_until(None)
            except WalError:
                return

    # ================================================================ internals: reading

    def _plan_read(
        self, lo: int, hi: int, max_bytes: int | None
    ) -> tuple[list[tuple[Segment, ReadableFile, int, int, list[int]]], int]:
        with self._lock:
            first = self._log_start.first_index
            if lo < first:
                raise WalCompactedError(f"entries [{lo}, {hi}): compacted up to {first - 1}")
            if hi > self._last + 1:
                raise WalUnavailableError(f"entries [{lo}, {hi}): last index is {self._last}")
            if lo > hi:
                raise WalIndexError(f"entries [{lo}, {hi}): empty range reversed")
            plan = []
            budget = max_bytes
            idx = lo
            while idx < hi:
                seg = self._segment_of(idx)
                stop = min(hi, seg.last_index + 1)
                if budget is not None:
                    # Cut early on a lower bound of each entry's data size; the exact cut is
                    # made after decoding.
                    k = idx
                    while k < stop:
                        size = seg.bounds[k + 1 - seg.base] - seg.bounds[k - seg.base]
                        budget -= max(0, size - 128 - size // 16000)  # 128: + a marker
                        k += 1
                        if budget < 0:
                            break
                    stop = k
                bounds = list(seg.bounds[idx - seg.base : stop - seg.base + 1])
                plan.append((seg, seg.reader(), idx, stop, bounds))
                idx = stop
                if budget is not None and budget < 0:
                    break
            return plan, self._epoch

    def _read_plan(
        self, plan: list[tuple[Segment, ReadableFile, int, int, list[int]]], max_bytes: int | None
    ) -> list[WalEntry]:
        out: list[WalEntry] = []
        total = 0
        for seg, reader, lo, hi, bounds in plan:
            start = bounds[0]
            buf = reader.pread(start, bounds[-1] - 2 - start)
            view = memoryview(buf)
            gen = seg.generation
            for k in range(hi - lo):
                a, b = bounds[k] - start, bounds[k + 1] - 2 - start
                # The span may end with commit markers: the entry ends at the first separator.
                end = buf.find(SEPARATOR, a, b)
                if end >= 0:
                    b = end
                decoded = decode_record(view[a:b])
                try:
                    if decoded is None or decoded[0] != gen:
                        raise PayloadError("record does not verify")
                    entry = decode_wal_entry(decoded[1])
                except PayloadError as exc:
                    raise WalCorruptionError(seg.path, bounds[k],
                                             f"entry {lo + k}: {exc.reason}") from None
                if entry.index != lo + k:
                    raise WalCorruptionError(seg.path, bounds[k],
                                             f"entry {entry.index} where {lo + k} was expected")
                total += len(entry.data)
                if max_bytes is not None and out and total > max_bytes:
                    return out
                out.append(entry)
        return out
