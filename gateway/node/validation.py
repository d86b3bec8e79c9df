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

from gateway.core import accel
from gateway.core.logrules import (
    TEXT_RULES,
    date_problem,
    datetime_problem,
    double_problem,
    name_problem,
    table_name_problem,
    time_problem,
    value_problem,
)
from gateway.core.rowops import CASE_OF_TYPE
from gateway.core.varint import decode_uvarint, encode_uvarint
from gateway.v1 import statement_pb2, value_pb2

__all__ = ["InvalidRequest", "TableSchema", "check_key_values", "check_statements",
           "qualified_name", "split_table_name"]

FT = value_pb2.FieldType
MAX_IDEMPOTENCY_KEY = 128


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

    def merged(self, fields: Sequence[tuple[str, int]]) -> TableSchema:
        cols = dict(self.columns)
        cols.update(fields)
        return TableSchema(self.key_fields, cols)


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
    out = [(f.name, f.type) for f in fs]
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
                 | statement_pb2.DeleteStatement, kind: str, path: str) -> None:
    """The leader's name rules for one row statement (``logrules.name_problem``): a schema is
    required, and column names are unique ignoring case (MySQL's rule: the stores appliers
    write, SQLite among them, would refuse ``id`` beside ``ID``)."""
    t = body.table
    if not t.schema_name:
        raise InvalidRequest(f"{path}.table.schema_name",
                             "missing schema name (tables are schema.table)")
    for attr, name, rule in (("schema_name", t.schema_name, name_problem),
                             ("table_name", t.table_name, table_name_problem)):
        reason = rule(name)
        if reason is not None:
            raise InvalidRequest(f"{path}.table.{attr}", reason)
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


def _check_sql(sql: statement_pb2.SqlStatement, path: str) -> None:
    """The leader's rules for a statement-based event: text without NUL (no SQL store accepts
    it), a valid default schema, and session variables with valid unique names and a value."""
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
                     schemas: dict[str, TableSchema], *, rows: bool = True
                     ) -> list[tuple[str, TableSchema]]:
    """Check ``statements`` against ``schemas`` (qualified name -> schema). Returns the schemas
    the statements create or extend, in order (the caller records them once the write is
    accepted); raises ``InvalidRequest``. ``schemas`` itself is not modified.

    ``rows=False`` is the apply-time check of an entry the leader already checked in full:
    only what depends on replicated state (the tables' first-seen schemas) and the
    per-statement shape is checked again -- not every record's values, nor the rules that
    depend on the entry alone (names, a key column among the value columns, SQL text and
    variables). Both are deterministic, so every replica reaches the same verdict."""
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
                _check_sql(stmt.sql, f"{path}.sql")
            continue
        if kind == "apply_status":
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
            _check_names(body, kind, path)
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
        if known is None:
            schema = TableSchema(tuple(keys), dict(keys + [c for c in cols
                                                           if c[0] not in key_names]))
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
        for r_no, rec in enumerate(body.records):
            rpath = f"{path}.records[{r_no}]"
            _values(rec.key_values, keys, key_rules, f"{rpath}.key_values", key=True)
            if kind != "delete":
                _values(rec.after_values, cols, col_rules, f"{rpath}.after_values", key=False)
            if kind != "insert" and rec.before_values:
                _values(rec.before_values, cols, col_rules, f"{rpath}.before_values",
                        key=False)
    return created


def check_key_values(values: Sequence[value_pb2.Value], key_fields: Sequence[tuple[str, int]],
                     path: str) -> None:
    """Check a key given to a read (``Read.key``, ``Scan.start_key``) against the table's key
    fields with the rules of a write's key values; raises ``InvalidRequest`` naming
    ``path[i]``."""
    _values(values, key_fields, _rules(key_fields), path, key=True)


def check_idempotency_key(key: str, path: str = "idempotency_key") -> None:
    """Raise ``InvalidRequest`` unless ``key`` is empty or at most 128 bytes."""
    if len(key.encode()) > MAX_IDEMPOTENCY_KEY:
        raise InvalidRequest(path, f"longer than {MAX_IDEMPOTENCY_KEY} bytes")


# -- the leader's check from wire bytes ------------------------------------------------------------

#: The first (tag) byte of a serialized ``Value`` per case (decimals are not here: they are
#: parsed by the full check).
_VALUE_TAG = {"null_value": 0x08, "bool_value": 0x10, "int_value": 0x18, "uint_value": 0x20,
              "double_value": 0x29, "string_value": 0x3A, "bytes_value": 0x42,
              "timestamp_ns": 0x49}


def frame_statements(statements: Sequence[statement_pb2.Statement]) -> bytes:
    """``statements`` serialized as the ``statements`` field (6) of a ``Transaction``: the
    bytes a serialized transaction holds between its timestamps and its segment fields."""
    parts = []
    for s in statements:
        b = s.SerializeToString()
        parts.append(b"\x32" + encode_uvarint(len(b)) + b)
    return b"".join(parts)


def insert_header_span(data: bytes, start: int, end: int) -> tuple[int, int] | None:
    """For the serialized ``Statement`` ``data[start:end]``: when it is exactly one insert
    (field 1) whose header fields (table, key fields, fields) all precede its records,
    ``(start of the InsertStatement body, position of its first InsertRecord field)`` -- the
    second is ``end`` when it has no records; None otherwise. A varint cut off by the end of
    ``data`` raises ``IndexError`` (callers treat it as "not this shape").

    The one walk of an insert's header shared by the leader's wire check
    (:class:`WireChecker`) and the apply fast path (``state_machine``)."""
    if start >= end or data[start] != 0x0A:
        return None
    ln, body = decode_uvarint(data, start + 1)
    if body + ln != end:
        return None
    p = body
    while p < end and data[p] != 0x22:
        if data[p] not in (0x0A, 0x12, 0x1A):
            return None
        ln, q = decode_uvarint(data, p + 1)
        p = q + ln
    if p > end:
        return None
    return body, p


def _single_field_end(data: bytes, pos: int, end: int, tag: int) -> bool:
    """Whether ``data[pos:end]`` is exactly one field with tag byte ``tag``."""
    wt = tag & 7
    p = pos + 1
    if wt == 0:
        _, p = decode_uvarint(data, p)
    elif wt == 2:
        ln, p = decode_uvarint(data, p)
        p += ln
    elif wt == 1:
        p += 8
    else:
        return False
    return p == end


#: Column codes of the wire check beyond the plain tag bytes: a value with the tag byte
#: ``_TAG_OF_CODE[code]`` that must also satisfy its type's rule. A DOUBLE column's code is its
#: tag (0x29), and its rule is always checked (never NaN; a key never -0.0).
CODE_UUID, CODE_DATE, CODE_TIME, CODE_DATETIME = 0x81, 0x82, 0x83, 0x84
_TAG_OF_CODE = {CODE_UUID: 0x42, CODE_DATE: 0x3A, CODE_TIME: 0x3A, CODE_DATETIME: 0x3A}
_TEXT_RULE_OF_CODE = {CODE_DATE: date_problem, CODE_TIME: time_problem,
                      CODE_DATETIME: datetime_problem}
_CODE_OF_TYPE = {FT.FIELD_TYPE_UUID: CODE_UUID, FT.FIELD_TYPE_DATE: CODE_DATE,
                 FT.FIELD_TYPE_TIME: CODE_TIME, FT.FIELD_TYPE_DATETIME: CODE_DATETIME,
                 FT.FIELD_TYPE_DECIMAL: 0, FT.FIELD_TYPE_JSON: 0}
_NAN_EXPONENT, _MANTISSA, _NEG_ZERO = 0x7FF << 52, (1 << 52) - 1, 1 << 63


def column_code(field_type: int) -> int:
    """The wire check's code of a column of ``field_type``: the tag byte of its case, a
    ``CODE_*`` for a type whose rule the wire check applies, 0 for a type it leaves to the
    full check (DECIMAL, JSON: parsing them is not worth a C twin)."""
    code = _CODE_OF_TYPE.get(field_type)
    if code is not None:
        return code
    return _VALUE_TAG.get(CASE_OF_TYPE.get(field_type, ""), 0)


def _value_ok_py(raw: bytes, v: int, v_end: int, code: int, key: bool) -> bool:
    """Whether the one value field ``raw[v:v_end]``, whose tag matches ``code``, satisfies
    the rule of ``code`` (``logrules``)."""
    if code == 0x29:
        bits = int.from_bytes(raw[v + 1:v + 9], "little")
        if bits & _NAN_EXPONENT == _NAN_EXPONENT and bits & _MANTISSA:
            return False  # NaN
        return not (key and bits == _NEG_ZERO)
    if code == CODE_UUID:
        return v_end - v == 18  # tag, length 16, 16 bytes
    rule = _TEXT_RULE_OF_CODE.get(code)
    if rule is None:
        return True
    _, p = decode_uvarint(raw, v + 1)
    return rule(raw[p:v_end].decode("latin-1")) is None


def _check_records_py(raw: bytes, pos: int, end: int, kcodes: bytes, vcodes: bytes) -> bool:
    """Whether ``raw[pos:end]`` is one or more ``InsertRecord`` fields each holding exactly
    ``len(kcodes)`` key values then ``len(vcodes)`` after values, every value exactly one
    field in its column's case and valid for its type (column codes from
    :func:`column_code`; an after value may also be null, tag ``0x08``). The specification of
    ``gateway.node._wire.check_records``."""
    nk, nv = len(kcodes), len(vcodes)
    try:
        while pos < end:
            if raw[pos] != 0x22:
                return False
            ln, r = decode_uvarint(raw, pos + 1)
            r_end = r + ln
            if r_end > end:
                return False
            i = 0
            while r < r_end:
                tag = raw[r]
                vl, v = decode_uvarint(raw, r + 1)
                v_end = v + vl
                if v_end > r_end or v_end == v:
                    return False
                got = raw[v]
                if i < nk:
                    code = kcodes[i]
                    if tag != 0x0A or got != _TAG_OF_CODE.get(code, code):
                        return False
                elif i < nk + nv:
                    code = vcodes[i - nk]
                    if tag != 0x12 or (got != _TAG_OF_CODE.get(code, code) and got != 0x08):
                        return False
                else:
                    return False
                if not _single_field_end(raw, v, v_end, got):
                    return False
                if got != 0x08 and not _value_ok_py(raw, v, v_end, code, i < nk):
                    return False
                i += 1
                r = v_end
            if i != nk + nv:
                return False
            pos = r_end
    except IndexError:
        return False
    return True


_wire = accel.load("gateway.node._wire")  # None: the Python specification serves
_check_records = _wire.check_records if _wire else _check_records_py


class WireChecker:
    """:func:`check_statements` for the leader, from the statements' wire bytes
    (:func:`frame_statements`): an insert statement's header (table, key fields, fields) is
    checked in full once and cached with the table's schema object; later statements of that
    shape only have every record's values checked from the bytes (each value one field of its
    column's case, a value column may be null, and valid for its type: see
    :func:`column_code`). Anything else -- another statement kind, an unseen shape, a value
    not in the expected case or invalid, a DECIMAL or JSON column, a schema that changed --
    runs the full :func:`check_statements`, which gives the verdict and the error. The wire
    check never accepts what the full check rejects."""

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        # header bytes -> (qualified name, schema object, key codes, value codes)
        self._shapes: dict[bytes, tuple[str, TableSchema, bytes, bytes]] = {}

    def check(self, raw: bytes, statements: Sequence[statement_pb2.Statement],
              schemas: dict[str, TableSchema]) -> list[tuple[str, TableSchema]]:
        """``check_statements(statements, schemas)``; ``raw`` is
        ``frame_statements(statements)``."""
        heads = self._fast(raw, schemas)
        if heads is not None:
            return []
        created = check_statements(statements, schemas)
        self._learn(raw, statements, schemas, created)
        return created

    def _heads(self, raw: bytes) -> list[tuple[bytes, int, int]] | None:
        """Per statement ``(header bytes, first record position, end)``; None if a statement
        is not an insert or is malformed."""
        out = []
        pos, n = 0, len(raw)
        while pos < n:
            if raw[pos] != 0x32:
                return None
            ln, s = decode_uvarint(raw, pos + 1)
            end = s + ln
            if end > n:
                return None
            span = insert_header_span(raw, s, end)
            if span is None or span[1] == end:
                return None  # not an insert of this shape, or no records
            b, p = span
            out.append((raw[b:p], p, end))
            pos = end
        return out if out else None

    def _fast(self, raw: bytes, schemas: dict[str, TableSchema]) -> list | None:
        try:
            heads = self._heads(raw)
            if heads is None:
                return None
            shapes = self._shapes
            for hdr, pos, end in heads:
                shape = shapes.get(hdr)
                if shape is None or schemas.get(shape[0]) is not shape[1]:
                    return None
                if not _check_records(raw, pos, end, shape[2], shape[3]):
                    return None
            return heads
        except IndexError:
            return None

    def _learn(self, raw: bytes, statements: Sequence[statement_pb2.Statement],
               schemas: dict[str, TableSchema], created: list[tuple[str, TableSchema]]
               ) -> None:
        """Cache the shapes of ``statements`` (just checked in full) whose tables existed."""
        try:
            heads = self._heads(raw)
        except IndexError:
            return
        if heads is None or len(heads) != len(statements):
            return
        made = {name for name, _ in created}
        for (hdr, _, _), stmt in zip(heads, statements, strict=True):
            if hdr in self._shapes:
                continue
            body = stmt.insert
            name = qualified_name(body.table)
            schema = schemas.get(name)
            if schema is None or name in made:
                continue
            ktags = bytes(column_code(f.type) for f in body.key_fields)
            vtags = bytes(column_code(f.type) for f in body.fields)
            if 0 in ktags or 0 in vtags:
                continue  # a type whose values need the full check
            if len(self._shapes) >= self._limit:
                self._shapes.clear()
            self._shapes[hdr] = (name, schema, ktags, vtags)
