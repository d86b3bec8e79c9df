"""Rows read as the store holds them: a stored row is a serialized ``gateway.v1.Row``, and a
read answers with those bytes unparsed (``gateway.node.api.read_wire``).

``StoreStateMachine.get_row`` / ``scan_rows`` are the same reads parsed into messages; these
read the state machine's store directly (the store of a ``StoreStateMachine``: ``sm.store``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.core.lsm.format import prefix_end
from gateway.node.state import keys
from gateway.v1 import value_pb2
from gateway.v1 import wire_tags as W

if TYPE_CHECKING:
    from gateway.core.lsm import LSMStore

__all__ = ["ROW_SHAPE_FIELDS", "row_bytes", "rows_bytes", "scan_rows_framed"]


def row_bytes(store: LSMStore, schema: str, table: str,
              key_values: Sequence[value_pb2.Value]) -> bytes | None:
    """The stored row of ``schema.table`` with primary key ``key_values`` as a serialized
    ``Row``, or ``None``."""
    return store.get(keys.row_key(schema, table, key_values))


def rows_bytes(store: LSMStore,
               wanted: Sequence[tuple[str, str, Sequence[value_pb2.Value]] | None]
               ) -> list[bytes | None]:
    """:func:`row_bytes` of every ``(schema, table, key_values)`` (None: no row wanted, None
    answered), in order; each table's key prefix made once."""
    get = store.get
    prefixes: dict[tuple[str, str], bytes] = {}
    out: list[bytes | None] = []
    for w in wanted:
        if w is None:
            out.append(None)
            continue
        schema, table, key_values = w
        prefix = prefixes.get((schema, table))
        if prefix is None:
            prefix = prefixes[(schema, table)] = keys.table_prefix(schema, table)
        out.append(get(prefix + keys.encode_key(key_values)))
    return out


#: A stored ``Row``'s shape (``RowShape``): its table first, then its key and column fields.
ROW_SHAPE_FIELDS = bytes((W.ROW_TABLE, W.ROW_KEY_FIELDS, W.ROW_FIELDS))


def scan_rows_framed(store: LSMStore, schema: str, table: str,
                     start: Sequence[value_pb2.Value], end: Sequence[value_pb2.Value],
                     field_key: bytes, limit: int, max_bytes: int, shared_shape: bool = False,
                     after: bool = False) -> tuple[bytes, int, bool, bytes | None]:
    """The stored rows of one table with ``start <= key < end`` (``start < key`` with
    ``after``; empty lists are open ends) in key order, serialized ``Row`` messages framed
    as the repeated message field of
    one-byte key ``field_key`` (a ``ScanResponse``'s rows): ``(framed, count, more, shape)``,
    at most ``limit`` rows and within ``max_bytes`` as ``LSMStore.scan_framed`` counts them.

    With ``shared_shape``, ``shape`` is the first row's table, key fields and fields as a
    serialized ``RowShape``, and every row whose own are the same bytes leaves them out (a
    row that keeps its own names its table, so readers tell the two apart); None when
    there is no row or a row could not be told apart (every row whole then)."""
    prefix = keys.table_prefix(schema, table)
    lo = prefix + keys.encode_key(start)
    if after and start:
        # the smallest byte string above the start's encoding: every key the encoding
        # orders after ``start`` (a longer key it begins included) is at or above it
        lo += b"\x00"
    hi = prefix + keys.encode_key(end) if end else prefix_end(prefix)
    return store.scan_framed(lo, hi, field_key, limit, max_bytes,
                             ROW_SHAPE_FIELDS if shared_shape else b"")

