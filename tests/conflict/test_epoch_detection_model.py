"""NDB$EPOCH's detection against a reference model, two clusters: A the PRIMARY, B the
SECONDARY, random local writes on a few hot keys, epochs sealed and shipped both ways with
random delays. A judges each of B's epochs with its max replicated epoch for B, kept by
``ReplicationState`` from B's reflected apply-status rows, as the node does. The model knows
what B had really applied of A when it wrote each change, so it knows which changes were truly
concurrent with A's: every one of them must be detected (no missed conflict, ever), and every
conflict it flags that was not concurrent must lie in the documented window (A had not yet
heard that B applied the epoch of A's change)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from gateway.conflict.model import Cause, Change, Context, OpType, Role, Stored
from gateway.conflict.resolve import RowChange, judge_epoch
from gateway.conflict.rules import ConflictRule, RuleSet
from gateway.replication import ReplicationState

A, B = 1, 2
RULES = RuleSet([ConflictRule("s.t", "NDB$EPOCH")])


@dataclass
class Write:
    key: int
    change: Change
    seen_of_a: int  # B's writes: the newest epoch of A that B had applied when writing it
    base: int = 0  # the write (its commit ts) whose row the writer changed; 0: none


class Cluster:
    def __init__(self, cid: int) -> None:
        self.cid = cid
        self.rows: dict[int, Stored] = {}
        self.epoch = 1
        self.open: list = []  # items of the open epoch: Write or ("as", server, epoch)
        self.sealed: list[tuple[int, list]] = []
        self.state = ReplicationState(cid)
        self.applied_of_peer = 0
        self.versions: dict[int, int] = {}  # key -> commit ts of the write the row holds

    def write(self, rng: random.Random, key: int, ts: int) -> Write:
        row = self.rows.get(key, Stored.absent())
        if not row.exists:
            op = OpType.WRITE_ROW
        else:
            op = rng.choice([OpType.UPDATE_ROW, OpType.UPDATE_ROW, OpType.DELETE_ROW])
        change = Change(op, self.cid, self.epoch, ts,
                        {} if op is OpType.DELETE_ROW else {"v": ts})
        self.rows[key] = Stored(op is not OpType.DELETE_ROW, dict(change.after), self.epoch,
                                self.cid, ts)
        w = Write(key, change, self.applied_of_peer, self.versions.get(key, 0))
        self.versions[key] = ts
        self.open.append(w)
        return w

    def seal(self) -> None:
        self.sealed.append((self.epoch, self.open))
        self.open = []
        self.epoch += 1


def _run(seed: int) -> tuple[int, int, int]:
    rng = random.Random(seed)
    a, b = Cluster(A), Cluster(B)
    to_b = to_a = 0  # next sealed epoch to ship each way
    detected = concurrent = false = 0
    for ts in range(1, 401):
        r = rng.random()
        if r < 0.25:
            a.write(rng, rng.randrange(3), ts)
        elif r < 0.5:
            b.write(rng, rng.randrange(3), ts)
        elif r < 0.6:
            a.seal()
        elif r < 0.7:
            b.seal()
        elif r < 0.85 and to_b < len(a.sealed):  # B applies A's next epoch (secondary)
            e, items = a.sealed[to_b]
            to_b += 1
            for w in items:
                if isinstance(w, Write):
                    c = w.change
                    b.versions[w.key] = c.commit_ts_ns
                    b.rows[w.key] = Stored(c.op is not OpType.DELETE_ROW, dict(c.after),
                                           b.epoch, A, c.commit_ts_ns)
            b.applied_of_peer = e
            b.open.append(("as", A, e))  # the reflection, in B's log after the apply
        elif to_a < len(b.sealed):  # A judges B's next epoch
            e, items = b.sealed[to_a]
            to_a += 1
            writes = [w for w in items if isinstance(w, Write)]
            mre = a.state.max_replicated_epoch(B)  # as of before this epoch
            ctx = Context(A, Role.PRIMARY, {B: mre})

            def lookup(rid, _rows=a.rows):
                return _rows.get(rid[2], Stored.absent())

            # the model's truth, row by row in B's order, against A's rows as they evolve
            j = judge_epoch([[RowChange("s", "t", w.key, w.change)] for w in writes], RULES,
                            lookup, ctx, a.epoch)
            rows = dict(a.rows)
            refused: set[int] = set()  # B's writes A rejected in this epoch (commit ts)
            for w, outcome in zip(writes, j.outcomes, strict=True):
                v = outcome[0].verdict
                row = rows.get(w.key, Stored.absent())
                # concurrent with A's row, or made on top of a change of B that A rejected
                # in this epoch (so on a state A refused)
                truly = (row.author == A and row.epoch > w.seen_of_a) or w.base in refused
                if not v.apply:
                    refused.add(w.change.commit_ts_ns)
                if truly:
                    concurrent += 1
                    assert v.in_conflict, (seed, w, row, mre)  # never missed
                detected += v.in_conflict  # a delete of a row gone here: ROW_DOES_NOT_EXIST
                if v.cause is Cause.DATA_IN_CONFLICT and not truly:
                    false += 1
                    # the window: A had not heard that B applied the row's epoch
                    assert row.author == A and mre < row.epoch <= w.seen_of_a, \
                        (seed, w, row, mre)
                if v.apply:
                    c = w.change
                    rows[w.key] = Stored(c.op is not OpType.DELETE_ROW, dict(c.after),
                                         a.epoch, B, c.commit_ts_ns)
            a.rows = rows
            for item in items:
                if not isinstance(item, Write):
                    a.state.raise_status(item[1], B, item[2])
    return detected, concurrent, false


@pytest.mark.parametrize("seed", range(60))
def test_no_concurrent_change_is_missed_and_false_conflicts_stay_in_the_window(seed):
    _run(seed)


def test_the_model_meets_conflicts_and_false_ones():
    totals = [sum(x) for x in zip(*(_run(s) for s in range(60)), strict=True)]
    detected, concurrent, false = totals
    assert concurrent > 50 and detected >= concurrent and false > 0
