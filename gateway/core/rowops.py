"""Single-row operations: what the reducer produces and what appliers receive.

A committed ``Transaction`` holds statements, each with many records; the reducer and the
appliers work on ``RowOp`` values instead, one per changed row (or one per SQL statement).
This module converts between the two and defines the value model:

- a column is a ``Column(name, type)`` with ``type`` a ``gateway.v1.FieldType`` number;
- a value is a plain Python value chosen by the column's type: ``None`` (null), ``bool``,
  ``int`` (INTEGER, UNSIGNED, TIMESTAMP as ns), ``float``, ``decimal.Decimal``, ``str`` (VARCHAR,
  DATE, TIME, DATETIME, JSON) or ``bytes`` (BLOB, UUID). Keys are tuples of such values, so rows
  can be hashed, compared and partitioned without touching protobuf.

Semantics of the operation kinds (what an applier must make true of the row ``(table, key)``):

========  ====================================================================================
INSERT    the row did not exist; afterwards it holds exactly ``columns``/``values``. Appliers
          apply it as an upsert (replace), which makes it idempotent.
UPSERT    afterwards the row holds exactly ``columns``/``values`` whatever was there before.
UPDATE    if the row exists, set ``columns`` to ``values``; a missing row stays missing.
DELETE    the row does not exist afterwards.
MOVE      if the row exists: set ``columns``, then move it to ``new_key`` (replacing any row
          there). A missing row is a no-op. Produced only for an UPDATE that changes the key
          and whose full row the reducer does not know; it touches two rows, so it is an
          ordering barrier.
SQL       execute ``sql`` (a statement-based event). Not reducible; an ordering barrier.
========  ====================================================================================

``statement_ops`` turns a transaction into these operations one record at a time (the
"original statements"); ``gateway.core.reducer`` folds them to one per row.

Errors: ``MalformedTransactionError`` (a ``ValueError``) names the transaction, statement and
record that do not follow the log model (docs/log-model.md).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import NamedTuple, TypedDict

from gateway.core.sql_value import SqlValue
from gateway.v1 import applier_pb2, gtid_pb2, statement_pb2, transaction_pb2, value_pb2

__all__ = [
    "APPLY_STATUS_TABLE",
    "CASE_OF_TYPE",
    "TYPE_OF_CASE",
    "Column",
    "ColumnOps",
    "Gtid",
    "MalformedTransactionError",
    "OpKind",
    "RowOp",
    "SqlText",
    "TableRef",
    "Variable",
    "op_from_proto",
    "op_to_proto",
    "python_value",
    "statement_ops",
    "value_message",
]

FT = value_pb2.FieldType


class MalformedTransactionError(ValueError):
    """A transaction does not follow the log model; ``str()`` is one line naming where."""


class TableRef(NamedTuple):
    """A table: ``schema`` (may be empty) and ``name``."""

    schema: str
    name: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

    @classmethod
    def parse(cls, table: str) -> TableRef:
        """``"schema.table"`` (or ``"table"``) as a ``TableRef``, the inverse of ``str``: the
        first dot splits, since schema names hold none."""
        schema, dot, name = table.partition(".")
        return cls(schema, name) if dot else cls("", table)


class Gtid(NamedTuple):
    """A global transaction id: origin cluster ``server_id`` and its ``trans_id``."""

    server_id: int
    trans_id: int

    def __str__(self) -> str:
        return f"({self.server_id},{self.trans_id})"


@dataclass(frozen=True, slots=True)
class Column:
    """A column: its name and declared ``gateway.v1.FieldType`` number."""

    name: str
    type: int


@dataclass(frozen=True, slots=True)
class Variable:
    """A session variable of a SQL statement (``name`` without ``@``); ``type`` is the
    ``FieldType`` its value case corresponds to (``FIELD_TYPE_UNSPECIFIED`` for null)."""

    name: str
    type: int
    value: SqlValue


@dataclass(frozen=True, slots=True)
class SqlText:
    """A statement-based event: ``query`` with its session context."""

    query: str
    variables: tuple[Variable, ...] = ()
    default_schema: str = ""
    session_id: int = 0


class OpKind(enum.Enum):
    """What an operation does to its row; see the module docstring for the exact semantics."""

    INSERT = 1
    UPDATE = 2
    DELETE = 3
    UPSERT = 4
    SQL = 5
    MOVE = 6


#: The table ApplyStatus statements are materialised in (key ``server_id``).
APPLY_STATUS_TABLE = TableRef("gateway", "apply_status")
_NO_TABLE = TableRef("", "")
_NO_GTID = Gtid(0, 0)


@dataclass(slots=True, unsafe_hash=True)
class RowOp:
    """One operation on one row (or one SQL statement), with the transaction it came from.

    A value: equal and hashing by its fields, and never to be modified once made (not
    enforced: every row on the apply path makes one, and a frozen dataclass costs five
    times as much to construct).

    ``key`` is aligned with ``key_columns`` and ``values`` with ``columns`` (non-key columns).
    ``gtid``, ``log_index``, ``epoch``, ``author`` and ``commit_ts_ns`` are those of the last
    change folded into this operation (after window reduction, the latest transaction that
    touched the row). ``new_key`` is set for MOVE only, ``sql`` for SQL only (with an empty
    ``table`` and ``key``). ``statement`` is the 1-based number of the statement (within its
    transaction, across segments) the operation, or its last folded change, came from: with
    ``gtid`` it identifies a SQL operation exactly, so stores can execute each one once.
    ``backfill`` is nonzero for a row delivered by a new applier's backfill (an UPSERT of the
    stored row, read from a store snapshot at that log index), 0 for a change from the log.
    """

    kind: OpKind
    table: TableRef
    key_columns: tuple[Column, ...]
    key: tuple[SqlValue, ...]
    columns: tuple[Column, ...] = ()
    values: tuple[SqlValue, ...] = ()
    gtid: Gtid = _NO_GTID
    log_index: int = 0
    epoch: int = 0
    author: int = 0
    commit_ts_ns: int = 0
    new_key: tuple[SqlValue, ...] | None = None
    sql: SqlText | None = None
    statement: int = 0
    backfill: int = 0

    @property
    def row_id(self) -> tuple[TableRef, tuple[SqlValue, ...]]:
        """The row this operation addresses: ``(table, key)``."""
        return (self.table, self.key)

    @property
    def is_barrier(self) -> bool:
        """True for operations that must be applied alone, after everything before them and
        before everything after them (SQL and MOVE)."""
        return self.kind is OpKind.SQL or self.kind is OpKind.MOVE

    def row(self) -> dict[str, SqlValue]:
        """The key and non-key columns as one ``{name: value}`` dict."""
        out = {c.name: v for c, v in zip(self.key_columns, self.key, strict=True)}
        out.update((c.name, v) for c, v in zip(self.columns, self.values, strict=True))
        return out


# --- values ---------------------------------------------------------------------------------

#: The ``Value`` case that carries each declared column type (``FieldType`` -> case name).
CASE_OF_TYPE: dict[int, str] = {
    FT.FIELD_TYPE_BOOLEAN: "bool_value",
    FT.FIELD_TYPE_INTEGER: "int_value",
    FT.FIELD_TYPE_UNSIGNED: "uint_value",
    FT.FIELD_TYPE_DOUBLE: "double_value",
    FT.FIELD_TYPE_DECIMAL: "decimal_value",
    FT.FIELD_TYPE_VARCHAR: "string_value",
    FT.FIELD_TYPE_BLOB: "bytes_value",
    FT.FIELD_TYPE_DATE: "string_value",
    FT.FIELD_TYPE_TIME: "string_value",
    FT.FIELD_TYPE_DATETIME: "string_value",
    FT.FIELD_TYPE_TIMESTAMP: "timestamp_ns",
    FT.FIELD_TYPE_UUID: "bytes_value",
    FT.FIELD_TYPE_JSON: "string_value",
}
#: The column type a ``Value`` case implies when no column declares one (session variables).
TYPE_OF_CASE: dict[str, int] = {
    "bool_value": FT.FIELD_TYPE_BOOLEAN,
    "int_value": FT.FIELD_TYPE_INTEGER,
    "uint_value": FT.FIELD_TYPE_UNSIGNED,
    "double_value": FT.FIELD_TYPE_DOUBLE,
    "decimal_value": FT.FIELD_TYPE_DECIMAL,
    "string_value": FT.FIELD_TYPE_VARCHAR,
    "bytes_value": FT.FIELD_TYPE_BLOB,
    "timestamp_ns": FT.FIELD_TYPE_TIMESTAMP,
}


def python_value(value: value_pb2.Value, field_type: int | None = None) -> SqlValue:
    """Return the Python value of ``value``.

    With ``field_type`` (a column's declared type), the case must be null or the case that
    type uses; otherwise ``ValueError`` says which case was found. A ``Value`` with no case
    set is malformed (``ValueError``).
    """
    case = value.WhichOneof("kind")
    if case is None:
        raise ValueError("value has no case set")
    if case == "null_value":
        return None
    if field_type is not None:
        expected = CASE_OF_TYPE.get(field_type)
        if expected is None:
            raise ValueError(f"invalid field type {field_type}")
        if case != expected:
            raise ValueError(f"{case} in a {FT.Name(field_type)} column (expected {expected})")
    if case == "decimal_value":
        text = value.decimal_value
        try:
            return Decimal(text)
        except InvalidOperation:
            raise ValueError(f"decimal_value {text!r} is not a number") from None
    raw: SqlValue = getattr(value, case)
    return raw


def value_message(field_type: int, value: SqlValue) -> value_pb2.Value:
    """Return the ``Value`` holding ``value`` in the case ``field_type`` uses (null for None)."""
    if value is None:
        return value_pb2.Value(null_value=value_pb2.NULL_VALUE)
    case = CASE_OF_TYPE.get(field_type)
    if case is None:
        raise ValueError(f"invalid field type {field_type}")
    if case == "decimal_value":
        value = str(value)
    msg = value_pb2.Value()
    setattr(msg, case, value)  # the case is data (CASE_OF_TYPE), so no keyword is spelled out
    return msg


def _variable(var: statement_pb2.SessionVariable) -> Variable:
    case = var.value.WhichOneof("kind")
    if case is None:
        raise ValueError(f"session variable @{var.name} has no value case set")
    ftype = FT.FIELD_TYPE_UNSPECIFIED if case == "null_value" else TYPE_OF_CASE[case]
    return Variable(var.name, ftype, python_value(var.value))


# --- transactions to operations -------------------------------------------------------------


def _columns(fields: Sequence[statement_pb2.FieldMetadata]) -> tuple[Column, ...]:
    return tuple(Column(f.name, f.type) for f in fields)


def _values(columns: tuple[Column, ...], values: Sequence[value_pb2.Value], part: str,
            r_no: int = 0, cases: list[str | None] | None = None) -> tuple[SqlValue, ...]:
    """The Python values of ``values`` for ``columns`` (checked as ``python_value`` does).
    ``cases``: ``_fast_cases(columns)``, for the fast path (a value in its column's case,
    bound as it is). Errors name the values as ``record <r_no> <part>`` (just ``part`` when
    ``r_no`` is 0); the name is only built for an error (this runs per row when applying;
    indexing a repeated field is cheaper than iterating it)."""
    n = len(values)
    if n != len(columns):
        raise ValueError(f"{_what(part, r_no)}: {n} values for {len(columns)} fields")
    out = []
    for i in range(n):
        val = values[i]
        if cases is not None:
            case = cases[i]
            if case is not None and val.WhichOneof("kind") == case:
                out.append(getattr(val, case))
                continue
        col = columns[i]
        try:
            out.append(python_value(val, col.type))
        except ValueError as exc:
            raise ValueError(f"{_what(part, r_no)} column {col.name!r}: {exc}") from None
    return tuple(out)


def _fast_cases(columns: tuple[Column, ...]) -> list[str | None]:
    """For ``_values``: the ``Value`` case of each column whose values bind as they are (None
    for a decimal column, converted by ``python_value``). Call after ``_check_columns``."""
    return [None if CASE_OF_TYPE[c.type] == "decimal_value" else CASE_OF_TYPE[c.type]
            for c in columns]


def _what(part: str, r_no: int) -> str:
    if not r_no:
        return part
    return f"record {r_no} {part}" if part else f"record {r_no}"


def _check_columns(key_cols: tuple[Column, ...], cols: tuple[Column, ...]) -> None:
    if not key_cols:
        raise ValueError("no key_fields")
    for col in key_cols + cols:
        if col.type not in CASE_OF_TYPE:
            raise ValueError(f"field {col.name!r} has invalid type {col.type}")


class _OpMeta(TypedDict):
    """The transaction fields every operation of one statement carries (``RowOp`` keywords)."""

    gtid: Gtid
    log_index: int
    epoch: int
    author: int
    commit_ts_ns: int
    statement: int


def statement_ops(txn: transaction_pb2.Transaction, log_index: int = 0) -> list[RowOp]:
    """Return the transaction's statements as operations, one per record, in log order.

    This is the unreduced form ("the original statements"): INSERT, UPDATE and DELETE records
    become INSERT, UPDATE and DELETE operations; an UPDATE record that sets a key column to a
    different value becomes a MOVE; an ``ApplyStatus`` statement becomes an UPSERT of
    ``APPLY_STATUS_TABLE``; a SQL statement becomes a SQL operation. Every operation carries
    ``log_index`` and the transaction's gtid, epoch, author and commit timestamp. Raises
    ``MalformedTransactionError`` naming the statement and record that break the log model.
    """
    meta: _OpMeta = {
        "statement": 0,
        "gtid": Gtid(txn.gtid.server_id, txn.gtid.trans_id),
        "log_index": log_index,
        "epoch": txn.epoch,
        "author": txn.author,
        "commit_ts_ns": txn.commit_timestamp_ns,
    }
    ops: list[RowOp] = []
    for s_no, stmt in enumerate(txn.statements, 1):
        meta["statement"] = s_no
        try:
            ops.extend(_ops_of_statement(stmt, meta))
        except ValueError as exc:
            raise MalformedTransactionError(
                f"transaction {meta['gtid']} statement {s_no}: {exc}"
            ) from None
    return ops


def _ops_of_statement(stmt: statement_pb2.Statement, meta: _OpMeta) -> Iterator[RowOp]:
    kind = stmt.WhichOneof("kind")
    if kind is None:
        raise ValueError("statement has no kind set")
    if kind == "sql":
        sql = stmt.sql
        yield RowOp(OpKind.SQL, _NO_TABLE, (), (), sql=SqlText(
            sql.query, tuple(_variable(v) for v in sql.variables), sql.default_schema,
            sql.session_id), **meta)
        return
    if kind == "apply_status":
        st = stmt.apply_status
        u = FT.FIELD_TYPE_UNSIGNED
        yield RowOp(OpKind.UPSERT, APPLY_STATUS_TABLE, (Column("server_id", u),),
                    (st.server_id,), (Column("epoch", u), Column("applied_by", u)),
                    (st.epoch, st.applied_by), **meta)
        return
    body = getattr(stmt, kind)
    table = TableRef(body.table.schema_name, body.table.table_name)
    if not table.name:
        raise ValueError("table has no name")
    key_cols = _columns(body.key_fields)
    if kind == "insert":
        cols = _columns(body.fields)
        _check_columns(key_cols, cols)
        kcases, vcases = _fast_cases(key_cols), _fast_cases(cols)
        for r_no, rec in enumerate(body.records, 1):
            yield RowOp(OpKind.INSERT, table, key_cols,
                        _values(key_cols, rec.key_values, "key", r_no, kcases), cols,
                        _values(cols, rec.after_values, "", r_no, vcases), **meta)
    elif kind == "delete":
        _check_columns(key_cols, ())
        kcases = _fast_cases(key_cols)
        for r_no, rec in enumerate(body.records, 1):
            yield RowOp(OpKind.DELETE, table, key_cols,
                        _values(key_cols, rec.key_values, "key", r_no, kcases), **meta)
    else:
        yield from _update_ops(body, table, key_cols, meta)


def _update_ops(body: statement_pb2.UpdateStatement, table: TableRef,
                key_cols: tuple[Column, ...], meta: _OpMeta) -> Iterator[RowOp]:
    cols = _columns(body.set_fields)
    _check_columns(key_cols, cols)
    key_pos = {c.name: i for i, c in enumerate(key_cols)}
    kcases, vcases = _fast_cases(key_cols), _fast_cases(cols)
    for r_no, rec in enumerate(body.records, 1):
        key = _values(key_cols, rec.key_values, "key", r_no, kcases)
        vals = _values(cols, rec.after_values, "", r_no, vcases)
        if rec.before_values and len(rec.before_values) != len(cols):
            raise ValueError(f"record {r_no}: {len(rec.before_values)} before values for "
                             f"{len(cols)} set_fields")
        new_key = list(key)
        rest_cols: list[Column] = []
        rest_vals: list[SqlValue] = []
        for col, val in zip(cols, vals, strict=True):
            if col.name in key_pos:
                new_key[key_pos[col.name]] = val
            else:
                rest_cols.append(col)
                rest_vals.append(val)
        if tuple(new_key) != key:
            yield RowOp(OpKind.MOVE, table, key_cols, key, tuple(rest_cols), tuple(rest_vals),
                        new_key=tuple(new_key), **meta)
        else:
            yield RowOp(OpKind.UPDATE, table, key_cols, key, tuple(rest_cols),
                        tuple(rest_vals), **meta)


# --- protobuf form (dead letters) -----------------------------------------------------------


def _fields(cols: Sequence[Column]) -> list[statement_pb2.FieldMetadata]:
    return [statement_pb2.FieldMetadata(name=c.name, type=c.type) for c in cols]  # type: ignore[arg-type]


def op_to_proto(op: RowOp) -> applier_pb2.RowOperation:
    """Return the ``gateway.v1.RowOperation`` form of ``op`` (lossless; see ``op_from_proto``)."""
    msg = applier_pb2.RowOperation(
        kind=op.kind.value,  # type: ignore[arg-type]
        table=statement_pb2.TableMetadata(schema_name=op.table.schema, table_name=op.table.name),
        key_fields=_fields(op.key_columns),
        key_values=[value_message(c.type, v) for c, v in zip(op.key_columns, op.key, strict=True)],
        fields=_fields(op.columns),
        values=[value_message(c.type, v) for c, v in zip(op.columns, op.values, strict=True)],
        gtid=gtid_pb2.Gtid(server_id=op.gtid.server_id, trans_id=op.gtid.trans_id),
        log_index=op.log_index,
        epoch=op.epoch,
        author=op.author,
        commit_timestamp_ns=op.commit_ts_ns,
        statement=op.statement,
        backfill_index=op.backfill,
    )
    if op.new_key is not None:
        msg.new_key_values.extend(
            value_message(c.type, v) for c, v in zip(op.key_columns, op.new_key, strict=True))
    if op.sql is not None:
        msg.sql.query = op.sql.query
        msg.sql.default_schema = op.sql.default_schema
        msg.sql.session_id = op.sql.session_id
        for var in op.sql.variables:
            msg.sql.variables.add(name=var.name, value=value_message(var.type, var.value))
    return msg


def op_from_proto(msg: applier_pb2.RowOperation) -> RowOp:
    """Inverse of ``op_to_proto``; raises ``MalformedTransactionError`` for a bad message."""
    try:
        kind = OpKind(msg.kind)
    except ValueError:
        raise MalformedTransactionError(f"row operation has invalid kind {msg.kind}") from None
    try:
        key_cols = _columns(msg.key_fields)
        cols = _columns(msg.fields)
        sql = None
        if kind is OpKind.SQL:
            sql = SqlText(msg.sql.query, tuple(_variable(v) for v in msg.sql.variables),
                          msg.sql.default_schema, msg.sql.session_id)
        return RowOp(
            kind,
            TableRef(msg.table.schema_name, msg.table.table_name),
            key_cols,
            _values(key_cols, msg.key_values, "key"),
            cols,
            _values(cols, msg.values, "values"),
            Gtid(msg.gtid.server_id, msg.gtid.trans_id),
            msg.log_index,
            msg.epoch,
            msg.author,
            msg.commit_timestamp_ns,
            _values(key_cols, msg.new_key_values, "new key") if kind is OpKind.MOVE else None,
            sql,
            msg.statement,
            msg.backfill_index,
        )
    except ValueError as exc:
        raise MalformedTransactionError(f"row operation: {exc}") from None


@dataclass(frozen=True, slots=True)
class ColumnOps:
    """Operations of one ``kind`` (INSERT, UPSERT, UPDATE or DELETE) on rows of one table,
    column by column: ``key[i][r]`` is the value of ``key_columns[i]`` in row ``r``,
    ``values[j][r]`` that of ``columns[j]``. Every row sets exactly ``columns`` (an INSERT
    leaves the table's other columns null, an UPDATE leaves them as they are); a DELETE has no
    columns. Values are what ``rowops.python_value`` gives for a value of the column's type
    (or ``None``), i.e. what the ``RowOp`` of each row would hold. ``gtids[r]`` is the
    ``(server_id, trans_id)`` of row ``r``'s last change. At most one operation per row."""

    table: TableRef
    kind: OpKind
    key_columns: tuple[Column, ...]
    columns: tuple[Column, ...]
    key: Sequence[Sequence[SqlValue]]
    values: Sequence[Sequence[SqlValue]]

    def __len__(self) -> int:
        return len(self.key[0]) if self.key else 0
