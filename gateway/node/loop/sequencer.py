"""``Sequencer``: the leader's bookkeeping for one term -- pure values in, decisions out.

A leader hands out, in log order, what every record it proposes carries (docs/node.md, "Log
entries, GTIDs, epochs"):

- GTID trans ids: ``1 +`` the largest trans id in its log when it took over, then ``+1`` per
  transaction proposed (and per ``derived_trans_id`` reserved for the conflict transaction a
  replicated epoch may derive);
- commit timestamps: the wall clock passed in, forced strictly increasing along the log;
- epochs: ``term << 32 | n`` where ``n`` counts ``epoch_s`` periods since this leader took
  over (from 1). The *open* epoch is the one the next record joins; when time moves past it
  and it holds transactions, the driver proposes the ``EpochMarker`` :meth:`open_seal`
  describes. The epoch an earlier leader left without a marker (``inherited``) is sealed
  first;
- the schema shadow: the schemas that proposals not yet applied create, so the next proposal
  is validated against them.

Every reservation can be taken back (:meth:`mark` / :meth:`take_back`) when the proposal that
used it is refused (a leadership transfer in progress): nothing was logged, so the counters
return to where they were -- but not the term's start, which would count its epochs from 1
again.

No I/O, no asyncio, no clock reads: the caller passes the time (``now_ns`` wall clock for
commit timestamps, ``mono_s`` monotonic seconds for epochs) and proposes what this module
decides. ``tests/node/test_sequencer.py`` pins each rule; ``tests/node/test_node_purity.py``
keeps the module pure. The driver (``driver.py``) is the shell: it reads the log back at a
leader change (``gtid_use.consumed``, ``epoch_seal.unsealed_epoch``), builds a sequencer with
:meth:`Sequencer.take_over`, and drops it when this node stops leading.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from gateway.node.base.validation import TableSchema
    from gateway.replication import ReplicationState

__all__ = ["Mark", "Seal", "Sequencer", "Stamp"]


class Stamp(NamedTuple):
    """What a transaction proposed now carries: its GTID trans id, this cluster's epoch, its
    commit timestamp (ns)."""

    trans_id: int
    epoch: int
    commit_ts: int


class Seal(NamedTuple):
    """An ``EpochMarker`` to propose: the epoch it seals and the last trans id handed out in it
    (0: none)."""

    epoch: int
    last_trans_id: int


_NO_SEAL = Seal(0, 0)
#: ``tuple.__new__``: builds a NamedTuple from a tuple of its fields, as its ``__new__`` does.
_new_tuple = tuple.__new__


@dataclass(slots=True)
class Mark:
    """The counters at :meth:`Sequencer.mark`, and the shadowed schemas as they were before
    the first change since (``None``: the table had no shadow schema)."""

    next_trans_id: int
    last_commit_ts: int
    last_trans_in_epoch: int
    open_epoch_txns: int
    shadowed: dict[str, TableSchema | None] = field(default_factory=dict)


@dataclass(slots=True)
class Sequencer:
    """The bookkeeping of the leader of ``term``, which took over at monotonic time ``since``
    (seconds); see the module docstring. Build it with :meth:`take_over`."""

    term: int
    since: float
    #: The length of an epoch in seconds (the driver's setting, which it may change).
    epoch_s: float
    #: The trans id the next transaction gets.
    next_trans_id: int
    #: The newest commit timestamp handed out (the next one is above it).
    last_commit_ts: int
    #: The epoch the next record joins (0: none opened yet; the first cycle opens one).
    open_epoch: int = 0
    #: Records with transactions proposed in ``open_epoch`` (0: nothing to seal).
    open_epoch_txns: int = 0
    #: The last trans id handed out in ``open_epoch`` (its marker's ``last_trans_id``).
    last_trans_in_epoch: int = 0
    #: The epoch an earlier leader's records left without a marker, and its last trans id
    #: (``(0, 0)``: none); sealed before anything else of this term.
    inherited: Seal = _NO_SEAL
    #: The schema shadow: tables created by proposals of this leader not yet known applied.
    schemas: dict[str, TableSchema] = field(default_factory=dict)
    #: Replication state as the next proposal sees it (the store's plus every replicated
    #: epoch already in this leader's log); held here for the driver, which builds it from
    #: the log (None: rebuild it when next needed).
    view: ReplicationState | None = None
    _mark: Mark | None = None

    @classmethod
    def take_over(cls, term: int, mono_s: float, epoch_s: float, applied_trans_id: int,
                  applied_commit_ts: int, pending: Iterable[tuple[int, int]] = (),
                  inherited: tuple[int, int] = (0, 0)) -> Sequencer:
        """The sequencer of a node that leads ``term`` from ``mono_s`` on.

        ``applied_trans_id``/``applied_commit_ts``: the store's newest trans id and commit
        timestamp (what the applied entries consumed); ``pending``: ``(trans id, commit ts)``
        of every entry in the log after the applied index (``gtid_use.consumed``; ``(0, 0)``
        for an entry that consumes none) -- a leader's log holds every committed entry, so
        the next trans id is above all of them. ``inherited``: ``(epoch, last trans id)`` an
        earlier leader left unsealed (``epoch_seal.unsealed_epoch``)."""
        trans, ts = applied_trans_id, applied_commit_ts
        for t, c in pending:
            if t > trans:
                trans = t
            if c > ts:
                ts = c
        return cls(term, mono_s, epoch_s, trans + 1, ts, inherited=Seal(*inherited))

    # -- epochs -----------------------------------------------------------------------------------

    def epoch_at(self, mono_s: float) -> int:
        """The epoch at monotonic time ``mono_s``: ``term << 32 | n``, ``n`` counting
        ``epoch_s`` periods since the take-over from 1."""
        return (self.term << 32) | (1 + int((mono_s - self.since) / self.epoch_s))

    def to_epoch_end(self, mono_s: float) -> float:
        """Seconds from ``mono_s`` until the epoch at ``mono_s`` ends."""
        return self.epoch_s - (mono_s - self.since) % self.epoch_s

    def inherited_seal(self) -> Seal | None:
        """The marker the epoch an earlier leader left open needs (None: none)."""
        return self.inherited if self.inherited.epoch else None

    def inherited_sealed(self) -> None:
        """The :meth:`inherited_seal` marker was proposed."""
        self.inherited = _NO_SEAL

    def open_seal(self) -> Seal | None:
        """The marker sealing the open epoch, if it holds transactions (None: nothing to
        seal)."""
        if not self.open_epoch_txns:
            return None
        return Seal(self.open_epoch, self.last_trans_in_epoch)

    def sealed(self) -> None:
        """The :meth:`open_seal` marker was proposed: records proposed after it join a new
        epoch (a reader drops a record of an epoch it already holds sealed)."""
        self.open_epoch_txns = 0

    def epoch_ended(self, mono_s: float) -> bool:
        """Whether the open epoch is not the epoch at ``mono_s``."""
        return self.epoch_at(mono_s) != self.open_epoch

    def open_at(self, mono_s: float) -> None:
        """Open the epoch at ``mono_s``. The caller first has :meth:`open_seal`'s marker (if
        any) proposed and calls :meth:`sealed`; an open epoch with transactions stays open
        (what is proposed meanwhile joins it)."""
        if self.open_epoch_txns:
            raise ValueError(f"epoch {self.open_epoch} has {self.open_epoch_txns} record(s) "
                             f"with transactions and no marker proposed")
        self.open_epoch = self.epoch_at(mono_s)

    # -- GTIDs and commit timestamps --------------------------------------------------------------

    def _commit_ts(self, now_ns: int) -> int:
        ts = now_ns if now_ns > self.last_commit_ts else self.last_commit_ts + 1
        self.last_commit_ts = ts
        return ts

    def stamp(self, now_ns: int) -> Stamp:
        """Reserve the GTID trans id, epoch and commit timestamp of one transaction proposed
        at wall-clock time ``now_ns``; it counts towards the open epoch's marker."""
        trans = self.next_trans_id
        self.next_trans_id = trans + 1
        self.last_trans_in_epoch = trans
        self.open_epoch_txns += 1
        # _commit_ts inlined, and the Stamp made without its generated __new__: once per write
        ts = now_ns if now_ns > self.last_commit_ts else self.last_commit_ts + 1
        self.last_commit_ts = ts
        return _new_tuple(Stamp, (trans, self.open_epoch, ts))

    def stamp_batch(self, n: int, now_ns: int) -> Stamp:
        """Reserve the stamps of ``n`` transactions proposed together at wall-clock time
        ``now_ns`` (``n >= 1``), as ``n`` calls of :meth:`stamp` with that time would: the
        first one's :class:`Stamp` is returned; the ``i``-th (from 0) has trans id
        ``trans_id + i``, the same epoch and commit timestamp ``commit_ts + i``. One call per
        batch of writes, not one per write."""
        trans = self.next_trans_id
        self.next_trans_id = trans + n
        self.last_trans_in_epoch = trans + n - 1
        self.open_epoch_txns += n
        ts = now_ns if now_ns > self.last_commit_ts else self.last_commit_ts + 1
        self.last_commit_ts = ts + n - 1
        return _new_tuple(Stamp, (trans, self.open_epoch, ts))

    def reserve_derived(self, now_ns: int) -> tuple[int, int]:
        """Reserve ``(derived_trans_id, derived_commit_ts)`` for the transaction a replicated
        epoch's conflicts may derive (consumed whether or not it derives one: ``gtid_use``).
        It is the open epoch's last trans id; the epoch's record count moves with
        :meth:`unit_proposed`."""
        trans = self.next_trans_id
        self.next_trans_id = trans + 1
        self.last_trans_in_epoch = trans
        return trans, self._commit_ts(now_ns)

    def unit_proposed(self, has_transactions: bool) -> None:
        """A replicated epoch was proposed in the open epoch: with transactions, the epoch
        needs a marker."""
        if has_transactions:
            self.open_epoch_txns += 1

    # -- the schema shadow ------------------------------------------------------------------------

    def known_schemas(self, applied: Mapping[str, TableSchema]) -> dict[str, TableSchema]:
        """The tables' schemas the next proposal sees: ``applied`` (the store's) with the
        shadow over it (a new mapping)."""
        if self.schemas:
            return {**applied, **self.schemas}
        return dict(applied)

    def shadow(self, name: str, schema: TableSchema) -> None:
        """A proposal creates table ``name`` with ``schema``: later proposals see it."""
        m = self._mark
        if m is not None and name not in m.shadowed:
            m.shadowed[name] = self.schemas.get(name)
        self.schemas[name] = schema

    # -- reservations -----------------------------------------------------------------------------

    def mark(self) -> Mark:
        """Remember the counters (and, from now on, the shadow's changes) so that
        :meth:`take_back` can undo what is reserved after this call. A new mark replaces the
        previous one."""
        m = Mark(self.next_trans_id, self.last_commit_ts, self.last_trans_in_epoch,
                 self.open_epoch_txns)
        self._mark = m
        return m

    def take_back(self, m: Mark) -> None:
        """Undo every reservation and shadowed schema since ``m`` (the proposal that used them
        was refused: none of it is in the log). The term, its start and the open epoch stay:
        a new sequencer would count this term's epochs from 1 again."""
        self.next_trans_id = m.next_trans_id
        self.last_commit_ts = m.last_commit_ts
        self.last_trans_in_epoch = m.last_trans_in_epoch
        self.open_epoch_txns = m.open_epoch_txns
        for name, before in m.shadowed.items():
            if before is None:
                self.schemas.pop(name, None)
            else:
                self.schemas[name] = before
        m.shadowed.clear()
        if self._mark is m:
            self._mark = None
