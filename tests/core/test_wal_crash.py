"""Crash recovery of the WAL at random crash points (Hypothesis + the fault-injecting layer).

A random workload (appends of random sizes and terms, syncs, suffix truncations, compactions,
hard-state saves, clean reopens) runs against a `FaultInjectingFileSystem` armed to crash at
a random mutating operation of a random step (a crashing write lands only a random prefix).
The power-cut image (`FaultInjectingFileSystem.crash_image`: synced data kept, unsynced
appends kept as a random prefix sometimes followed by zeros, unsynced directory changes lost)
must reopen without error, and:

- everything acknowledged as durable survives: ``last_index() >= durable index``;
- nothing else is invented: every recovered entry is the one the model has at that index
  (during a truncation, the pre-truncation log; recovery may keep any prefix of it that covers
  the durable index);
- the first index is the old one or, during a compaction, the new one;
- the hard state is the last saved one (or, during a save, the one being saved);
- batches are atomic: every append is a batch (``append_batch`` with a distinct hard state,
  or ``append`` keeping the current one), and the recovered ``(last index, hard state)`` pair
  is one the model went through since everything was last made durable -- for every batch,
  either all of its entries and its hard state are recovered or none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.fileio import FaultInjectingFileSystem, SimulatedCrash
from gateway.core.wal import (
    FsyncPolicy,
    SegmentedWal,
    WalEntry,
    WalFailedError,
    WalHardState,
    WalOptions,
)

DIR = "/wal"

op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 300), st.booleans()),
    st.tuples(st.just("batch"), st.integers(0, 4), st.integers(0, 300), st.booleans(),
              st.booleans()),
    st.tuples(st.just("sync")),
    st.tuples(st.just("truncate"), st.integers(0, 12)),
    st.tuples(st.just("compact"), st.integers(0, 12)),
    st.tuples(st.just("hardstate")),
    st.tuples(st.just("reopen")),
)


@dataclass
class Model:
    """What the log holds (index -> (term, data)) and what was acknowledged."""

    log: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    first: int = 1
    prev_term: int = 0
    last: int = 0
    durable: int = 0
    hard_state: WalHardState = field(default_factory=WalHardState)
    # (last index, hard state) after every batch since everything was last durable.
    points: list[tuple[int, WalHardState]] = field(default_factory=lambda: [(0, WalHardState())])

    def settle(self) -> None:
        """Everything is durable: only the current state may be recovered."""
        self.points = [(self.last, self.hard_state)]

    def term(self, i: int) -> int:
        return self.prev_term if i == self.first - 1 else self.log[i][0]


def open_wal(fs: FaultInjectingFileSystem, policy: FsyncPolicy) -> SegmentedWal:
    return SegmentedWal(DIR, fs=fs, options=WalOptions(max_segment_bytes=1024, fsync=policy))


def crashed(exc: BaseException) -> bool:
    return isinstance(exc, SimulatedCrash) or (
        isinstance(exc, WalFailedError) and isinstance(exc.__cause__, SimulatedCrash)
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op, min_size=1, max_size=30),
    crash_step=st.integers(0, 29),
    crash_at=st.integers(1, 10),
    policy=st.sampled_from([FsyncPolicy.ALWAYS, FsyncPolicy.NEVER]),
    seed=st.integers(0, 1 << 16),
)
def test_crash_at_any_point_keeps_every_durable_entry_and_invents_nothing(
    ops: list[tuple], crash_step: int, crash_at: int, policy: FsyncPolicy, seed: int
) -> None:
    fs = FaultInjectingFileSystem(seed=seed)
    wal = open_wal(fs, policy)
    m = Model()
    term = 1
    # What a crash during the current operation may leave: (reference log, required durable
    # index, allowed first indexes, allowed hard states).
    for n, step in enumerate(ops):
        if n == crash_step:  # crash at the crash_at-th mutating operation from this step on
            fs.arm_crash(crash_at)
        kind = step[0]
        ref = m.log
        need = m.durable
        firsts = {m.first}
        states = {m.hard_state}
        points = list(m.points)
        try:
            if kind == "append":
                _, count, size, bump = step
                term += bump
                new = [WalEntry(m.last + k, term, k % 2, bytes([(m.last + k) % 256]) * size)
                       for k in range(1, count + 1)]
                ref = dict(m.log)
                ref.update({e.index: (e.term, e.data) for e in new})
                points.append((new[-1].index, m.hard_state))
                wal.append(new)
                m.log = ref
                m.last = new[-1].index
                m.points.append((m.last, m.hard_state))
            elif kind == "batch":
                _, count, size, bump, sync = step
                term += bump
                new = [WalEntry(m.last + k, term, 0, bytes([(m.last + k) % 256]) * size)
                       for k in range(1, count + 1)]
                hs = WalHardState(term, len(m.points) % 5, m.last + count)  # distinct per batch
                ref = dict(m.log)
                ref.update({e.index: (e.term, e.data) for e in new})
                states = {m.hard_state, hs}
                points.append((m.last + count, hs))
                wal.append_batch(new, hs, sync=True if sync else None)  # None: the policy
                m.log = ref
                m.last += count
                m.hard_state = hs
                m.points.append((m.last, hs))
                if sync:
                    m.settle()
            elif kind == "sync":
                wal.sync()
                m.settle()
            elif kind == "truncate":
                at = max(m.first, m.last - step[1])
                if at <= m.last:
                    need = min(m.durable, at - 1)
                    points.append((at - 1, m.hard_state))
                    wal.truncate_suffix(at)  # durable: syncs what stays, saves the state
                    m.log = {i: v for i, v in m.log.items() if i < at}
                    m.last = at - 1
                    m.settle()
                # above the last index it is a no-op (documented): nothing becomes durable
            elif kind == "compact":
                at = m.first - 1 + step[1]
                if m.first <= at <= m.last:
                    firsts = {m.first, at + 1}
                    wal.compact(at)
                    m.prev_term = m.log[at][0]
                    m.log = {i: v for i, v in m.log.items() if i > at}
                    m.first = at + 1
                    m.settle()
            elif kind == "hardstate":
                hs = WalHardState(term, term % 3, m.first - 1)
                states = {m.hard_state, hs}
                points.append((m.last, hs))
                wal.save_hard_state(hs)
                m.hard_state = hs
                m.settle()
            elif kind == "reopen":
                wal.close()
                m.settle()
                wal = open_wal(fs, policy)
            m.durable = wal.durable_index()
            if policy is FsyncPolicy.ALWAYS:
                m.settle()
        except Exception as exc:
            if not crashed(exc):
                raise
            check_image(fs, seed, policy, ref, need, firsts, states, m, points)
            return
    # No crash happened: a power cut now must still keep everything acknowledged.
    check_image(fs, seed, policy, m.log, m.durable, {m.first}, {m.hard_state}, m, m.points)


def check_image(
    fs: FaultInjectingFileSystem,
    seed: int,
    policy: FsyncPolicy,
    ref: dict[int, tuple[int, bytes]],
    need: int,
    firsts: set[int],
    states: set[WalHardState],
    m: Model,
    points: list[tuple[int, WalHardState]],
) -> None:
    image = fs.crash_image(seed)
    wal = open_wal(image, policy)
    first, last = wal.first_index(), wal.last_index()
    assert first in firsts, (first, firsts, wal.recovery_report)
    assert last >= need, (last, need, wal.recovery_report)
    assert last >= first - 1
    got = wal.entries(first, last + 1)
    assert [e.index for e in got] == list(range(first, last + 1))
    for e in got:
        assert ref.get(e.index) == (e.term, e.data), (e.index, wal.recovery_report)
    if first - 1 >= 1 and (first - 1) in ref:
        assert wal.term(first - 1) == ref[first - 1][0]
    assert wal.hard_state() in states or (last, wal.hard_state()) in points
    # Batch atomicity: the recovered log ends where a batch ended, with that batch's hard
    # state (never a batch's entries without its hard state, or the reverse).
    assert (last, wal.hard_state()) in points, (last, wal.hard_state(), points,
                                                 wal.recovery_report)
    # The recovered WAL is writable: append one more entry and read it back after a reopen.
    nxt = WalEntry(last + 1, max(wal.term(last), 1), 0, b"after")
    wal.append([nxt])
    wal.close()
    again = open_wal(image, policy)
    assert again.entries(last + 1, last + 2) == [nxt]
    assert again.recovery_report.clean, again.recovery_report
    again.close()
