"""Judging a replicated epoch: every row change of every transaction against the rows as
they stand here, with the rules' functions; what to apply, what to record, what to refresh.

Rows are judged in the epoch's transaction order against the store *plus* what the epoch's
earlier accepted changes did (``judge_epoch`` keeps that overlay). A row whose table has no
rule is applied as it comes. Under a row function (the NDB$ column functions, ``LWW``,
``NDB$EPOCH``, ``NDB$EPOCH2``) a conflicting row is rejected alone. Under a transactional
one (``NDB$EPOCH_TRANS``, ``NDB$EPOCH2_TRANS``) a conflict rejects its whole transaction --
every row of it, the others with cause ``TRANS_IN_CONFLICT`` -- and then every later
transaction of the epoch that touches a row a rejected transaction touched (it depends on
it), and so on: the transactions come in their commit order, so one forward pass reaches the
fixed point MySQL iterates to (``trans_detect_iter_count`` is 1 per epoch with conflicts).

Under an epoch function, once a change of a row is rejected, a later change of that row in
the epoch is rejected too (``DATA_IN_CONFLICT``) when it was made on top of the rejected
one: when the epoch's ``source`` cluster made it (the epoch is the source's log in order, so
the source had applied the rejected change), or when the rejected change's own origin made
it (every origin's changes keep their order). The author rule alone misses that in a ring:
cluster 3 forwards cluster 2's change of a row 3 wrote last, then changes the row again;
3's second change has the row's author here and would be accepted over a row that never
held 2's change.

On a PRIMARY every rejected row is answered by one refresh of the row as it stands here
after the epoch (``refresh``), which realigns the secondaries. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from gateway.core.sql_value import SqlValue

from .functions import FunctionSpec, bind
from .model import Cause, Change, Context, OpType, Role, Stored, Verdict
from .rules import RuleSet

__all__ = ["COUNTERS", "EpochJudgement", "RowChange", "RowOutcome", "exception_row", "judge_epoch"]

RowId = tuple[str, str, Hashable]  # (schema, table, key)


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row change of a replicated transaction: its table, key and the change."""

    schema: str
    table: str
    key: Hashable
    change: Change

    @property
    def row_id(self) -> RowId:
        return (self.schema, self.table, self.key)


@dataclass(frozen=True, slots=True)
class RowOutcome:
    """A row change with its verdict and the function that gave it ("" when no rule)."""

    row: RowChange
    verdict: Verdict
    function: str = ""
    stored: Stored | None = None  # the row here when it was judged (None: not judged)


@dataclass
class EpochJudgement:
    """What ``judge_epoch`` decided: per transaction its row outcomes (in order), whether the
    transaction was rejected whole, the rows to refresh (primary), and MySQL's counters."""

    outcomes: list[list[RowOutcome]] = field(default_factory=list)
    rejected: list[bool] = field(default_factory=list)
    refresh: list[RowId] = field(default_factory=list)
    counters: Counter[str] = field(default_factory=Counter)

    @property
    def in_conflict(self) -> bool:
        return any(o.verdict.in_conflict for t in self.outcomes for o in t)


def _after(stored: Stored, change: Change, op: OpType, epoch: int) -> Stored:
    """The row after ``change`` (applied as ``op``) in this cluster's ``epoch``."""
    if op is OpType.DELETE_ROW:
        return Stored(False, {}, epoch, change.origin, change.commit_ts_ns)
    values = dict(stored.values) if stored.exists and op is not OpType.WRITE_ROW else {}
    if op is OpType.UPDATE_ROW and change.op is OpType.WRITE_ROW:
        values = dict(stored.values)  # an insert applied over the existing row
    values.update(change.after)
    return Stored(True, values, epoch, change.origin, change.commit_ts_ns)


def judge_epoch(transactions: Sequence[Sequence[RowChange]], rules: RuleSet,
                lookup: Callable[[RowId], Stored], ctx: Context, epoch: int,
                source: int = 0) -> EpochJudgement:
    """Judge one replicated epoch (see the module docstring). ``lookup``: the row as this
    cluster stores it before the epoch; ``epoch``: this cluster's epoch the epoch is applied
    in (the rows' new epoch); ``source``: the cluster whose log the epoch is (0: unknown).
    Raises ``RoleNotSetError`` when an epoch function meets role NONE."""
    out = EpochJudgement()
    # the rows accepted changes left, as (row before, change, operation): made a Stored
    # only when a later change of the epoch reads the row again
    overlay: dict[RowId, tuple[Stored, Change, OpType]] = {}
    tainted: set[RowId] = set()  # rows touched by rejected transactional transactions
    # per row, the origins whose change of it an epoch function rejected in this epoch
    refused: dict[RowId, set[int]] = {}
    judges: dict[tuple[str, str], tuple[FunctionSpec, Callable[..., Verdict]] | None] = {}
    primary = ctx.role is Role.PRIMARY
    counters = out.counters

    def judge_of(schema: str, table: str
                 ) -> tuple[FunctionSpec, Callable[..., Verdict]] | None:
        key = (schema, table)
        if key not in judges:
            rule = rules.rule_for(schema, table)
            judges[key] = None if rule is None else bind(rule.function, rule.args, None,
                                                         rules.functions)
        return judges[key]

    for txn in transactions:
        results: list[tuple[RowChange, RowId, Verdict, FunctionSpec | None, Stored]] = []
        staged: dict[RowId, tuple[Stored, Change, OpType]] = {}
        transactional = conflict = False
        for rc in txn:
            rid = (rc.schema, rc.table, rc.key)
            before = staged.get(rid) or overlay.get(rid)
            stored = lookup(rid) if before is None else _after(*before, epoch)
            judge = judge_of(rc.schema, rc.table)
            if judge is None:
                results.append((rc, rid, _APPLY, None, stored))
                staged[rid] = (stored, rc.change, rc.change.op)
                continue
            spec, fn = judge
            transactional |= spec.transactional
            verdict = fn(rc.change, stored, ctx)
            if verdict.delete_delete:
                counters["epoch_delete_delete_count"] += 1
            if verdict.cause is None and spec.transactional and rid in tainted:
                verdict = Verdict(False, Cause.TRANS_IN_CONFLICT,
                                  refresh=verdict.refresh or primary)
            elif (verdict.cause is None and spec.epoch and rid in refused
                  and (rc.change.origin == source or rc.change.origin in refused[rid])):
                verdict = Verdict(False, Cause.DATA_IN_CONFLICT,
                                  refresh=verdict.refresh or primary)
            if verdict.cause is not None:
                conflict = True
            elif verdict.apply:
                staged[rid] = (stored, rc.change, verdict.as_op or rc.change.op)
            results.append((rc, rid, verdict, spec, stored))
        reject_all = transactional and conflict
        outcomes = []
        for rc, _rid, verdict, row_spec, stored in results:
            if reject_all and verdict.cause is None:
                verdict = Verdict(False, Cause.TRANS_IN_CONFLICT, refresh=primary)
            outcomes.append(RowOutcome(rc, verdict, row_spec.name if row_spec else "",
                                       stored if row_spec else None))
        for rc, rid, verdict, row_spec, _stored in results:
            if row_spec is not None and row_spec.epoch and verdict.cause is not None:
                refused.setdefault(rid, set()).add(rc.change.origin)
        if reject_all:
            tainted.update(rid for _, rid, *_ in results)
        else:
            overlay.update(staged)  # the rows this transaction applied
        out.outcomes.append(outcomes)
        out.rejected.append(reject_all)
        if conflict or reject_all:
            _count(counters, outcomes, reject_all)
    seen: set[RowId] = set()
    for outcomes in out.outcomes:
        for o in outcomes:
            if o.verdict.refresh and o.row.row_id not in seen:
                seen.add(o.row.row_id)
                out.refresh.append(o.row.row_id)
    c = out.counters
    c["refresh_op_count"] += len(out.refresh)
    if out.in_conflict:
        c["last_conflict_epoch"] = epoch
        if any(out.rejected):
            c["trans_detect_iter_count"] += 1
            c["trans_conflict_commit_count"] += 1
    # last_stable_epoch is not this epoch's: MySQL sets it to the max replicated epoch once
    # that reaches the last conflict epoch (the caller knows both: the state machine)
    return out


_APPLY = Verdict(True)

#: MySQL's conflict counters, every one a channel reports (0 until counted); the
#: ``last_*_epoch`` ones hold an epoch of this cluster, the others counts.
COUNTERS = (
    "conflict_fn_epoch", "conflict_fn_epoch2", "conflict_fn_epoch_trans",
    "conflict_fn_epoch2_trans", "conflict_fn_max", "conflict_fn_old", "conflict_fn_max_del_win",
    "conflict_fn_max_ins", "conflict_fn_max_del_win_ins", "conflict_fn_lww",
    "trans_row_conflict_count", "trans_row_reject_count", "trans_reject_count",
    "trans_detect_iter_count", "trans_conflict_commit_count", "epoch_delete_delete_count",
    "reflected_op_prepare_count", "reflected_op_discard_count", "refresh_op_count",
    "last_conflict_epoch", "last_stable_epoch",
)

_FN_COUNTER = {
    "NDB$EPOCH": "conflict_fn_epoch", "NDB$EPOCH2": "conflict_fn_epoch2",
    "NDB$EPOCH_TRANS": "conflict_fn_epoch_trans", "NDB$EPOCH2_TRANS": "conflict_fn_epoch2_trans",
    "NDB$OLD": "conflict_fn_old", "NDB$MAX": "conflict_fn_max",
    "NDB$MAX_DELETE_WIN": "conflict_fn_max_del_win", "NDB$MAX_INS": "conflict_fn_max_ins",
    "NDB$MAX_DEL_WIN_INS": "conflict_fn_max_del_win_ins", "LWW": "conflict_fn_lww",
}


def _count(c: Counter[str], outcomes: list[RowOutcome], rejected: bool) -> None:
    for o in outcomes:
        cause = o.verdict.cause
        if cause is None:
            continue
        if cause is not Cause.TRANS_IN_CONFLICT:
            c[_FN_COUNTER.get(o.function, "conflict_fn_other")] += 1
            if rejected:
                c["trans_row_conflict_count"] += 1
        if rejected:
            c["trans_row_reject_count"] += 1
    if rejected:
        c["trans_reject_count"] += 1


def exception_row(outcome: RowOutcome, me: int, source_epoch: int, count: int,
                  key_columns: Sequence[str], old: Mapping[str, SqlValue] | None,
                  orig_transid: str) -> dict[str, SqlValue]:
    """The row of ``schema.table$EX`` recording a rejected change, in MySQL's layout: the
    key ``(server_id, source_server_id, source_epoch, count)``, then ``NDB$OP_TYPE``,
    ``NDB$CFT_CAUSE``, ``NDB$ORIG_TRANSID`` (the origin GTID ``S:T``), the row's key columns,
    and for every other column its value here before (``c$OLD``, from ``old``: None when the
    row is absent) and in the change (``c$NEW``)."""
    ch = outcome.row.change
    cause = outcome.verdict.cause
    if cause is None:
        raise ValueError("an applied change has no exception row")
    row: dict[str, SqlValue] = {
        "server_id": me, "source_server_id": ch.origin, "source_epoch": source_epoch,
        "count": count, "NDB$OP_TYPE": ch.op.name, "NDB$CFT_CAUSE": cause.name,
        "NDB$ORIG_TRANSID": orig_transid,
    }
    key = outcome.row.key
    values = key if isinstance(key, tuple) else (key,)
    # one store row key standing for several key columns is not theirs to split: the caller
    # records their values as the change logged them
    if isinstance(key, tuple) or len(key_columns) == 1:
        for name, value in zip(key_columns, values, strict=True):
            row[name] = value
    names = sorted(set(ch.after) | set(old or {}) - set(key_columns))
    for name in names:
        row[f"{name}$OLD"] = (old or {}).get(name)
        row[f"{name}$NEW"] = ch.after.get(name)
    return row
