"""Judging a replicated epoch: the overlay of earlier accepted changes, row functions that
reject a row alone, transactional functions that reject a transaction and everything in the
epoch depending on it, refreshes on the primary, MySQL's counters, exception rows."""

from __future__ import annotations

from gateway.conflict.model import Cause, Change, Context, OpType, Role, Stored
from gateway.conflict.resolve import RowChange, exception_row, judge_epoch
from gateway.conflict.rules import ConflictRule, RuleSet

W, U, D = OpType.WRITE_ROW, OpType.UPDATE_ROW, OpType.DELETE_ROW
PRIMARY = Context(me=1, role=Role.PRIMARY, max_replicated={2: 5})
STABLE = Stored(True, {"v": 1}, epoch=5, author=1)  # cluster 2 had seen it
FRESH = Stored(True, {"v": 1}, epoch=8, author=1)  # changed here after what 2 had seen


def rc(key: int, op: OpType = U, table: str = "t", **after) -> RowChange:
    return RowChange("s", table, key, Change(op, 2, origin_epoch=3, commit_ts_ns=10,
                                             after=after or ({} if op is D else {"v": 2})))


def rows(**stored):
    table = {("s", "t", int(k[1:])): v for k, v in stored.items()}
    return lambda rid: table.get(rid, Stored.absent())


def causes(j):
    return [[o.verdict.cause for o in t] for t in j.outcomes]


def test_without_a_rule_everything_applies():
    j = judge_epoch([[rc(1), rc(2, D)]], RuleSet(), rows(r1=FRESH), PRIMARY, 9)
    assert causes(j) == [[None, None]] and not j.in_conflict and not j.refresh
    assert not +j.counters


def test_a_row_function_rejects_the_conflicting_row_alone_and_refreshes_it():
    rules = RuleSet([ConflictRule("s.*", "NDB$EPOCH")])
    j = judge_epoch([[rc(1), rc(2)]], rules, rows(r1=FRESH, r2=STABLE), PRIMARY, 9)
    assert causes(j) == [[Cause.DATA_IN_CONFLICT, None]]
    assert [o.verdict.apply for o in j.outcomes[0]] == [False, True]
    assert j.rejected == [False] and j.refresh == [("s", "t", 1)]
    assert +j.counters == {"conflict_fn_epoch": 1, "refresh_op_count": 1,
                           "last_conflict_epoch": 9}


def test_a_transactional_function_rejects_the_transaction_and_its_dependents():
    rules = RuleSet([ConflictRule("s.*", "NDB$EPOCH_TRANS")])
    epoch = [
        [rc(1), rc(2)],  # row 1 in conflict: the transaction goes, row 2 with it
        [rc(2)],  # touches row 2, which a rejected transaction wrote: rejected too
        [rc(3)],  # independent: applied
        [rc(3), rc(4, W)],  # depends only on the applied one: applied
    ]
    j = judge_epoch(epoch, rules, rows(r1=FRESH, r2=STABLE, r3=STABLE), PRIMARY, 9)
    T = Cause.TRANS_IN_CONFLICT
    assert causes(j) == [[Cause.DATA_IN_CONFLICT, T], [T], [None], [None, None]]
    assert j.rejected == [True, True, False, False]
    assert j.refresh == [("s", "t", 1), ("s", "t", 2)]
    assert +j.counters == {
        "conflict_fn_epoch_trans": 1, "trans_row_conflict_count": 1,
        "trans_row_reject_count": 3, "trans_reject_count": 2, "trans_detect_iter_count": 1,
        "trans_conflict_commit_count": 1, "refresh_op_count": 2, "last_conflict_epoch": 9}


def test_later_transactions_see_what_earlier_accepted_ones_did_and_not_rejected_ones():
    rules = RuleSet([ConflictRule("s.t", "NDB$MAX", ("ts",))])
    ctx = Context(me=1)
    j = judge_epoch([[rc(1, W, ts=5, v=1)], [rc(1, U, ts=3)], [rc(1, U, ts=7)]], rules,
                    rows(), ctx, 9)
    assert causes(j) == [[None], [Cause.DATA_IN_CONFLICT], [None]]
    # a transactional rejection keeps its insert out: the next update finds no row
    trans = RuleSet([ConflictRule("s.*", "NDB$EPOCH_TRANS")])
    j = judge_epoch([[rc(1), rc(4, W)], [rc(4)]], trans, rows(r1=FRESH), PRIMARY, 9)
    assert causes(j) == [[Cause.DATA_IN_CONFLICT, Cause.TRANS_IN_CONFLICT],
                         [Cause.ROW_DOES_NOT_EXIST]]
    assert j.rejected == [True, True]


def test_a_secondary_applies_and_refreshes_nothing():
    rules = RuleSet([ConflictRule("*", "NDB$EPOCH2_TRANS")])
    ctx = Context(me=2, role=Role.SECONDARY, max_replicated={1: 0})
    j = judge_epoch([[rc(1), rc(2, D)]], rules, rows(r1=FRESH, r2=FRESH), ctx, 4)
    assert causes(j) == [[None, None]] and not j.refresh


def test_rows_of_tables_without_a_rule_apply_beside_judged_ones():
    rules = RuleSet([ConflictRule("s.t", "NDB$EPOCH")])
    j = judge_epoch([[rc(1), rc(1, table="other")]], rules, rows(r1=FRESH), PRIMARY, 9)
    assert causes(j) == [[Cause.DATA_IN_CONFLICT, None]]
    assert [o.function for o in j.outcomes[0]] == ["NDB$EPOCH", ""]


def test_exception_rows_have_mysqls_layout():
    rules = RuleSet([ConflictRule("s.*", "NDB$EPOCH")])
    j = judge_epoch([[rc(7, U, v=2, w="x")]], rules, rows(r7=FRESH), PRIMARY, 9)
    row = exception_row(j.outcomes[0][0], me=1, source_epoch=3, count=1, key_columns=["id"],
                        old={"v": 1}, orig_transid="2:40")
    assert row == {"server_id": 1, "source_server_id": 2, "source_epoch": 3, "count": 1,
                   "NDB$OP_TYPE": "UPDATE_ROW", "NDB$CFT_CAUSE": "DATA_IN_CONFLICT",
                   "NDB$ORIG_TRANSID": "2:40", "id": 7, "v$OLD": 1, "v$NEW": 2,
                   "w$OLD": None, "w$NEW": "x"}


def test_delete_delete_is_counted_and_only_epoch_takes_it_as_a_conflict():
    """A delete of a row gone here too: NDB$EPOCH2 drops it without a conflict (the epoch
    stays stable, nothing refreshed, the transaction kept); NDB$EPOCH_TRANS rejects the
    transaction (ROW_DOES_NOT_EXIST) and refreshes. Both count it."""
    gone = Stored(False, epoch=8, author=1)  # deleted here concurrently
    epoch = [[rc(1, D), rc(2)]]
    j2 = judge_epoch(epoch, RuleSet([ConflictRule("s.*", "NDB$EPOCH2_TRANS")]),
                     rows(r1=gone, r2=STABLE), PRIMARY, 9)
    assert causes(j2) == [[None, None]] and j2.rejected == [False] and not j2.refresh
    assert [o.verdict.apply for o in j2.outcomes[0]] == [False, True]
    assert +j2.counters == {"epoch_delete_delete_count": 1}
    j1 = judge_epoch(epoch, RuleSet([ConflictRule("s.*", "NDB$EPOCH_TRANS")]),
                     rows(r1=gone, r2=STABLE), PRIMARY, 9)
    assert causes(j1) == [[Cause.ROW_DOES_NOT_EXIST, Cause.TRANS_IN_CONFLICT]]
    assert j1.refresh == [("s", "t", 1), ("s", "t", 2)]
    assert j1.counters["epoch_delete_delete_count"] == 1
    assert j1.counters["last_conflict_epoch"] == 9 and "last_stable_epoch" not in j1.counters


def test_judging_an_epoch_without_conflict_leaves_last_stable_epoch_to_the_caller():
    """MySQL's last_stable_epoch is the max replicated epoch once it reaches the last
    conflict epoch, not the judged epoch (the state machine sets it: it knows both)."""
    rules = RuleSet([ConflictRule("s.t", "NDB$EPOCH")])
    j = judge_epoch([[rc(1)]], rules, rows(r1=STABLE), PRIMARY, 9)
    assert not +j.counters


def test_a_change_the_source_made_over_a_rejected_one_is_rejected_too():
    # A ring 1 -> 2 -> 3 -> 1, 1 PRIMARY: cluster 3 wrote row 1 last (accepted here), then
    # forwarded cluster 2's change of it and changed it again itself, in one epoch. 3's
    # second change was made on top of 2's, which is rejected: it must not be applied over
    # a row that never held 2's change, though its author is the row's author here.
    ctx = Context(me=1, role=Role.PRIMARY, max_replicated={2: 5, 3: 5})
    by_3 = Stored(True, {"v": "a"}, epoch=8, author=3)

    def change(origin: int, v: str) -> RowChange:
        return RowChange("s", "t", 1, Change(U, origin, origin_epoch=3, commit_ts_ns=10,
                                             after={"v": v}))

    for fn in ("NDB$EPOCH", "NDB$EPOCH2", "NDB$EPOCH_TRANS", "NDB$EPOCH2_TRANS"):
        rules = RuleSet([ConflictRule("s.*", fn)])
        j = judge_epoch([[change(2, "b")], [change(3, "bc")]], rules, rows(r1=by_3), ctx, 9,
                        source=3)
        assert [o.verdict.apply for t in j.outcomes for o in t] == [False, False], fn
        assert all(o.verdict.cause is not None for t in j.outcomes for o in t), fn
        assert j.refresh == [("s", "t", 1)], fn
    # the same epoch judged without its source: 3's change passes the author rule
    j = judge_epoch([[change(2, "b")], [change(3, "bc")]],
                    RuleSet([ConflictRule("s.*", "NDB$EPOCH")]), rows(r1=by_3), ctx, 9)
    assert [o.verdict.apply for t in j.outcomes for o in t] == [False, True]
    # a column function judges each change on its own values: the later change still wins
    rules = RuleSet([ConflictRule("s.t", "NDB$MAX", ("ts",))])
    j = judge_epoch([[rc(1, U, ts=3)], [rc(1, U, ts=9)]], rules,
                    rows(r1=Stored(True, {"ts": 5}, epoch=8, author=3)), Context(me=1), 9)
    assert causes(j) == [[Cause.DATA_IN_CONFLICT], [None]]
