"""The conflict rules' part of applying a replicated epoch (``epoch_apply``, steps 3-5 of its
docstring): the functions and rules known here, the screen that lets an epoch of fresh
inserts pass unjudged (``_all_fresh``), the judgement (``_judge``: ``epoch_judge`` in C,
``conflict_apply`` the specification), the derived transaction of exception and refresh
rows (``_derive``: ``conflict_wire`` from bytes), what the entry finally holds
(``_record_outcome``) and MySQL's conflict counters.

``EpochJudging`` is a base of ``EpochApply`` (and so of ``StoreStateMachine``), not used
alone: the attributes annotated below are the state machine's, set by its ``_load``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter

from gateway.conflict import ConflictRule, Context, FunctionSpec, Role, RuleSet, Stored
from gateway.core.messages import TypeTag
from gateway.node.base.validation import TableSchema, check_statements
from gateway.node.state import keys
from gateway.node.state.conflict_apply import (
    UnitJudgement,
    add_refresh,
    derived_transaction,
    fresh_insert_keys,
    judge_unit,
    ruled_statements,
    stored_of_row,
)
from gateway.node.state.conflict_wire import derived_wire, read_row, read_rows
from gateway.node.state.epoch_judge import judge_unit_fast
from gateway.node.state.epoch_outcome import outcome_bytes, outcome_record
from gateway.node.state.store_ops import MISSING as _MISSING
from gateway.node.state.store_ops import Ops, RowMeta, meta_op
from gateway.node.state.txn_apply import TransactionApply
from gateway.node.state.wire import encode_transaction, meta_parts, parse_txn, put_pairs
from gateway.replication import ReplicationState
from gateway.v1 import replication_pb2, statement_pb2, transaction_pb2

__all__ = ["U64", "EpochJudging"]

#: Durable counters and watermarks: big-endian unsigned 64-bit.
U64 = struct.Struct(">Q")
#: The counters that hold an epoch (the newest wins), not a count.
_LAST_EPOCHS = frozenset({"last_conflict_epoch", "last_stable_epoch"})


class EpochJudging(TransactionApply):
    """Judges replicated epochs under the conflict rules (see the module docstring)."""

    cluster_id: int
    replication: ReplicationState
    conflict_rules: dict[str, ConflictRule]
    conflict_role: Role
    conflict_functions: Mapping[str, FunctionSpec]
    load_functions: Callable[[], Mapping[str, FunctionSpec]] | None
    conflict_counters: dict[str, dict[str, int]]
    _rules_for: dict[str, ConflictRule] | None
    _rules: RuleSet | None
    #: judge epochs under the row epoch functions in C (``epoch_judge``); the tests turn it
    #: off to compare with ``judge_unit``, the specification
    judge_in_c: bool = True
    #: build the exception and refresh rows from bytes, and the derived transaction's rows
    #: with the C insert path (``conflict_wire``); off: ``conflict_apply``'s specification
    derive_in_c: bool = True

    def functions(self, need: str | None = None) -> Mapping[str, FunctionSpec]:
        """The conflict functions known here; when ``need`` is not one of them, the plugins'
        are loaded first (once; ``load_functions`` may raise, naming what failed)."""
        if need is not None and need not in self.conflict_functions \
                and self.load_functions is not None:
            self.conflict_functions = self.load_functions()
            self.load_functions = None
        return self.conflict_functions

    def _ruleset(self) -> RuleSet:
        rules = self.conflict_rules
        if self._rules is None or self._rules_for is not rules:
            for r in rules.values():
                self.functions(r.function)
            self._rules = RuleSet(rules.values(), self.conflict_functions, checked=False)
            self._rules_for = rules
        return self._rules

    def _missing_function(self, txns: list[transaction_pb2.Transaction]) -> str | None:
        """The function of a rule judging one of ``txns``' tables that this node does not
        have (a plugin it did not load), or None."""
        rules = self._ruleset()
        for txn in txns:
            for _, rule in ruled_statements(txn, rules):
                if rule.function not in rules.functions:
                    return rule.function
        return None

    def _all_fresh(self, txns: list[transaction_pb2.Transaction],
                   row_keys: list[list[bytes] | None], overlay: dict[bytes, bytes | None]
                   ) -> tuple[list[bytes] | None, dict[bytes, bytes | None] | None]:
        """``(keys, None)``: the keys of the epoch's judged transactions when its judged
        changes are all inserts of keys this cluster holds nothing for (``fresh_insert_keys``;
        empty: nothing to judge): every rule applies them as they came, the same outcome as
        judging them row by row. ``(None, cells)``: the epoch must be judged; ``cells`` (or
        None) the store's cells of those keys, read by the same check (``held_cells``)."""
        got = fresh_insert_keys(txns, self._ruleset(), self.conflict_role, row_keys)
        if got is None:
            return None, None
        if not overlay.keys().isdisjoint(got):
            return None, None
        held = self.store.held_cells(got)  # a dict of every key of got, when not None
        if held is None:  # fresh unless a key repeats (its second insert finds the first)
            return (got, None) if len(set(got)) == len(got) else (None, None)
        return (None, held) if len(held) == len(got) else (None, None)

    def _judge(self, unit: replication_pb2.ReplicatedEpoch,
               txns: list[transaction_pb2.Transaction], ops: Ops,
               overlay: dict[bytes, bytes | None], row_keys: list[list[bytes] | None],
               schemas: Mapping[str, TableSchema] | None = None,
               held: Mapping[bytes, bytes | None] | None = None,
               wires: Sequence[bytes | None] | None = None) -> UnitJudgement:
        """Judge a replicated epoch's transactions with the conflict rules (see
        ``conflict_apply``) against the rows as they stand before it; raises
        ``ConflictConfigError`` / ``RoleNotSetError`` for rules that cannot run here.
        ``schemas``: the tables' shapes with those the entry creates (default: recorded);
        ``held``: store cells read already for keys outside ``overlay`` (``_all_fresh``);
        ``wires[n]``: the entry payload ``txns[n]`` was received as (None: replaced)."""
        known_shapes = self.schemas if schemas is None else schemas
        rep = self.replication
        ctx = Context(self.cluster_id, self.conflict_role,
                      {p: rep.max_replicated_epoch(p) for p in rep.peers()})
        deleted: dict[bytes, tuple[int, int, int]] | None = None

        def lookup(k: bytes, values: bool) -> Stored:
            nonlocal deleted
            raw = overlay.get(k, _MISSING)
            if raw is _MISSING:
                v = self.store.get_version(k)
                if v is None:
                    return Stored.absent()
                return stored_of_row(v.value, (v.epoch, v.author, v.commit_ts), values)
            if raw is None:  # deleted by an earlier entry of this batch: its metadata
                if deleted is None:
                    deleted = {k: (ep, au, ts) for k, v, ep, au, ts in ops if v is None}
                return stored_of_row(None, deleted.get(k))
            return stored_of_row(raw, None, values)

        def columns(schema: str, table: str) -> Mapping[str, int]:
            known = known_shapes.get(f"{schema}.{table}")
            return known.columns if known is not None else {}

        cells: dict[bytes, bytes | None] = {}
        store_cells = self.store.cells

        def fetch(ks: list[bytes]) -> dict[bytes, bytes | None]:
            cells.update(held or {})  # kept: the exception and refresh rows read them
            rest = [k for k in ks if k not in held] if held else ks
            if rest:
                cells.update(store_cells(rest))
            return cells

        fast = judge_unit_fast(txns, self._ruleset(), ctx, lookup, self.store.cell, overlay,
                               unit.local_epoch, unit.source_epoch, row_keys, columns,
                               source=unit.source_id,
                               raw=(lambda k: read_row(k, overlay, cells, self.store.get))
                               if self.derive_in_c else None,
                               cells=fetch, wires=wires) if self.judge_in_c else None
        if fast is not None:
            fast.cells = cells
            return fast
        return judge_unit(txns, self._ruleset(), ctx, lookup, unit.local_epoch,
                          unit.source_epoch, row_keys, columns, source=unit.source_id)

    def _derive(self, unit: replication_pb2.ReplicatedEpoch, judged: UnitJudgement,
                index: int, ops: Ops, overlay: dict[bytes, bytes | None]) -> None:
        """Write this cluster's derived transaction for a judged epoch (exception rows, and
        refreshes of the rows as they now stand), count the conflicts, and record what the
        entry finally holds (``m dx:<index>``: the accepted transactions, then the derived
        one) for the change feed and the appliers."""
        me = self.cluster_id
        derived = payload = data = None
        stmts: Sequence[statement_pb2.Statement] = ()
        if self.derive_in_c:  # the specification's statements and bytes, from bytes
            raws = read_rows(list(map(itemgetter(0), judged.refresh)), overlay, judged.cells,
                             self.store.get)
            got = derived_wire(me, unit.derived_trans_id, unit.local_epoch,
                               unit.derived_commit_ts, judged.exceptions,
                               map(itemgetter(1), judged.refresh), raws,
                               judged.exception_parts)
            if got is not None:
                stmts, data = got
                payload = bytes((TypeTag.TRANSACTION,)) + data
        if data is None:
            stmts = list(judged.exceptions)
            for k, table, kf, kv in judged.refresh:
                add_refresh(stmts, table, kf, kv, self._get(k, overlay))
            if stmts:
                derived = derived_transaction(me, unit.derived_trans_id, unit.local_epoch,
                                              unit.derived_commit_ts, stmts)
                payload = encode_transaction(derived) if self.derive_in_c else None
        if stmts:
            # ``derived_problem`` checked it before anything of the entry was written; then
            # the C insert path when every statement is an insert it takes: the same rows
            self._record_schemas(check_statements(stmts, self.schemas, rows=False),
                                 ops, index, str(me))
            rows = None if payload is None else self._replicated_rows(payload, index,
                                                                      unit.local_epoch)
            if rows is not None:
                ops += rows
                put_pairs(overlay, rows)
            else:
                if derived is None:  # the message, parsed from its bytes
                    derived = transaction_pb2.Transaction.FromString(data or b"")
                self._write_statements(derived, index, derived.gtid, RowMeta(
                    unit.local_epoch, me, unit.derived_commit_ts), ops, overlay)
        self._record_outcome(unit, judged.transactions, derived, index, ops, data)

    def _record_outcome(self, unit: replication_pb2.ReplicatedEpoch,
                        accepted: list[transaction_pb2.Transaction],
                        derived: transaction_pb2.Transaction | None, index: int,
                        ops: Ops, data: bytes | None = None) -> None:
        """Record what entry ``index`` holds (``m dx:<index>``): its transactions as applied
        (``accepted``), then this cluster's ``derived`` one (or its bytes ``data``)."""
        ops.append(meta_op(keys.meta_key(f"dx:{index}"), outcome_bytes(
            unit, accepted, derived, data) if self.derive_in_c else outcome_record(
            unit, accepted, derived)))

    def _stable_epoch(self, unit: replication_pb2.ReplicatedEpoch,
                      state: ReplicationState) -> int:
        """MySQL's ``last_stable_epoch`` after an epoch of ``unit``'s channel without a
        conflict: the source's max replicated epoch once it reached the channel's last
        conflict epoch (an epoch of this cluster that looped back with no conflict found or
        corrected since it was logged), else 0 (not stable yet: unchanged)."""
        mre = state.max_replicated_epoch(unit.source_id)
        got = self.conflict_counters.get(unit.channel, {})
        if mre and mre >= got.get("last_conflict_epoch", 0) \
                and mre > got.get("last_stable_epoch", 0):
            return mre
        return 0

    def _count_conflicts(self, channel: str, got: dict[str, int], ops: Ops) -> None:
        """Add one epoch's conflict counters of ``channel`` to the durable ones
        (``m cc:<channel>:<name>``); ``last_conflict_epoch`` and ``last_stable_epoch`` keep
        the newest epoch, the others add up (``conflict_fn_epoch`` is a count)."""
        counters = dict(self.conflict_counters.get(channel, {}))
        for name, n in got.items():
            counters[name] = max(counters.get(name, 0), n) if name in _LAST_EPOCHS \
                else counters.get(name, 0) + n
            ops.append(meta_op(keys.meta_key(f"cc:{channel}:{name}"),
                               U64.pack(counters[name])))
        self.conflict_counters = {**self.conflict_counters, channel: counters}

    def _replicated_rows(self, data: bytes, index: int, local_epoch: int) -> Ops | None:
        """``_wire_rows`` for a replicated (origin) transaction, its entry payload ``data``
        (``_received``): its GTID, author and commit timestamp, and this cluster's
        ``local_epoch``; None: the general path."""
        parsed = parse_txn(data)
        if parsed is None:
            return None
        sid, tid, _, author, commit_ts, stmts, _ = parsed
        if not stmts:
            return None
        _, tail, _ = meta_parts(sid, tid, local_epoch, author, commit_ts, index)
        return self._wire_rows(data, stmts, tail, local_epoch, author, commit_ts)
