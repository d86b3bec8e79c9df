"""``PreparedInsert``: INSERT writes of one fixed table and column list, encoded straight to
the wire format.

::

    ins = PreparedInsert("shop.items", key={"id": int}, values={"name": str, "price": float})
    async with c.stream() as s:
        fut = await s.send(ins.encode((1,), ("a", 2.5)))
    c.write(ins.encode_many([((2,), ("b", 1.0)), ((3,), ("c", None))]))

``row_insert`` builds protobuf message objects for every row (``Value``, ``InsertRecord``,
``InsertStatement``, ``Statement``) and gRPC serializes them again, a cost a high-rate
producer pays per row. A prepared insert serializes the table and column metadata once and
encodes each row's values as bytes, about a tenth of that CPU (docs/benchmarks.md, "The Python
client encodes rows straight to bytes").

Contract: ``encode`` returns the serialized ``statements`` field of one ``WriteRequest`` (one
``Statement`` holding one ``InsertStatement``), byte for byte what
``WriteRequest(statements=[row_insert(...)]).SerializeToString()`` gives for the same row when
the values have the declared types (``WriteRequest.FromString`` of it is that message). Every
client write method takes these bytes in place of a statement list. Column types are fixed at
preparation: a Python type (``bool``, ``int``, ``float``, ``str``, ``bytes``, ``Decimal``) or
a ``FieldType`` (``DATE``, ``TIMESTAMP``, ``UUID``, ... with the ``Value`` kind the log model
gives it). ``None`` encodes SQL NULL in a value column; a key value cannot be NULL. A value
of another type raises ``TypeError`` naming the column; what the node checks beyond the type
(a UUID's 16 bytes, a date's text, integer range) it refuses with INVALID_ARGUMENT.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import cast

from gateway.v1 import statement_pb2, value_pb2
from gateway.v1.wire_tags import (
    INSERT_RECORD_AFTER_VALUES_KEY,
    INSERT_RECORD_KEY_VALUES_KEY,
    INSERT_STATEMENT_RECORDS_KEY,
    STATEMENT_INSERT_KEY,
    VALUE_BOOL_VALUE_KEY,
    VALUE_BYTES_VALUE_KEY,
    VALUE_DECIMAL_VALUE_KEY,
    VALUE_DOUBLE_VALUE_KEY,
    VALUE_INT_VALUE_KEY,
    VALUE_NULL_VALUE_KEY,
    VALUE_STRING_VALUE_KEY,
    VALUE_TIMESTAMP_NS_KEY,
    VALUE_UINT_VALUE_KEY,
    WRITE_REQUEST_IDEMPOTENCY_KEY_KEY,
    WRITE_REQUEST_STATEMENTS_KEY,
)

__all__ = ["PreparedInsert", "Statements", "delimited", "keyed", "repeated",
           "serialize_statements", "varint"]

FT = value_pb2.FieldType
Statements = Iterable[statement_pb2.Statement] | bytes  # a list, or a PreparedInsert's bytes

_PY_TYPES: dict[type, int] = {bool: FT.FIELD_TYPE_BOOLEAN, int: FT.FIELD_TYPE_INTEGER,
                              float: FT.FIELD_TYPE_DOUBLE, str: FT.FIELD_TYPE_VARCHAR,
                              bytes: FT.FIELD_TYPE_BLOB, Decimal: FT.FIELD_TYPE_DECIMAL}

_SMALL = [bytes((n,)) for n in range(128)] + [bytes((n & 0x7F | 0x80, n >> 7))
                                              for n in range(128, 16384)]
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
# after_values holding Value.null_value = NULL_VALUE (a oneof member: written even when 0)
_NULL_FIELD = INSERT_RECORD_AFTER_VALUES_KEY + b"\x02" + VALUE_NULL_VALUE_KEY + b"\x00"
_SEQUENCES = frozenset({tuple, list})  # what a row's key and values may be (not a dict: its
#                                        keys would be taken for the values)
_TRUE, _FALSE = VALUE_BOOL_VALUE_KEY + b"\x01", VALUE_BOOL_VALUE_KEY + b"\x00"
_DOUBLE = struct.Struct("<d").pack
_SFIXED64 = struct.Struct("<q").pack


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of ``0 <= n < 2**64``."""
    if n < 16384:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def delimited(tag: bytes, data: bytes) -> bytes:
    """One length-delimited protobuf field: its ``tag`` byte(s), ``len(data)``, ``data``."""
    return tag + varint(len(data)) + data


def repeated(tag: bytes, items: Iterable[bytes]) -> bytes:
    """A repeated length-delimited field: :func:`delimited` of every item, in order."""
    return b"".join([tag + varint(len(d)) + d for d in items])


def keyed(write: bytes, key: str) -> bytes:
    """A serialized ``WriteRequest`` of ``write`` (its serialized ``statements``, as
    :meth:`PreparedInsert.encode` returns them) with idempotency key ``key`` (``""``: none)."""
    return write + delimited(WRITE_REQUEST_IDEMPOTENCY_KEY_KEY, key.encode()) if key else write


def serialize_statements(statements: Statements) -> bytes:
    """The serialized ``statements`` field of a ``WriteRequest`` holding ``statements`` (a
    ``PreparedInsert``'s bytes are that already and are returned as they are)."""
    if isinstance(statements, bytes):
        return statements
    return repeated(WRITE_REQUEST_STATEMENTS_KEY, [st.SerializeToString() for st in statements])


def _int(v: object) -> bytes:
    if type(v) is not int and (isinstance(v, bool) or not isinstance(v, int)):
        raise TypeError
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise OverflowError
    return VALUE_INT_VALUE_KEY + varint((v << 1) ^ (v >> 63))  # sint64: zigzag


def _uint(v: object) -> bytes:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError
    if not 0 <= v <= _UINT64_MAX:
        raise OverflowError
    return VALUE_UINT_VALUE_KEY + varint(v)


def _bool(v: object) -> bytes:
    if not isinstance(v, bool):
        raise TypeError
    return _TRUE if v else _FALSE


def _double(v: object) -> bytes:
    if isinstance(v, bool) or not isinstance(v, float | int):
        raise TypeError
    return VALUE_DOUBLE_VALUE_KEY + _DOUBLE(v)


def _string(v: object) -> bytes:
    if type(v) is not str and not isinstance(v, str):
        raise TypeError
    return delimited(VALUE_STRING_VALUE_KEY, v.encode())


def _decimal(v: object) -> bytes:
    if not isinstance(v, Decimal | str):
        raise TypeError
    return delimited(VALUE_DECIMAL_VALUE_KEY, str(v).encode())


def _bytes(v: object) -> bytes:
    if not isinstance(v, bytes | bytearray | memoryview):
        raise TypeError
    return delimited(VALUE_BYTES_VALUE_KEY, bytes(v))


def _timestamp(v: object) -> bytes:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise OverflowError
    return VALUE_TIMESTAMP_NS_KEY + _SFIXED64(v)


#: Encodes one column value as a ``Value`` (raising ``TypeError`` / ``OverflowError``).
_Encoder = Callable[[object], bytes]
#: ``record(key, values)``: one ``InsertRecord`` field (``_record_function``).
_Record = Callable[[Sequence[object], Sequence[object]], bytes]
_STRING = _string
_ENCODERS: dict[int, _Encoder] = {
    FT.FIELD_TYPE_BOOLEAN: _bool, FT.FIELD_TYPE_INTEGER: _int, FT.FIELD_TYPE_UNSIGNED: _uint,
    FT.FIELD_TYPE_DOUBLE: _double, FT.FIELD_TYPE_DECIMAL: _decimal,
    FT.FIELD_TYPE_VARCHAR: _STRING, FT.FIELD_TYPE_DATE: _STRING, FT.FIELD_TYPE_TIME: _STRING,
    FT.FIELD_TYPE_DATETIME: _STRING, FT.FIELD_TYPE_JSON: _STRING,
    FT.FIELD_TYPE_BLOB: _bytes, FT.FIELD_TYPE_UUID: _bytes,
    FT.FIELD_TYPE_TIMESTAMP: _timestamp,
}


def _field(wrapper: bytes, ftype: int) -> _Encoder:
    """The encoder of one column's whole ``InsertRecord`` field: ``wrapper`` (the tag of
    ``key_values`` or ``after_values``), the ``Value``'s length and the ``Value``. Raises
    ``TypeError`` / ``OverflowError`` (``None`` included: NULL is the caller's case)."""
    if _ENCODERS[ftype] is _STRING:  # the common case, one concatenation for short text
        short = [wrapper + bytes((n + 2,)) + VALUE_STRING_VALUE_KEY + bytes((n,))
                 for n in range(126)]

        def text(v: object) -> bytes:
            if type(v) is not str and not isinstance(v, str):
                raise TypeError
            b = v.encode()
            n = len(b)
            if n < 126:
                return short[n] + b
            return delimited(wrapper, delimited(VALUE_STRING_VALUE_KEY, b))
        return text
    value = _ENCODERS[ftype]

    def other(v: object) -> bytes:
        return delimited(wrapper, value(v))
    return other


def _record_function(key_fields: Sequence[_Encoder], value_fields: Sequence[_Encoder]
                     ) -> _Record:
    """``record(key, values) -> bytes``: one ``InsertRecord`` field (tag 4) of the given
    column encoders (:func:`_field`), ``None`` in a value column being NULL. Generated for the
    column count, as ``dataclasses`` generates ``__init__``: unpacking checks the lengths
    (``ValueError``) and the record is one expression -- a loop over the columns costs as much
    again as the encoding itself in CPython 3.11."""
    ns: dict[str, object] = {"delimited": delimited, "NULL": _NULL_FIELD, "SEQ": _SEQUENCES}
    ks = [f"k{i}" for i in range(len(key_fields))]
    vs = [f"v{i}" for i in range(len(value_fields))]
    ns.update((f"e{k}", f) for k, f in zip(ks, key_fields, strict=True))
    ns.update((f"e{v}", f) for v, f in zip(vs, value_fields, strict=True))
    terms = [f"e{k}({k})" for k in ks] + [f"(NULL if {v} is None else e{v}({v}))" for v in vs]
    body = (" + ".join(terms) if len(terms) <= 4
            else "b''.join((" + ", ".join(terms) + ",))")
    src = ["def record(key, values):",
           "    if key.__class__ not in SEQ or values.__class__ not in SEQ: raise TypeError",
           f"    {', '.join(ks)}, = key",
           f"    {', '.join(vs)}, = values" if vs else "    if len(values): raise ValueError",
           f"    r = {body}", f"    return delimited({INSERT_STATEMENT_RECORDS_KEY!r}, r)"]
    exec("\n".join(src), ns)  # generated from column numbers only, never from user text
    return cast(_Record, ns["record"])


def _field_type(column: str, declared: object) -> int:
    if isinstance(declared, type):
        if declared not in _PY_TYPES:
            raise TypeError(f"column {column!r}: no column type for Python type "
                            f"{declared.__name__} (use bool, int, float, str, bytes, Decimal "
                            "or a FieldType)")
        return _PY_TYPES[declared]
    if isinstance(declared, int) and declared in _ENCODERS:
        return declared
    raise TypeError(f"column {column!r}: {declared!r} is not a column type (a Python type or a "
                    "FieldType other than UNSPECIFIED)")


class PreparedInsert:
    """Encodes INSERTs into ``table`` (``schema.table``) of the ``key`` columns and the
    ``values`` columns, each ``{name: type}``; a row is its key values and its other values,
    each a tuple or list in that column order. See the module docstring for the contract."""

    __slots__ = ("_header", "_key_enc", "_rec", "_val_enc", "key_columns", "table",
                 "value_columns")

    def __init__(self, table: str, key: Mapping[str, object],
                 values: Mapping[str, object] | None = None) -> None:
        values = values or {}
        if not key:
            raise ValueError("a prepared insert needs at least one key column")
        schema, _, name = table.partition(".")
        key_types = {c: _field_type(c, t) for c, t in key.items()}
        value_types = {c: _field_type(c, t) for c, t in values.items()}
        self.table = table
        self.key_columns = tuple(key_types)
        self.value_columns = tuple(value_types)
        header = statement_pb2.InsertStatement(
            table=statement_pb2.TableMetadata(schema_name=schema, table_name=name),
            key_fields=[statement_pb2.FieldMetadata(name=c, type=t)  # type: ignore[arg-type]
                        for c, t in key_types.items()],
            fields=[statement_pb2.FieldMetadata(name=c, type=t)  # type: ignore[arg-type]
                    for c, t in value_types.items()])
        self._header = header.SerializeToString()
        self._key_enc = tuple(_field(INSERT_RECORD_KEY_VALUES_KEY, t) for t in key_types.values())
        self._val_enc = tuple(_field(INSERT_RECORD_AFTER_VALUES_KEY, t)
                              for t in value_types.values())
        self._rec = _record_function(self._key_enc, self._val_enc)

    def _record(self, key: Sequence[object], values: Sequence[object]) -> bytes:
        """One ``InsertRecord`` field (tag 4) of the statement."""
        try:
            return self._rec(key, values)
        except (TypeError, OverflowError, ValueError):
            raise self._refusal(key, values) from None

    def _refusal(self, key: Sequence[object], values: Sequence[object]) -> Exception:
        """Why ``key``, ``values`` cannot be encoded, naming the column (the slow path)."""
        for what, given in (("key", key), ("values", values)):
            if given.__class__ not in _SEQUENCES:
                return TypeError(f"{self.table}: the row's {what} must be a tuple or list in "
                                 f"the prepared column order, not {type(given).__name__}")
        if len(key) != len(self._key_enc) or len(values) != len(self._val_enc):
            return ValueError(f"{self.table}: {len(key)} key and {len(values)} values given, "
                              f"the insert has {len(self._key_enc)} key and "
                              f"{len(self._val_enc)} value columns")
        for col, enc, v in zip(self.key_columns, self._key_enc, key, strict=True):
            if v is None:
                return TypeError(f"{self.table}: key column {col!r} cannot be NULL")
            try:
                enc(v)
            except (TypeError, OverflowError, ValueError) as exc:
                return _bad(self.table, col, v, exc)
        for col, enc, v in zip(self.value_columns, self._val_enc, values, strict=True):
            try:
                if v is not None:
                    enc(v)
            except (TypeError, OverflowError, ValueError) as exc:
                return _bad(self.table, col, v, exc)
        return ValueError(f"{self.table}: the row cannot be encoded")  # not reached

    def encode(self, key: Sequence[object], values: Sequence[object] = ()) -> bytes:
        """One write inserting one row: ``key`` and ``values`` in the prepared column order."""
        return self._statement(self._record(key, values))

    def encode_many(self, rows: Iterable[tuple[Sequence[object], Sequence[object]]]) -> bytes:
        """One write inserting every ``(key, values)`` row (one statement, one transaction)."""
        records = b"".join([self._record(k, v) for k, v in rows])
        if not records:
            raise ValueError(f"{self.table}: an insert needs at least one row")
        return self._statement(records)

    def _statement(self, records: bytes) -> bytes:
        """The write's ``statements`` field: one ``Statement.insert`` of ``records``."""
        return delimited(WRITE_REQUEST_STATEMENTS_KEY,
                         delimited(STATEMENT_INSERT_KEY, self._header + records))

    def __repr__(self) -> str:
        return (f"PreparedInsert({self.table!r}, key={list(self.key_columns)}, "
                f"values={list(self.value_columns)})")


def _bad(table: str, column: str, value: object, exc: BaseException) -> TypeError:
    what = ("out of range" if isinstance(exc, OverflowError) else
            f"not encodable ({exc})" if isinstance(exc, ValueError) else "of the wrong type")
    return TypeError(f"{table}: column {column!r}: {value!r:.80} ({type(value).__name__}) is "
                     f"{what} for the prepared column")
