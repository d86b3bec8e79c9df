"""Key encoding of the node's LSM store (the format is specified in docs/node.md, "Store keys").

Every key starts with a one-byte namespace:

- ``r`` rows: ``r`` + esc(schema) + ``00 01`` + esc(table) + ``00 01`` + the encoded primary key;
- ``s`` table schemas (first-seen shape): ``s`` + ``schema.table``;
- ``i`` idempotency records: ``i`` + the client's key (UTF-8);
- ``x`` log entries deliberately not applied (duplicates, rejected): ``x`` + index (u64 BE);
- ``m`` node metadata (``m`` + name), e.g. the last assigned GTID trans id, and the replicated
  positions of cluster-scoped appliers (``m applier:<name>``).

Key values are encoded so that byte order is value order within one type: a type byte, then
for integers and timestamps ``value + 2**63`` (u64 big-endian), unsigned u64 big-endian,
doubles with the IEEE sign trick, booleans one byte, and text/bytes with ``00`` escaped as
``00 FF`` and terminated by ``00 01`` (so a prefix sorts first). Decimals are encoded as their
canonical text (ordered as text, not numerically). Null sorts before every other value.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from gateway.v1 import value_pb2

__all__ = [
    "KeyEncodingError",
    "applier_position_key",
    "encode_key",
    "entry_outcome_key",
    "idempotency_key",
    "meta_key",
    "row_key",
    "schema_key",
    "table_prefix",
]

_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")
_TERM = b"\x00\x01"
_BIAS = 1 << 63

T_NULL, T_BOOL, T_INT, T_UINT, T_DOUBLE, T_TEXT, T_BYTES, T_TS = range(1, 9)


class KeyEncodingError(ValueError):
    """A key value cannot be encoded (no case set, out of range)."""


def _esc(data: bytes) -> bytes:
    return data.replace(b"\x00", b"\x00\xff") + _TERM


def _value(v: value_pb2.Value) -> bytes:
    case = v.WhichOneof("kind")
    if case == "int_value":
        return bytes((T_INT,)) + _U64.pack(v.int_value + _BIAS)
    if case == "string_value":
        return bytes((T_TEXT,)) + _esc(v.string_value.encode())
    if case == "uint_value":
        return bytes((T_UINT,)) + _U64.pack(v.uint_value)
    if case == "bytes_value":
        return bytes((T_BYTES,)) + _esc(v.bytes_value)
    if case == "timestamp_ns":
        return bytes((T_TS,)) + _U64.pack(v.timestamp_ns + _BIAS)
    if case == "bool_value":
        return bytes((T_BOOL, int(v.bool_value)))
    if case == "double_value":
        (bits,) = _U64.unpack(_F64.pack(v.double_value))
        bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | _BIAS
        return bytes((T_DOUBLE,)) + _U64.pack(bits)
    if case == "decimal_value":
        return bytes((T_TEXT,)) + _esc(v.decimal_value.encode())
    if case == "null_value":
        return bytes((T_NULL,))
    raise KeyEncodingError("key value has no case set")


def encode_key(values: Sequence[value_pb2.Value]) -> bytes:
    """The order-preserving encoding of a primary key (a tuple of values)."""
    return b"".join([_value(v) for v in values])  # a list: joined without a generator


def table_prefix(schema: str, table: str) -> bytes:
    """Prefix of every row key of ``schema.table`` (for scans)."""
    return b"r" + _esc(schema.encode()) + _esc(table.encode())


def row_key(schema: str, table: str, key: Sequence[value_pb2.Value]) -> bytes:
    """Store key of one row."""
    return table_prefix(schema, table) + encode_key(key)


def schema_key(qualified: str) -> bytes:
    """Store key of the first-seen schema of ``schema.table``."""
    return b"s" + qualified.encode()


def idempotency_key(key: str) -> bytes:
    """Store key of the result of the write with client idempotency key ``key``."""
    return b"i" + key.encode()


#: Prefix of the idempotency expiry index (its keys: :func:`idempotency_expiry_key`).
IDEMPOTENCY_EXPIRY_PREFIX = b"j"


def idempotency_expiry_key(commit_ts_ns: int, key: str) -> bytes:
    """Store key of the expiry index entry of idempotency record ``key`` written by the
    transaction committed at ``commit_ts_ns`` (ordered by time, so expired records are one
    range)."""
    return idempotency_expiry_bound(commit_ts_ns) + key.encode()


def idempotency_expiry_bound(commit_ts_ns: int) -> bytes:
    """The least expiry index key of a record committed at ``commit_ts_ns`` or later: the
    index entries committed before it are the keys in ``[IDEMPOTENCY_EXPIRY_PREFIX, bound)``."""
    return IDEMPOTENCY_EXPIRY_PREFIX + _U64.pack(commit_ts_ns)


def parse_idempotency_expiry_key(index_key: bytes) -> tuple[int, bytes]:
    """``(commit_ts_ns, record store key)`` of an expiry index key (inverse of
    :func:`idempotency_expiry_key`; the record's key is :func:`idempotency_key`'s)."""
    return _U64.unpack_from(index_key, 1)[0], idempotency_key("") + index_key[9:]


def entry_outcome_key(index: int) -> bytes:
    """Store key marking log entry ``index`` as not applied (duplicate or rejected)."""
    return b"x" + _U64.pack(index)


def meta_key(name: str) -> bytes:
    """Store key of node metadata ``name``."""
    return b"m" + name.encode()


def applier_position_key(applier: str) -> bytes:
    """Store key of the replicated position of cluster-scoped applier ``applier`` (value: a
    serialized ``gateway.v1.ApplierPosition``); ``applier_position_key("")`` is the prefix of
    them all."""
    return meta_key("applier:" + applier)
