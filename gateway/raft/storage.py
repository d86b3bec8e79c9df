"""The storage interface the core reads its durable log through, and an in-memory version.

The core never writes storage: the driver persists what ``Ready`` hands out (and, for
``MemoryStorage``, mirrors it with ``append``/``set_hard_state``/``apply_snapshot``). The real
segmented WAL lives elsewhere and implements the same protocol.
"""

from __future__ import annotations

from typing import Protocol

from .errors import CompactedError, SnapshotOutOfDateError, UnavailableError
from .types import (
    EMPTY_HARD_STATE,
    ConfState,
    Entry,
    HardState,
    Ready,
    Snapshot,
    SnapshotMetadata,
    limit_size,
)

#: ``max_size`` meaning "no limit".
NO_LIMIT = 1 << 62


class Storage(Protocol):
    """Read access to the durable Raft log.

    Indexes are 1-based; the log holds ``[first_index(), last_index()]``. Everything at or
    below ``first_index() - 1`` is covered by ``snapshot()``, whose term ``term()`` must still
    answer. Any method may raise :class:`~gateway.raft.errors.StorageError`; other exceptions
    make the node inoperable.
    """

    def initial_state(self) -> tuple[HardState, ConfState]:
        """The saved hard state and the configuration of the latest snapshot."""
        ...

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        """Entries in ``[lo, hi)``, cut to ``max_size`` payload bytes but never empty when the
        range is not. Raises ``CompactedError`` if ``lo < first_index()`` and
        ``UnavailableError`` if ``hi > last_index() + 1``. The caller must not mutate the list.
        """
        ...

    def term(self, i: int) -> int:
        """Term of entry ``i``; valid for ``first_index() - 1 <= i <= last_index()``."""
        ...

    def last_index(self) -> int: ...

    def first_index(self) -> int: ...

    def snapshot(self) -> Snapshot:
        """The most recent snapshot (may raise ``SnapshotTemporarilyUnavailableError``)."""
        ...


class MemoryStorage:
    """A ``Storage`` kept in memory. ``_ents[0]`` is a dummy entry holding the index and term of
    the snapshot; real entries follow it contiguously."""

    __slots__ = ("_ents", "_hard_state", "_snapshot")

    def __init__(self, conf_state: ConfState | None = None) -> None:
        self._hard_state = EMPTY_HARD_STATE
        self._snapshot = Snapshot(SnapshotMetadata(conf_state or ConfState(), 0, 0))
        self._ents: list[Entry] = [Entry(0, 0)]

    @classmethod
    def bootstrap(cls, voters: tuple[int, ...], data: bytes = b"") -> MemoryStorage:
        """A storage for a brand-new cluster: a snapshot at index 1, term 1 holding ``voters``
        and the initial application state ``data``. Nodes added later start with an empty
        ``MemoryStorage()`` and receive such a snapshot from the leader."""
        s = cls()
        s.apply_snapshot(Snapshot(SnapshotMetadata(ConfState(voters=tuple(voters)), 1, 1), data))
        s.set_hard_state(HardState(term=1, commit=1))
        return s

    # -- Storage protocol -------------------------------------------------------------------

    def initial_state(self) -> tuple[HardState, ConfState]:
        return self._hard_state, self._snapshot.metadata.conf_state

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        offset = self._ents[0].index
        if lo <= offset:
            raise CompactedError(f"entries [{lo}, {hi}): compacted up to {offset}")
        if hi > self.last_index() + 1:
            raise UnavailableError(f"entries [{lo}, {hi}): last index is {self.last_index()}")
        return limit_size(self._ents[lo - offset : hi - offset], max_size)

    def term(self, i: int) -> int:
        offset = self._ents[0].index
        if i < offset:
            raise CompactedError(f"term of {i}: compacted up to {offset}")
        if i - offset >= len(self._ents):
            raise UnavailableError(f"term of {i}: last index is {self.last_index()}")
        return self._ents[i - offset].term

    def last_index(self) -> int:
        return self._ents[0].index + len(self._ents) - 1

    def first_index(self) -> int:
        return self._ents[0].index + 1

    def snapshot(self) -> Snapshot:
        return self._snapshot

    # -- mutation (driver side) -------------------------------------------------------------

    def hard_state(self) -> HardState:
        return self._hard_state

    def set_hard_state(self, hs: HardState) -> None:
        self._hard_state = hs

    def persist(self, rd: Ready) -> None:
        """Persist a ``Ready`` the way Raft requires before its messages may depend on it:
        its snapshot (if any), then its entries, then its hard state. The one helper the
        test harness, the simulator and the Raft benchmark use."""
        if not rd.snapshot.is_empty():
            self.apply_snapshot(rd.snapshot)
        self.append(rd.entries)
        if rd.hard_state is not None:
            self.set_hard_state(rd.hard_state)

    def apply_snapshot(self, snap: Snapshot) -> None:
        """Replace the whole log with ``snap``. Raises ``SnapshotOutOfDateError`` if ``snap`` is
        older than the current snapshot."""
        if snap.metadata.index < self._snapshot.metadata.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {snap.metadata.index} older than {self._snapshot.metadata.index}"
            )
        self._snapshot = snap
        self._ents = [Entry(snap.metadata.term, snap.metadata.index)]

    def create_snapshot(self, i: int, cs: ConfState | None, data: bytes) -> Snapshot:
        """Record a snapshot of the application state as of applied index ``i`` (which must be
        in the log). Does not compact; call :meth:`compact` afterwards."""
        if i <= self._snapshot.metadata.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {i} not newer than {self._snapshot.metadata.index}"
            )
        if i > self.last_index():
            raise UnavailableError(f"snapshot at {i}: last index is {self.last_index()}")
        cs = cs if cs is not None else self._snapshot.metadata.conf_state
        self._snapshot = Snapshot(SnapshotMetadata(cs, i, self.term(i)), data)
        return self._snapshot

    def compact(self, compact_index: int) -> None:
        """Discard entries up to and including ``compact_index`` (which must not exceed the
        last index). The snapshot covering them must already be in place."""
        offset = self._ents[0].index
        if compact_index <= offset:
            raise CompactedError(f"compact {compact_index}: already compacted to {offset}")
        if compact_index > self.last_index():
            raise UnavailableError(f"compact {compact_index}: last index {self.last_index()}")
        i = compact_index - offset
        head = self._ents[i]
        self._ents = [Entry(head.term, head.index), *self._ents[i + 1 :]]

    def append(self, entries: list[Entry]) -> None:
        """Append ``entries`` (contiguous), truncating any conflicting suffix first. Entries
        already covered by the snapshot are ignored."""
        if not entries:
            return
        first = self.first_index()
        last = entries[-1].index
        if last < first:
            return
        if entries[0].index < first:
            entries = entries[first - entries[0].index :]
        offset = entries[0].index - self._ents[0].index
        n = len(self._ents)
        if offset == n:
            self._ents.extend(entries)
        elif offset < n:
            del self._ents[offset:]
            self._ents.extend(entries)
        else:
            raise UnavailableError(
                f"append at {entries[0].index}: missing entries after {self.last_index()}"
            )
