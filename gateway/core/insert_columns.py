"""Windows of plain inserts as columns: the applier fast path that skips row objects.

Most of what a busy log holds is transactions that only INSERT rows nobody else in the window
touches. Their reduction is the identity -- one operation per row, no folding -- so building a
``RowOp`` per row, reducing and partitioning them only to hand the same rows to an applier is
pure overhead (it was most of the SQLite applier's CPU per row). ``insert_columns`` reads such a
window straight into ``ColumnOps`` (one per table and column set, values column by column) for
appliers that take them (``Applier.apply_columns``), and returns ``None`` for every other window
so the caller takes the row path, which stays the specification:

- a statement that is not an INSERT (update, delete, SQL, apply status), a table without a
  name, a decimal column (its values need conversion), or anything ``statement_ops`` would
  reject (missing key fields, a record with the wrong number of values, a value in another
  case than its column's) -> ``None``;
- a row (table and key) inserted twice in the window -> ``None`` (the reducer folds those).

Otherwise each row's values are exactly those of its ``RowOp`` from ``statement_ops``, so an
applier that applies ``ColumnOps`` as it applies ``RowOp`` values leaves the same store.

The transactions are read by the C accelerator ``gateway.core._columns`` when it is built, one
call per transaction from its wire bytes (``AssembledTransaction.wire``, the bytes the log
holds, when the source kept them; serialized here otherwise): no message object per statement,
record or value. ``_add_transaction_py`` is the specification it is tested against and the
fallback. ``insert_columns_of_wires`` is the same read for whole transactions given only as
their bytes and GTIDs -- the dispatcher's path for a run of such entries, which then builds no
``AssembledTransaction`` (nor anything else) per transaction.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, cast

from google.protobuf.message import DecodeError

from gateway.core.accel import load
from gateway.core.reducer import AssembledTransaction
from gateway.core.rowops import (
    CASE_OF_TYPE,
    Column,
    ColumnOps,
    Gtid,
    OpKind,
    TableRef,
)
from gateway.core.sql_value import SqlValue
from gateway.v1 import statement_pb2, transaction_pb2, value_pb2

__all__ = ["WIRES_IN_C", "InsertWindow", "insert_columns", "insert_columns_of_wires"]



class _ColumnsC(Protocol):
    """The C reader ``_columns.c``: ``fill_txn`` adds the INSERT rows of one serialized
    transaction (segment) to ``groups`` and gives their count, ``None`` when the bytes need
    the row path, or ``(head, start, end)`` naming an INSERT whose spec is not cached yet
    (its head and the byte range of its statement)."""

    def fill_txn(self, data: bytes, specs: dict[_SpecKey, _Spec | None], groups: _Groups,
                 seen: _Seen, /
                 ) -> int | tuple[bytes, int, int] | None: ...


_C = cast("_ColumnsC | None", load("gateway.core._columns"))
#: Whether ``insert_columns_of_wires`` reads the bytes in C (else it declines every window).
WIRES_IN_C = _C is not None


class InsertWindow:
    """``batches``: the window's rows as ``ColumnOps``; ``gtids``: the GTIDs of the
    transactions that inserted at least one row (what the row path records); ``rows``: the
    number of rows."""

    __slots__ = ("batches", "gtids", "rows")

    def __init__(self, batches: list[ColumnOps], gtids: list[Gtid], rows: int) -> None:
        self.batches, self.gtids, self.rows = batches, gtids, rows


def insert_columns(window: Sequence[AssembledTransaction]) -> InsertWindow | None:
    """The window as columns, or ``None`` when the row path must take it (module docstring)."""
    groups: _Groups = {}
    seen: _Seen = {}
    gtids: list[Gtid] = []
    rows = 0
    for txn in window:
        if txn.rolled_back:
            return None
        added = _add_transaction(txn, groups, seen)
        if added is None:
            return None
        if added:
            rows += added
            gtids.append(txn.gtid)
    return _window(groups, gtids, rows)


def insert_columns_of_wires(wires: Sequence[bytes], gtids: Sequence[Gtid]
                            ) -> InsertWindow | None:
    """``insert_columns`` of a window of whole transactions -- each in one segment, not rolled
    back (what ``CommittedEntry.head`` says of an entry) -- given as their serialized bytes
    ``wires`` and their ``gtids``: the same window, or ``None`` where ``insert_columns`` gives
    ``None`` (and always without the C reader: ``WIRES_IN_C``). One C call per transaction and
    no object per transaction: on the applier's hot path, building an
    ``AssembledTransaction`` per entry cost as much as reading its rows."""
    if _C is None:
        return None
    groups: _Groups = {}
    seen: _Seen = {}
    inserted: list[Gtid] = []
    rows = 0
    fill = _C.fill_txn
    specs = _SPECS
    for wire, gtid in zip(wires, gtids, strict=True):
        got = fill(wire, specs, groups, seen)
        if isinstance(got, tuple):  # a statement's spec is not cached yet: learn it (rare)
            got = _fill(wire, groups, seen)
        if got is None:
            return None
        if got:
            rows += got
            inserted.append(gtid)
    return _window(groups, inserted, rows)


def _window(groups: _Groups, gtids: list[Gtid], rows: int) -> InsertWindow:
    batches = [ColumnOps(spec[0], OpKind.INSERT, spec[1], spec[2], key, values)
               for spec, key, values in groups.values()]
    return InsertWindow(batches, gtids, rows)


# An INSERT's table and fields -> its group's columns, each column's value case and the Value
# field number of every column (keys first); None for one the row path must take. Keyed by the
# fields (Python) or by the statement's serialized head -- its bytes other than its records --
# (C: two statements with the same head have the same table and fields, parsing being a
# function of the bytes). Bounded: cleared when it reaches _SPEC_LIMIT entries.
_Spec = tuple[TableRef, tuple[Column, ...], tuple[Column, ...], tuple[str, ...], tuple[str, ...],
              tuple[int, ...]]
# A window's rows so far: group key (a spec's key) -> (spec, key columns, value columns), one
# list of values per column. Two keys may name the same table and columns (two encodings of the
# same fields): two batches then, which is fine, as ``seen`` is kept per table.
# The keys of the rows added so far, per table (a key twice sends the window to the row path).
_Seen = dict[TableRef, set[tuple[SqlValue, ...]]]
_Groups = dict[Hashable, tuple[_Spec, list[list[SqlValue]], list[list[SqlValue]]]]
# An INSERT's table and fields as read from its message: (schema, table, key fields, fields),
# each field as (name, FieldType number).
_Signature = tuple[str, str, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]
# A spec's cache key: the signature (Python) or the statement's serialized head (C).
_SpecKey = _Signature | bytes
_SPECS: dict[_SpecKey, _Spec | None] = {}
_SPEC_LIMIT = 4096
_VALUE_FIELDS = {f.name: f.number for f in value_pb2.Value.DESCRIPTOR.fields}


def _spec(signature: _Signature) -> _Spec | None:
    schema, name, key_fields, fields = signature
    if not name or not key_fields:
        return None
    cases = []
    for _, ftype in key_fields + fields:
        case = CASE_OF_TYPE.get(ftype)
        if case is None or case == "decimal_value":
            return None
        cases.append(case)
    nk = len(key_fields)
    return (TableRef(schema, name), tuple(Column(n, t) for n, t in key_fields),
            tuple(Column(n, t) for n, t in fields), tuple(cases[:nk]), tuple(cases[nk:]),
            tuple(_VALUE_FIELDS[c] for c in cases))


def _signature(body: statement_pb2.InsertStatement) -> _Signature:
    table_msg = body.table
    return (table_msg.schema_name, table_msg.table_name,
            tuple([(f.name, f.type) for f in body.key_fields]),
            tuple([(f.name, f.type) for f in body.fields]))


def _lookup(cache_key: _SpecKey, body: statement_pb2.InsertStatement) -> _Spec | None:
    try:
        return _SPECS[cache_key]
    except KeyError:
        if len(_SPECS) >= _SPEC_LIMIT:
            _SPECS.clear()
        spec = _SPECS[cache_key] = _spec(_signature(body))
        return spec


def _add_transaction_c(txn: AssembledTransaction, groups: _Groups,
                       seen: _Seen) -> int | None:
    """``_add_transaction_py`` through the C reader, from the transaction's wire bytes (kept
    by the source -- then the message is not touched, maybe never parsed --, else each
    segment serialized here): the same rows and the same refusals."""
    if txn.wire is not None:  # whole in one segment (AssembledTransaction's contract)
        return _fill(txn.wire, groups, seen)
    rows = 0
    for segment in txn.segments:
        got = _fill(segment.SerializeToString(), groups, seen)
        if got is None:
            return None
        rows += got
    return rows


def _fill(data: bytes, groups: _Groups, seen: _Seen
          ) -> int | None:
    """One serialized segment through ``fill_txn``; an INSERT whose spec is not cached is
    learned from its bytes and the segment read again (at most once per statement of the
    segment, counted -- by parsing ``data`` -- only when something is to be learned; bytes
    that do not parse give ``None``)."""
    assert _C is not None  # only called with the C reader
    got = _C.fill_txn(data, _SPECS, groups, seen)
    learned, statements = 0, -1
    while isinstance(got, tuple):
        head, start, end = got
        if statements < 0:
            try:
                statements = len(transaction_pb2.Transaction.FromString(data).statements)
            except DecodeError:  # damaged: the row path parses it and dead-letters it
                return None
        learned += 1
        if learned > statements or not _learn(head, data[start:end]):
            return None
        got = _C.fill_txn(data, _SPECS, groups, seen)
    return got


def _learn(head: bytes, body_bytes: bytes) -> bool:
    """Cache the spec of the serialized InsertStatement ``body_bytes`` under its ``head``;
    False when the bytes do not parse (the row path then takes the window)."""
    try:
        body = statement_pb2.InsertStatement.FromString(body_bytes)
    except DecodeError:
        return False
    _lookup(head, body)
    return True


def _add_transaction_py(txn: AssembledTransaction, groups: _Groups,
                        seen: _Seen) -> int | None:
    """Append the rows of every INSERT of ``txn`` to their groups; the number of rows, or
    ``None`` when the row path must take the window (a statement that is not an INSERT...)."""
    rows = 0
    for segment in txn.segments:
        for stmt in segment.statements:
            if stmt.WhichOneof("kind") != "insert":
                return None
            added = _add_insert_py(stmt.insert, groups, seen)
            if added is None:
                return None
            rows += added
    return rows


def _add_insert_py(body: statement_pb2.InsertStatement, groups: _Groups, seen: _Seen
                   ) -> int | None:
    """Append the records of one INSERT to their group; the number of rows, or ``None``."""
    records = body.records
    if not records:
        return 0
    spec = _lookup(_signature(body), body)
    if spec is None:
        return None
    table, kcases, vcases = spec[0], spec[3], spec[4]
    group = groups.get(spec[:3])
    if group is None:
        group = groups[spec[:3]] = (spec, [[] for _ in kcases], [[] for _ in vcases])
    key_lists, val_lists = group[1], group[2]
    table_keys = seen.get(table)
    if table_keys is None:
        table_keys = seen[table] = set()
    nk, nc = len(kcases), len(vcases)
    for rec in records:
        kv, av = rec.key_values, rec.after_values
        if len(kv) != nk or len(av) != nc:
            return None
        key = []
        for i in range(nk):
            v = kv[i]
            c = v.WhichOneof("kind")
            if c == kcases[i]:
                x = getattr(v, c)
            elif c == "null_value":
                x = None
            else:
                return None
            key.append(x)
            key_lists[i].append(x)
        row = tuple(key)
        if row in table_keys:
            return None  # a row inserted twice in the window: the reducer folds it
        table_keys.add(row)
        for j in range(nc):
            v = av[j]
            c = v.WhichOneof("kind")
            if c == vcases[j]:
                val_lists[j].append(getattr(v, c))
            elif c == "null_value":
                val_lists[j].append(None)
            else:
                return None
    return len(records)


_add_transaction = _add_transaction_py if _C is None else _add_transaction_c
