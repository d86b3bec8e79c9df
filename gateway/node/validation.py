"""Request validation: a write's statements against the log model and the tables' first-seen
schemas. Pure functions over values; the leader runs them before proposing and every replica
runs them again when applying (deterministically, so all replicas reject the same entries).

A table's schema is fixed by the first statement that writes it: its key fields (names and
types, in order) and the columns it names. Later statements must use exactly the same key
fields and only known columns with their known types. ``InvalidRequest.field`` is the path of
the offending field in the request (``statements[0].insert.records[2].key_values[0]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.core import accel
from gateway.core.rowops import CASE_OF_TYPE, python_value
from gateway.core.varint import decode_uvarint, encode_uvarint
from gateway.v1 import statement_pb2, value_pb2

__all__ = ["InvalidRequest", "TableSchema", "check_statements", "qualified_name"]

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
    """``schema.table`` (or ``table`` without a schema)."""
    return f"{table.schema_name}.{table.table_name}" if table.schema_name else table.table_name


_COLUMNS_ATTR = {"insert": "fields", "update": "set_fields", "delete": "fields"}
_VALID_TYPES = frozenset(FT.values()) - {FT.FIELD_TYPE_UNSPECIFIED}


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


def _cases(cols: Sequence[tuple[str, int]]) -> tuple[str | None, ...]:
    """The ``Value`` case each column's type uses (None for a type without one)."""
    return tuple(CASE_OF_TYPE.get(t) for _, t in cols)


def _values(vals: Sequence[value_pb2.Value], cols: Sequence[tuple[str, int]], path: str,
            *, key: bool, cases: tuple[str | None, ...] | None = None) -> None:
    """Check one record's values against ``cols``. ``cases`` (from :func:`_cases`) lets the
    common case -- every value in its column's case, no decimal to parse -- skip the per-value
    conversion; anything else takes the full check, which names the offending value."""
    if len(vals) != len(cols):
        raise InvalidRequest(path, f"{len(vals)} values for {len(cols)} fields")
    if cases is not None:
        for v, want in zip(vals, cases, strict=True):
            got = v.WhichOneof("kind")
            if got != want or got is None or got == "decimal_value":
                if got == "null_value" and not key:
                    continue
                break
        else:
            return
    for i, (v, (name, ftype)) in enumerate(zip(vals, cols, strict=True)):
        try:
            got = python_value(v, ftype)
        except ValueError as exc:
            raise InvalidRequest(f"{path}[{i}]", f"column {name!r}: {exc}") from None
        if key and got is None:
            raise InvalidRequest(f"{path}[{i}]", f"missing key: key column {name!r} is null")


def check_statements(statements: Sequence[statement_pb2.Statement],
                     schemas: dict[str, TableSchema], *, rows: bool = True
                     ) -> list[tuple[str, TableSchema]]:
    """Check ``statements`` against ``schemas`` (qualified name -> schema). Returns the schemas
    the statements create or extend, in order (the caller records them once the write is
    accepted); raises ``InvalidRequest``. ``schemas`` itself is not modified.

    ``rows=False`` is the apply-time check of an entry the leader already checked in full:
    only what depends on replicated state (the tables' first-seen schemas) and the
    per-statement shape is checked again -- not every record's values, nor the rules that
    depend on the entry alone (a key column among the value columns). Both are deterministic,
    so every replica reaches the same verdict."""
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
        key_cases, col_cases = _cases(keys), _cases(cols)
        for r_no, rec in enumerate(body.records):
            rpath = f"{path}.records[{r_no}]"
            _values(rec.key_values, keys, f"{rpath}.key_values", key=True, cases=key_cases)
            if kind == "insert":
                _values(rec.after_values, cols, f"{rpath}.after_values", key=False,
                        cases=col_cases)
            elif kind == "update":
                _values(rec.after_values, cols, f"{rpath}.after_values", key=False,
                        cases=col_cases)
                if rec.before_values:
                    _values(rec.before_values, cols, f"{rpath}.before_values", key=False,
                            cases=col_cases)
            elif rec.before_values:
                _values(rec.before_values, cols, f"{rpath}.before_values", key=False,
                        cases=col_cases)
    return created


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


def _check_records_py(raw: bytes, pos: int, end: int, ktags: bytes, vtags: bytes) -> bool:
    """Whether ``raw[pos:end]`` is one or more ``InsertRecord`` fields each holding exactly
    ``len(ktags)`` key values then ``len(vtags)`` after values, every value exactly one field
    whose tag byte is the column's (``ktags[i]`` / ``vtags[i]``; an after value may also be
    null, tag ``0x08``). The specification of ``gateway.node._wire.check_records``."""
    nk, nv = len(ktags), len(vtags)
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
                    if tag != 0x0A or got != ktags[i]:
                        return False
                elif i < nk + nv:
                    if tag != 0x12 or (got != vtags[i - nk] and got != 0x08):
                        return False
                else:
                    return False
                if not _single_field_end(raw, v, v_end, got):
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
    shape only have every record's value cases checked from the bytes (each value one field
    of its column's case, a value column may be null). Anything else -- another statement
    kind, an unseen shape, a value not in the expected case, a decimal, a schema that changed
    -- runs the full :func:`check_statements`, which gives the same verdict and error."""

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        # header bytes -> (qualified name, schema object, key tags, value tags)
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
            ktags = bytes(_VALUE_TAG.get(CASE_OF_TYPE.get(f.type), 0) for f in body.key_fields)
            vtags = bytes(_VALUE_TAG.get(CASE_OF_TYPE.get(f.type), 0) for f in body.fields)
            if 0 in ktags or 0 in vtags or 0x08 in ktags:
                continue  # a type whose values need the full check
            if len(self._shapes) >= self._limit:
                self._shapes.clear()
            self._shapes[hdr] = (name, schema, ktags, vtags)
