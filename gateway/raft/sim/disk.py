"""Simulated disk of one node: writes are buffered until ``sync``; a crash keeps only a prefix
of the unsynced writes.

Each ``Ready``'s snapshot, entries and hard state form **one atomic record** (as a WAL that
frames them as one checksummed record, or commits them with a marker): a crash keeps a prefix
of the records, and a torn record fails its checksum and is dropped whole. Both piecewise
orders are unsafe, and the simulator found a counterexample for each:

* hard state first: the commit index survives while the entries of that Ready, which were to
  *replace* a stale uncommitted suffix, do not; the restarted node applies the stale entries
  as committed (Figure 8 scenario, state machine safety);
* entries first: a follower that received a joint configuration and the entry leaving it in
  one append keeps both entries but not the commit index covering the first; restarted with
  its old applied configuration it can win an election in C_old that C_new's quorum never
  saw (leader completeness). Apply-time configuration needs "a conf change is only durable
  once a commit index covering the previous one is" (etcd-io/etcd#7625, the Append invariant).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from ..errors import CorruptStateError
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
        """Buffer one Ready's writes as one atomic record (applied as snapshot, entries, hard
        state)."""
        if hs is None and (snap is None or snap.is_empty()) and not ents:
            return
        self.pending.append(("ready", (hs, snap, ents)))

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
        """Lose unsynced writes, except a random prefix of whole records that happened to reach
        the platter (with ``tear``, the next record was half written: its checksum fails and
        recovery drops it, which loses it just the same)."""
        keep = rng.randrange(0, len(self.pending) + 1)
        for op in self.pending[:keep]:
            self._apply(op)
        self.pending.clear()

    def _apply(self, op: tuple[str, object]) -> None:
        kind, val = op
        if kind == "ready":
            hs, snap, ents = cast("tuple[HardState | None, Snapshot | None, list[Entry]]", val)
            if snap is not None and not snap.is_empty():
                self._apply(("snap", snap))
            if ents:
                self._apply(("ents", ents))
            if hs is not None:
                self._apply(("hs", hs))
        elif kind == "hs":
            self.hard_state = cast(HardState, val)
        elif kind == "snap":
            new_snap = cast(Snapshot, val)
            if new_snap.metadata.index > self.snapshot.metadata.index:
                self.snapshot = new_snap
                self.entries = []
        else:
            new_ents = cast("list[Entry]", val)
            if not new_ents:
                return
            first = new_ents[0].index
            snap_index = self.snapshot.metadata.index
            # keep entries before the first new one (contiguous after the snapshot)
            keep = max(0, first - snap_index - 1)
            del self.entries[keep:]
            self.entries.extend(e for e in new_ents if e.index > snap_index)

    def recover(self) -> MemoryStorage:
        """The storage a restarted node finds. Raises ``CorruptStateError`` if the durable
        commit index lies beyond the durable log (the write order was not respected)."""
        st = MemoryStorage()
        if not self.snapshot.is_empty():
            st.apply_snapshot(self.snapshot)
        st.append(list(self.entries))
        hs = self.hard_state
        if hs.commit > st.last_index():
            raise CorruptStateError(
                f"durable commit {hs.commit} beyond the durable log (last {st.last_index()})"
            )
        commit = max(hs.commit, st.first_index() - 1)
        st.set_hard_state(HardState(hs.term, hs.vote, commit))
        return st
