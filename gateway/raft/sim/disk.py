"""Simulated disk of one node: writes are buffered until ``sync``; a crash keeps only a prefix
of the unsynced writes, and may tear the last of them.

Write order within one ``Ready`` is hard state, snapshot, entries, so every surviving prefix is
a state a real WAL could recover: entries never survive without the term they were accepted in.
A torn entries write keeps a prefix of its entries (the torn record fails its checksum and is
truncated, as the WAL's recovery does); a torn hard-state or snapshot write is lost entirely.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..rng import SplitMix64
from ..storage import MemoryStorage
from ..types import EMPTY_HARD_STATE, Entry, HardState, Snapshot


@dataclass(slots=True)
class SimDisk:
    hard_state: HardState = EMPTY_HARD_STATE
    snapshot: Snapshot = field(default_factory=Snapshot)
    entries: list[Entry] = field(default_factory=list)
    pending: list[tuple[str, object]] = field(default_factory=list)
    syncs: int = 0

    def write(self, hs: HardState | None, snap: Snapshot | None, ents: list[Entry]) -> None:
        if hs is not None:
            self.pending.append(("hs", hs))
        if snap is not None and not snap.is_empty():
            self.pending.append(("snap", snap))
        if ents:
            self.pending.append(("ents", ents))

    def sync(self) -> None:
        for op in self.pending:
            self._apply(op)
        self.pending.clear()
        self.syncs += 1

    def save_snapshot(self, snap: Snapshot) -> None:
        """An application snapshot: written and synced atomically (write + rename + fsync);
        the log prefix it covers is discarded."""
        self.sync()
        if snap.metadata.index <= self.snapshot.metadata.index:
            return
        self.snapshot = snap
        self.entries = [e for e in self.entries if e.index > snap.metadata.index]

    def crash(self, rng: SplitMix64, tear: bool) -> None:
        """Lose unsynced writes, except a random prefix that happened to reach the platter."""
        keep = rng.randrange(0, len(self.pending) + 1)
        for op in self.pending[:keep]:
            self._apply(op)
        if tear and keep < len(self.pending):
            kind, val = self.pending[keep]
            if kind == "ents":
                ents: list[Entry] = val  # type: ignore[assignment]
                self._apply(("ents", ents[: rng.randrange(0, len(ents) + 1)]))
        self.pending.clear()

    def _apply(self, op: tuple[str, object]) -> None:
        kind, val = op
        if kind == "hs":
            self.hard_state = val  # type: ignore[assignment]
        elif kind == "snap":
            snap: Snapshot = val  # type: ignore[assignment]
            if snap.metadata.index > self.snapshot.metadata.index:
                self.snapshot = snap
                self.entries = []
        else:
            ents: list[Entry] = val  # type: ignore[assignment]
            if not ents:
                return
            first = ents[0].index
            snap_index = self.snapshot.metadata.index
            # keep entries before the first new one (contiguous after the snapshot)
            keep = max(0, first - snap_index - 1)
            del self.entries[keep:]
            self.entries.extend(e for e in ents if e.index > snap_index)

    def recover(self) -> MemoryStorage:
        """The storage a restarted node finds."""
        st = MemoryStorage()
        if not self.snapshot.is_empty():
            st.apply_snapshot(self.snapshot)
        st.append(list(self.entries))
        hs = self.hard_state
        commit = min(max(hs.commit, st.first_index() - 1), st.last_index())
        st.set_hard_state(HardState(hs.term, hs.vote, commit))
        return st
