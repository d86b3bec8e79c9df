"""``gateway sql`` for table definitions: DDL text to a ``gateway.v1.SchemaChangeRequest``
(parsed with sqlglot, MySQL dialect; docs/schema.md).

Accepted, one statement at a time:

- ``CREATE TABLE schema.table (col TYPE [NOT NULL] [DEFAULT literal] [PRIMARY KEY], ...
  [, PRIMARY KEY (col, ...)])``;
- ``ALTER TABLE schema.table ADD [COLUMN] col TYPE [NOT NULL] [DEFAULT literal]``;
- ``ALTER TABLE schema.table DROP [COLUMN] col``;
- ``ALTER TABLE schema.table RENAME COLUMN old TO new``;
- ``DROP TABLE schema.table``;
- ``ALTER TABLE ... MODIFY/ALTER COLUMN`` (a type change) and ``ADD/DROP PRIMARY KEY`` are
  sent as what they are, and the node refuses them (FAILED_PRECONDITION, with the reason).

Types map to the log's column types: INT/BIGINT/SMALLINT/TINYINT/MEDIUMINT INTEGER (UNSIGNED:
UNSIGNED), DOUBLE/FLOAT/REAL DOUBLE, DECIMAL/NUMERIC DECIMAL, CHAR/VARCHAR/TEXT VARCHAR,
BLOB/BINARY/VARBINARY BLOB, DATE, TIME, DATETIME, TIMESTAMP, UUID, JSON, BOOLEAN. Anything
else (several statements, IF EXISTS, constraints other than those above, ...) raises
``SqlError`` naming it.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import cast

import sqlglot
from sqlglot import exp

from gateway.cli.sql import SqlError, _column, _literal, _parse, _table, as_written
from gateway.core.rowops import value_message
from gateway.v1 import schema_pb2, value_pb2

__all__ = ["is_ddl", "parse_ddl"]

K = schema_pb2.SchemaChangeKind
FT = value_pb2.FieldType
_T = exp.DataType.Type
_TYPES: dict[object, int] = {
    **dict.fromkeys((_T.INT, _T.BIGINT, _T.SMALLINT, _T.TINYINT, _T.MEDIUMINT),
                    FT.FIELD_TYPE_INTEGER),
    **dict.fromkeys((_T.UINT, _T.UBIGINT, _T.USMALLINT, _T.UTINYINT, _T.UMEDIUMINT),
                    FT.FIELD_TYPE_UNSIGNED),
    **dict.fromkeys((_T.DOUBLE, _T.FLOAT), FT.FIELD_TYPE_DOUBLE),
    **dict.fromkeys((_T.DECIMAL,), FT.FIELD_TYPE_DECIMAL),
    **dict.fromkeys((_T.CHAR, _T.VARCHAR, _T.TEXT, _T.MEDIUMTEXT, _T.LONGTEXT, _T.TINYTEXT,
                     _T.NCHAR, _T.NVARCHAR), FT.FIELD_TYPE_VARCHAR),
    **dict.fromkeys((_T.BLOB, _T.BINARY, _T.VARBINARY, _T.MEDIUMBLOB, _T.LONGBLOB,
                     _T.TINYBLOB), FT.FIELD_TYPE_BLOB),
    _T.DATE: FT.FIELD_TYPE_DATE, _T.TIME: FT.FIELD_TYPE_TIME,
    _T.DATETIME: FT.FIELD_TYPE_DATETIME, _T.TIMESTAMP: FT.FIELD_TYPE_TIMESTAMP,
    _T.UUID: FT.FIELD_TYPE_UUID, _T.JSON: FT.FIELD_TYPE_JSON,
    _T.BOOLEAN: FT.FIELD_TYPE_BOOLEAN,
}


def is_ddl(text: str) -> bool:
    """Whether ``text`` starts with CREATE, ALTER or DROP (a table definition change)."""
    head = text.lstrip().split(None, 1)
    return bool(head) and head[0].upper() in ("CREATE", "ALTER", "DROP")


def _type(node: exp.Expression | None, where: str) -> int:
    if not isinstance(node, exp.DataType):
        raise SqlError(f"{where}: missing column type")
    got = _TYPES.get(node.this)
    if got is None:
        raise SqlError(f"{where}: type {node.sql(dialect='mysql')} is not supported")
    return got


def _default(node: exp.Expression, ftype: int, where: str) -> value_pb2.Value:
    v = _literal(node, {})
    if v is None:
        return value_pb2.Value(null_value=value_pb2.NULL_VALUE)
    try:
        if ftype == FT.FIELD_TYPE_DOUBLE and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        elif ftype == FT.FIELD_TYPE_DECIMAL and isinstance(v, int | float | str):
            v = str(Decimal(str(v)))
        elif ftype == FT.FIELD_TYPE_BLOB and isinstance(v, str):
            v = v.encode()
        if ftype in (FT.FIELD_TYPE_INTEGER, FT.FIELD_TYPE_UNSIGNED, FT.FIELD_TYPE_TIMESTAMP) \
                and isinstance(v, bool):
            raise TypeError("a boolean")
        return value_message(ftype, v)
    except (TypeError, ValueError, InvalidOperation) as exc:
        raise SqlError(f"{where}: DEFAULT {node.sql(dialect='mysql')} does not fit "
                       f"{FT.Name(ftype)[len('FIELD_TYPE_'):]} ({exc})") from None


def _column_def(node: exp.ColumnDef, table: str) -> tuple[schema_pb2.ColumnDef, bool]:
    """The column and whether it is declared PRIMARY KEY."""
    name = str(node.name)
    where = f"{table}.{name}"
    ftype = _type(node.args.get("kind"), where)
    col = schema_pb2.ColumnDef(name=name, type=cast(value_pb2.FieldType, ftype))
    key = False
    for c in node.args.get("constraints") or ():
        kind = c.args.get("kind")
        if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
            col.not_null = True
        elif isinstance(kind, exp.DefaultColumnConstraint):
            col.default_value.CopyFrom(_default(kind.this, ftype, where))
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            key = col.not_null = True
        else:
            raise SqlError(f"{where}: constraint {c.sql(dialect='mysql')} is not supported")
    return col, key


def _create(node: exp.Create) -> schema_pb2.SchemaChangeRequest:
    if str(node.args.get("kind", "")).upper() != "TABLE":
        raise SqlError(f"only CREATE TABLE is supported, not CREATE {node.args.get('kind')}")
    if node.args.get("exists"):
        raise SqlError("CREATE TABLE IF NOT EXISTS is not supported (the node refuses a table "
                       "that exists)")
    schema = node.this
    if not isinstance(schema, exp.Schema) or not schema.expressions:
        raise SqlError("CREATE TABLE needs a column list")
    table = _table(schema.this)
    req = schema_pb2.SchemaChangeRequest(table=table, kind=K.SCHEMA_CHANGE_KIND_CREATE)
    keys: list[str] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            col, key = _column_def(item, table)
            req.columns.append(col)
            if key:
                keys.append(col.name)
        elif isinstance(item, exp.PrimaryKey):
            if keys:
                raise SqlError(f"{table}: the primary key is given twice")
            keys = [_column(c.this if isinstance(c, exp.Ordered) else c, "PRIMARY KEY")
                    for c in item.expressions]
        else:
            raise SqlError(f"{table}: {item.sql(dialect='mysql')} is not supported")
    if not keys:
        raise SqlError(f"{table}: a table needs a PRIMARY KEY")
    req.primary_key.extend(keys)
    return req


def _alter(node: exp.Alter) -> schema_pb2.SchemaChangeRequest:
    table = _table(node.this)
    actions = node.args.get("actions") or []
    if len(actions) != 1:
        raise SqlError(f"ALTER TABLE {table}: one change at a time (each is its own version)")
    act = actions[0]
    req = schema_pb2.SchemaChangeRequest(table=table)
    if isinstance(act, exp.ColumnDef):
        col, key = _column_def(act, table)
        if key:
            raise SqlError(f"{table}.{col.name}: adding a primary-key column is a primary-key "
                           f"change")
        req.kind = K.SCHEMA_CHANGE_KIND_ADD_COLUMN
        req.column.CopyFrom(col)
    elif isinstance(act, exp.Drop) and str(act.args.get("kind", "")).upper() == "COLUMN":
        cols = act.args.get("tables") or []
        if len(cols) != 1:
            raise SqlError(f"ALTER TABLE {table} DROP COLUMN: one column at a time")
        req.kind = K.SCHEMA_CHANGE_KIND_DROP_COLUMN
        req.column.name = _column(cols[0], "DROP COLUMN")
    elif isinstance(act, exp.RenameColumn):
        req.kind = K.SCHEMA_CHANGE_KIND_RENAME_COLUMN
        req.old_name = _column(act.this, "RENAME COLUMN")
        req.new_name = _column(act.args["to"], "RENAME COLUMN ... TO")
    elif isinstance(act, exp.ModifyColumn | exp.AlterColumn):
        req.kind = K.SCHEMA_CHANGE_KIND_CHANGE_TYPE
        inner = act.this
        if isinstance(inner, exp.ColumnDef):
            req.column.CopyFrom(_column_def(inner, table)[0])
        else:
            req.column.name = _column(inner, "ALTER COLUMN")
            dtype = act.args.get("dtype")
            if dtype is not None:
                req.column.type = cast(value_pb2.FieldType,
                                       _type(dtype, f"{table}.{req.column.name}"))
    elif isinstance(act, exp.DropPrimaryKey | exp.PrimaryKey | exp.AddConstraint):
        req.kind = K.SCHEMA_CHANGE_KIND_CHANGE_PRIMARY_KEY
    else:
        raise SqlError(f"ALTER TABLE {table}: {act.sql(dialect='mysql')} is not supported "
                       f"(ADD COLUMN, DROP COLUMN, RENAME COLUMN)")
    return req


def parse_ddl(text: str) -> schema_pb2.SchemaChangeRequest:
    """The one table-definition change in ``text``; raises ``SqlError`` for anything else."""
    try:
        trees = [t for t in _parse(text) if t is not None]
    except sqlglot.errors.SqlglotError as exc:  # pragma: no cover - _parse maps them
        raise SqlError(str(exc)) from None
    if len(trees) != 1:
        raise SqlError("a CREATE, ALTER or DROP TABLE must be the only statement")
    node = trees[0]
    if isinstance(node, exp.Create):
        return _create(node)
    if isinstance(node, exp.Alter):
        if str(node.args.get("kind", "TABLE")).upper() != "TABLE":
            raise SqlError("only ALTER TABLE is supported")
        return _alter(node)
    if isinstance(node, exp.Drop):
        if str(node.args.get("kind", "")).upper() != "TABLE":
            raise SqlError(f"only DROP TABLE is supported, not DROP {node.args.get('kind')}")
        if node.args.get("exists"):
            raise SqlError("DROP TABLE IF EXISTS is not supported")
        tables = node.args.get("tables") or []
        if len(tables) != 1:
            raise SqlError("DROP TABLE: one table at a time")
        return schema_pb2.SchemaChangeRequest(table=_table(tables[0]),
                                              kind=K.SCHEMA_CHANGE_KIND_DROP_TABLE)
    raise SqlError(f"unsupported statement: {as_written(text, trees, node)!r} (CREATE TABLE, "
                   f"ALTER TABLE, DROP TABLE)")
