"""Schema events that came on a channel, and the transactions written under other versions:
the replica's part of table definitions (docs/schema.md, "Across clusters").

A replicated entry (``REPLICATED_EPOCH``) carries the source's schema events
(``ReplicatedItem.schema_event``) before its transactions. Each is applied here with the
winner rule of ``gateway.schema.history``: the table's applied chain (``m sh:``), the events
that lost here before (``m sl:<table>:<event id hex>``) and the new event form one
``TableHistory``; then

- the event is already known (applied or lost): nothing;
- the winning chain is the applied chain plus the event: it is applied like a local
  ``SCHEMA_EVENT`` entry (``schema_apply.apply_schema_entry`` without the parent check: it
  was checked by ``TableHistory``);
- the winning chain is unchanged: the event lost (to a concurrent change made here or seen
  before), recorded with its cause (``m sl:``);
- the winning chain switches branch (the event beats a change applied here): the applied
  events past the fork lost, recorded with their cause; the winning events are recorded as
  the history, and every stored row of the table is read as the new head reads it
  (``TableHistory.read``: reverted to the fork, upcast along the winning branch, projected
  on the definition).

The outcome depends only on the set of events a cluster has seen, so every cluster ends with
the same definition whatever the order the channels brought them in. Nothing is refused: a
channel never stops on a schema event.

``upcast_transaction`` then fits each replicated transaction to the definitions as they
stand: a column renamed since it was written is written under its new name, a column
dropped (or never known here: a losing branch's) is left out, a value of a type the column
does not take is the column's default, and an insert gets the default of every column it
does not name (it was written under a version without them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

from gateway.core.lsm.format import prefix_end
from gateway.core.rowops import CASE_OF_TYPE, value_message
from gateway.core.sql_value import SqlValue
from gateway.node.base.validation import TableSchema
from gateway.node.state import keys
from gateway.node.state.schema_apply import (
    TableState,
    definition_key,
    history_prefix,
    read_history,
    record_event,
    rewrite_rows,
    table_schema_of,
)
from gateway.node.state.store_ops import Ops, meta_op
from gateway.schema.apply import apply_event
from gateway.schema.codec import decode_event, encode_event, event_id, field_type
from gateway.schema.history import TableHistory
from gateway.schema.model import SchemaError, SchemaEvent, TableDef
from gateway.schema.upcast import revert, upcast
from gateway.v1 import gateway_pb2, schema_pb2, statement_pb2, transaction_pb2, value_pb2

__all__ = ["LostEvent", "ReplicaSchema", "apply_replicated_event", "encode_def_dropped",
           "lost_prefix", "read_lost", "renames_of", "upcast_transaction"]

_LOST = "sl:"
Scan = Callable[[bytes, bytes | None], Iterator[tuple[bytes, bytes]]]
ScanPrefix = Callable[[bytes], Iterable[tuple[bytes, bytes]]]


def lost_prefix(table: str) -> bytes:
    return keys.meta_key(f"{_LOST}{table}:")


@dataclass(frozen=True)
class LostEvent:
    """A schema event that lost here, and why (``cause`` names the winner)."""

    event: SchemaEvent
    cause: str


def read_lost(scan_prefix: ScanPrefix, table: str = "") -> list[LostEvent]:
    """The events that lost here (of ``table``; every table when empty): stored as the
    cause's length (u16 BE), the cause, then the event's tagged bytes."""
    prefix = lost_prefix(table) if table else keys.meta_key(_LOST)
    out = []
    for _k, v in scan_prefix(prefix):
        n = int.from_bytes(v[:2], "big")
        out.append(LostEvent(decode_event(v[2 + n:]), v[2:2 + n].decode()))
    return out


def _record_lost(e: SchemaEvent, cause: str, ops: Ops) -> None:
    raw = cause.encode()[:65535]
    ops.append(meta_op(lost_prefix(e.table) + event_id(e).hex().encode(),
                       len(raw).to_bytes(2, "big") + raw + encode_event(e)))


@dataclass
class ReplicaSchema:
    """What applying replicated schema events gave: the new states and shapes (None when
    unchanged) and the events that lost here, with their causes."""

    tables: dict[str, TableState] | None = None
    schemas: dict[str, TableSchema] | None = None
    lost: list[LostEvent] = field(default_factory=list)
    applied: list[SchemaEvent] = field(default_factory=list)


def apply_replicated_event(tables: Mapping[str, TableState],
                           schemas: Mapping[str, TableSchema], e: SchemaEvent, index: int,
                           ops: Ops, scan: Scan, scan_prefix: ScanPrefix,
                           shape_row: Callable[[str, TableSchema], bytes],
                           out: ReplicaSchema) -> None:
    """Apply the replicated event ``e`` at log ``index`` (see the module docstring), adding
    its store operations to ``ops`` and its outcome to ``out``. ``scan``/``scan_prefix``
    read the store as it stands before ``ops`` (the caller wrote the batch so far)."""
    cur_tables = out.tables if out.tables is not None else tables
    cur_schemas = out.schemas if out.schemas is not None else schemas
    applied = [h.event for h in read_history(scan_prefix, e.table)]
    # events applied earlier in this same entry are in ``ops``, not yet in the store
    applied = _with_pending(applied, e.table, out.applied)
    hist = TableHistory(e.table)
    lost_before = read_lost(scan_prefix, e.table)
    for ev in applied:
        hist.add(ev)
    for lost in lost_before:
        hist.add(lost.event)
    for lost in out.lost:
        if lost.event.table == e.table:
            hist.add(lost.event)
    old_ids = [event_id(ev) for ev in applied]
    eid = event_id(e)
    if eid in hist:
        return  # applied or lost here already (a ring brings it back)
    hist.add(e)
    new_chain = hist.chain()
    new_ids = [event_id(ev) for ev in new_chain]
    causes = {event_id(x.event): x.cause for x in hist.lost()}
    if new_ids == old_ids:
        cause = causes.get(eid, "made on a version this cluster has not seen")
        _record_lost(e, cause, ops)
        out.lost.append(LostEvent(e, cause))
        return
    have = cur_tables.get(e.table)
    if (new_ids == [*old_ids, eid] and have is not None) or not old_ids:
        current = have.definition if have is not None else None
        last = have.version if have is not None else 0
        try:
            after = apply_event(current, e, last)
        except SchemaError as exc:  # the history found it valid: cannot happen
            cause = f"invalid on version {last}: {exc}"
            _record_lost(e, cause, ops)
            out.lost.append(LostEvent(e, cause))
            return
        rewrite_rows(e, after, ops, scan)  # exactly as a local SCHEMA_EVENT entry does
        record_event(e, after, index, ops)
        out.applied.append(e)
        _set_state(e.table, after, e, cur_tables, cur_schemas, ops, shape_row, out)
        return
    clash = _key_clash(have.definition if have is not None else None, hist.definition())
    if clash:
        # Rows stored here are keyed by the current key's type: a winner with another key
        # type cannot read them, so no cluster switches to it; the other side's rows are
        # quarantined there (``channel quarantine``), as a transaction of either shape is.
        cause = f"{clash}: cannot be reconciled, the other cluster's rows are quarantined"
        _record_lost(e, cause, ops)
        out.lost.append(LostEvent(e, cause))
        return
    # the chain switched branch: undo the applied events past the fork, apply the winners
    fork = 0
    while fork < min(len(old_ids), len(new_ids)) and old_ids[fork] == new_ids[fork]:
        fork += 1
    for gone in applied[fork:]:
        cause = causes.get(event_id(gone), "lost to a concurrent change")
        _record_lost(gone, cause, ops)
        out.lost.append(LostEvent(gone, cause))
    for v in range(new_chain[-1].version + 1, (applied[-1].version if applied else 0) + 1):
        ops.append(meta_op(history_prefix(e.table) + v.to_bytes(8, "big"), None))
    target = hist.definition()
    for ev in new_chain[fork:]:
        record_event(ev, ev.definition, index, ops)
        out.applied.append(ev)
    back, forward = applied[fork:], new_chain[fork:]
    _rewrite(e.table, ops, scan, lambda row: _switch_row(row, back, forward, target))
    head = new_chain[-1]
    if target is None:
        ops.append(meta_op(definition_key(e.table), encode_def_dropped(head)))
    _set_state(e.table, target, head, cur_tables, cur_schemas, ops, shape_row, out)


def _key_clash(have: TableDef | None, winner: TableDef | None) -> str:
    """Why the primary key of ``winner`` cannot take the rows keyed by ``have``'s ("" when
    it can: same key columns of the same types, or either side has no definition)."""
    if have is None or winner is None:
        return ""
    def key(d: TableDef) -> list[tuple[str, str]]:
        types = {c.name: c.type for c in d.columns}
        return [(k, types.get(k, "")) for k in d.primary_key]
    mine, theirs = key(have), key(winner)
    if [t for _, t in mine] == [t for _, t in theirs]:
        return ""
    return (f"primary key ({', '.join(f'{n} {t}' for n, t in theirs)}) against this "
            f"cluster's ({', '.join(f'{n} {t}' for n, t in mine)})")


def renames_of(scan_prefix: ScanPrefix, table: str, pending: list[SchemaEvent] | None = None
               ) -> list[tuple[str, str]]:
    """The renames of ``table``'s applied history, oldest first; ``pending``: the events
    applied by the running entry (not in the store yet)."""
    chain = _with_pending([h.event for h in read_history(scan_prefix, table)], table,
                          pending or [])
    return [(e.old_name, e.new_name) for e in chain if e.kind == "rename_column"]


def encode_def_dropped(head: SchemaEvent) -> bytes:
    """The stored definition of a table dropped by ``head``."""
    return schema_pb2.TableDefinition(table=head.table, version=head.version
                                      ).SerializeToString()


def _with_pending(applied: list[SchemaEvent], table: str, pending: list[SchemaEvent]
                  ) -> list[SchemaEvent]:
    """The applied chain with the events of this entry applied before (by version)."""
    mine = [p for p in pending if p.table == table]
    if not mine:
        return applied
    by_version = {ev.version: ev for ev in applied}
    for p in mine:
        by_version[p.version] = p
    top = mine[-1].version
    return [by_version[v] for v in sorted(by_version) if v <= top]


def _set_state(table: str, after: TableDef | None, head: SchemaEvent,
               tables: Mapping[str, TableState], schemas: Mapping[str, TableSchema],
               ops: Ops, shape_row: Callable[[str, TableSchema], bytes],
               out: ReplicaSchema) -> None:
    new_tables = dict(tables)
    new_tables[table] = TableState(after, head.version, event_id(head), head.implicit)
    new_schemas = dict(schemas)
    if after is None:
        new_schemas.pop(table, None)
        ops.append(meta_op(keys.schema_key(table), None))
    else:
        shape = table_schema_of(after)
        new_schemas[table] = shape
        ops.append(meta_op(keys.schema_key(table), shape_row(table, shape)))
    out.tables, out.schemas = new_tables, new_schemas


RowMap = dict[str, object]


def _rewrite(table: str, ops: Ops, scan: Scan,
             change: Callable[[RowMap], RowMap | None]) -> None:
    """Rewrite every stored row of ``table`` by ``change`` (None: the row goes), keeping
    its epoch, author and commit time."""
    schema_name, _, table_name = table.partition(".")
    prefix = keys.table_prefix(schema_name, table_name)
    for k, v in scan(prefix, prefix_end(prefix)):
        row = gateway_pb2.Row.FromString(v)
        meta = (row.epoch, row.author, row.commit_timestamp_ns)
        got: RowMap = {f.name: x for f, x in zip(row.key_fields, row.key_values, strict=False)}
        got.update({f.name: x for f, x in zip(row.fields, row.values, strict=False)})
        new = change(got)
        if new is None:
            ops.append((k, None, *meta))
            continue
        del row.fields[:]
        del row.values[:]
        key_names = {f.name for f in row.key_fields}
        for name, cell in new.items():
            ftype, val = cast(tuple[int, value_pb2.Value], cell)
            if name in key_names:
                continue
            row.fields.add(name=name, type=cast(value_pb2.FieldType, ftype))
            row.values.append(val)
        ops.append((k, row.SerializeToString(), *meta))


def _fit(target: TableDef, row: RowMap) -> RowMap:
    """Exactly ``target``'s columns: a stored ``Value`` of the column's case (or null) is
    kept, anything else (missing, another case, a default) is the column's default."""
    out: RowMap = {}
    for c in target.columns:
        ftype = field_type(c.type)
        v = row.get(c.name)
        if isinstance(v, value_pb2.Value) and v.WhichOneof("kind") in (
                "null_value", CASE_OF_TYPE[ftype]):
            out[c.name] = (ftype, v)
        else:
            out[c.name] = (ftype, value_message(ftype, cast(SqlValue, c.default)))
    return out


def _switch_row(row: RowMap, back: list[SchemaEvent], forward: list[SchemaEvent],
                target: TableDef | None) -> RowMap | None:
    """A stored row written under the losing branch ``back`` as the winning branch
    ``forward`` reads it (``TableHistory.read`` on stored values)."""
    if target is None or any(ev.kind == "drop_table" for ev in forward):
        return None
    return _fit(target, upcast(revert(row, back), forward))


def upcast_transaction(txn: transaction_pb2.Transaction, tables: Mapping[str, TableState],
                       renames: Callable[[str], list[tuple[str, str]]]
                       ) -> transaction_pb2.Transaction | None:
    """``txn`` fitted to the tables' current definitions (see the module docstring), or None
    when it fits as it is. ``renames(table)``: the table's renames, oldest first."""
    out: transaction_pb2.Transaction | None = None
    for s_no, stmt in enumerate(txn.statements):
        kind = stmt.WhichOneof("kind")
        if kind not in ("insert", "update", "delete"):
            continue
        body = getattr(stmt, kind)
        name = f"{body.table.schema_name}.{body.table.table_name}"
        st = tables.get(name)
        if st is None or st.definition is None or _fits(body, kind, st.definition):
            continue
        if out is None:
            out = transaction_pb2.Transaction()
            out.CopyFrom(txn)
        _fit_statement(getattr(out.statements[s_no], kind), kind, st.definition,
                       renames(name))
    return out


_Body = (statement_pb2.InsertStatement | statement_pb2.UpdateStatement
         | statement_pb2.DeleteStatement)
_COLS = {"insert": "fields", "update": "set_fields", "delete": "fields"}
_VALS = {"insert": "after_values", "update": "after_values", "delete": "before_values"}


def _fits(body: _Body, kind: str, d: TableDef) -> bool:
    types = {c.name: field_type(c.type) for c in d.columns}
    named = set()
    for f in (*body.key_fields, *getattr(body, _COLS[kind])):
        if types.get(f.name) != f.type:
            return False
        named.add(f.name)
    return kind != "insert" or len(named) == len(types)


def _fit_statement(body: _Body, kind: str, d: TableDef,
                   renames: list[tuple[str, str]]) -> None:
    types = {c.name: field_type(c.type) for c in d.columns}

    def now(n: str) -> str:
        for old, new in renames:
            if n == old:
                n = new
        return n

    for f in body.key_fields:
        f.name = now(f.name)
    cols = getattr(body, _COLS[kind])
    keep: list[int] = []
    for i, f in enumerate(cols):
        f.name = now(f.name) if f.name not in types else f.name
        if types.get(f.name) == f.type:
            keep.append(i)
    names = [cols[i].name for i in keep]
    ftypes = [cols[i].type for i in keep]
    key_names = {f.name for f in body.key_fields}
    extra = [c for c in d.columns if kind == "insert" and c.name not in key_names
             and c.name not in names]
    del cols[:]
    for n, t in zip(names, ftypes, strict=True):
        cols.add(name=n, type=t)
    for c in extra:
        cols.add(name=c.name, type=cast(value_pb2.FieldType, field_type(c.type)))
    for rec in body.records:
        vals = getattr(rec, _VALS[kind])
        if kind != "insert" and not len(vals):
            continue  # no before image
        kept = [value_pb2.Value() for _ in keep]
        for j, i in enumerate(keep):
            if i < len(vals):
                kept[j].CopyFrom(vals[i])
        del vals[:]
        vals.extend(kept)
        for c in extra:
            vals.append(value_message(field_type(c.type), cast(SqlValue, c.default)))

