"""Request validation: a write's statements against the log model and the tables' first-seen
schemas. Pure functions over values; the leader runs them before proposing and every replica
runs them again when applying (deterministically, so all replicas reject the same entries).

A table's schema is fixed by the first statement that writes it: its key fields (names and
types, in order) and the columns it names. Later statements must use exactly the same key
fields and only known columns with their known types. ``InvalidRequest.field`` is the path of
the offending field in the request (``statements[0].insert.records[2].key_values[0]``).

The rules for names and values themselves (lengths, characters, each type's valid values)
are defined once in :mod:`gateway.core.logrules`; this module applies them to requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.core.logrules import (
    TEXT_RULES,
    double_problem,
    name_problem,
    table_name_problem,
    value_problem,
)
from gateway.core.reserved import is_exceptions_table, reserved_write_problem
from gateway.core.rowops import CASE_OF_TYPE
from gateway.core.sqlauth import sql_problem
from gateway.v1 import statement_pb2, value_pb2

__all__ = ["InvalidRequest", "TableSchema", "check_key_values", "check_statements",
           "qualified_name", "split_table_name"]

FT = value_pb2.FieldType
MAX_IDEMPOTENCY_KEY = 128
#: The most columns (key columns included) a table may have: SQLite's default limit
#: (SQLITE_MAX_COLUMN), which the embedded applier cannot exceed -- a wider table would be
#: acknowledged and then dead-lettered on every node.
MAX_COLUMNS = 2000


class InvalidRequest(ValueError):
    """The request is invalid; ``field`` names where, ``str()`` is ``field: reason``."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table's first-seen shape: key fields in order and every known column's type."""

    key_fields: tuple[tuple[str, int], ...]
    columns: Mapping[str, int]
    #: Value columns a table definition declares NOT NULL (docs/schema.md): a write may not
    #: set them to NULL.
    not_null: frozenset[str] = frozenset()

    def merged(self, fields: Sequence[tuple[str, int]]) -> TableSchema:
        cols = dict(self.columns)
        cols.update(fields)
        return TableSchema(self.key_fields, cols, self.not_null)


def qualified_name(table: statement_pb2.TableMetadata) -> str:
    """``schema.table`` (or ``table`` without a schema, which only old logs hold: the leader
    requires a schema)."""
    return f"{table.schema_name}.{table.table_name}" if table.schema_name else table.table_name


def split_table_name(text: str, path: str = "table") -> tuple[str, str]:
    """``(schema, table)`` of ``schema.table``, both valid names (so the text has exactly one
    dot); raises ``InvalidRequest`` naming ``path``."""
    if not text:
        raise InvalidRequest(path, "missing table name (schema.table)")
    schema, dot, table = text.partition(".")
    if not dot or not schema:
        raise InvalidRequest(path, f"{text!r} has no schema (expected schema.table)")
    for what, name, rule in (("schema", schema, name_problem),
                             ("table", table, table_name_problem)):
        reason = rule(name)
        if reason is not None:
            raise InvalidRequest(path, f"{text!r}: {what} {reason}")
    return schema, table


_COLUMNS_ATTR = {"insert": "fields", "update": "set_fields", "delete": "fields"}
_VALID_TYPES = frozenset(FT.values()) - {FT.FIELD_TYPE_UNSPECIFIED}
#: Types whose values have a rule beyond their case (``logrules.value_problem``).
_CHECKED_TYPES = frozenset({FT.FIELD_TYPE_DOUBLE, FT.FIELD_TYPE_UUID, *TEXT_RULES})


def _fields(fs: Sequence[statement_pb2.FieldMetadata], path: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = [(f.name, f.type) for f in fs]
    names = {n for n, _ in out}
    if len(names) == len(out) and "" not in names and all(t in _VALID_TYPES for _, t in out):
        return out  # the common case, checked without building paths
    seen: set[str] = set()
    for i, (name, ftype) in enumerate(out):
        if not name:
            raise InvalidRequest(f"{path}[{i}].name", "missing column name")
        if ftype not in _VALID_TYPES:
            raise InvalidRequest(f"{path}[{i}].type", f"invalid field type {ftype}")
        if name in seen:
            raise InvalidRequest(f"{path}[{i}].name", f"duplicate column {name!r}")
        seen.add(name)
    return out


def _check_names(body: statement_pb2.InsertStatement | statement_pb2.UpdateStatement
                 | statement_pb2.DeleteStatement, kind: str, path: str, admin: bool) -> None:
    """The leader's name rules for one row statement (``logrules.name_problem``): a schema is
    required, the table is not one the gateway writes (``gateway.core.reserved``: a DELETE
    of ``$EX`` rows needs ``admin``), and column names are unique ignoring case (MySQL's
    rule: the stores appliers write, SQLite among them, would refuse ``id`` beside ``ID``)."""
    t = body.table
    if not t.schema_name:
        raise InvalidRequest(f"{path}.table.schema_name",
                             "missing schema name (tables are schema.table)")
    for attr, name, rule in (("schema_name", t.schema_name, name_problem),
                             ("table_name", t.table_name, table_name_problem)):
        reason = rule(name)
        if reason is not None:
            raise InvalidRequest(f"{path}.table.{attr}", reason)
    reason = reserved_write_problem(t.table_name, kind, admin=admin)
    if reason is not None:
        raise InvalidRequest(f"{path}.table.table_name", reason)
    col_attr = _COLUMNS_ATTR[kind]
    seen = _names_unique_ignoring_case(body.key_fields, f"{path}.key_fields", {})
    # A delete's fields are its before image, which may list the key columns again.
    _names_unique_ignoring_case(getattr(body, col_attr), f"{path}.{col_attr}",
                                seen if kind != "delete" else {})


def _names_unique_ignoring_case(fs: Sequence[statement_pb2.FieldMetadata], path: str,
                                seen: dict[str, str]) -> dict[str, str]:
    """Check each field's name, and that none differs from a name in ``seen`` (casefolded ->
    name, updated) only in case; an exact repeat is left to the shape checks."""
    for i, f in enumerate(fs):
        reason = name_problem(f.name)
        if reason is not None:
            raise InvalidRequest(f"{path}[{i}].name", reason)
        folded = f.name.casefold()
        other = seen.setdefault(folded, f.name)
        if other != f.name:
            raise InvalidRequest(f"{path}[{i}].name",
                                 f"column {f.name!r} differs from column {other!r} only in "
                                 f"case (names are compared without case)")
    return seen


def _check_sql(sql: statement_pb2.SqlStatement, path: str,
               schemas: Mapping[str, TableSchema]) -> None:
    """The leader's rules for a statement-based event: text without NUL (no SQL store accepts
    it), a valid default schema, session variables with valid unique names and a value, and
    a query every replica's SQLite authorizer accepts (``gateway.core.sqlauth``: no ATTACH,
    PRAGMA, reserved tables or non-deterministic functions), so that nothing is acknowledged
    that every replica refuses."""
    if "\0" in sql.query:
        raise InvalidRequest(f"{path}.query", "query contains NUL (U+0000)")
    if sql.default_schema:
        reason = name_problem(sql.default_schema)
        if reason is not None:
            raise InvalidRequest(f"{path}.default_schema", reason)
    seen: set[str] = set()
    for i, var in enumerate(sql.variables):
        reason = name_problem(var.name)
        if reason is not None:
            raise InvalidRequest(f"{path}.variables[{i}].name", reason)
        if var.name.casefold() in seen:
            raise InvalidRequest(f"{path}.variables[{i}].name",
                                 f"duplicate variable @{var.name}")
        seen.add(var.name.casefold())
        case = var.value.WhichOneof("kind")
        reason = "value has no case set" if case is None else double_problem(
            var.value.double_value, False) if case == "double_value" else None
        if reason is not None:
            raise InvalidRequest(f"{path}.variables[{i}].value", reason)
    # The tables the row statements made, as the SQLite applier names them (table alone).
    tables = {name.rpartition(".")[2]: [*s.columns] for name, s in schemas.items()}
    reason = sql_problem(sql.query, [v.name for v in sql.variables], tables)
    if reason is not None:
        raise InvalidRequest(f"{path}.query", f"refused: {reason}")


def _rules(cols: Sequence[tuple[str, int]]) -> tuple[tuple[str | None, int | None], ...]:
    """Per column: the ``Value`` case its type uses, and its type when its values have a rule
    beyond the case (None otherwise)."""
    return tuple((CASE_OF_TYPE.get(t), t if t in _CHECKED_TYPES else None) for _, t in cols)


def _values(vals: Sequence[value_pb2.Value], cols: Sequence[tuple[str, int]],
            rules: tuple[tuple[str | None, int | None], ...], path: str, *, key: bool) -> None:
    """Check one record's values against ``cols`` (``rules`` from :func:`_rules`): each value
    null (not in a key) or in its column's case, and valid for its type."""
    if len(vals) != len(cols):
        raise InvalidRequest(path, f"{len(vals)} values for {len(cols)} fields")
    for i, (v, (want, checked)) in enumerate(zip(vals, rules, strict=True)):
        got = v.WhichOneof("kind")
        if got == want and got is not None:
            if checked is None:
                continue
            reason = value_problem(v, checked, key=key)
            if reason is None:
                continue
        elif got == "null_value":
            if not key:
                continue
            raise InvalidRequest(f"{path}[{i}]",
                                 f"missing key: key column {cols[i][0]!r} is null")
        elif got is None:
            reason = "value has no case set"
        else:
            reason = f"{got} in a {FT.Name(cols[i][1])} column (expected {want})"
        raise InvalidRequest(f"{path}[{i}]", f"column {cols[i][0]!r}: {reason}")


def check_statements(statements: Sequence[statement_pb2.Statement],
                     schemas: dict[str, TableSchema], *, rows: bool = True,
                     admin: bool = False) -> list[tuple[str, TableSchema]]:
    """Check ``statements`` against ``schemas`` (qualified name -> schema). Returns the schemas
    the statements create or extend, in order (the caller records them once the write is
    accepted); raises ``InvalidRequest``. ``schemas`` itself is not modified.

    ``rows=False`` is the apply-time check of an entry the leader already checked in full:
    only what depends on replicated state (the tables' first-seen schemas) and the
    per-statement shape is checked again -- not every record's values, nor the rules that
    depend on the entry alone (names, a key column among the value columns, SQL text and
    variables). Both are deterministic, so every replica reaches the same verdict.

    ``rows=True`` is also the check of a client's write at the API: tables the gateway writes
    itself (``gateway.core.reserved``) and ``apply_status`` statements are refused there;
    ``admin`` (the caller holds the ``admin`` permission) allows deleting rows of ``$EX``
    tables."""
    if not statements:
        raise InvalidRequest("statements", "a write needs at least one statement")
    local = schemas  # copied on the first table created (most writes create none)
    created: list[tuple[str, TableSchema]] = []
    for s_no, stmt in enumerate(statements):
        path = f"statements[{s_no}]"
        kind = stmt.WhichOneof("kind")
        if kind is None:
            raise InvalidRequest(path, "statement has no kind set")
        if kind == "sql":
            if not stmt.sql.query.strip():
                raise InvalidRequest(f"{path}.sql.query", "empty query")
            if rows:
                _check_sql(stmt.sql, f"{path}.sql", local)
            continue
        if kind == "apply_status":
            if rows:
                raise InvalidRequest(f"{path}.apply_status", "apply-status rows are written by "
                                     "the gateway's replication channels, not by clients")
            continue
        body = getattr(stmt, kind)
        path = f"{path}.{kind}"
        if not body.table.table_name:
            raise InvalidRequest(f"{path}.table.table_name", "missing table name")
        name = qualified_name(body.table)
        keys = _fields(body.key_fields, f"{path}.key_fields")
        if not keys:
            raise InvalidRequest(f"{path}.key_fields", "missing key: no key fields")
        col_attr = _COLUMNS_ATTR[kind]
        cols = _fields(getattr(body, col_attr), f"{path}.{col_attr}")
        if rows:
            _check_names(body, kind, path, admin)
        if not body.records:
            raise InvalidRequest(f"{path}.records", "no records")
        known = local.get(name)
        key_names = {k for k, _ in keys}
        if rows and kind != "delete":
            for i, (cname, _) in enumerate(cols):
                if cname in key_names:
                    if kind == "update":
                        raise InvalidRequest(f"{path}.set_fields[{i}]",
                                             f"key column {cname!r} cannot be updated here "
                                             f"(delete and insert instead)")
                    raise InvalidRequest(f"{path}.{col_attr}[{i}].name",
                                         f"key column {cname!r} repeated among the value "
                                         f"columns (fields are the other columns written)")
        if known is None and rows and is_exceptions_table(body.table.table_name):
            # only the admin DELETE of handled rows gets here: it must not be what makes the
            # table (its shape is the conflict machinery's to fix)
            raise InvalidRequest(f"{path}.table.table_name",
                                 f"{name} does not exist: no exceptions recorded to delete")
        if known is None:
            schema = TableSchema(tuple(keys), dict(keys + [c for c in cols
                                                           if c[0] not in key_names]))
            if rows and len(schema.columns) > MAX_COLUMNS:
                raise InvalidRequest(f"{path}.{col_attr}",
                                     f"{name} would have {len(schema.columns)} columns: more "
                                     f"than {MAX_COLUMNS}, the most a table may have")
            if local is schemas:
                local = dict(schemas)
            local[name] = schema
            created.append((name, schema))
        else:
            if tuple(keys) != known.key_fields:
                want = ", ".join(f"{n} {FT.Name(t)}" for n, t in known.key_fields)
                raise InvalidRequest(f"{path}.key_fields",
                                     f"unknown table shape: {name} has key ({want})")
            new_cols = []
            for i, (cname, ctype) in enumerate(cols):
                have = known.columns.get(cname)
                if have is None:
                    new_cols.append((cname, ctype))
                elif have != ctype:
                    raise InvalidRequest(
                        f"{path}.{col_attr}[{i}].type",
                        f"wrong type: {name}.{cname} is {FT.Name(have)}, not {FT.Name(ctype)}")
            if new_cols:
                raise InvalidRequest(
                    f"{path}.{col_attr}",
                    f"unknown table shape: {name} has no column {new_cols[0][0]!r}")
        if not rows:
            continue
        key_rules, col_rules = _rules(keys), _rules(cols)
        required = [(i, c) for i, (c, _) in enumerate(cols) if c in known.not_null] \
            if known is not None and known.not_null and kind != "delete" else []
        for r_no, rec in enumerate(body.records):
            rpath = f"{path}.records[{r_no}]"
            _values(rec.key_values, keys, key_rules, f"{rpath}.key_values", key=True)
            if kind != "delete":
                _values(rec.after_values, cols, col_rules, f"{rpath}.after_values", key=False)
                for i, cname in required:
                    if rec.after_values[i].WhichOneof("kind") == "null_value":
                        raise InvalidRequest(f"{rpath}.after_values[{i}]",
                                             f"{name}.{cname} is NOT NULL")
            if kind != "insert" and rec.before_values:
                _values(rec.before_values, cols, col_rules, f"{rpath}.before_values",
                        key=False)
    return created


def key_rules(key_fields: Sequence[tuple[str, int]]) -> tuple[tuple[str | None, int | None], ...]:
    """The rules :func:`check_key_values` checks a key of ``key_fields`` with (for a caller
    checking many keys of one table: computed once)."""
    return _rules(key_fields)


def check_key_values(values: Sequence[value_pb2.Value], key_fields: Sequence[tuple[str, int]],
                     path: str,
                     rules: tuple[tuple[str | None, int | None], ...] | None = None) -> None:
    """Check a key given to a read (``Read.key``, ``Scan.start_key``) against the table's key
    fields with the rules of a write's key values (``rules``: :func:`key_rules` of
    ``key_fields``, computed here when not given); raises ``InvalidRequest`` naming
    ``path[i]``."""
    _values(values, key_fields, _rules(key_fields) if rules is None else rules, path, key=True)


def check_idempotency_key(key: str, path: str = "idempotency_key") -> None:
    """Raise ``InvalidRequest`` unless ``key`` is empty or at most 128 bytes."""
    if len(key.encode()) > MAX_IDEMPOTENCY_KEY:
        raise InvalidRequest(path, f"longer than {MAX_IDEMPOTENCY_KEY} bytes")
