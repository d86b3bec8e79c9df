"""The API's reads: ``Read`` (one row by key) and ``Scan`` (rows in key order), each at the
read point of the consistency asked for (docs/node.md, "API").

A key value given as text for a non-text key column is converted to the column's type
(``gateway get shop.items 1``); then every key value must be valid for its key column exactly
as in a write. A table never written has no rows. A scan stops before a response clients
cannot receive (:data:`SCAN_RESPONSE_BYTES`) and says ``more``. Errors are raised
(``InvalidRequest``, the node's errors); the servicer maps them to the call's status.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.core.rowops import CASE_OF_TYPE
from gateway.node.base.validation import InvalidRequest, check_key_values, split_table_name
from gateway.v1 import gateway_pb2, value_pb2

if TYPE_CHECKING:
    from gateway.node.api.served_node import ServedNode
    from gateway.node.base.validation import TableSchema

__all__ = ["SCAN_RESPONSE_BYTES", "coerce_key", "read", "read_point", "scan"]

#: The largest Scan response: below gRPC's default 4 MiB receive limit of clients.
SCAN_RESPONSE_BYTES = (4 << 20) - (64 << 10)
FT = value_pb2.FieldType
_C = gateway_pb2.Consistency


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


def coerce_key(values: Sequence[value_pb2.Value], schema: TableSchema, path: str
               ) -> list[value_pb2.Value]:
    """``values`` as the key of a table of ``schema``: a text value of a non-text key
    column is converted to the column's type (``gateway get shop.items 1``); then every
    value must be valid for its key column, exactly as in a write."""
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
    check_key_values(out, schema.key_fields, path)
    return out


async def read(node: ServedNode, request: gateway_pb2.ReadRequest, deadline: float
               ) -> gateway_pb2.ReadResponse:
    """``Gateway.Read``: the row of ``request.key`` (module docstring)."""
    schema, table = split_table_name(request.table)
    if not request.key:
        raise InvalidRequest("key", "missing key")
    await read_point(node, request.consistency, deadline)
    # The table's shape is looked up only now: a read that waited for the apply of the
    # table's first write must see the schema that write created. An unknown table
    # has no rows (its key cannot be checked: its types are unknown).
    shape = node.sm.schemas.get(f"{schema}.{table}")
    if shape is None:
        return gateway_pb2.ReadResponse(found=False,
                                        applied_index=node.sm.applied_index)
    key = coerce_key(request.key, shape, "key")
    row = node.sm.get_row(schema, table, key)
    resp = gateway_pb2.ReadResponse(found=row is not None,
                                    applied_index=node.sm.applied_index)
    if row is not None:
        resp.row.CopyFrom(row)
    return resp


async def scan(node: ServedNode, request: gateway_pb2.ScanRequest, deadline: float
               ) -> gateway_pb2.ScanResponse:
    """``Gateway.Scan``: the rows from ``start_key`` up to ``end_key`` (module docstring)."""
    schema, table = split_table_name(request.table)
    limit = request.limit or 1000
    if limit > 10000:
        raise InvalidRequest("limit", "at most 10000")
    await read_point(node, request.consistency, deadline)
    shape = node.sm.schemas.get(f"{schema}.{table}")  # after the read point
    resp = gateway_pb2.ScanResponse(applied_index=node.sm.applied_index)
    if shape is None:
        return resp
    start = coerce_key(request.start_key, shape, "start_key") \
        if request.start_key else []
    end = coerce_key(request.end_key, shape, "end_key") if request.end_key else []
    size = 0
    for row in node.sm.scan_rows(schema, table, start, end):
        # Stop before a response clients cannot receive (gRPC's default receive
        # limit): ``more`` tells the caller to continue after the last row.
        size += row.ByteSize() + 6
        if len(resp.rows) == limit or (resp.rows and size > SCAN_RESPONSE_BYTES):
            resp.more = True
            break
        resp.rows.append(row)
    return resp


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
