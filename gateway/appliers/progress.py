"""Which log entries are fully applied: the contiguous watermark (aurora's CutHead).

Workers finish operations out of log order (different rows, different threads), so "applied up
to index N" must only move over a contiguous prefix: ``ProgressTracker.watermark`` is the
largest N such that every entry <= N is done, exactly the longest continuous run cut off the
head of the sorted list of finished entries.

A *unit* is what the dispatcher reduces at once: one transaction (all its segments' indexes),
or a window of them. It is *complete* when all its operations were applied or dead-lettered.
It is *recorded* -- its GTIDs join the applied set and its indexes count as done -- only when it
is complete **and** every earlier unit it depends on is recorded. A unit depends on the latest
earlier unit that touched one of its rows and is not yet recorded, and on every earlier
unrecorded unit if either of them holds a barrier (SQL, MOVE: they may touch any row). This is
what makes skipping recorded GTIDs on restart safe: for every row, the transactions replayed
after a restart are a suffix of that row's history, so replaying them in order ends in the right
state, and a recorded transaction is never overwritten by the replay of an earlier one.

Pure bookkeeping, no threads: the dispatcher calls it under its own lock.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from gateway.core.rowops import Gtid

from .position import ApplierPosition

__all__ = ["ProgressTracker", "Unit"]


@dataclass(eq=False, slots=True)
class Unit:
    """A reduced unit in flight; see the module docstring."""

    indexes: tuple[int, ...]
    gtids: tuple[Gtid, ...]
    pending_ops: int
    barrier: bool = False
    blocked_by: int = 0  # unrecorded units this one depends on
    dependents: list[Unit] = field(default_factory=list)
    recorded: bool = False


class ProgressTracker:
    """Watermark and applied-GTID bookkeeping for one applier, starting from ``position``."""

    def __init__(self, position: ApplierPosition) -> None:
        self.watermark = position.log_index
        self.applied = position.applied.copy()
        self.backfill = position.backfill  # carried on unchanged (a finished backfill's record)
        self._done_heap: list[int] = []
        self._commit_ts: dict[int, int] = {}  # registered, not yet under the watermark
        self._last_registered = position.log_index
        self._row_owner: dict[Hashable, Unit] = {}
        self._unrecorded: dict[int, Unit] = {}  # id -> unit, insertion (= log) order
        self._last_barrier: Unit | None = None
        self.in_flight_ops = 0
        self.units_recorded = 0

    # -- entries -------------------------------------------------------------------------------

    def register(self, index: int, commit_ts_ns: int = 0) -> None:
        """Announce entry ``index`` (read from the log, not yet done); indexes must be
        registered in order without gaps."""
        if index != self._last_registered + 1:
            raise ValueError(f"entry {index} registered after {self._last_registered}")
        self._last_registered = index
        self._commit_ts[index] = commit_ts_ns

    def register_run(self, first: int, last: int, commit_ts_ns: Sequence[int]) -> None:
        """``register`` of entries ``first..last``, whose commit timestamps are
        ``commit_ts_ns`` in order (raises when the run has gaps, as ``register`` does)."""
        if first != self._last_registered + 1:
            raise ValueError(f"entry {first} registered after {self._last_registered}")
        if last - first + 1 != len(commit_ts_ns):
            raise ValueError(f"entries {first}..{last} registered as a run of "
                             f"{len(commit_ts_ns)}")
        self._last_registered = last
        self._commit_ts.update(zip(range(first, last + 1), commit_ts_ns, strict=True))

    def finish(self, indexes: Iterable[int]) -> None:
        """Mark entries done (rolled back, skipped, not transactions, or their unit was
        recorded) and advance the watermark over the contiguous prefix."""
        heap = self._done_heap
        if not heap:
            # The common case: the entries right above the watermark, in order -- the
            # watermark moves over them at once, without the heap.
            run = indexes if isinstance(indexes, list | tuple) else list(indexes)
            w = self.watermark
            if run and run[0] == w + 1 and run[-1] == w + len(run) and \
                    list(run) == list(range(w + 1, w + 1 + len(run))):
                self.watermark = run[-1]
                pop = self._commit_ts.pop
                for i in run:
                    pop(i, None)
                return
            indexes = run
        for i in indexes:
            heapq.heappush(heap, i)
        while heap and heap[0] <= self.watermark + 1:
            i = heapq.heappop(heap)
            if i == self.watermark + 1:
                self.watermark = i
                self._commit_ts.pop(i, None)

    @property
    def last_registered(self) -> int:
        return self._last_registered

    def oldest_pending_commit_ts(self) -> int | None:
        """Commit timestamp of the first entry above the watermark, if one is registered."""
        return self._commit_ts.get(self.watermark + 1)

    def position(self) -> ApplierPosition:
        """A snapshot of the durable position to save."""
        return ApplierPosition(self.watermark, self.applied.copy(), self.backfill)

    # -- units ---------------------------------------------------------------------------------

    def start_unit(self, indexes: Iterable[int], gtids: Iterable[Gtid],
                   rows: Iterable[Hashable], n_ops: int, *, barrier: bool = False) -> Unit:
        """Create a unit of ``n_ops`` operations on ``rows``; returns it already recorded
        when it has no operations and nothing blocks it."""
        unit = Unit(tuple(indexes), tuple(gtids), n_ops, barrier)
        blockers: dict[int, Unit] = {}
        if barrier:
            blockers.update(self._unrecorded)
        elif self._last_barrier is not None and not self._last_barrier.recorded:
            blockers[id(self._last_barrier)] = self._last_barrier
        for row in rows:
            owner = self._row_owner.get(row)
            if owner is not None and not owner.recorded:
                blockers[id(owner)] = owner
            self._row_owner[row] = unit
        for blocker in blockers.values():
            blocker.dependents.append(unit)
        unit.blocked_by = len(blockers)
        self._unrecorded[id(unit)] = unit
        if barrier:
            self._last_barrier = unit
        self.in_flight_ops += n_ops
        self._maybe_record(unit)
        return unit

    def op_done(self, unit: Unit, n: int = 1) -> None:
        """``n`` operations of ``unit`` were applied or dead-lettered."""
        unit.pending_ops -= n
        self.in_flight_ops -= n
        if unit.pending_ops < 0:
            raise ValueError("more operations finished than the unit has")
        self._maybe_record(unit)

    def _maybe_record(self, first: Unit) -> None:
        stack = [first]
        while stack:
            unit = stack.pop()
            if unit.recorded or unit.pending_ops or unit.blocked_by:
                continue
            unit.recorded = True
            self.units_recorded += 1
            del self._unrecorded[id(unit)]
            self.applied.update(unit.gtids)
            self.finish(unit.indexes)
            for dep in unit.dependents:
                dep.blocked_by -= 1
                stack.append(dep)
            unit.dependents = []

    def forget_recorded_rows(self) -> None:
        """Drop row ownership entries of recorded units (bounds memory; call now and then)."""
        self._row_owner = {r: u for r, u in self._row_owner.items() if not u.recorded}
