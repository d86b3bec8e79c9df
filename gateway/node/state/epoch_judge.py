"""Judging a replicated epoch in C when every rule that judges it is a row epoch function.

``judge_unit`` (``conflict_apply``) is the specification: it builds a ``RowChange`` per
judged row and runs ``gateway.conflict.judge_epoch``, which calls the rule's function per
row. For ``NDB$EPOCH`` and ``NDB$EPOCH2`` (the row variants: a conflict rejects its row
alone) on a PRIMARY, SECONDARY or PASS, a verdict depends only on the change's operation and
origin, the row's existence, epoch and author here, this cluster's max replicated epochs, and
what the epoch's earlier changes of the row did; ``gateway.node._judge.epoch_verdicts``
computes those verdicts in one C pass over the rows' keys, reading the rows' metadata from
the store's cells. Only the rows it does not apply are then made into ``RowOutcome`` values,
and the rest of the judgement (exception rows, refreshes, dropped records) is
``unit_of_outcomes``, shared with ``judge_unit``.

``judge_unit_fast`` returns None whenever it cannot decide exactly as ``judge_unit`` would --
another function (column functions, ``LWW``, the ``_TRANS`` variants, plugins), a rule with
arguments (``judge_unit`` raises for it), role NONE (raises too), or no C accelerator -- and
the caller judges with ``judge_unit``. ``tests/node/test_epoch_judge_accelerator.py`` checks
both give the same judgement on random epochs.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, cast, overload

from gateway.conflict import Cause, Change, Context, OpType, Role, RuleSet, Stored, Verdict
from gateway.conflict.functions import BUILTIN
from gateway.conflict.resolve import RowChange, RowOutcome
from gateway.core import accel
from gateway.core.rowops import python_value
from gateway.core.sql_value import SqlValue
from gateway.node.state import keys
from gateway.node.state.conflict_apply import UnitJudgement, Where, unit_of_outcomes, without
from gateway.node.state.conflict_wire import (
    ExceptionRows,
    Shape,
    exception_run,
    statement_bytes,
    without_wire,
)
from gateway.v1 import statement_pb2, transaction_pb2, value_pb2

FT = value_pb2.FieldType

__all__ = ["judge_unit_fast"]


class _JudgeC(Protocol):
    """The C accelerator ``_judge.c`` (its header comment states the contract)."""

    def epoch_verdicts(self, keys: list[bytes], codes: bytes, origins: list[int],
                       ends: list[int], mre: dict[int, int], source: int, primary: bool,
                       local_epoch: int, overlay: Mapping[bytes, object],
                       lookup: Callable[[bytes], tuple[bool, int, int]],
                       cell: Callable[[bytes], bytes | None], /) -> tuple[bytes, int, int]: ...


#: None without a compiler at install (or GATEWAY_PURE_PYTHON): every epoch takes judge_unit
_judge = cast("_JudgeC | None", accel.load("gateway.node._judge"))

#: The functions the C pass judges, with the flag its row code carries for them.
_FUNCTIONS = {"NDB$EPOCH": 0, "NDB$EPOCH2": 4}
_FN_COUNTER = {"NDB$EPOCH": "conflict_fn_epoch", "NDB$EPOCH2": "conflict_fn_epoch2"}
_OPS = {"insert": (OpType.WRITE_ROW, 1), "update": (OpType.UPDATE_ROW, 2),
        "delete": (OpType.DELETE_ROW, 3)}
_CAUSES = (None, Cause.ROW_DOES_NOT_EXIST, Cause.ROW_ALREADY_EXISTS, Cause.DATA_IN_CONFLICT)
#: a ruled statement's body
_Body = statement_pb2.InsertStatement | statement_pb2.UpdateStatement | \
    statement_pb2.DeleteStatement
#: a ruled statement's record
_Record = statement_pb2.InsertRecord | statement_pb2.UpdateRecord | statement_pb2.DeleteRecord
#: verdict byte -> 1 when the row is not applied (``bytes.translate`` finds them at C speed)
_NOT_APPLIED = bytes(0 if v & 1 else 1 for v in range(256))


def _verdict(v: int) -> Verdict:
    """The ``Verdict`` a verdict byte of ``epoch_verdicts`` stands for."""
    return Verdict(bool(v & 1), _CAUSES[(v >> 1) & 7],
                   OpType.UPDATE_ROW if v & 32 else None, bool(v & 16), bool(v & 64))


def judge_unit_fast(txns: list[transaction_pb2.Transaction], rules: RuleSet, ctx: Context,
                    lookup: Callable[[bytes, bool], Stored],
                    cell: Callable[[bytes], bytes | None], overlay: Mapping[bytes, object],
                    local_epoch: int, source_epoch: int,
                    row_keys: list[list[bytes] | None] | None = None,
                    columns: Callable[[str, str], Mapping[str, int]] | None = None,
                    source: int = 0, raw: Callable[[bytes], bytes | None] | None = None,
                    cells: Callable[[list[bytes]], Mapping[bytes, bytes | None]] | None = None,
                    wires: Sequence[bytes | None] | None = None
                    ) -> UnitJudgement | None:
    """``judge_unit``'s judgement of the epoch (same arguments; ``lookup`` is only called for
    keys in ``overlay``, the rows earlier entries of the batch wrote, and for the values of
    rejected rows), made in C; None when it must be made by ``judge_unit`` (see the module
    docstring). ``cell(key)``: the store's cell of ``key`` (the LSM cell format), or None.
    ``raw(key)``: the row before the epoch as stored (a serialized ``Row``; None: absent or
    deleted), what ``lookup`` reads: with it the exception rows are assembled from bytes
    (``conflict_wire``) when they can be. ``cells(keys)``: ``{k: cell(k)}`` for every key of
    ``keys`` (the judged rows' keys outside ``overlay``) in one call; with it ``cell`` is not
    called -- the store is probed once per epoch rather than once per row. ``wires[n]``: the
    bytes ``txns[n]`` was parsed from, as a transaction entry payload (None: serialize it), cut
    when the judgement leaves records out of it (``without_wire``)."""
    if _judge is None or ctx.role is Role.NONE:
        return None
    row_key = keys.row_key
    rkeys: list[bytes] = []
    codes = bytearray()
    origins: list[int] = []
    ends: list[int] = []
    # per ruled statement: (its first row, transaction, statement, kind, function)
    spots: list[tuple[int, int, int, str, str]] = []
    for t_no, txn in enumerate(txns):
        origin = txn.gtid.server_id
        known = row_keys[t_no] if row_keys else None
        pos = 0
        for s_no, stmt in enumerate(txn.statements):
            kind = stmt.WhichOneof("kind")
            if kind not in _OPS:
                continue
            body = getattr(stmt, kind)
            n = len(body.records)
            t = body.table
            rule = rules.rule_for(t.schema_name, t.table_name)
            if rule is None:
                pos += n
                continue
            flag = _FUNCTIONS.get(rule.function)
            if (flag is None or rule.args
                    or rules.functions.get(rule.function) is not BUILTIN[rule.function]):
                return None
            spots.append((len(rkeys), t_no, s_no, kind, rule.function))
            if known is not None:
                rkeys += known[pos:pos + n]
            else:
                s, tb = t.schema_name, t.table_name
                rkeys += [row_key(s, tb, r.key_values) for r in body.records]
            pos += n
            codes += bytes((_OPS[kind][1] | flag,)) * n
            origins += [origin] * n
        ends.append(len(rkeys))
    if not rkeys:
        return UnitJudgement(list(txns), counters=Counter(refresh_op_count=0))

    def meta(k: bytes) -> tuple[bool, int, int]:
        st = lookup(k, False)
        return st.exists, st.epoch, st.author

    got: Mapping[bytes, bytes | None] | None = None
    if cells is not None:
        got = cells([k for k in rkeys if k not in overlay] if overlay else rkeys)
        cell = got.__getitem__  # every key the C pass asks for is in it
    verdicts, dd, first_dd = _judge.epoch_verdicts(
        rkeys, bytes(codes), origins, ends, dict(ctx.max_replicated), source,
        ctx.role is Role.PRIMARY, local_epoch, overlay, meta, cell)
    flags = verdicts.translate(_NOT_APPLIED)
    i = flags.find(1)
    if i < 0:
        counters: Counter[str] = Counter(epoch_delete_delete_count=dd) if dd else Counter()
        counters["refresh_op_count"] = 0
        return UnitJudgement(list(txns), counters=counters)
    firsts = [s[0] for s in spots]
    if raw is not None:
        wired = _judged_wire(txns, spots, firsts, rkeys, verdicts, flags, i, ends, dd,
                             first_dd, ctx.me, local_epoch, source_epoch, raw, columns,
                             overlay, got, wires)
        if wired is not None:
            return wired
    outcomes: list[tuple[RowOutcome, Where]] = []
    refresh: set[bytes] = set()
    counts = _Counts(ends, dd, first_dd)
    verdict_of: dict[int, Verdict] = {}
    types_of: dict[tuple[int, int], dict[str, int]] = {}
    while i >= 0:
        first, t_no, s_no, kind, function = spots[bisect_right(firsts, i) - 1]
        txn = txns[t_no]
        body = getattr(txn.statements[s_no], kind)
        rec = body.records[i - first]
        fields = body.set_fields if kind == "update" else body.fields
        types = types_of.get((t_no, s_no))
        if types is None:
            types = types_of[(t_no, s_no)] = {f.name: f.type for f in body.key_fields}
            types.update((f.name, f.type) for f in fields)
        v = verdicts[i]
        verdict = verdict_of.get(v)
        if verdict is None:
            verdict = verdict_of[v] = _verdict(v)
        stored = Stored(bool(v & 128))
        after: dict[str, SqlValue] = {}
        if verdict.cause is not None:
            counts.conflicts(function, i)
            # what the exception row shows: the row before the epoch and the change's
            # values (``judge_unit`` reads them the same way, after judging without them)
            if stored.exists:
                stored = lookup(rkeys[i], True)
            if kind != "delete":
                after = {f.name: python_value(x)
                         for f, x in zip(fields, rec.after_values, strict=False)}
        if verdict.refresh:
            refresh.add(rkeys[i])
        t = body.table
        row = RowChange(t.schema_name, t.table_name, rkeys[i], Change(
            _OPS[kind][0], txn.gtid.server_id, txn.epoch, txn.commit_timestamp_ns, after))
        outcomes.append((RowOutcome(row, verdict, function, stored),
                         Where(t_no, s_no, i - first, t, body.key_fields, rec.key_values,
                               cast("dict[str, FT]", types))))
        i = flags.find(1, i + 1)
    return unit_of_outcomes(txns, outcomes, counts.counters(len(refresh), local_epoch),
                            counts.in_conflict, ctx.me, lookup, source_epoch, columns)


def _judged_wire(txns: list[transaction_pb2.Transaction],
                 spots: list[tuple[int, int, int, str, str]], firsts: list[int],
                 rkeys: list[bytes], verdicts: bytes, flags: bytes, i: int, ends: list[int],
                 dd: int, first_dd: int, me: int, local_epoch: int, source_epoch: int,
                 raw: Callable[[bytes], bytes | None],
                 columns: Callable[[str, str], Mapping[str, int]] | None,
                 overlay: Mapping[bytes, object] | None = None,
                 cells: Mapping[bytes, bytes | None] | None = None,
                 wires: Sequence[bytes | None] | None = None
                 ) -> UnitJudgement | None:
    """The tail of ``judge_unit_fast`` (the rows not applied, from row ``i`` on, marked in
    ``flags``) with the exception rows assembled from bytes (``conflict_wire``): the same
    judgement as ``unit_of_outcomes`` gives, or None when a row needs it. With ``overlay``
    and ``cells`` (dictionaries: ``raw(k)`` is ``overlay[k]`` for a key there, else the
    value of ``cells[k]``), each statement's rows are taken by ``ExceptionRows.add_run`` in
    C for as long as its fast path holds, and row by row here from a row it leaves."""
    run = exception_run is not None and isinstance(overlay, dict) and isinstance(cells, dict)
    rows = ExceptionRows(me, source_epoch)
    counts = _Counts(ends, dd, first_dd)
    dropped: dict[int, set[tuple[int, int]]] = {}
    refresh: list[tuple[bytes, statement_pb2.TableMetadata,
                        Sequence[statement_pb2.FieldMetadata], Sequence[value_pb2.Value]]] = []
    seen: set[bytes] = set()
    shapes: dict[tuple[int, int], Shape] = {}
    transids: dict[int, str] = {}
    # the statement of the row at hand, looked up again only when a row leaves it
    end = -1
    first = t_no = s_no = origin = 0
    kind = function = transid = ""
    body: _Body | None = None
    shape: Shape | None = None
    gone: set[tuple[int, int]] = set()
    while i >= 0:
        if i >= end:
            spot = bisect_right(firsts, i) - 1
            first, t_no, s_no, kind, function = spots[spot]
            end = firsts[spot + 1] if spot + 1 < len(firsts) else len(rkeys)
            txn = txns[t_no]
            body = cast("_Body", getattr(txn.statements[s_no], kind))
            origin = txn.gtid.server_id
            transid = transids.get(t_no, "")
            if not transid:
                transid = transids[t_no] = f"{origin}:{txn.gtid.trans_id}"
            gone = dropped.setdefault(t_no, set())
            shape = None
            data = b""
        assert body is not None
        if run:
            if shape is None:
                shape = _shape(shapes, t_no, s_no, kind, body, columns)
            if not data:
                data = body.SerializeToString()
            nxt, conflicts, first_conflict = rows.add_run(
                verdicts, flags, i, end, first, data, rkeys,
                cast("dict[bytes, bytes | None]", overlay),
                cast("dict[bytes, bytes | None]", cells), kind, origin, transid, shape, gone,
                s_no, seen, refresh, body, _KeyValues)
            if conflicts:
                counts.conflicts(function, first_conflict, conflicts)
            if nxt != i:
                i = nxt
                continue
        r_no = i - first
        rec = body.records[r_no]
        v = verdicts[i]
        gone.add((s_no, r_no))
        cause = (v >> 1) & 7
        if cause:
            counts.conflicts(function, i)
            if shape is None:
                shape = _shape(shapes, t_no, s_no, kind, body, columns)
            stored = raw(rkeys[i]) if v & 128 else None
            if not rows.add(kind, cause, origin, transid, body.table, shape,
                            rec.SerializeToString(), stored):
                return None
        if v & 16:
            k = rkeys[i]
            if k not in seen:
                seen.add(k)
                refresh.append((k, body.table, body.key_fields, rec.key_values))
        i = flags.find(1, i + 1)
    exceptions = []
    for head, records in rows.statements:
        data = statement_bytes(head, records)
        stmt = statement_pb2.Statement.FromString(data)
        if stmt.SerializeToString() != data:
            return None  # bytes the specification would write otherwise
        exceptions.append(stmt)
    out = UnitJudgement(list(txns), exceptions, refresh,
                        counts.counters(len(seen), local_epoch), counts.in_conflict)
    out.exception_parts = rows.statements
    for t_no, gone in dropped.items():
        out.transactions[t_no] = without_wire(txns[t_no], gone, wires[t_no] if wires else None) \
            or without(txns[t_no], gone)
    out.gone = dropped
    return out


class _Counts:
    """The conflict counters of a judged epoch, in the order ``judge_epoch`` first counts
    them, which is the order they are written in: a delete-delete as its row is judged (after
    the rows before it: ``(row, 1)``), a function's conflicts once the first transaction with
    one ends (before the row at its end: ``(end, 0)``). ``ends``: the row each transaction
    ends at; ``dd`` delete-deletes, the first at row ``first_dd``."""

    __slots__ = ("_dd", "_ends", "_fn", "_order", "in_conflict")

    def __init__(self, ends: list[int], dd: int, first_dd: int) -> None:
        self._ends = ends
        self._dd = dd
        self._order: dict[str, tuple[int, int, int]] = {}
        if dd:
            self._order["epoch_delete_delete_count"] = (first_dd, 1, 0)
        self._fn: Counter[str] = Counter()
        self.in_conflict = False

    def conflicts(self, function: str, row: int, n: int = 1) -> None:
        """Count ``n`` rows in conflict under ``function``, the first of them at ``row``."""
        self.in_conflict = True
        name = _FN_COUNTER[function]
        if name not in self._order:
            self._order[name] = (self._ends[bisect_right(self._ends, row)], 0, row)
        self._fn[name] += n

    def counters(self, refreshed: int, local_epoch: int) -> Counter[str]:
        """The counters in order, then ``refresh_op_count`` and, with a conflict, the
        ``last_conflict_epoch``."""
        order = self._order
        out = Counter({name: self._dd if name == "epoch_delete_delete_count" else self._fn[name]
                       for name in sorted(order, key=order.__getitem__)})
        out["refresh_op_count"] = refreshed
        if self.in_conflict:
            out["last_conflict_epoch"] = local_epoch
        return out


class _KeyValues(Sequence[value_pb2.Value]):
    """The key values of record ``r`` of ``records``, read when used: a refresh's key values
    serve only the refresh of a row absent here (a delete), so most are never read."""

    __slots__ = ("_r", "_records")

    def __init__(self, records: Sequence[_Record], r: int) -> None:
        self._records = records
        self._r = r

    @overload
    def __getitem__(self, i: int) -> value_pb2.Value: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[value_pb2.Value]: ...

    def __getitem__(self, i: int | slice) -> value_pb2.Value | Sequence[value_pb2.Value]:
        return self._records[self._r].key_values[i]

    def __len__(self) -> int:
        return len(self._records[self._r].key_values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


def _shape(shapes: dict[tuple[int, int], Shape], t_no: int, s_no: int, kind: str, body: _Body,
           columns: Callable[[str, str], Mapping[str, int]] | None) -> Shape:
    """The ``Shape`` of statement ``s_no`` of transaction ``t_no`` (``body``, a ``kind``
    statement), made once per statement and kept in ``shapes``."""
    shape = shapes.get((t_no, s_no))
    if shape is None:
        fields = cast("statement_pb2.UpdateStatement", body).set_fields \
            if kind == "update" else \
            cast("statement_pb2.InsertStatement", body).fields if kind == "insert" else ()
        t = body.table
        shape = shapes[(t_no, s_no)] = Shape(
            [(f.name, f.type) for f in body.key_fields],
            [(f.name, f.type) for f in fields],
            columns(t.schema_name, t.table_name) if columns else {})
    return shape
