"""``gateway sql``: simple SQL text to row-based statements (parsed with sqlglot, MySQL dialect).

Accepted, separated by ``;``:

- ``SET @name = literal`` (later statements may use ``@name`` wherever a literal goes);
- ``INSERT INTO schema.table (col, ...) VALUES (...), (...)``;
- ``UPDATE schema.table SET col = literal, ... WHERE key = literal [AND key2 = literal]``;
- ``DELETE FROM schema.table WHERE key = literal [AND ...]``.

Primary key: the ``key`` columns given (``--key id``), else ``id`` if the INSERT names it,
else the INSERT's first column; for UPDATE/DELETE the WHERE columns are the key. Column types
come from the literals: integers INTEGER, decimals with a point DOUBLE, strings VARCHAR,
TRUE/FALSE BOOLEAN, NULL a null VARCHAR. Anything else raises :class:`SqlError` (one line).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from gateway.client import row_delete, row_insert, row_update
from gateway.v1 import statement_pb2

__all__ = ["SqlError", "sql_to_statements"]


class SqlError(ValueError):
    """The SQL text is not in the supported subset; ``str()`` is one line."""


def _literal(node: exp.Expression, variables: dict[str, Any]) -> Any:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        v = _literal(node.this, variables)
        if not isinstance(v, int | float) or isinstance(v, bool):
            raise SqlError(f"cannot negate {node.sql()}")
        return -v
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            return float(text)
    if isinstance(node, exp.Parameter | exp.SessionParameter):
        name = node.name
        if name not in variables:
            raise SqlError(f"@{name} is not set (SET @{name} = ... first)")
        return variables[name]
    raise SqlError(f"only literals and @variables are supported, not {node.sql()!r}")


def _table(node: exp.Expression) -> str:
    t = node if isinstance(node, exp.Table) else node.find(exp.Table)
    if t is None or not t.name:
        raise SqlError("missing table name")
    return f"{t.db}.{t.name}" if t.db else t.name


def _where(node: exp.Expression | None, variables: dict[str, Any]) -> dict[str, Any]:
    if node is None:
        raise SqlError("UPDATE/DELETE need WHERE key = value (no multi-row changes)")
    cond = node.this if isinstance(node, exp.Where) else node
    out: dict[str, Any] = {}
    parts = list(cond.flatten()) if isinstance(cond, exp.And) else [cond]
    for p in parts:
        if not isinstance(p, exp.EQ) or not isinstance(p.this, exp.Column):
            raise SqlError(f"WHERE must be key = value [AND ...], not {p.sql()!r}")
        out[p.this.name] = _literal(p.expression, variables)
    return out


def _insert(node: exp.Insert, variables: dict[str, Any], key: Sequence[str]
            ) -> statement_pb2.Statement:
    schema = node.this
    if not isinstance(schema, exp.Schema) or not schema.expressions:
        raise SqlError("INSERT needs a column list: INSERT INTO t (a, b) VALUES (...)")
    cols = [c.name for c in schema.expressions]
    keys = list(key) or (["id"] if "id" in cols else cols[:1])
    missing = [k for k in keys if k not in cols]
    if missing:
        raise SqlError(f"INSERT does not set key column {missing[0]!r}")
    values = node.expression
    if not isinstance(values, exp.Values):
        raise SqlError("only INSERT ... VALUES is supported")
    table = _table(schema)
    stmt: statement_pb2.Statement | None = None
    for tup in values.expressions:
        row = [_literal(v, variables) for v in tup.expressions]
        if len(row) != len(cols):
            raise SqlError(f"{len(row)} values for {len(cols)} columns")
        rec = dict(zip(cols, row, strict=True))
        kv = {k: rec[k] for k in keys}
        rest = {c: v for c, v in rec.items() if c not in keys}
        one = row_insert(table, kv, rest)
        if stmt is None:
            stmt = one
        else:
            stmt.insert.records.extend(one.insert.records)
    if stmt is None:
        raise SqlError("INSERT without rows")
    return stmt


def sql_to_statements(text: str, key: Sequence[str] = ()) -> list[statement_pb2.Statement]:
    """Statements of one transaction for ``text`` (see the module docstring)."""
    try:
        trees = sqlglot.parse(text, read="mysql")
    except sqlglot.errors.ParseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "parse error"
        raise SqlError(f"cannot parse SQL: {first}") from None
    variables: dict[str, Any] = {}
    out: list[statement_pb2.Statement] = []
    for node in trees:
        if node is None:
            continue
        if isinstance(node, exp.Set):
            for item in node.expressions:
                eq = item.this
                if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Parameter):
                    raise SqlError(f"only SET @var = literal is supported, not {item.sql()!r}")
                variables[eq.this.name] = _literal(eq.expression, variables)
        elif isinstance(node, exp.Insert):
            out.append(_insert(node, variables, key))
        elif isinstance(node, exp.Update):
            sets = {}
            for eq in node.expressions:
                if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
                    raise SqlError(f"SET must be col = value, not {eq.sql()!r}")
                sets[eq.this.name] = _literal(eq.expression, variables)
            out.append(row_update(_table(node.this), _where(node.args.get("where"), variables),
                                  sets))
        elif isinstance(node, exp.Delete):
            out.append(row_delete(_table(node.this), _where(node.args.get("where"), variables)))
        else:
            raise SqlError(f"unsupported statement: {node.sql()[:60]!r} (INSERT, UPDATE, "
                           f"DELETE and SET @var only)")
    if not out:
        raise SqlError("no INSERT, UPDATE or DELETE to run")
    return out

