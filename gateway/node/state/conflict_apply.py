"""The state machine's use of the conflict rules on a replicated epoch (docs/conflicts.md).

``judge_unit`` turns the epoch's transactions into row changes (insert, update and delete
records, with the before images the origin logged), judges them with
``gateway.conflict.judge_epoch`` against the rows as this cluster holds them, and returns:

- the transactions to write: each origin transaction with its rejected records left out (a
  transaction rejected whole keeps its GTID, so it is not fetched again, and writes nothing);
- the *derived* transaction of this cluster (GTID reserved by the leader in the entry:
  ``derived_trans_id``): one row per rejected change in the table's exceptions table
  ``schema.table$EX`` (MySQL's layout) and, on a PRIMARY, the keys to refresh -- the state
  machine adds the refresh operations (the rows as they stand after the epoch) before writing
  it, so the secondaries receive this cluster's version of every row in conflict;
- MySQL's counters.

Deterministic: every replica judges the same entry against the same state the same way.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from gateway.conflict import Change, ConflictRule, Context, OpType, Role, RuleSet, Stored
from gateway.conflict.functions import BUILTIN, ConflictConfigError, bind
from gateway.conflict.resolve import (
    RowChange,
    RowId,
    RowOutcome,
    exception_row,
    judge_epoch,
)
from gateway.core.rowops import python_value, value_message
from gateway.core.sql_value import SqlValue
from gateway.node.state import keys
from gateway.v1 import gateway_pb2, gtid_pb2, statement_pb2, transaction_pb2, value_pb2

__all__ = ["UnitJudgement", "Where", "add_refresh", "append_merged", "exception_statement",
           "fresh_insert_keys",
           "judge_unit", "ruled_statements", "stored_of_row", "unit_of_outcomes", "without"]

FT = value_pb2.FieldType
_U = FT.FIELD_TYPE_UNSIGNED
_S = FT.FIELD_TYPE_VARCHAR
_EX_KEY = [statement_pb2.FieldMetadata(name=n, type=_U)
           for n in ("server_id", "source_server_id", "source_epoch", "count")]
_EX_HEAD = [statement_pb2.FieldMetadata(name=n, type=_S)
            for n in ("NDB$OP_TYPE", "NDB$CFT_CAUSE", "NDB$ORIG_TRANSID")]


def exception_statement(schema: str, table: str, cols: Iterable[tuple[str, FT]]
                        ) -> statement_pb2.InsertStatement:
    """The insert statement, without records, of ``schema.table``'s exceptions table
    (``table$EX``): the four key columns, the three ``NDB$`` columns, then ``cols`` (name,
    type) as given."""
    return statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name=schema, table_name=f"{table}$EX"),
        key_fields=_EX_KEY, fields=[*_EX_HEAD, *(statement_pb2.FieldMetadata(name=n, type=t)
                                                 for n, t in cols)])


@dataclass
class Where:
    """Where a row change came from: its statement and record, and its key as logged."""

    txn: int
    stmt: int
    rec: int
    table: statement_pb2.TableMetadata
    key_fields: Sequence[statement_pb2.FieldMetadata]
    key_values: Sequence[value_pb2.Value]
    types: dict[str, FT]


@dataclass
class UnitJudgement:
    """What ``judge_unit`` decided (see the module docstring)."""

    transactions: list[transaction_pb2.Transaction]
    exceptions: list[statement_pb2.Statement] = field(default_factory=list)
    refresh: list[tuple[bytes, statement_pb2.TableMetadata,
                        Sequence[statement_pb2.FieldMetadata], Sequence[value_pb2.Value]]] = field(
        default_factory=list)  # (row key, table, key fields, key values)
    counters: Counter[str] = field(default_factory=Counter)
    in_conflict: bool = False
    #: per transaction (by position) that lost records, the ``(statement, record)`` numbers
    #: of the records left out of it (``without``'s ``gone``)
    gone: dict[int, set[tuple[int, int]]] = field(default_factory=dict)
    #: store cells read while judging (row key -> cell, None: nothing stored), for the
    #: exception and refresh rows (``EpochApply``)
    cells: dict[bytes, bytes | None] = field(default_factory=dict)
    #: ``exceptions`` as the bytes they were assembled from (``conflict_wire``): per statement
    #: its insert head and records, what each serializes to; None when built in Python
    exception_parts: list[tuple[bytes, list[bytes]]] | None = None

    @property
    def dropped(self) -> bool:
        """Some record of ``transactions`` was left out."""
        return bool(self.gone)


def _values(fields: Iterable[statement_pb2.FieldMetadata], values: Iterable[value_pb2.Value]
            ) -> dict[str, SqlValue]:
    return {f.name: python_value(v) for f, v in zip(fields, values, strict=False)}


def stored_of_row(raw: bytes | None, meta: tuple[int, int, int] | None,
                  values: bool = True) -> Stored:
    """The ``Stored`` view of a stored ``Row`` (``raw``), or of a delete with metadata
    ``meta`` = (epoch, author, commit ts) when ``raw`` is None (nothing known: both None).
    ``values``: convert the row's column values too (only the column functions compare
    them; the epoch functions and LWW need the metadata, which ``meta`` gives when set)."""
    if raw is None:
        if meta is None:
            return Stored.absent()
        epoch, author, commit_ts = meta
        return Stored(False, {}, epoch, author, commit_ts)
    if not values and meta is not None:
        epoch, author, commit_ts = meta
        return Stored(True, {}, epoch, author, commit_ts)
    row = gateway_pb2.Row.FromString(raw)
    return Stored(True, _values(row.fields, row.values) if values else {}, row.epoch,
                  row.author, row.commit_timestamp_ns)


def _changes(txns: list[transaction_pb2.Transaction], rules: RuleSet,
             row_keys: list[list[bytes] | None] | None = None
             ) -> tuple[list[list[RowChange]], dict[int, Where]]:
    """The row changes a rule judges (rows of tables without one are applied as they come
    and left out here); values only for the column functions, which compare them."""
    out: list[list[RowChange]] = []
    where: dict[int, Where] = {}
    for t_no, txn in enumerate(txns):
        rows: list[RowChange] = []
        origin = txn.gtid.server_id
        precomputed = row_keys[t_no] if row_keys else None
        known = iter(precomputed) if precomputed is not None else None
        for s_no, stmt in enumerate(txn.statements):
            kind = stmt.WhichOneof("kind")
            if kind not in ("insert", "update", "delete"):
                continue
            body = getattr(stmt, kind)
            t = body.table
            rule = rules.rule_for(t.schema_name, t.table_name)
            if rule is None:
                if known is not None:  # keep the precomputed keys aligned
                    for _ in body.records:
                        next(known)
                continue
            spec = rules.functions.get(rule.function)
            with_values = spec is None or spec.column
            types = {f.name: f.type for f in body.key_fields}
            if kind == "insert":
                fields, op = body.fields, OpType.WRITE_ROW
            elif kind == "update":
                fields, op = body.set_fields, OpType.UPDATE_ROW
            else:
                fields, op = body.fields, OpType.DELETE_ROW
            types.update((f.name, f.type) for f in fields)
            for r_no, rec in enumerate(body.records):
                after = {} if kind == "delete" or not with_values else \
                    _values(fields, rec.after_values)
                before = _values(fields, rec.before_values) \
                    if kind != "insert" and with_values else {}
                key = next(known) if known is not None else \
                    keys.row_key(t.schema_name, t.table_name, rec.key_values)
                rc = RowChange(t.schema_name, t.table_name, key, Change(
                    op, origin, txn.epoch, txn.commit_timestamp_ns, after, before))
                where[id(rc)] = Where(t_no, s_no, r_no, t, body.key_fields, rec.key_values,
                                       types)
                rows.append(rc)
        out.append(rows)
    return out, where


def ruled_statements(txn: transaction_pb2.Transaction, rules: RuleSet
                     ) -> Iterator[tuple[str, ConflictRule]]:
    """``(kind, rule)`` of each insert, update or delete of ``txn`` whose table has a rule."""
    for stmt in txn.statements:
        kind = stmt.WhichOneof("kind")
        if kind not in ("insert", "update", "delete"):
            continue
        t = getattr(stmt, kind).table
        rule = rules.rule_for(t.schema_name, t.table_name)
        if rule is not None:
            yield kind, rule


def fresh_insert_keys(txns: list[transaction_pb2.Transaction], rules: RuleSet, role: Role,
                      row_keys: list[list[bytes] | None]) -> list[bytes] | None:
    """The screen that spares ``judge_unit`` for the common epoch: every change a rule judges
    is an insert of a transaction whose row keys are known (``row_keys``), under a built-in
    function that can run here. Returns those transactions' row keys (every row, ruled or
    not), or None when the epoch needs ``judge_unit``.

    Every built-in function applies an insert of a key this cluster holds nothing for (no row,
    no retained tombstone) and records nothing; so when the caller finds none of the returned
    keys held -- in the store, in the entries before this one, twice in the epoch -- the
    judgement is "apply all as it came" and need not be made row by row."""
    out: list[bytes] = []
    for txn, known in zip(txns, row_keys, strict=True):
        ruled = False
        for kind, rule in ruled_statements(txn, rules):
            spec = rules.functions.get(rule.function)
            if (kind != "insert" or spec is None or BUILTIN.get(rule.function) is not spec
                    or (spec.epoch and role is Role.NONE)):
                return None
            try:
                bind(rule.function, rule.args, None, rules.functions)
            except ConflictConfigError:
                return None  # judge_unit raises it, and the unit is refused
            ruled = True
        if ruled:
            if known is None:
                return None
            out += known
    return out


def judge_unit(txns: list[transaction_pb2.Transaction], rules: RuleSet, ctx: Context,
               lookup: Callable[[bytes, bool], Stored], local_epoch: int, source_epoch: int,
               row_keys: list[list[bytes] | None] | None = None,
               columns: Callable[[str, str], Mapping[str, int]] | None = None,
               source: int = 0) -> UnitJudgement:
    """Judge the transactions of one replicated epoch; see the module docstring.
    ``lookup(row key, values)``: the row here before the epoch, with its column values when
    ``values`` (its metadata always). ``row_keys``: per transaction, the row keys of its
    records in order when already computed (insert-only transactions), else None.
    ``columns(schema, table)``: the table's known column types, for the exception rows of
    changes that do not name every column (a delete's stored values). ``source``: the
    cluster the epoch comes from (``judge_epoch``)."""
    changes, where = _changes(txns, rules, row_keys)
    needs: dict[tuple[str, str], bool] = {}

    def values_for(schema: str, table: str) -> bool:
        got = needs.get((schema, table))
        if got is None:
            rule = rules.rule_for(schema, table)
            spec = rules.functions.get(rule.function) if rule is not None else None
            got = needs[(schema, table)] = spec is None or spec.column
        return got

    def lookup_row(rid: RowId) -> Stored:
        schema, table, key = rid
        assert isinstance(key, bytes)  # the store row key ``_changes`` gives every change
        return lookup(key, values_for(schema, table))

    j = judge_epoch(changes, rules, lookup_row, ctx, local_epoch, source)
    if not j.in_conflict and not any(not o.verdict.apply for t in j.outcomes for o in t):
        return UnitJudgement(list(txns), counters=j.counters, in_conflict=j.in_conflict)
    return unit_of_outcomes(txns, [(o, where[id(o.row)]) for t in j.outcomes for o in t
                                   if not o.verdict.apply or o.verdict.refresh],
                            j.counters, j.in_conflict, ctx.me, lookup, source_epoch, columns)


def unit_of_outcomes(txns: list[transaction_pb2.Transaction],
                     outcomes: list[tuple[RowOutcome, Where]], counters: Counter[str],
                     in_conflict: bool, me: int, lookup: Callable[[bytes, bool], Stored],
                     source_epoch: int,
                     columns: Callable[[str, str], Mapping[str, int]] | None
                     ) -> UnitJudgement:
    """The ``UnitJudgement`` of an epoch judged with ``outcomes``: the row outcomes that are
    not applied or call for a refresh, in the epoch's order, each with where its change came
    from (see ``judge_unit``, whose tail this is; ``epoch_judge`` shares it)."""
    out = UnitJudgement(list(txns), counters=counters, in_conflict=in_conflict)
    dropped: dict[int, set[tuple[int, int]]] = {}
    count = 0
    last: object = None
    for o, w in outcomes:
        if o.verdict.apply:
            continue
        dropped.setdefault(w.txn, set()).add((w.stmt, w.rec))
        if o.verdict.cause is not None:
            count += 1
            if o.stored is not None and o.stored.exists and not o.stored.values:
                # judged on metadata only: the row's values for the exception row
                # (every change's key is its store row key: see ``_changes``)
                o = dataclasses.replace(o, stored=lookup(cast(bytes, o.row.key), True))
            known = columns(w.table.schema_name, w.table.table_name) if columns else {}
            last = _exception(o, w, me, source_epoch, count, txns[w.txn], known,
                              out.exceptions, last)
    for t_no, gone in dropped.items():
        out.transactions[t_no] = without(txns[t_no], gone)
    out.gone = dropped
    seen: set[bytes] = set()
    for o, w in outcomes:
        if o.verdict.refresh and o.row.key not in seen:
            key = cast(bytes, o.row.key)  # the store row key ``_changes`` gives every change
            seen.add(key)
            out.refresh.append((key, w.table, w.key_fields, w.key_values))
    return out


def without(txn: transaction_pb2.Transaction, gone: set[tuple[int, int]]
             ) -> transaction_pb2.Transaction:
    """``txn`` without the records ``(statement, record)`` in ``gone``; statements left with
    no record are left out."""
    out = transaction_pb2.Transaction()
    out.CopyFrom(txn)
    del out.statements[:]
    for s_no, stmt in enumerate(txn.statements):
        kind = stmt.WhichOneof("kind")
        if kind not in ("insert", "update", "delete"):
            out.statements.append(stmt)
            continue
        keep = [r for r_no, r in enumerate(getattr(stmt, kind).records)
                if (s_no, r_no) not in gone]
        if not keep:
            continue
        copy = statement_pb2.Statement()
        copy.CopyFrom(stmt)
        body = getattr(copy, kind)
        del body.records[:]
        body.records.extend(keep)
        out.statements.append(copy)
    return out


def _exception(o: RowOutcome, w: Where, me: int, source_epoch: int, count: int,
               txn: transaction_pb2.Transaction, columns: Mapping[str, int],
               into: list[statement_pb2.Statement], last: object) -> object:
    """Add the insert of ``o``'s row into ``schema.table$EX`` to ``into``; a column's type
    is the change's, else the table's (``columns``). The row joins the last statement of
    ``into`` when ``last``, what the previous call returned, is the same table and columns
    (``append_merged``'s rule, decided without building a statement first); returns what
    the next call takes as ``last``."""
    key_names = [f.name for f in w.key_fields]
    old = dict(o.stored.values) if o.stored is not None and o.stored.exists else None
    if not o.row.change.after and o.row.change.op is not OpType.DELETE_ROW:
        o = _with_values(o, txn.statements[w.stmt], w.rec)  # judged without values
    g = txn.gtid
    row = exception_row(o, me, source_epoch, count, key_names, old, f"{g.server_id}:"
                        f"{g.trans_id}")
    # (the table's column types are FieldType numbers, held as int by ``TableSchema``)
    types = cast("dict[str, FT]", {**columns, **w.types})
    cols = [(kf.name, kf.type) for kf in w.key_fields]
    values = [value_message(_S, row["NDB$OP_TYPE"]), value_message(_S, row["NDB$CFT_CAUSE"]),
              value_message(_S, row["NDB$ORIG_TRANSID"])]
    values += w.key_values
    for name in sorted(k for k in row if k.endswith(("$OLD", "$NEW"))):
        ftype = types.get(name[:-4], _S)
        cols.append((name, ftype))
        values.append(value_message(ftype, row[name]))
    key_values = [value_message(_U, row[n]) for n in
                  ("server_id", "source_server_id", "source_epoch", "count")]
    shape = (w.table.schema_name, w.table.table_name, cols)
    if into and shape == last:
        into[-1].insert.records.add(key_values=key_values, after_values=values)
        return last
    ins = exception_statement(w.table.schema_name, w.table.table_name, cols)
    ins.records.add(key_values=key_values, after_values=values)
    into.append(statement_pb2.Statement(insert=ins))
    return shape


def _with_values(o: RowOutcome, stmt: statement_pb2.Statement, r_no: int) -> RowOutcome:
    """``o`` with its change's values read from record ``r_no`` of its statement (for the
    exception row)."""
    kind = stmt.WhichOneof("kind")
    body = getattr(stmt, kind)
    fields = body.fields if kind == "insert" else body.set_fields
    rec = body.records[r_no]
    change = dataclasses.replace(o.row.change, after=_values(fields, rec.after_values))
    return dataclasses.replace(o, row=dataclasses.replace(o.row, change=change))


def append_merged(stmts: list[statement_pb2.Statement],
                  stmt: statement_pb2.Statement) -> None:
    """Append ``stmt`` (an insert or a delete) to ``stmts``, as more records of the last
    statement when that one is of the same kind, table, key fields and fields: the same
    rows written in the same order, with one statement's cost (validation, the write path)
    for a run of exception or refresh rows instead of one per row."""
    kind = stmt.WhichOneof("kind")
    if stmts and kind in ("insert", "delete") and stmts[-1].WhichOneof("kind") == kind:
        last, body = getattr(stmts[-1], kind), getattr(stmt, kind)
        if (last.table == body.table and last.key_fields == body.key_fields
                and (kind == "delete" or last.fields == body.fields)):
            last.records.extend(body.records)
            return
    stmts.append(stmt)


def refresh_statement(table: statement_pb2.TableMetadata,
                      key_fields: Sequence[statement_pb2.FieldMetadata],
                      key_values: Sequence[value_pb2.Value], raw: bytes | None
                      ) -> statement_pb2.Statement:
    """The refresh of one row: an insert of the row as stored here (``raw``), or a delete of
    its key when it is absent."""
    if raw is None:
        d = statement_pb2.DeleteStatement(table=table, key_fields=key_fields)
        d.records.add(key_values=key_values)
        return statement_pb2.Statement(delete=d)
    row = gateway_pb2.Row.FromString(raw)
    ins = statement_pb2.InsertStatement(table=table, key_fields=row.key_fields,
                                        fields=row.fields)
    ins.records.add(key_values=row.key_values, after_values=row.values)
    return statement_pb2.Statement(insert=ins)


def add_refresh(stmts: list[statement_pb2.Statement], table: statement_pb2.TableMetadata,
                key_fields: Sequence[statement_pb2.FieldMetadata],
                key_values: Sequence[value_pb2.Value], raw: bytes | None) -> None:
    """``append_merged(stmts, refresh_statement(table, key_fields, key_values, raw))``, the
    record added to the last statement directly when it joins it (no statement built)."""
    last = stmts[-1] if stmts else None
    if raw is None:
        if (last is not None and last.WhichOneof("kind") == "delete"
                and last.delete.table == table and last.delete.key_fields == key_fields):
            last.delete.records.add(key_values=key_values)
            return
        stmts.append(refresh_statement(table, key_fields, key_values, None))
        return
    row = gateway_pb2.Row.FromString(raw)
    if (last is not None and last.WhichOneof("kind") == "insert" and last.insert.table == table
            and last.insert.key_fields == row.key_fields and last.insert.fields == row.fields):
        last.insert.records.add(key_values=row.key_values, after_values=row.values)
        return
    ins = statement_pb2.InsertStatement(table=table, key_fields=row.key_fields,
                                        fields=row.fields)
    ins.records.add(key_values=row.key_values, after_values=row.values)
    stmts.append(statement_pb2.Statement(insert=ins))


def derived_transaction(me: int, trans_id: int, epoch: int, commit_ts: int,
                        statements: list[statement_pb2.Statement]
                        ) -> transaction_pb2.Transaction:
    """This cluster's transaction of exceptions and refreshes for one replicated epoch."""
    out = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=me, trans_id=trans_id), epoch=epoch, author=me,
        start_timestamp_ns=commit_ts, commit_timestamp_ns=commit_ts, segment_id=1,
        end_segment=True)
    out.statements.extend(statements)
    return out
