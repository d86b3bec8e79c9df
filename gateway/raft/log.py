"""The Raft log as the core sees it: stable entries in ``Storage`` followed by unstable entries
(and possibly an unstable snapshot) that the driver has not persisted yet.

Invariant: ``applied <= applying <= committed <= last_index()``; ``first_index() - 1`` is the
index covered by the newest snapshot (stable or unstable).
"""

from __future__ import annotations

from .errors import CompactedError, CorruptStateError, StorageError, UnavailableError
from .storage import NO_LIMIT, Storage
from .types import Entry, Snapshot, limit_size


class Unstable:
    """Entries (and a snapshot) received but not yet persisted. ``entries[i]`` has index
    ``offset + i``; if ``snapshot`` is set, ``offset == snapshot index + 1``."""

    __slots__ = ("entries", "offset", "snapshot")

    def __init__(self, offset: int) -> None:
        self.snapshot: Snapshot | None = None
        self.entries: list[Entry] = []
        self.offset = offset

    def maybe_first_index(self) -> int | None:
        if self.snapshot is not None:
            return self.snapshot.metadata.index + 1
        return None

    def maybe_last_index(self) -> int | None:
        if self.entries:
            return self.offset + len(self.entries) - 1
        if self.snapshot is not None:
            return self.snapshot.metadata.index
        return None

    def maybe_term(self, i: int) -> int | None:
        if i < self.offset:
            if self.snapshot is not None and self.snapshot.metadata.index == i:
                return self.snapshot.metadata.term
            return None
        k = i - self.offset
        if k >= len(self.entries):
            return None
        return self.entries[k].term

    def stable_to(self, i: int, t: int) -> None:
        """Entries up to ``i`` (with term ``t``) are now durable; forget them. Ignored if the
        entry at ``i`` was replaced meanwhile."""
        if i < self.offset:
            return
        k = i - self.offset
        if k >= len(self.entries) or self.entries[k].term != t:
            return
        del self.entries[: k + 1]
        self.offset = i + 1

    def stable_snap_to(self, i: int) -> None:
        if self.snapshot is not None and self.snapshot.metadata.index == i:
            self.snapshot = None

    def restore(self, snap: Snapshot) -> None:
        self.offset = snap.metadata.index + 1
        self.entries = []
        self.snapshot = snap

    def truncate_and_append(self, ents: list[Entry]) -> None:
        after = ents[0].index
        n = len(self.entries)
        if after == self.offset + n:
            self.entries.extend(ents)
        elif after <= self.offset:
            self.offset = after
            self.entries = list(ents)
        else:
            del self.entries[after - self.offset :]
            self.entries.extend(ents)

    def slice(self, lo: int, hi: int) -> list[Entry]:
        return self.entries[lo - self.offset : hi - self.offset]


class RaftLog:
    """Stable storage plus unstable tail, with commit/apply bookkeeping."""

    __slots__ = ("applied", "applying", "committed", "max_applying_size", "storage", "unstable")

    def __init__(self, storage: Storage, max_applying_size: int = NO_LIMIT) -> None:
        self.storage = storage
        first = storage.first_index()
        last = storage.last_index()
        self.unstable = Unstable(last + 1)
        self.committed = first - 1
        self.applied = first - 1
        self.applying = first - 1
        self.max_applying_size = max_applying_size

    def __repr__(self) -> str:
        return (
            f"RaftLog(committed={self.committed}, applied={self.applied}, "
            f"unstable.offset={self.unstable.offset}, unstable={len(self.unstable.entries)})"
        )

    # -- indexes and terms ------------------------------------------------------------------

    def first_index(self) -> int:
        i = self.unstable.maybe_first_index()
        return i if i is not None else self.storage.first_index()

    def last_index(self) -> int:
        i = self.unstable.maybe_last_index()
        return i if i is not None else self.storage.last_index()

    def term(self, i: int) -> int:
        """Term of entry ``i``. Raises ``CompactedError`` below ``first_index() - 1`` and
        ``UnavailableError`` beyond ``last_index()``."""
        t = self.unstable.maybe_term(i)
        if t is not None:
            return t
        if i < self.first_index() - 1:
            raise CompactedError(f"term of {i}: compacted")
        if i > self.last_index():
            raise UnavailableError(f"term of {i}: beyond last index {self.last_index()}")
        return self.storage.term(i)

    def term_or_zero(self, i: int) -> int:
        try:
            return self.term(i)
        except (CompactedError, UnavailableError):
            return 0

    def last_term(self) -> int:
        return self.term(self.last_index())

    def match_term(self, i: int, t: int) -> bool:
        try:
            return self.term(i) == t
        except (CompactedError, UnavailableError):
            return False

    def is_up_to_date(self, lasti: int, term: int) -> bool:
        """Whether a log ending at (``lasti``, ``term``) is at least as up-to-date as ours
        (Raft paper §5.4.1)."""
        last_term = self.last_term()
        return term > last_term or (term == last_term and lasti >= self.last_index())

    # -- appending --------------------------------------------------------------------------

    def find_conflict(self, ents: list[Entry]) -> int:
        """Index of the first entry of ``ents`` that is new or conflicts with ours; 0 if all of
        them are already in the log."""
        for e in ents:
            if not self.match_term(e.index, e.term):
                return e.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest index <= ``index`` whose term is <= ``term``, with that term: the
        follower's hint for fast backtracking. Returns ``(index, 0)`` if terms are unknown."""
        while index > 0:
            try:
                our = self.term(index)
            except StorageError:
                return index, 0
            if our <= term:
                return index, our
            index -= 1
        return 0, 0

    def maybe_append(
        self, index: int, log_term: int, committed: int, ents: list[Entry]
    ) -> tuple[int, bool]:
        """Append ``ents`` after (``index``, ``log_term``) if our log matches there. Returns the
        index of the last new entry and whether the append was accepted."""
        if not self.match_term(index, log_term):
            return 0, False
        last_new = index + len(ents)
        if ents:
            ci = self.find_conflict(ents)
            if ci:
                if ci <= self.committed:
                    raise CorruptStateError(
                        f"entry {ci} conflicts with committed entry (committed {self.committed})"
                    )
                self.unstable.truncate_and_append(ents[ci - index - 1 :])
        self.commit_to(min(committed, last_new))
        return last_new, True

    def append(self, ents: list[Entry]) -> int:
        """Append ``ents`` (leader path) and return the new last index."""
        if ents:
            if ents[0].index - 1 < self.committed:
                raise CorruptStateError(
                    f"append after {ents[0].index - 1} is below committed {self.committed}"
                )
            self.unstable.truncate_and_append(ents)
        return self.last_index()

    # -- reading ----------------------------------------------------------------------------

    def slice(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        """Entries ``[lo, hi)`` limited to ``max_size`` payload bytes (at least one entry)."""
        if lo < self.first_index():
            raise CompactedError(f"slice [{lo}, {hi}): first index is {self.first_index()}")
        if hi > self.last_index() + 1:
            raise UnavailableError(f"slice [{lo}, {hi}): last index is {self.last_index()}")
        if lo >= hi:
            return []
        off = self.unstable.offset
        ents: list[Entry] = []
        if lo < off:
            stop = min(hi, off)
            ents = self.storage.entries(lo, stop, max_size)
            if len(ents) < stop - lo or hi <= off:
                return ents
        if hi > off:
            tail = self.unstable.slice(max(lo, off), hi)
            ents = [*ents, *tail] if ents else tail
        return limit_size(ents, max_size)

    def entries(self, i: int, max_size: int = NO_LIMIT) -> list[Entry]:
        """Entries from ``i`` to the end, limited to ``max_size`` bytes."""
        if i > self.last_index():
            return []
        return self.slice(i, self.last_index() + 1, max_size)

    def all_entries(self) -> list[Entry]:
        return self.entries(self.first_index())

    def unstable_entries(self) -> list[Entry]:
        return list(self.unstable.entries)

    def has_pending_snapshot(self) -> bool:
        return self.unstable.snapshot is not None

    def snapshot(self) -> Snapshot:
        if self.unstable.snapshot is not None:
            return self.unstable.snapshot
        return self.storage.snapshot()

    def has_next_committed_ents(self) -> bool:
        if self.has_pending_snapshot():
            return False
        return self.committed > max(self.applying, self.first_index() - 1)

    def next_committed_ents(self) -> list[Entry]:
        """Committed entries not yet handed out for applying (may include unstable ones: the
        driver persists a Ready's entries before applying its committed entries)."""
        if self.has_pending_snapshot():
            return []
        lo = max(self.applying + 1, self.first_index())
        hi = self.committed + 1
        if lo >= hi:
            return []
        return self.slice(lo, hi, self.max_applying_size)

    # -- bookkeeping ------------------------------------------------------------------------

    def commit_to(self, c: int) -> None:
        if c > self.committed:
            if c > self.last_index():
                raise CorruptStateError(f"commit {c} beyond last index {self.last_index()}")
            self.committed = c

    def maybe_commit(self, max_index: int, term: int) -> bool:
        """Advance the commit index to ``max_index`` if the entry there has ``term`` (leaders
        commit only entries of their own term; earlier ones follow implicitly)."""
        if max_index > self.committed and self.term_or_zero(max_index) == term:
            self.commit_to(max_index)
            return True
        return False

    def accept_applying(self, i: int) -> None:
        self.applying = max(self.applying, i)

    def applied_to(self, i: int) -> None:
        if i == 0:
            return
        if i > self.committed or i < self.applied:
            raise CorruptStateError(
                f"applied {i} out of range [{self.applied}, {self.committed}]"
            )
        self.applied = i
        self.applying = max(self.applying, i)

    def stable_to(self, i: int, t: int) -> None:
        self.unstable.stable_to(i, t)

    def stable_snap_to(self, i: int) -> None:
        self.unstable.stable_snap_to(i)

    def restore(self, snap: Snapshot) -> None:
        self.committed = snap.metadata.index
        self.unstable.restore(snap)
