"""``RaftLogStorage``: the ``gateway.raft`` ``Storage`` of a node, over the segmented WAL.

Layout under ``DATA/raft``: ``wal/`` (``SegmentedWal``: entries, hard state, log start) and
``snapshots/`` (:class:`~gateway.node.storage.snapshot_files.SnapshotFiles`). Raft indexes
are WAL indexes.

Contracts:

- Reads (``entries``, ``term``, ``first_index``, ``last_index``, ``snapshot``) may run on any
  thread; writes (``save_ready``, ``install_snapshot``, ``compact``) on one thread at a time,
  and the Raft core must not read while a write runs (the driver guarantees it: it steps the
  core only between Ready cycles).
- ``record_snapshot`` is the exception: it may run on its own thread while the writes above
  run and the core reads. It only writes the snapshot files and then switches the newest
  snapshot in one step (``SnapshotFiles``), which changes no answer of the log reads (the
  snapshot's index is an applied, hence stored, index with the same term) and which
  ``snapshot()`` sees whole or not at all. It is serialized with ``install_snapshot`` by a
  lock, and it never replaces a newer snapshot.
- WAL errors are mapped: ``WalCompactedError`` -> ``CompactedError``, ``WalUnavailableError``
  -> ``UnavailableError``; anything else propagates and makes the node inoperable.
- ``save_ready`` makes a Ready's snapshot, entries and hard state durable **together**
  (docs/raft.md): the entries and the hard state are one WAL batch (one write, closed by a
  commit marker; a crash keeps all of it or none), and when ``must_sync`` it returns only once
  the batch is durable: one write and one fsync per Ready (group commit: every proposal
  gathered into that Ready shares it). A conflicting suffix is truncated first (durably):
  a crash right after leaves a prefix of the old log with the old hard state, a state the node
  was in before (its commit index never covers the conflicting entries), and prefixes keep
  the apply-time configuration invariant. A snapshot is installed as described at
  ``install_snapshot``.
- Opening recovers the WAL (``SegmentedWal``); every recovery event (torn tail, torn batch,
  damaged seal, ...) is logged as a warning naming the file and byte offset. Damage recovery
  may not resolve raises ``WalCorruptionError`` (file and offset); a damaged snapshot
  ``CURRENT`` raises ``SnapshotMetadataError`` (file and offset).
- A stored entry that no longer verifies (a damaged sealed segment: recovery trusts a
  sealed segment's footer and reads its records only when they are needed) raises
  `LogDamagedError`, a ``CompactedError``: the Raft core, which sends a snapshot for a
  compacted entry, sends a lagging follower a snapshot instead of dying, and ``on_damage``
  (set by the node) is told the first index of the read so it can take a newer snapshot
  when the damage is past the newest one. Other readers (the change feed, the appliers'
  source) report it as data loss naming the file (relative to the data directory) and byte
  offset. Each damaged place is logged once as a warning.
- A tail of recent entries is kept in memory (at most ``cache_entries`` entries and
  ``cache_bytes`` bytes of entry data), so replication and apply rarely read the WAL files;
  older entries are read from the WAL.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import cast

from gateway.core.fileio import OsFileSystem
from gateway.core.undo_fs import UndoableFileSystem
from gateway.core.wal import (
    FsyncPolicy,
    RecoveryEvent,
    SegmentedWal,
    WalCompactedError,
    WalCorruptionError,
    WalHardState,
    WalOptions,
    WalUnavailableError,
)
from gateway.node.base.errors import DataLossError
from gateway.node.storage.snapshot_files import ArchiveReader, SnapshotFiles
from gateway.raft import (
    CompactedError,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Ready,
    Snapshot,
    SnapshotMetadata,
    UnavailableError,
)
from gateway.raft.types import limit_size

__all__ = ["BOOTSTRAP_INDEX", "LogDamagedError", "RaftLogStorage", "compacted_log"]

#: Every cluster's log starts with its bootstrap snapshot at index 1 (the initial membership;
#: no transactions), so a log starting at 2 lost nothing to compaction.
BOOTSTRAP_INDEX = 1


def compacted_log(first_index: int) -> bool:
    """Whether a log whose first entry is at ``first_index`` lost entries that may hold
    transactions to compaction (not just the bootstrap snapshot's index)."""
    return first_index > BOOTSTRAP_INDEX + 1


log = logging.getLogger("gateway.node.storage.storage")


class LogDamagedError(CompactedError, DataLossError):
    """A stored log entry no longer verifies; ``str()`` is one line naming the file
    (``file``, relative to the data directory), the byte ``offset`` and why.

    A ``CompactedError`` for the Raft core (which then sends a snapshot instead of the
    entries: the entry is as unavailable as a compacted one) and a ``DataLossError`` for the
    API, which answers it with DATA_LOSS. Readers that treat a compacted read as "retry later"
    must test for it first: it does not go away."""

    def __init__(self, file: str, offset: int, reason: str, lo: int) -> None:
        self.file = file
        self.offset = offset
        self.reason = reason
        #: The first index of the read that met the damage (the damaged entry is at or after).
        self.lo = lo
        super().__init__(f"{file}: byte {offset}: {reason} (the Raft log is damaged there)")


def _log_recovery_event(event: RecoveryEvent) -> None:
    """Every finding of WAL recovery (torn tail, torn batch, damaged seal, stale entries or
    files removed) is logged with its file and byte offset: nothing is cut silently."""
    log.warning("WAL recovery: %s", event)


class RaftLogStorage:
    """Raft log storage of one node in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str, *, fsync: bool = True, cache_entries: int = 65536,
                 cache_bytes: int = 64 << 20) -> None:
        self.directory = directory
        self._wal_dir = os.path.join(directory, "wal")
        self._fsync = fsync
        self.snapshots = SnapshotFiles(os.path.join(directory, "snapshots"))
        self._cache_limit = cache_entries
        self._cache_bytes_limit = cache_bytes
        self._cached_bytes = 0  # entry data bytes in _cache
        self._lock = threading.Lock()
        self._snap_lock = threading.Lock()  # record_snapshot vs install_snapshot
        self._cache: list[Entry] = []
        self._cache_start = 0  # index of _cache[0]
        #: Bytes of entry data appended since this storage was opened (what the snapshot
        #: taker weighs against the newest snapshot's size).
        self.appended_bytes = 0
        #: Reads of entries older than the in-memory tail (answered from the log files).
        self.file_reads = 0
        #: Called (on the reading thread) with the first index of a read that met a damaged
        #: entry (`LogDamagedError`); the node takes a snapshot past it.
        self.on_damage: Callable[[int], None] | None = None
        self._damage_logged: set[tuple[str, int]] = set()
        #: What opening the WAL changes (a torn tail cut, ...) is journaled until the node
        #: accepts it (``keep_recovery``) or refuses to start (``undo_recovery``).
        self._recovery_fs = UndoableFileSystem(OsFileSystem())
        try:
            self._wal = self._open_wal()
        except BaseException:
            self._recovery_fs.undo()  # damage found after a cut: leave the files as found
            raise
        start = self._wal.first_index() - 1
        if start > self.snapshots.metadata.index and not self.snapshots.commit_pending(start):
            self._wal.close()
            self._recovery_fs.undo()
            current = os.path.join(self.snapshots.directory, "CURRENT")
            newest = self.snapshots.metadata.index
            says = "says so" if os.path.exists(current) else "missing"
            raise RuntimeError(f"{self._wal_dir}: the log starts after index {start} but no "
                               f"snapshot at index {start} exists (newest: {newest}, "
                               f"{current} {says})")

    def _open_wal(self) -> SegmentedWal:
        # NEVER: the driver fsyncs once per Ready itself (group commit).
        return SegmentedWal(self._wal_dir, fs=self._recovery_fs,
                            options=WalOptions(fsync=FsyncPolicy.NEVER),
                            on_recovery_event=_log_recovery_event)

    # -- the start's changes ------------------------------------------------------------------

    def keep_recovery(self) -> None:
        """Accept what opening changed in the WAL (the node may start); must be called before
        this storage persists anything the node says to others (a vote, an acknowledged
        append): ``undo_recovery`` must never take such a write back."""
        self._recovery_fs.keep()

    def recovery_pending(self) -> bool:
        """Whether what opening changed may still be undone (``keep_recovery`` not called)."""
        return self._recovery_fs.journaling

    def undo_recovery(self) -> list[str]:
        """Put the WAL's files back as they were before this storage was opened (the node
        refused to start: docs/node.md, "Damage and recovery"); call after ``close``. Returns
        the files put back; nothing once ``keep_recovery`` was called."""
        return self._recovery_fs.undo()

    # -- bootstrap ----------------------------------------------------------------------------

    def is_empty(self) -> bool:
        """No snapshot, no entries and no hard state: a brand-new node."""
        hs = self._wal.hard_state()
        return (self.snapshots.metadata.index == 0 and self._wal.last_index() == 0
                and hs.term == 0 and hs.vote == 0)

    def bootstrap(self, voters: tuple[int, ...]) -> None:
        """Start a new cluster: a snapshot at index 1, term 1 holding ``voters`` and the empty
        store (every founding member bootstraps identically)."""
        meta = SnapshotMetadata(ConfState(voters=tuple(sorted(voters))), 1, 1)
        self.install_snapshot(Snapshot(meta, b"GWSNAP1\n"), WalHardState(1, 0, 1))

    def _reset_wal(self, index: int, term: int, hs: WalHardState) -> None:
        """Replace the whole log by an empty one starting after ``index`` (term ``term``) and
        save ``hs``, atomically (``SegmentedWal.reset``: one meta-file write is the commit
        point)."""
        self._wal.reset(index + 1, term, hs)
        with self._lock:
            self._cache = []
            self._cached_bytes = 0
            self._cache_start = index + 1

    # -- Storage protocol -----------------------------------------------------------------------

    def initial_state(self) -> tuple[HardState, ConfState]:
        hs = self._wal.hard_state()
        return HardState(hs.term, hs.vote, hs.commit), self.snapshots.metadata.conf_state

    def first_index(self) -> int:
        # The WAL is compacted only up to the newest snapshot, so entries after its first
        # index are all there (a follower behind the snapshot but not behind the WAL's start
        # is caught up from the log, not with a snapshot).
        return self._wal.first_index()

    def last_index(self) -> int:
        return max(self._wal.last_index(), self.snapshots.metadata.index)

    def log_bytes_from(self, index: int) -> int:
        """Bytes the log files hold for entries ``index`` and later (``SegmentedWal``)."""
        return self._wal.bytes_from(index)

    def term(self, i: int) -> int:
        meta = self.snapshots.metadata
        if i == meta.index:
            return meta.term
        with self._lock:
            k = i - self._cache_start
            if 0 <= k < len(self._cache):
                return self._cache[k].term
        try:
            return self._wal.term(i)
        except WalCompactedError as exc:
            raise CompactedError(str(exc)) from None
        except WalUnavailableError as exc:
            raise UnavailableError(str(exc)) from None

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        if lo < self.first_index():
            raise CompactedError(f"entries [{lo}, {hi}): compacted up to {self.first_index() - 1}")
        if hi > self.last_index() + 1:
            raise UnavailableError(f"entries [{lo}, {hi}): last index is {self.last_index()}")
        with self._lock:
            start = self._cache_start
            if self._cache and lo >= start:
                return limit_size(self._cache[lo - start : hi - start], max_size)
        try:
            got = self._wal.entries(lo, hi, max_size)
        except WalCompactedError as exc:
            raise CompactedError(str(exc)) from None
        except WalUnavailableError as exc:
            raise UnavailableError(str(exc)) from None
        except WalCorruptionError as exc:
            raise self._damaged(exc, lo) from None
        self.file_reads += 1
        return [Entry(e.term, e.index, EntryType(e.type), e.data) for e in got]

    def _damaged(self, exc: WalCorruptionError, lo: int) -> LogDamagedError:
        """The `LogDamagedError` of a read from ``lo`` that met ``exc``; logged once per
        damaged place, and reported to ``on_damage``."""
        data_dir = os.path.dirname(os.path.abspath(self.directory))
        err = LogDamagedError(os.path.relpath(exc.path, data_dir), exc.offset, exc.reason, lo)
        with self._lock:
            first = (exc.path, exc.offset) not in self._damage_logged
            self._damage_logged.add((exc.path, exc.offset))
        if first:
            log.warning("Raft log damaged: %s; a follower that needs these entries gets a "
                        "snapshot, subscribers and appliers DATA_LOSS", err)
        if self.on_damage is not None:
            self.on_damage(lo)
        return err

    def snapshot(self) -> Snapshot:
        return self.snapshots.load()

    # -- writes (driver side) -------------------------------------------------------------------

    @property
    def wal(self) -> SegmentedWal:
        return self._wal

    def save_ready(self, rd: Ready) -> None:
        """Persist ``rd``: snapshot, entries and hard state become durable together (see the
        module docstring); durable on return if ``rd.must_sync`` (and fsync is on)."""
        hs = rd.hard_state
        whs = WalHardState(hs.term, hs.vote, hs.commit) if hs is not None else None
        sync = rd.must_sync and self._fsync
        if not rd.snapshot.is_empty():
            self.install_snapshot(rd.snapshot, whs if not rd.entries else None)
            if not rd.entries:
                return
        if rd.entries:
            self._append(rd.entries, whs, sync)
        elif whs is not None:
            self._wal.append_batch((), whs, sync=sync)

    def _append(self, ents: list[Entry], hs: WalHardState | None, sync: bool) -> None:
        first = ents[0].index
        if first <= self._wal.last_index():
            self._wal.truncate_suffix(first)
            with self._lock:
                k = first - self._cache_start
                if k < len(self._cache):
                    self._cached_bytes -= sum(len(e.data) for e in self._cache[max(k, 0):])
                    del self._cache[max(k, 0):]
                    if k < 0:
                        self._cache_start = first
        self._wal.append_batch(ents, hs, sync=sync)
        size = sum(len(e.data) for e in ents)
        self.appended_bytes += size
        with self._lock:
            if not self._cache:
                self._cache_start = first
            if first == self._cache_start + len(self._cache):
                self._cache.extend(ents)
                self._cached_bytes += size
            else:
                self._cache = list(ents)
                self._cached_bytes = size
                self._cache_start = first
            drop = max(len(self._cache) - self._cache_limit, 0)
            over, fits = self._cached_bytes - self._cache_bytes_limit, 0
            while over > 0:  # the oldest entries until the rest fits (all if need be)
                over -= len(self._cache[fits].data)
                fits += 1
            if max(drop, fits):
                self._drop_cached(max(drop, fits))

    @property
    def cached_bytes(self) -> int:
        """Bytes of entry data in the in-memory tail (at most ``cache_bytes``)."""
        return self._cached_bytes

    def _drop_cached(self, n: int) -> None:
        """Forget the ``n`` oldest cached entries (under ``_lock``)."""
        self._cached_bytes -= sum(len(e.data) for e in self._cache[:n])
        del self._cache[:n]
        self._cache_start += n

    def install_snapshot(self, snap: Snapshot, hs: WalHardState | None = None) -> None:
        """Make ``snap`` the newest snapshot and discard the log (a follower receiving
        InstallSnapshot): the WAL restarts after the snapshot's index with hard state ``hs``
        (default: the current one).

        Atomic: (1) the archive and its metadata are staged (``N.snap``, ``N.pending``,
        synced); (2) ``SegmentedWal.reset`` saves the log start and the hard state in one
        meta-file write -- the commit point -- and deletes the segments; (3) ``CURRENT`` is
        switched to the snapshot. A crash before (2) leaves the old snapshot, log and hard
        state (the staged files are ignored and removed by the next snapshot); a crash after
        it is finished on open (the WAL's first index is past ``CURRENT``: the staged snapshot
        is committed), and a crash inside (2) is finished by the WAL's recovery."""
        with self._snap_lock:
            # (a received image: bytes, or the ``ArchiveReader`` of this storage's spool)
            self.snapshots.stage(snap.metadata, cast("bytes | ArchiveReader", snap.data))
            self._reset_wal(snap.metadata.index, snap.metadata.term,
                            hs if hs is not None else self._wal.hard_state())
            self.snapshots.commit(snap.metadata)

    def record_snapshot(self, meta: SnapshotMetadata, directory: str) -> int | None:
        """Save a snapshot this node made of its own state (the log is kept); any thread (see
        the module docstring). ``directory``: the store's export at ``meta.index`` (links to
        its tables and the manifest), moved into the snapshot files
        (``SnapshotFiles.save_dir``: no table is copied). Returns the size of the archive it
        stands for; None, and nothing saved (``directory`` left where it is), if the newest
        snapshot is already at ``meta.index`` or later (one was installed meanwhile)."""
        with self._snap_lock:
            if meta.index <= self.snapshots.metadata.index:
                return None
            return self.snapshots.save_dir(meta, directory)

    def compact(self, index: int) -> None:
        """Discard entries ``<= index`` (which must be covered by the newest snapshot or by
        the durable state of every consumer)."""
        index = min(index, self._wal.last_index())
        if index < self._wal.first_index():
            return
        self._wal.compact(index)
        with self._lock:
            k = index + 1 - self._cache_start
            if k > 0:
                self._drop_cached(k)  # all of them if k passes the tail

    def close(self) -> None:
        self._wal.close()
