"""The API's reads: ``Read`` (one row by key), ``Reads.ReadBatch`` (many rows by key) and
``Scan`` (rows in key order), each at the read point of the consistency asked for
(docs/node.md, "API").

A key value given as text for a non-text key column is converted to the column's type
(``gateway get shop.items 1``); then every key value must be valid for its key column exactly
as in a write. A table never written has no rows. A scan stops before a response clients
cannot receive (:data:`SCAN_RESPONSE_BYTES`) and says ``more``: the caller continues after
its last row (``start_after``: the start key exclusive, so a page of one big row still moves
on -- an inclusive start at the last key would read that row again); a read batch whose rows would
not fit in such a response fails naming the key where it overflowed. Errors are raised
(``InvalidRequest``, the node's errors); the servicer maps them to the call's status.

The responses are built as bytes around the rows as the store holds them (a serialized
``Row``): a row is never parsed and serialized again on its way out (``read_wire``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.core.rowops import CASE_OF_TYPE
from gateway.node.api import read_wire
from gateway.node.base.validation import (
    InvalidRequest,
    check_key_values,
    key_rules,
    split_table_name,
)
from gateway.node.state import keys, row_reads
from gateway.node.state.wire import column_code
from gateway.v1 import gateway_pb2, reads_pb2, value_pb2

if TYPE_CHECKING:
    from gateway.node.api.served_node import ServedNode
    from gateway.node.base.validation import TableSchema
    from gateway.node.state.state_machine import StoreStateMachine

__all__ = ["MAX_BATCH_KEYS", "SCAN_RESPONSE_BYTES", "coerce_key", "read", "read_batch",
           "read_point", "scan"]

#: The largest Scan response: below gRPC's default 4 MiB receive limit of clients.
SCAN_RESPONSE_BYTES = (4 << 20) - (64 << 10)
#: The most keys one ReadBatch may name (Scan's largest limit).
MAX_BATCH_KEYS = 10000
FT = value_pb2.FieldType
#: A table's key rules (``validation.key_rules``).
KeyRules = tuple[tuple[str | None, int | None], ...]
_C = gateway_pb2.Consistency


#: ``split_table_name`` of the table names reads named lately (only valid ones): a read
#: checks its table's name once, not per call. Emptied when it reaches ``_TABLES_KEPT``.
_TABLES: dict[str, tuple[str, str]] = {}
_TABLES_KEPT = 1024


def _table(text: str, path: str = "table") -> tuple[str, str]:
    """``split_table_name(text, path)``, remembered for valid names."""
    got = _TABLES.get(text)
    if got is None:
        got = split_table_name(text, path)
        if len(_TABLES) >= _TABLES_KEPT:
            _TABLES.clear()
        _TABLES[text] = got
    return got


async def read_point(node: ServedNode, consistency: int, deadline: float) -> None:
    """Wait until this node may serve a read of ``consistency`` (STALE: at once;
    LINEARIZABLE: a read index the leader confirmed with a quorum; LEASE: under the
    leader's lease), for at most ``deadline`` seconds."""
    if consistency == _C.CONSISTENCY_STALE:
        return
    if consistency not in (_C.CONSISTENCY_LINEARIZABLE, _C.CONSISTENCY_LEASE):
        raise InvalidRequest("consistency", f"unknown consistency {consistency}")
    timeout = min(deadline, max(1.0, node.election_timeout_s() * 2))
    await node.driver.read_index(consistency == _C.CONSISTENCY_LEASE, timeout)


def coerce_key(values: Sequence[value_pb2.Value], schema: TableSchema, path: str,
               rules: KeyRules | None = None) -> list[value_pb2.Value]:
    """``values`` as the key of a table of ``schema``: a text value of a non-text key
    column is converted to the column's type (``gateway get shop.items 1``); then every
    value must be valid for its key column, exactly as in a write (``rules``: the key's
    ``key_rules``, for a caller checking many keys of one table)."""
    if len(values) != len(schema.key_fields):
        raise InvalidRequest(path, f"missing key: {len(values)} values for "
                                   f"{len(schema.key_fields)} key fields")
    out = []
    for i, (v, (name, ftype)) in enumerate(zip(values, schema.key_fields, strict=True)):
        if v.WhichOneof("kind") == "string_value" and \
                CASE_OF_TYPE.get(ftype) != "string_value":
            out.append(_parse_typed(v.string_value, ftype, f"{path}[{i}]", name))
        else:
            out.append(v)
    check_key_values(out, schema.key_fields, path, rules)
    return out


async def read(node: ServedNode, request: gateway_pb2.ReadRequest, deadline: float
               ) -> bytes:
    """``Gateway.Read``: the serialized ``ReadResponse`` with the row of ``request.key``
    (module docstring)."""
    schema, table = _table(request.table)
    if not request.key:
        raise InvalidRequest("key", "missing key")
    await read_point(node, request.consistency, deadline)
    # The table's shape is looked up only now: a read that waited for the apply of the
    # table's first write must see the schema that write created. An unknown table
    # has no rows (its key cannot be checked: its types are unknown).
    sm = node.sm
    shape = sm.schemas.get(f"{schema}.{table}")
    if shape is None:
        return read_wire.read_response(None, sm.applied_index)
    key = coerce_key(request.key, shape, "key")
    return read_wire.read_response(row_reads.row_bytes(sm.store, schema, table, key),
                                    sm.applied_index)


async def read_batch(node: ServedNode, request: reads_pb2.ReadBatchRequest, deadline: float,
                     data: bytes | None = None) -> bytes:
    """``Reads.ReadBatch``: the serialized ``ReadBatchResponse`` with the row of every key, in
    the request's order, all read at one applied index after one read point. Every key is
    checked before any row is read; a bad one fails the call naming ``keys[i]...``.

    ``data``, the request's bytes as received, lets a batch of plain keys of one table (the
    common case: see ``read_wire.batch_keys``) be read from them; any other batch, or any key
    to refuse, is read from the parsed request, which gives the same answer."""
    n = len(request.keys)
    if n > MAX_BATCH_KEYS:
        raise InvalidRequest("keys", f"{n} keys: at most {MAX_BATCH_KEYS}")
    if data is not None and (name := _one_table(data)) is not None:
        await read_point(node, request.consistency, deadline)
        sm = node.sm
        # No await from here on (as below): every row comes from one applied index.
        shape = sm.schemas.get(f"{name[0]}.{name[1]}")
        if shape is not None:
            prefix, kcodes = _key_plan(name, shape)
            store_keys = read_wire.batch_keys(data, prefix, kcodes)
            if store_keys is not None:
                return read_wire.read_batch_response(list(map(sm.store.get, store_keys)),
                                                     sm.applied_index, SCAN_RESPONSE_BYTES)
        return _read_batch_checked(sm, request, [name] * n)
    names: list[tuple[str, str]] = []
    default: tuple[str, str] | None = None
    for i, rk in enumerate(request.keys):
        if rk.table:
            names.append(_table(rk.table, f"keys[{i}].table"))
        else:
            if default is None:
                if not request.table:
                    raise InvalidRequest(f"keys[{i}].table", "missing table name (schema.table): "
                                         "neither the key nor the request names one")
                default = _table(request.table)
            names.append(default)
        if not rk.key:
            raise InvalidRequest(f"keys[{i}].key", "missing key")
    await read_point(node, request.consistency, deadline)
    return _read_batch_checked(node.sm, request, names)


def _one_table(data: bytes) -> tuple[str, str] | None:
    """The valid name of the one table every key of the serialized request ``data`` is of
    (``read_wire.batch_table``), or None: the general path reads the request (and names
    the key of an invalid name)."""
    table = read_wire.batch_table(data)
    if table is None:
        return None
    try:
        return _table(table.decode())
    except (InvalidRequest, UnicodeDecodeError):
        return None


def _read_batch_checked(sm: StoreStateMachine, request: reads_pb2.ReadBatchRequest,
                        names: list[tuple[str, str]]) -> bytes:
    """:func:`read_batch` after its read point, from the parsed request: every key checked
    against its table (``names[i]``: key ``i``'s) before any row is read."""
    schemas = sm.schemas
    # Keys are checked and looked up after the read point (as ``read``): the shapes are the
    # ones the read point's applies created. No await: every row comes from one applied
    # index. Each table's shape and key rules are looked up once.
    tables: dict[tuple[str, str], tuple[TableSchema, KeyRules] | None] = {}
    looked: list[tuple[str, str, list[value_pb2.Value]] | None] = []
    for i, (name, rk) in enumerate(zip(names, request.keys, strict=True)):
        if name in tables:
            known = tables[name]
        else:
            shape = schemas.get(f"{name[0]}.{name[1]}")
            known = tables[name] = None if shape is None else (shape, key_rules(
                shape.key_fields))
        looked.append(None if known is None else
                      (*name, coerce_key(rk.key, known[0], f"keys[{i}].key", known[1])))
    rows = row_reads.rows_bytes(sm.store, looked)
    return read_wire.read_batch_response(rows, sm.applied_index, SCAN_RESPONSE_BYTES)


#: Per table read lately: its shape, its rows' key prefix and its key columns' wire-check
#: codes (``wire.column_code``), for ``read_wire.batch_keys``; an entry serves while the
#: table's shape is the same object. Emptied when it reaches ``_TABLES_KEPT``.
_KEY_PLANS: dict[tuple[str, str], tuple[TableSchema, bytes, bytes]] = {}


def _key_plan(name: tuple[str, str], shape: TableSchema) -> tuple[bytes, bytes]:
    """``(key prefix, key codes)`` of table ``name`` of ``shape``."""
    got = _KEY_PLANS.get(name)
    if got is None or got[0] is not shape:
        if len(_KEY_PLANS) >= _TABLES_KEPT:
            _KEY_PLANS.clear()
        got = _KEY_PLANS[name] = (shape, keys.table_prefix(*name),
                                  bytes(column_code(t) for _, t in shape.key_fields))
    return got[1], got[2]


async def scan(node: ServedNode, request: gateway_pb2.ScanRequest, deadline: float
               ) -> bytes:
    """``Gateway.Scan``: the serialized ``ScanResponse`` with the rows from ``start_key`` up
    to ``end_key`` (module docstring)."""
    schema, table = _table(request.table)
    limit = request.limit or 1000
    if limit > 10000:
        raise InvalidRequest("limit", "at most 10000")
    if request.start_after and not request.start_key:
        raise InvalidRequest("start_after", "give start_key: the key the scan starts after")
    await read_point(node, request.consistency, deadline)
    sm = node.sm
    shape = sm.schemas.get(f"{schema}.{table}")  # after the read point
    if shape is None:
        return read_wire.scan_response([], False, sm.applied_index)
    start = coerce_key(request.start_key, shape, "start_key") \
        if request.start_key else []
    end = coerce_key(request.end_key, shape, "end_key") if request.end_key else []
    # Stop before a response clients cannot receive (gRPC's default receive limit):
    # ``more`` tells the caller to continue after the last row. The stored rows are framed
    # as they are read, a run of them per call (no Python per row).
    # With ``shared_shape`` the rows' common table and columns go once, in ``shape``.
    rows, _, more, common = row_reads.scan_rows_framed(
        sm.store, schema, table, start, end, read_wire.SCAN_ROWS_KEY, limit,
        SCAN_RESPONSE_BYTES, request.shared_shape, request.start_after)
    return read_wire.scan_response_framed(rows, more, sm.applied_index, common)


def _parse_typed(text: str, ftype: int, path: str, name: str) -> value_pb2.Value:
    """A key value given as text (``gateway get shop.items 1``) in the column's type."""
    try:
        if ftype == FT.FIELD_TYPE_INTEGER:
            return value_pb2.Value(int_value=int(text))
        if ftype == FT.FIELD_TYPE_UNSIGNED:
            return value_pb2.Value(uint_value=int(text))
        if ftype == FT.FIELD_TYPE_TIMESTAMP:
            return value_pb2.Value(timestamp_ns=int(text))
        if ftype == FT.FIELD_TYPE_DOUBLE:
            return value_pb2.Value(double_value=float(text))
        if ftype == FT.FIELD_TYPE_BOOLEAN:
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return value_pb2.Value(bool_value=text.lower() in ("true", "1"))
        if ftype == FT.FIELD_TYPE_DECIMAL:
            return value_pb2.Value(decimal_value=text)
        if ftype in (FT.FIELD_TYPE_BLOB, FT.FIELD_TYPE_UUID):
            return value_pb2.Value(bytes_value=bytes.fromhex(text))
        return value_pb2.Value(string_value=text)
    except ValueError:
        raise InvalidRequest(path, f"wrong type: {text!r} is not a {FT.Name(ftype)} "
                                   f"(key column {name!r})") from None
