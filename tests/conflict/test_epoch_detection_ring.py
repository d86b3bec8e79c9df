"""NDB$EPOCH's detection in a ring of three clusters, A -> B -> C -> A, against a reference
model: A is the PRIMARY; B and C write too. Changes and apply-status rows flow around the
ring in each cluster's log order (what the channels guarantee: per-origin order, reflections
forwarded). A judges every change of B (arriving through C) and of C with its per-peer max
replicated epoch, raised only by reflections of epochs already judged. The model knows what
each writer had really seen of A when it wrote: no truly concurrent change may be missed."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from gateway.conflict.model import Cause, Change, Context, OpType, Role, Stored
from gateway.conflict.resolve import RowChange, judge_epoch
from gateway.conflict.rules import ConflictRule, RuleSet
from gateway.replication import ReplicationState

A, B, C = 1, 2, 3
RULES = RuleSet([ConflictRule("s.t", "NDB$EPOCH")])


@dataclass(frozen=True)
class Write:
    wid: int
    origin: int
    key: int
    change: Change
    seen_of_a: int  # the newest epoch of A whose content the writer held when writing
    base: int = 0  # the write whose row the writer changed (its wid; 0: none)


@dataclass(frozen=True)
class Status:
    server_id: int
    epoch: int
    applied_by: int


@dataclass
class Node:
    cid: int
    rows: dict[int, Stored] = field(default_factory=dict)
    epoch: int = 1
    open: list = field(default_factory=list)
    sealed: list = field(default_factory=list)
    seen: set[int] = field(default_factory=set)  # write ids held
    seen_of_a: int = 0
    versions: dict[int, int] = field(default_factory=dict)  # key -> wid of the row held

    def seal(self) -> None:
        self.sealed.append((self.epoch, self.open))
        self.open = []
        self.epoch += 1

    def put(self, w: Write) -> None:
        c = w.change
        self.rows[w.key] = Stored(c.op is not OpType.DELETE_ROW, dict(c.after), self.epoch,
                                  w.origin, c.commit_ts_ns)
        self.seen.add(w.wid)
        self.versions[w.key] = w.wid
        self.open.append(w)


def _run(seed: int) -> tuple[int, int, int]:
    rng = random.Random(seed)
    nodes = {A: Node(A), B: Node(B), C: Node(C)}
    ring = {A: B, B: C, C: A}  # source -> replica
    cursor = {A: 0, B: 0, C: 0}  # next sealed epoch of the source each replica applies
    state = ReplicationState(A)
    wid = 0
    concurrent = flagged = false = 0
    for ts in range(1, 700):
        r = rng.random()
        if r < 0.3:  # a local write somewhere
            n = nodes[rng.choice([A, B, C])]
            key = rng.randrange(3)
            row = n.rows.get(key, Stored.absent())
            op = OpType.WRITE_ROW if not row.exists else rng.choice(
                [OpType.UPDATE_ROW, OpType.UPDATE_ROW, OpType.DELETE_ROW])
            wid += 1
            n.put(Write(wid, n.cid, key, Change(op, n.cid, n.epoch, ts,
                                                {} if op is OpType.DELETE_ROW else {"v": ts}),
                        n.epoch if n.cid == A else n.seen_of_a, n.versions.get(key, 0)))
        elif r < 0.5:
            nodes[rng.choice([A, B, C])].seal()
        else:  # a replica applies its source's next sealed epoch
            src = rng.choice([A, B, C])
            dst = nodes[ring[src]]
            s = nodes[src]
            if cursor[src] >= len(s.sealed):
                continue
            e, items = s.sealed[cursor[src]]
            cursor[src] += 1
            writes = [w for w in items if isinstance(w, Write) and w.wid not in dst.seen
                      and w.origin != dst.cid]
            statuses = [it for it in items if isinstance(it, Status)]
            if dst.cid == A:  # the primary judges
                ctx = Context(A, Role.PRIMARY, {B: state.max_replicated_epoch(B),
                                                C: state.max_replicated_epoch(C)})
                rows = dict(dst.rows)
                refused: set[int] = set()  # wids A rejected in this epoch
                j = judge_epoch([[RowChange("s", "t", w.key, w.change)] for w in writes],
                                RULES, lambda rid, _r=dst.rows: _r.get(rid[2],
                                                                        Stored.absent()),
                                ctx, dst.epoch, src)
                for w, (o,) in zip(writes, j.outcomes, strict=True):
                    row = rows.get(w.key, Stored.absent())
                    truly = row.author != w.origin and row.epoch > w.seen_of_a and \
                        (row.epoch or row.author)
                    # the epoch's source changed a row holding a change A refused in
                    # this epoch (C forwarded B's change, then changed the row itself):
                    # made on a state A refused, whoever wrote A's row last (across
                    # epochs A's refresh of the refused row realigns: not modelled here)
                    truly = truly or w.base in refused
                    if truly:
                        concurrent += 1
                        assert o.verdict.in_conflict, (seed, w, row, ctx.max_replicated)
                    if truly and o.verdict.cause not in (None, Cause.DATA_IN_CONFLICT):
                        flagged += 1  # e.g. an update of a row deleted here (MySQL's cause)
                    if o.verdict.cause is Cause.DATA_IN_CONFLICT:
                        flagged += 1
                        if not truly:  # a false conflict: only inside the window -- the
                            false += 1  # writer held the row's epoch, A had not heard yet
                            assert ctx.max_replicated_epoch(w.origin) < row.epoch \
                                <= w.seen_of_a, (seed, w, row, ctx.max_replicated)
                    if o.verdict.apply:
                        c = w.change
                        rows[w.key] = Stored(c.op is not OpType.DELETE_ROW, dict(c.after),
                                             dst.epoch, w.origin, c.commit_ts_ns)
                        dst.seen.add(w.wid)
                        dst.open.append(w)  # forwarded on, like an accepted change
                    else:
                        dst.seen.add(w.wid)  # rejected: held (its GTID), not forwarded
                        refused.add(w.wid)
                dst.rows = rows
                for st in statuses:  # reflections count only after the epoch is judged
                    state.raise_status(st.server_id, st.applied_by, st.epoch)
            else:  # a secondary applies what arrives
                for w in writes:
                    dst.put(w)
            for st in statuses:
                if st.applied_by != dst.cid:
                    dst.open.append(st)  # apply-status rows flow on
            # the replica now holds the source's epoch e, and through it what the source held
            if src == A:
                dst.seen_of_a = max(dst.seen_of_a, e)
            else:
                dst.seen_of_a = max(dst.seen_of_a, s_seen_of_a(items, dst.seen_of_a))
            if dst.cid != A and dst.seen_of_a:
                dst.open.append(Status(A, dst.seen_of_a, dst.cid))
    return concurrent, flagged, false


def s_seen_of_a(items: list, current: int) -> int:
    """The newest epoch of A an epoch's items show its source held (its reflections)."""
    got = [it.epoch for it in items if isinstance(it, Status) and it.server_id == A]
    return max([current, *got])


@pytest.mark.parametrize("seed", range(40))
def test_no_concurrent_change_is_missed_around_a_ring_of_three(seed):
    _run(seed)


def test_the_ring_model_meets_conflicts_and_counts_false_ones():
    concurrent, flagged, false = map(sum, zip(*(_run(s) for s in range(40)), strict=True))
    assert concurrent > 30 and flagged >= concurrent and false > 0
    # measured (docs/conflicts.md): the share of flagged conflicts that were false
    assert false / flagged < 0.5, (concurrent, flagged, false)
