"""``gateway sql``: simple SQL text to row-based statements (parsed with sqlglot, MySQL dialect).

Accepted, separated by ``;``:

- ``SET @name = literal`` (later statements may use ``@name`` wherever a literal goes);
- ``INSERT INTO schema.table (col, ...) VALUES (...), (...)``;
- ``UPDATE schema.table SET col = literal, ... WHERE key = literal [AND key2 = literal]``;
- ``DELETE FROM schema.table WHERE key = literal [AND ...]``;
- in both, ``AND col = literal`` terms on non-key columns (beside every key column) are
  conditions of the write (``sql_to_write``; docs/node.md, "Conditional writes"): it is
  applied only if the row exists and holds those values when the write is applied, else it
  is refused whole (FAILED_PRECONDITION) -- an UPDATE never changes a row its WHERE does
  not match;
- ``SELECT * | col, ... FROM schema.table [WHERE ...] [LIMIT n]``, alone (`parse_select`):
  the WHERE is ``col = literal`` terms on a prefix of the primary key, optionally followed by
  one range on the next key column (``BETWEEN a AND b``, ``>``, ``>=``, ``<``, ``<=``), all
  joined with AND. It is answered with ``Read`` (the whole key given) or ``Scan``.

Translation is exact or refused: any clause, modifier or expression not listed here
(``ON DUPLICATE KEY UPDATE``, ``INSERT IGNORE``, ``REPLACE``, ``LIMIT``/``ORDER BY`` on a
change, a repeated column, a 3-part name, an integer outside the signed 64-bit range, a
non-finite number, functions, sub-queries, ...) raises :class:`SqlError` naming it.

Primary key: the ``key`` columns given (``--key id``), else ``id`` if the INSERT names it,
else the INSERT's first column; for UPDATE/DELETE the table's key (``key_of``: the CLI asks the
node), or the WHERE columns when it is not known (a table without rows). Column types
come from the literals: integers INTEGER, decimals with a point DOUBLE, strings VARCHAR,
TRUE/FALSE BOOLEAN, NULL a null VARCHAR. Anything else raises :class:`SqlError` (one line).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from gateway.client import Condition, row_delete, row_insert, row_update
from gateway.v1 import statement_pb2, transaction_pb2

if TYPE_CHECKING:
    from gateway.core.sql_value import SqlValue

__all__ = ["SelectQuery", "SqlError", "is_select", "parse_select", "sql_to_statements",
           "sql_to_write"]

# sqlglot logs "contains unsupported syntax. Falling back to parsing as a 'Command'" for text
# it cannot parse (REPLACE, ...); such statements are refused here in one line instead.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

_INT64 = (-(1 << 63), (1 << 63) - 1)


class SqlError(ValueError):
    """The SQL text is not in the supported subset; ``str()`` is one line."""


def _literal(node: exp.Expression, variables: dict[str, SqlValue]) -> SqlValue:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        inner = node.this
        if isinstance(inner, exp.Literal) and not inner.is_string and inner.this.isdigit():
            value = -int(inner.this)  # so that -9223372036854775808 is in range
            if value < _INT64[0]:
                raise SqlError(f"integer out of the signed 64-bit range: -{inner.this}")
            return value
        v = _literal(node.this, variables)
        if not isinstance(v, int | float) or isinstance(v, bool):
            raise SqlError(f"cannot negate {node.sql()}")
        return -v
    if isinstance(node, exp.Literal):
        if node.is_string:
            string: str = node.this
            return string
        text = node.this
        try:
            number = int(text)
        except ValueError:
            try:
                real = float(text)
            except ValueError:
                raise SqlError(f"not a number: {text!r}") from None
            if not math.isfinite(real):
                raise SqlError(f"number out of range: {text}") from None
            return real
        if not _INT64[0] <= number <= _INT64[1]:
            raise SqlError(f"integer out of the signed 64-bit range: {text}")
        return number
    if isinstance(node, exp.Parameter | exp.SessionParameter):
        name = node.name
        if name not in variables:
            raise SqlError(f"@{name} is not set (SET @{name} = ... first)")
        return variables[name]
    raise SqlError(f"only literals and @variables are supported, not {node.sql()!r}")


def _only(node: exp.Expression, allowed: set[str], what: str) -> None:
    """Refuse ``node`` if it carries any argument beyond ``allowed`` (a clause or modifier
    this translation would otherwise drop silently)."""
    extra = sorted(k for k, v in node.args.items()
                   if k not in allowed and v not in (None, False, "", []))
    if extra:
        names = {"conflict": "ON DUPLICATE KEY UPDATE / ON CONFLICT", "ignore": "IGNORE",
                 "order": "ORDER BY", "limit": "LIMIT", "returning": "RETURNING",
                 "joins": "JOIN", "group": "GROUP BY", "having": "HAVING",
                 "distinct": "DISTINCT", "offset": "OFFSET", "with": "WITH"}
        raise SqlError(f"{what}: {', '.join(names.get(k, k) for k in extra)} is not supported")


def _table(node: exp.Expression) -> str:
    t = node if isinstance(node, exp.Table) else node.find(exp.Table)
    if t is None or not t.name:
        raise SqlError("missing table name")
    _only(t, {"this", "db"}, f"table {t.sql()}")
    return f"{t.db}.{t.name}" if t.db else t.name


def _column(node: exp.Expression, what: str) -> str:
    if isinstance(node, exp.Identifier) or (isinstance(node, exp.Column) and not node.table):
        return str(node.name)
    raise SqlError(f"{what}: expected a plain column name, not {node.sql()!r}")


def _distinct(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise SqlError(f"{what}: column {n!r} is given twice")
        seen.add(n)


def _where(node: exp.Expression | None, variables: dict[str, SqlValue]) -> dict[str, SqlValue]:
    if node is None:
        raise SqlError("UPDATE/DELETE need WHERE key = value (no multi-row changes)")
    cond = node.this if isinstance(node, exp.Where) else node
    out: dict[str, SqlValue] = {}
    parts = list(cond.flatten()) if isinstance(cond, exp.And) else [cond]
    for p in parts:
        if not isinstance(p, exp.EQ) or not isinstance(p.this, exp.Column):
            raise SqlError(f"WHERE must be key = value [AND ...], not {p.sql()!r}")
        name = _column(p.this, "WHERE")
        if name in out:
            raise SqlError(f"WHERE: column {name!r} is given twice")
        out[name] = _literal(p.expression, variables)
        if out[name] is None:
            raise SqlError(f"WHERE: key column {name!r} is NULL (a primary key is never NULL, "
                           f"and = NULL matches no row)")
    return out


def _insert(node: exp.Insert, variables: dict[str, SqlValue], key: Sequence[str]
            ) -> statement_pb2.Statement:
    _only(node, {"this", "expression", "into"}, "INSERT")
    schema = node.this
    if not isinstance(schema, exp.Schema) or not schema.expressions:
        raise SqlError("INSERT needs a column list: INSERT INTO t (a, b) VALUES (...)")
    cols = [_column(c, "INSERT column list") for c in schema.expressions]
    _distinct(cols, "INSERT")
    _distinct(list(key), "--key")
    keys = list(key) or (["id"] if "id" in cols else cols[:1])
    missing = [k for k in keys if k not in cols]
    if missing:
        raise SqlError(f"INSERT does not set key column {missing[0]!r}")
    values = node.expression
    if not isinstance(values, exp.Values):
        raise SqlError("only INSERT ... VALUES is supported")
    table = _table(schema)
    stmt: statement_pb2.Statement | None = None
    _only(values, {"expressions"}, "VALUES")
    for tup in values.expressions:
        if not isinstance(tup, exp.Tuple):
            raise SqlError(f"VALUES needs parenthesised rows, not {tup.sql()!r}")
        row = [_literal(v, variables) for v in tup.expressions]
        if len(row) != len(cols):
            raise SqlError(f"{len(row)} values for {len(cols)} columns")
        rec = dict(zip(cols, row, strict=True))
        kv = {k: rec[k] for k in keys}
        nulls = [k for k, v in kv.items() if v is None]
        if nulls:
            raise SqlError(f"INSERT row {len(stmt.insert.records) + 1 if stmt else 1}: key "
                           f"column {nulls[0]!r} is NULL (a primary key is never NULL)")
        rest = {c: v for c, v in rec.items() if c not in keys}
        one = row_insert(table, kv, rest)
        if stmt is None:
            stmt = one
        else:
            stmt.insert.records.extend(one.insert.records)
    if stmt is None:
        raise SqlError("INSERT without rows")
    return stmt


def _parse(text: str) -> list[exp.Expr | None]:
    try:
        return sqlglot.parse(text, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "parse error"
        raise SqlError(f"cannot parse SQL: {first}") from None


def as_written(text: str, trees: Sequence[exp.Expr | None], node: exp.Expr) -> str:
    """``node`` (one of ``trees``, what ``text`` parsed into) for an error message, at most 60
    characters: ``text`` itself when it holds that one statement alone, else the parser's
    rendering (which may differ from what was typed: ``SELEC x`` parses as ``SELEC AS x``)."""
    alone = [t for t in trees if t is not None] == [node]
    shown = " ".join(text.split()).rstrip(";").strip() if alone else node.sql()
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _split_where(table: str, where: dict[str, SqlValue], key_of: KeyOf | None,
                 conditions: list[transaction_pb2.Condition]) -> dict[str, SqlValue]:
    """The key part of an UPDATE/DELETE's ``where``; its other columns become a values
    condition on the row, appended to ``conditions``."""
    keycols = key_of(table) if key_of is not None else None
    if not keycols or set(where) == set(keycols):
        return where
    missing = [k for k in keycols if k not in where]
    if missing:
        raise SqlError(f"WHERE must give every key column of {table} "
                       f"({', '.join(keycols)}): {missing[0]!r} is missing")
    key = {k: where[k] for k in keycols}
    rest = {c: v for c, v in where.items() if c not in key}
    conditions.append(Condition.values(table, list(key.values()), rest))
    return key


KeyOf = Callable[[str], "Sequence[str] | None"]


def sql_to_statements(text: str, key: Sequence[str] = ()) -> list[statement_pb2.Statement]:
    """Statements of one transaction for ``text`` (see the module docstring); every WHERE
    column is taken for a key column."""
    return sql_to_write(text, key)[0]


def sql_to_write(text: str, key: Sequence[str] = (), key_of: KeyOf | None = None
                 ) -> tuple[list[statement_pb2.Statement], list[transaction_pb2.Condition]]:
    """Statements and conditions of one transaction for ``text`` (see the module docstring).
    ``key_of(table)``: the table's key columns in order, or None when unknown (then every
    WHERE column is taken for a key column, as by :func:`sql_to_statements`)."""
    trees = _parse(text)
    variables: dict[str, SqlValue] = {}
    out: list[statement_pb2.Statement] = []
    conditions: list[transaction_pb2.Condition] = []
    for node in trees:
        if node is None:
            continue
        if isinstance(node, exp.Select):
            raise SqlError("SELECT must be the only statement (it is not part of a transaction)")
        if isinstance(node, exp.Set):
            _only(node, {"expressions"}, "SET")
            for item in node.expressions:
                eq = item.this
                if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Parameter):
                    raise SqlError(f"only SET @var = literal is supported, not {item.sql()!r}")
                variables[eq.this.name] = _literal(eq.expression, variables)
        elif isinstance(node, exp.Insert):
            out.append(_insert(node, variables, key))
        elif isinstance(node, exp.Update):
            _only(node, {"this", "expressions", "where"}, "UPDATE")
            sets = {}
            for eq in node.expressions:
                if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
                    raise SqlError(f"SET must be col = value, not {eq.sql()!r}")
                name = _column(eq.this, "SET")
                if name in sets:
                    raise SqlError(f"UPDATE: column {name!r} is set twice")
                sets[name] = _literal(eq.expression, variables)
            table = _table(node.this)
            where = _split_where(table, _where(node.args.get("where"), variables), key_of,
                                 conditions)
            out.append(row_update(table, where, sets))
        elif isinstance(node, exp.Delete):
            _only(node, {"this", "where"}, "DELETE")
            table = _table(node.this)
            out.append(row_delete(table, _split_where(
                table, _where(node.args.get("where"), variables), key_of, conditions)))
        else:
            raise SqlError(f"unsupported statement: {as_written(text, trees, node)!r} "
                           f"(INSERT, UPDATE, DELETE and SET @var only)")
    if not out:
        raise SqlError("no INSERT, UPDATE or DELETE to run")
    return out, conditions



# -- SELECT --------------------------------------------------------------------------------


@dataclass
class SelectQuery:
    """A parsed ``SELECT`` (module docstring): ``columns`` None for ``*``; ``equal`` the
    ``col = value`` terms in the order written; ``range_column`` with ``lower``/``upper``
    bounds ``(value, inclusive)``; ``limit`` None when not given."""

    table: str
    columns: list[str] | None
    equal: dict[str, SqlValue] = field(default_factory=dict)
    range_column: str | None = None
    lower: tuple[SqlValue, bool] | None = None
    upper: tuple[SqlValue, bool] | None = None
    limit: int | None = None


def is_select(text: str) -> bool:
    """True if ``text`` starts with SELECT (after whitespace and comments are ignored)."""
    trees = [t for t in _parse(text) if t is not None]
    return bool(trees) and isinstance(trees[0], exp.Select)


def _bound(query: SelectQuery, column: str, which: str, value: SqlValue, inclusive: bool) -> None:
    if query.range_column not in (None, column):
        raise SqlError(f"WHERE: ranges on two columns ({query.range_column!r}, {column!r}) "
                       f"are not supported")
    query.range_column = column
    if getattr(query, which) is not None:
        raise SqlError(f"WHERE: two {which} bounds on {column!r}")
    setattr(query, which, (value, inclusive))


def parse_select(text: str) -> SelectQuery:
    """The one ``SELECT`` in ``text``; raises `SqlError` for anything else."""
    trees = [t for t in _parse(text) if t is not None]
    if len(trees) != 1 or not isinstance(trees[0], exp.Select):
        raise SqlError("a SELECT must be the only statement")
    node = trees[0]
    _only(node, {"expressions", "from", "from_", "where", "limit"}, "SELECT")
    source = node.args.get("from") or node.args.get("from_")
    if source is None:
        raise SqlError("SELECT needs FROM schema.table")
    _only(source, {"this"}, "FROM")
    if not isinstance(source.this, exp.Table):
        raise SqlError(f"FROM: expected a table, not {source.this.sql()!r}")
    query = SelectQuery(_table(source.this), None)
    if not (len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Star)):
        query.columns = [_column(c, "SELECT list") for c in node.expressions]
        _distinct(query.columns, "SELECT")
    where = node.args.get("where")
    if where is not None:
        cond = where.this
        for p in list(cond.flatten()) if isinstance(cond, exp.And) else [cond]:
            if isinstance(p, exp.Between):
                name = _column(p.this, "WHERE")
                _bound(query, name, "lower", _literal(p.args["low"], {}), True)
                _bound(query, name, "upper", _literal(p.args["high"], {}), True)
            elif isinstance(p, exp.EQ):
                name = _column(p.this, "WHERE")
                if name in query.equal:
                    raise SqlError(f"WHERE: column {name!r} is given twice")
                query.equal[name] = _literal(p.expression, {})
            elif isinstance(p, exp.GT | exp.GTE | exp.LT | exp.LTE):
                name = _column(p.this, "WHERE")
                value = _literal(p.expression, {})
                which = "lower" if isinstance(p, exp.GT | exp.GTE) else "upper"
                _bound(query, name, which, value, isinstance(p, exp.GTE | exp.LTE))
            else:
                raise SqlError(f"WHERE supports col = value, BETWEEN, <, <=, >, >= joined "
                               f"by AND, not {p.sql()!r}")
        if query.range_column is not None and query.range_column in query.equal:
            raise SqlError(f"WHERE: {query.range_column!r} has both = and a range")
    limit = node.args.get("limit")
    if limit is not None:
        _only(limit, {"expression"}, "LIMIT")
        value = _literal(limit.expression, {})
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SqlError(f"LIMIT must be a non-negative integer, not {limit.expression.sql()}")
        query.limit = value
    return query
