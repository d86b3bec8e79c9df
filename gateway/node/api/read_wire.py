"""The read responses as bytes, built around rows as the store holds them.

A stored row *is* a serialized ``gateway.v1.Row`` (``StoreStateMachine.row_bytes``), so a
read's answer is the row's bytes framed as the response's ``row`` field: parsing the row
into a message only to serialize it again, as a message-built response does, costs the node
CPU per row and gives the client the same message. Each function here returns exactly the
bytes the message-built response serializes to (field order as protobuf writes it; the
differential tests in ``tests/node/test_read_batch.py`` compare them).

A read batch's keys are read here from the request's bytes too (:func:`batch_table`,
:func:`batch_keys`): the store key of every key, checked by the rules of a write's key values,
without building a message per key and value. Anything out of the plain case (keys of two
tables, a text value for a typed column, a value to refuse) answers None, and the parsed
request takes the general path, which gives the verdict and the error.

Each ``*_py`` function is the specification of its C twin in ``_read_wire.c``
(``gateway.core.accel``), which serves when built; the tests run both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from gateway.core import accel
from gateway.core.varint import encode_uvarint, read_varint64
from gateway.node.base.validation import InvalidRequest
from gateway.node.state.wire import (
    frame_field,
    key_part,
    single_field_end,
    tag_of_code,
    value_ok_py,
)
from gateway.v1 import wire_tags as W

__all__ = ["SCAN_ROWS_KEY", "batch_keys", "batch_keys_py", "batch_table", "batch_table_py",
           "read_batch_response", "read_batch_response_py", "read_response", "scan_response",
           "scan_response_framed"]

_FOUND = W.READ_RESPONSE_FOUND_KEY + b"\x01"
_ROW = W.READ_RESPONSE_ROW_KEY
_READ_INDEX = W.READ_RESPONSE_APPLIED_INDEX_KEY
#: The key of ``ScanResponse.rows`` (what ``row_reads.scan_rows_framed`` frames rows with).
SCAN_ROWS_KEY = W.SCAN_RESPONSE_ROWS_KEY
_SCAN_MORE = W.SCAN_RESPONSE_MORE_KEY + b"\x01"
_SCAN_INDEX = W.SCAN_RESPONSE_APPLIED_INDEX_KEY
_SCAN_SHAPE = W.SCAN_RESPONSE_SHAPE_KEY
_RESULTS = W.READ_BATCH_RESPONSE_RESULTS_KEY
_BATCH_INDEX = W.READ_BATCH_RESPONSE_APPLIED_INDEX_KEY
#: A ReadBatchResult of a key with no row: ``found`` false, no row (an empty message).
_MISSING = _RESULTS + b"\x00"
_RESULT_FOUND = W.READ_BATCH_RESULT_FOUND_KEY + b"\x01"
_RESULT_ROW = W.READ_BATCH_RESULT_ROW_KEY
_accel = accel.load("gateway.node.api._read_wire")  # None: the Python specifications serve
_B_REQ_TABLE = W.READ_BATCH_REQUEST_TABLE_KEY[0]
_B_REQ_KEYS = W.READ_BATCH_REQUEST_KEYS_KEY[0]
_B_REQ_CONSISTENCY = W.READ_BATCH_REQUEST_CONSISTENCY_KEY[0]
_B_KEY_TABLE = W.READ_KEY_TABLE_KEY[0]
_B_KEY_VALUES = W.READ_KEY_KEY_KEY[0]


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
    return b"".join((frame_field(SCAN_ROWS_KEY, rows), _SCAN_MORE if more else b"",
                     _index(_SCAN_INDEX, applied_index)))


def scan_response_framed(rows: bytes, more: bool, applied_index: int,
                         shape: bytes | None = None) -> bytes:
    """:func:`scan_response` of rows already framed as its ``rows`` field
    (``row_reads.scan_rows_framed`` with :data:`SCAN_ROWS_KEY`), with ``shape`` (a serialized
    ``RowShape``; None or empty: none) as its ``shape`` field."""
    tail = _SCAN_SHAPE + encode_uvarint(len(shape)) + shape if shape else b""
    return b"".join((rows, _SCAN_MORE if more else b"", _index(_SCAN_INDEX, applied_index),
                     tail))


def read_batch_response(rows: Sequence[bytes | None], applied_index: int, limit: int
                        ) -> bytes:
    """``ReadBatchResponse`` of one result per row (``None``: not found), serialized; raises
    ``InvalidRequest`` naming ``keys[i]`` when the response would pass ``limit`` bytes at the
    ``i``-th key (:func:`read_batch_response_py`, by its C twin when built)."""
    if _accel is not None:
        got: bytes | None = _accel.batch_response(rows, applied_index, limit)
        if got is not None:
            return got
    return read_batch_response_py(rows, applied_index, limit)  # the error names the key


def read_batch_response_py(rows: Sequence[bytes | None], applied_index: int, limit: int
                           ) -> bytes:
    """:func:`read_batch_response`, the specification of ``_read_wire.batch_response``
    (which answers None where this raises: a response past ``limit``)."""
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


def _len_fields(data: bytes, pos: int, end: int, tags: tuple[int, int], skipped: int = -1
                ) -> Iterator[tuple[int, int, int]]:
    """``(tag, start, stop)`` of every length-delimited field of ``data[pos:end]``, each with
    a tag of ``tags``; a varint field of tag ``skipped`` is passed over. Raises ``ValueError``
    at any other field, or one running past ``end`` (``_read_wire.c``'s ``walk``)."""
    while pos < end:
        tag = data[pos]
        if tag == skipped:
            _, pos = read_varint64(data, pos + 1, end)
            continue
        if tag != tags[0] and tag != tags[1]:
            raise ValueError(f"field {tag:#x} at {pos}")
        ln, start = read_varint64(data, pos + 1, end)
        pos = start + ln
        if pos > end:
            raise ValueError(f"field {tag:#x} at {pos}")
        yield tag, start, pos


def _request_fields(data: bytes) -> Iterator[tuple[int, int, int]]:
    """The table and key fields of a serialized ``ReadBatchRequest`` (``_len_fields``)."""
    return _len_fields(data, 0, len(data), (_B_REQ_KEYS, _B_REQ_TABLE), _B_REQ_CONSISTENCY)


def batch_table_py(data: bytes) -> bytes | None:
    """The one table every ``ReadKey`` of the serialized ``ReadBatchRequest`` ``data`` is of
    -- the key's own ``table``, or the request's for a key that names none, each the last such
    field as a parse reads it -- as its UTF-8 bytes, when every key holds a value and the
    request has no field but its table, keys and consistency: what the request alone must say
    for :func:`batch_keys` to read its keys. None otherwise (no key, keys of two tables, a key
    of none, bytes that do not walk so). The specification of ``_read_wire.batch_table``."""
    try:
        fields = list(_request_fields(data))
        request_table = b""
        for tag, start, stop in fields:
            if tag == _B_REQ_TABLE:
                request_table = data[start:stop]
        common: bytes | None = None
        for tag, start, stop in fields:
            if tag != _B_REQ_KEYS:
                continue
            table, values = b"", 0
            for t, v, v_end in _len_fields(data, start, stop, (_B_KEY_VALUES, _B_KEY_TABLE)):
                if t == _B_KEY_TABLE:
                    table = data[v:v_end]
                else:
                    values += 1
            table = table or request_table
            if not values or not table or (common is not None and table != common):
                return None
            common = table
    except (IndexError, ValueError):
        return None
    return common


def batch_keys_py(data: bytes, prefix: bytes, kcodes: bytes) -> list[bytes] | None:
    """The store key of every ``ReadKey`` of the serialized ``ReadBatchRequest`` ``data``, in
    order: ``prefix`` (the table's, ``keys.table_prefix``) + the key's encoding
    (``keys.encode_key``), when every key is plain -- it holds exactly ``len(kcodes)`` values,
    each exactly one field in its key column's case and valid for its type by the rules of a
    write's key values (``kcodes``: ``wire.column_code`` of each key column). The keys'
    tables are skipped: the caller read them with :func:`batch_table`. None when a key is not
    plain, or the bytes do not walk as :func:`batch_table` says: the general path then checks
    the parsed request and gives the verdict and the error. The specification of
    ``_read_wire.batch_keys``."""
    nk = len(kcodes)
    out: list[bytes] = []
    try:
        for tag, start, stop in _request_fields(data):
            if tag != _B_REQ_KEYS:
                continue
            parts = [prefix]
            for t, v, v_end in _len_fields(data, start, stop, (_B_KEY_VALUES, _B_KEY_TABLE)):
                if t == _B_KEY_TABLE:
                    continue  # read by batch_table
                if len(parts) > nk:
                    return None
                code = kcodes[len(parts) - 1]
                got = data[v] if v_end > v else -1
                if got != tag_of_code(code) or not single_field_end(data, v, v_end, got) \
                        or not value_ok_py(data, v, v_end, code, True):
                    return None
                part = key_part(data, v, v_end)
                if part is None:
                    return None
                parts.append(part)
            if len(parts) != nk + 1:
                return None
            out.append(b"".join(parts))
    except (IndexError, ValueError):
        return None
    return out


batch_table: Callable[[bytes], bytes | None] = _accel.batch_table if _accel else batch_table_py
batch_keys: Callable[[bytes, bytes, bytes], list[bytes] | None] = (
    _accel.batch_keys if _accel else batch_keys_py)
