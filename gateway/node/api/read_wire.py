"""The read responses as bytes, built around rows as the store holds them.

A stored row *is* a serialized ``gateway.v1.Row`` (``StoreStateMachine.row_bytes``), so a
read's answer is the row's bytes framed as the response's ``row`` field: parsing the row
into a message only to serialize it again, as a message-built response does, costs the node
CPU per row and gives the client the same message. Each function here returns exactly the
bytes the message-built response serializes to (field order as protobuf writes it; the
differential tests in ``tests/node/test_read_wire.py`` compare them).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.core.varint import encode_uvarint
from gateway.node.base.validation import InvalidRequest
from gateway.node.state.wire import frame_field
from gateway.v1 import wire_tags as W

__all__ = ["read_batch_response", "read_response", "scan_response"]

_FOUND = W.READ_RESPONSE_FOUND_KEY + b"\x01"
_ROW = W.READ_RESPONSE_ROW_KEY
_READ_INDEX = W.READ_RESPONSE_APPLIED_INDEX_KEY
_SCAN_ROWS = W.SCAN_RESPONSE_ROWS_KEY
_SCAN_MORE = W.SCAN_RESPONSE_MORE_KEY + b"\x01"
_SCAN_INDEX = W.SCAN_RESPONSE_APPLIED_INDEX_KEY
_RESULTS = W.READ_BATCH_RESPONSE_RESULTS_KEY
_BATCH_INDEX = W.READ_BATCH_RESPONSE_APPLIED_INDEX_KEY
#: A ReadBatchResult of a key with no row: ``found`` false, no row (an empty message).
_MISSING = _RESULTS + b"\x00"
_RESULT_FOUND = W.READ_BATCH_RESULT_FOUND_KEY + b"\x01"
_RESULT_ROW = W.READ_BATCH_RESULT_ROW_KEY


def _index(key: bytes, index: int) -> bytes:
    return key + encode_uvarint(index) if index else b""


def read_response(row: bytes | None, applied_index: int) -> bytes:
    """``ReadResponse(found=row is not None, row=Row.FromString(row), applied_index=...)``
    serialized."""
    if row is None:
        return _index(_READ_INDEX, applied_index)
    return b"".join((_FOUND, _ROW, encode_uvarint(len(row)), row,
                     _index(_READ_INDEX, applied_index)))


def scan_response(rows: list[bytes], more: bool, applied_index: int) -> bytes:
    """``ScanResponse(rows=[Row.FromString(r) for r in rows], more=..., applied_index=...)``
    serialized."""
    return b"".join((frame_field(_SCAN_ROWS, rows), _SCAN_MORE if more else b"",
                     _index(_SCAN_INDEX, applied_index)))


def read_batch_response(rows: Sequence[bytes | None], applied_index: int, limit: int
                        ) -> bytes:
    """``ReadBatchResponse`` of one result per row (``None``: not found), serialized; raises
    ``InvalidRequest`` naming ``keys[i]`` when the response would pass ``limit`` bytes at the
    ``i``-th key."""
    parts: list[bytes] = []
    size = 0
    for i, row in enumerate(rows):
        if row is None:
            parts.append(_MISSING)
            size += 2
            continue
        n = len(row)
        inner = 3 + len(encode_uvarint(n)) + n  # found, the row's key, length, bytes
        part = b"".join((_RESULTS, encode_uvarint(inner), _RESULT_FOUND, _RESULT_ROW,
                         encode_uvarint(n), row))
        size += len(part)
        if size > limit:
            raise InvalidRequest(f"keys[{i}]", f"the rows up to this key pass the largest "
                                 f"response ({limit} bytes): read fewer keys per call")
        parts.append(part)
    parts.append(_index(_BATCH_INDEX, applied_index))
    return b"".join(parts)
