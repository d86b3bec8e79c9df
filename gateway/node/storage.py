"""``RaftLogStorage``: the ``gateway.raft`` ``Storage`` of a node, over the segmented WAL.

Layout under ``DATA/raft``: ``wal/`` (``SegmentedWal``: entries, hard state, log start) and
``snapshots/`` (:class:`~gateway.node.snapshots.SnapshotFiles`). Raft indexes are WAL indexes.

Contracts:

- Reads (``entries``, ``term``, ``first_index``, ``last_index``, ``snapshot``) may run on any
  thread; writes (``save_ready``, ``install_snapshot``, ``compact``) on one thread at a time,
  and the Raft core must not read while a write runs (the driver guarantees it: it steps the
  core only between Ready cycles).
- WAL errors are mapped: ``WalCompactedError`` -> ``CompactedError``, ``WalUnavailableError``
  -> ``UnavailableError``; anything else propagates and makes the node inoperable.
- ``save_ready`` writes in the order the Raft docs require (hard state, snapshot, entries) and,
  when ``must_sync``, returns only once they are durable: one WAL fsync per Ready (group
  commit: every proposal gathered into that Ready shares it).
- A tail of recent entries is kept in memory (``cache_entries``), so replication and apply
  rarely read the WAL files.
"""

from __future__ import annotations

import os
import threading

from gateway.core.fileio import OsFileSystem
from gateway.core.wal import (
    FsyncPolicy,
    LogStart,
    SegmentedWal,
    WalCompactedError,
    WalOptions,
    WalUnavailableError,
)
from gateway.core.wal import (
    HardState as WalHardState,
)
from gateway.core.wal.meta import MetaFile
from gateway.core.wal.recovery import segment_first_index
from gateway.core.wal.report import RecoveryReport
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

from .snapshots import SnapshotFiles

__all__ = ["RaftLogStorage"]


class RaftLogStorage:
    """Raft log storage of one node in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str, *, fsync: bool = True, cache_entries: int = 65536) -> None:
        self.directory = directory
        self._wal_dir = os.path.join(directory, "wal")
        self._fsync = fsync
        self.snapshots = SnapshotFiles(os.path.join(directory, "snapshots"))
        self._cache_limit = cache_entries
        self._lock = threading.Lock()
        self._cache: list[Entry] = []
        self._cache_start = 0  # index of _cache[0]
        self._wal = self._open_wal()

    def _open_wal(self) -> SegmentedWal:
        # NEVER: the driver fsyncs once per Ready itself (group commit).
        return SegmentedWal(self._wal_dir, options=WalOptions(fsync=FsyncPolicy.NEVER))

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
        self.snapshots.save_metadata_only(meta)
        self._reset_wal(1, 1)
        self._wal.save_hard_state(WalHardState(1, 0, 1), sync=True)

    def _reset_wal(self, index: int, term: int) -> None:
        """Replace the whole log by an empty one starting after ``index`` (term ``term``)."""
        hs = self._wal.hard_state()
        self._wal.close()
        for name in os.listdir(self._wal_dir):
            if segment_first_index(name) is not None:
                os.remove(os.path.join(self._wal_dir, name))
        meta = MetaFile(OsFileSystem(), self._wal_dir, RecoveryReport())
        try:
            meta.save_log_start(LogStart(index + 1, term))
            meta.save_hard_state(hs, sync=True)
        finally:
            meta.close()
        self._wal = self._open_wal()
        with self._lock:
            self._cache = []
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
        return [Entry(e.term, e.index, EntryType(e.type), e.data) for e in got]

    def snapshot(self) -> Snapshot:
        return self.snapshots.load()

    # -- writes (driver side) -------------------------------------------------------------------

    @property
    def wal(self) -> SegmentedWal:
        return self._wal

    def save_ready(self, rd: Ready) -> None:
        """Persist ``rd`` (hard state, snapshot, entries); durable on return if ``must_sync``."""
        hs = rd.hard_state
        if hs is not None:
            prev = self._wal.hard_state()
            vote_changed = hs.term != prev.term or hs.vote != prev.vote
            self._wal.save_hard_state(WalHardState(hs.term, hs.vote, hs.commit),
                                      sync=vote_changed and self._fsync)
        if not rd.snapshot.is_empty():
            self.install_snapshot(rd.snapshot)
        if rd.entries:
            self._append(rd.entries)
        if rd.must_sync and self._fsync and rd.entries:
            self._wal.sync()

    def _append(self, ents: list[Entry]) -> None:
        first = ents[0].index
        if first <= self._wal.last_index():
            self._wal.truncate_suffix(first)
            with self._lock:
                k = first - self._cache_start
                if k < len(self._cache):
                    del self._cache[max(k, 0):]
                    if k < 0:
                        self._cache_start = first
        self._wal.append(ents)
        with self._lock:
            if not self._cache:
                self._cache_start = first
            if first == self._cache_start + len(self._cache):
                self._cache.extend(ents)
            else:
                self._cache = list(ents)
                self._cache_start = first
            extra = len(self._cache) - self._cache_limit
            if extra > 0:
                del self._cache[:extra]
                self._cache_start += extra

    def install_snapshot(self, snap: Snapshot) -> None:
        """Make ``snap`` the newest snapshot and discard the log it covers (a follower
        receiving InstallSnapshot): the WAL restarts after the snapshot's index."""
        self.snapshots.save(snap.metadata, snap.data)
        self._reset_wal(snap.metadata.index, snap.metadata.term)

    def record_snapshot(self, meta: SnapshotMetadata, data: bytes) -> None:
        """Save a snapshot this node made of its own state (the log is kept)."""
        self.snapshots.save(meta, data)

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
                del self._cache[:k]
                self._cache_start = index + 1

    def close(self) -> None:
        self._wal.close()
