"""The node's wire paths: the Python twin of ``_wire.c``.

Entry payloads, rows and write results are read and written here straight from protobuf wire
bytes, without building messages, on the hot paths (the leader's check of incoming
statements, the apply of insert statements, write results). Every function here is the
specification of its C accelerator in ``gateway/node/_wire.c`` (``parse_txn``,
``insert_rows``, ``check_records``, ``meta_parts``, ``encode_txn``, ``frame``,
``frame_writes``, ``header_span``, ``txn_head``), which serves when built (``gateway.core.accel``;
``GATEWAY_PURE_PYTHON=1`` forces these); both are tested against each other and against
``SerializeToString``. Field keys come from ``gateway.v1.wire_tags`` (generated from the
.proto files), never raw literals.

Size: ~900 lines because it is the specification of one C file, ``_wire.c``, function for
function, and the differential tests pair the two function by function; splitting the Python
alone would break that one-to-one map. What would split it next, together with ``_wire.c``
(issue 53's "one C file per Python specification"): the transaction readers (``parse_txn``,
``txn_head``, ``insert_rows``, ``meta_parts``), the framing of requests (``frame_*``,
``insert_header_span``) and the leader's statement check (``WireChecker``,
``check_records``).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence, Set
from typing import Any

from gateway.core import accel
from gateway.core.logrules import date_problem, datetime_problem, time_problem
from gateway.core.messages import TypeTag
from gateway.core.rowops import CASE_OF_TYPE
from gateway.core.varint import (
    SMALL_VARINTS,
    decode_uvarint,
    encode_uvarint,
    read_varint64,
    skip_field,
)
from gateway.node.base.validation import TableSchema, check_statements, qualified_name
from gateway.node.state.store_ops import InsertShape, ParsedTxn
from gateway.v1 import gateway_pb2, statement_pb2, transaction_pb2, value_pb2
from gateway.v1 import wire_tags as W

__all__ = [
    "WireChecker",
    "ack_bytes",
    "column_code",
    "decode_entry",
    "encode_transaction",
    "encode_transaction_wire",
    "encode_transaction_wire_py",
    "frame_batch",
    "frame_batch_flagged",
    "frame_field",
    "frame_field_py",
    "frame_request",
    "frame_statements",
    "frame_statements_py",
    "frame_writes",
    "frame_writes_flagged",
    "frame_writes_flagged_py",
    "frame_writes_py",
    "gtid_bytes",
    "insert_header_span",
    "insert_header_span_py",
    "insert_rows",
    "insert_rows_py",
    "key_part",
    "meta_parts",
    "meta_parts_py",
    "parse_txn",
    "parse_txn_py",
    "put_pairs",
    "put_pairs_py",
    "retag_record",
    "row_tail",
    "single_field_end",
    "split_insert",
    "tag_of_code",
    "txn_head",
    "txn_head_py",
    "value_ok_py",
    "write_result",
]

FT = value_pb2.FieldType


def _byte(key: bytes) -> int:
    """A one-byte field key as an int, to compare with ``data[pos]`` (every key read here is
    one byte: field numbers below 16)."""
    if len(key) != 1:
        raise ValueError(f"field key {key!r} is not one byte")
    return key[0]


# Keys written and compared below, named by message and field (gateway.v1.wire_tags).
_GTID_SERVER_ID, _GTID_TRANS_ID = W.GTID_SERVER_ID_KEY, W.GTID_TRANS_ID_KEY
_TXN_GTID, _TXN_EPOCH, _TXN_AUTHOR = W.TRANSACTION_GTID_KEY, W.TRANSACTION_EPOCH_KEY, \
    W.TRANSACTION_AUTHOR_KEY
_TXN_START_TS, _TXN_COMMIT_TS = W.TRANSACTION_START_TIMESTAMP_NS_KEY, \
    W.TRANSACTION_COMMIT_TIMESTAMP_NS_KEY
_TXN_STATEMENTS, _TXN_IDEMPOTENCY_KEY = W.TRANSACTION_STATEMENTS_KEY, \
    W.TRANSACTION_IDEMPOTENCY_KEY_KEY
_TXN_SEGMENT_ID, _TXN_END_SEGMENT = W.TRANSACTION_SEGMENT_ID_KEY, W.TRANSACTION_END_SEGMENT_KEY
_STMT_INSERT = W.STATEMENT_INSERT_KEY
_INS_TABLE, _INS_KEY_FIELDS, _INS_FIELDS, _INS_RECORDS = (
    W.INSERT_STATEMENT_TABLE_KEY, W.INSERT_STATEMENT_KEY_FIELDS_KEY, W.INSERT_STATEMENT_FIELDS_KEY,
    W.INSERT_STATEMENT_RECORDS_KEY)
_REC_KEY_VALUES, _REC_AFTER_VALUES = W.INSERT_RECORD_KEY_VALUES_KEY, \
    W.INSERT_RECORD_AFTER_VALUES_KEY
_ROW_KEY_VALUES, _ROW_FIELDS, _ROW_VALUES = W.ROW_KEY_VALUES_KEY, W.ROW_FIELDS_KEY, \
    W.ROW_VALUES_KEY
_ROW_EPOCH, _ROW_AUTHOR, _ROW_GTID, _ROW_COMMIT_TS, _ROW_LOG_INDEX = (
    W.ROW_EPOCH_KEY, W.ROW_AUTHOR_KEY, W.ROW_GTID_KEY, W.ROW_COMMIT_TIMESTAMP_NS_KEY,
    W.ROW_LOG_INDEX_KEY)
_RES_GTID, _RES_EPOCH, _RES_COMMIT_TS, _RES_LOG_INDEX = (
    W.WRITE_RESULT_GTID_KEY, W.WRITE_RESULT_EPOCH_KEY, W.WRITE_RESULT_COMMIT_TIMESTAMP_NS_KEY,
    W.WRITE_RESULT_LOG_INDEX_KEY)
_V_NULL, _V_BOOL, _V_INT, _V_UINT = (_byte(W.VALUE_NULL_VALUE_KEY), _byte(W.VALUE_BOOL_VALUE_KEY),
                                     _byte(W.VALUE_INT_VALUE_KEY), _byte(W.VALUE_UINT_VALUE_KEY))
_V_DOUBLE, _V_DECIMAL, _V_STRING = (_byte(W.VALUE_DOUBLE_VALUE_KEY),
                                    _byte(W.VALUE_DECIMAL_VALUE_KEY),
                                    _byte(W.VALUE_STRING_VALUE_KEY))
_V_BYTES, _V_TIMESTAMP = _byte(W.VALUE_BYTES_VALUE_KEY), _byte(W.VALUE_TIMESTAMP_NS_KEY)
# the same keys as ints, for reading
_B_REC_KEY_VALUES, _B_REC_AFTER_VALUES = _byte(_REC_KEY_VALUES), _byte(_REC_AFTER_VALUES)
_B_INS_TABLE, _B_INS_KEY_FIELDS = _byte(_INS_TABLE), _byte(_INS_KEY_FIELDS)
_B_INS_FIELDS, _B_INS_RECORDS = _byte(_INS_FIELDS), _byte(_INS_RECORDS)
_B_STMT_INSERT, _B_TXN_STATEMENTS = _byte(_STMT_INSERT), _byte(_TXN_STATEMENTS)
_B_TXN_GTID, _B_TXN_EPOCH, _B_TXN_AUTHOR = _byte(_TXN_GTID), _byte(_TXN_EPOCH), _byte(_TXN_AUTHOR)
_B_TXN_START_TS, _B_TXN_COMMIT_TS = _byte(_TXN_START_TS), _byte(_TXN_COMMIT_TS)
_B_TXN_SEGMENT_ID, _B_TXN_END_SEGMENT = _byte(_TXN_SEGMENT_ID), _byte(_TXN_END_SEGMENT)
_B_TXN_IDEMPOTENCY_KEY = _byte(_TXN_IDEMPOTENCY_KEY)
_B_GTID_SERVER_ID, _B_GTID_TRANS_ID = _byte(_GTID_SERVER_ID), _byte(_GTID_TRANS_ID)
_B_BATCH_WRITES = _byte(W.WRITE_BATCH_REQUEST_WRITES_KEY)
_B_WRITE_STATEMENTS = _byte(W.WRITE_REQUEST_STATEMENTS_KEY)
_B_WRITE_CONDITIONS = _byte(W.WRITE_REQUEST_CONDITIONS_KEY)

_TXN = TypeTag.TRANSACTION

def retag_record(data: bytes) -> tuple[bytes, bytes] | None:
    """A serialized ``InsertRecord`` (key_values = 1, after_values = 2, both ``Value``) as
    ``(key values tagged as Row field 3, after values tagged as Row field 5)``; None if it holds
    anything else. Serialization writes fields in number order, so the parts are contiguous."""
    keys_out: list[bytes] = []
    vals_out: list[bytes] = []
    pos, n = 0, len(data)
    while pos < n:
        tag = data[pos]
        start = pos + 1
        length, pos = decode_uvarint(data, start)
        end = pos + length
        if tag == _B_REC_KEY_VALUES:
            keys_out.append(_ROW_KEY_VALUES + data[start:end])
        elif tag == _B_REC_AFTER_VALUES:
            vals_out.append(_ROW_VALUES + data[start:end])
        else:
            return None
        pos = end
    return b"".join(keys_out), b"".join(vals_out)


def _fields_of(data: bytes) -> list[tuple[int, int, int, int]] | None:
    """Top-level length-delimited fields of a serialized message as ``(tag byte, start of the
    tag, start of the payload, end)``; None if any field is not a one-byte-tag
    length-delimited one."""
    out = []
    pos, n = 0, len(data)
    while pos < n:
        tag = data[pos]
        if tag & 0x87 != 0x02:  # wire type 2, field number < 16
            return None
        start = pos
        length, pos = decode_uvarint(data, pos + 1)
        out.append((tag, start, pos, pos + length))
        pos += length
    if pos != n:
        return None
    return out


def split_insert(data: bytes) -> tuple[bytes, bytes, list[bytes]] | None:
    """A serialized ``InsertStatement`` (table = 1, key_fields = 2, fields = 3, records = 4)
    as ``(table + key_fields as Row fields 1-2, fields as Row field 4, record payloads)``;
    None if it holds anything else."""
    fields = _fields_of(data)
    if fields is None:
        return None
    head: list[bytes] = []
    mid: list[bytes] = []
    recs: list[bytes] = []
    for tag, start, body, end in fields:
        if tag in (_B_INS_TABLE, _B_INS_KEY_FIELDS):  # Row fields 1-2 have the same keys
            head.append(data[start:end])
        elif tag == _B_INS_FIELDS:
            mid.append(_ROW_FIELDS + data[start + 1:end])
        elif tag == _B_INS_RECORDS:
            recs.append(data[body:end])
        else:
            return None
    return b"".join(head), b"".join(mid), recs


_FIXED64 = struct.Struct("<Q")


def row_tail(meta: tuple[int, int, int], gtid: bytes, index: int) -> bytes:
    """Row fields 6-10 (epoch, author, gtid, commit_timestamp_ns, log_index) serialized as
    ``Row.SerializeToString()`` writes them (zero scalars omitted, the GTID always present)."""
    epoch, author, commit_ts = meta
    parts = []
    if epoch:
        parts.append(_ROW_EPOCH + encode_uvarint(epoch))
    if author:
        parts.append(_ROW_AUTHOR + encode_uvarint(author))
    parts.append(_ROW_GTID + encode_uvarint(len(gtid)) + gtid)
    if commit_ts:
        parts.append(_ROW_COMMIT_TS + _FIXED64.pack(commit_ts))
    if index:
        parts.append(_ROW_LOG_INDEX + encode_uvarint(index))
    return b"".join(parts)


def encode_transaction(txn: transaction_pb2.Transaction, idempotency_key: str = "") -> bytes:
    """The Raft entry payload of ``txn``: tag ``TRANSACTION`` + the serialized ``Transaction``.

    ``idempotency_key``, when given, is stored in ``txn.idempotency_key`` (the field of the log
    model) before serializing; an empty key leaves the field as it is."""
    if idempotency_key:
        txn.idempotency_key = idempotency_key
    return bytes((_TXN,)) + txn.SerializeToString(deterministic=True)


def encode_transaction_wire_py(server_id: int, trans_id: int, epoch: int, author: int,
                               start_ns: int, commit_ns: int, statements: bytes,
                               idempotency_key: str = "") -> bytes:
    """:func:`encode_transaction` of ``Transaction(gtid=Gtid(server_id, trans_id), epoch,
    author, start_timestamp_ns, commit_timestamp_ns, statements, segment_id=1,
    end_segment=True, idempotency_key)`` assembled from its parts, ``statements`` already
    serialized as the transaction's field 6 (``validation.frame_statements``): the same bytes
    without building and serializing the message again."""
    gtid = gtid_bytes(server_id, trans_id)
    parts = [bytes((_TXN,)), _TXN_GTID, encode_uvarint(len(gtid)), gtid]
    if epoch:
        parts.append(_TXN_EPOCH + encode_uvarint(epoch))
    if author:
        parts.append(_TXN_AUTHOR + encode_uvarint(author))
    if start_ns:
        parts.append(_TXN_START_TS + _FIXED64.pack(start_ns))
    if commit_ns:
        parts.append(_TXN_COMMIT_TS + _FIXED64.pack(commit_ns))
    parts.append(statements)
    parts.append(_TXN_SEGMENT_ID + b"\x01" + _TXN_END_SEGMENT + b"\x01")  # 1, true
    if idempotency_key:
        key = idempotency_key.encode()
        parts.append(_TXN_IDEMPOTENCY_KEY + encode_uvarint(len(key)) + key)
    return b"".join(parts)


def decode_entry(data: bytes) -> tuple[transaction_pb2.Transaction | None, str]:
    """``(transaction, idempotency key)`` of an entry payload; ``(None, "")`` if the entry
    holds no transaction (no-op, epoch marker, anything else)."""
    if not data or data[0] != _TXN:
        return None, ""
    txn = transaction_pb2.Transaction.FromString(data[1:])
    return txn, txn.idempotency_key



_SINT_BIAS = 1 << 63
_U64BE = struct.Struct(">Q")
_U64LE = struct.Struct("<Q")
_U64_MASK = (1 << 64) - 1
_FIX64_AT = struct.Struct("<Q").unpack_from


def _txn_walk(data: bytes) -> tuple[int, int, int, int, int, list[tuple[int, int]], str, int,
                                    bool] | None:
    """Every top-level field of a transaction entry payload (``data[0]`` is the type tag, not
    read here) from its wire bytes: ``(server id, trans id, epoch, author, commit ts,
    statement spans, idempotency key, segment_id, end_segment)``; None for an unknown field or
    wire type (a rollback among them), a multi-byte tag, a varint past 64 bits, a field
    running past the end, a key that is not UTF-8. Shared by the two specifications below."""
    pos, n = 1, len(data)
    sid = tid = epoch = author = commit_ts = segment = 0
    end_segment = False
    stmts: list[tuple[int, int]] = []
    idem = ""
    try:
        while pos < n:
            tag = data[pos]
            pos += 1
            wt = tag & 7
            if wt == 0:
                v, pos = read_varint64(data, pos, n)
                if tag == _B_TXN_EPOCH:
                    epoch = v
                elif tag == _B_TXN_AUTHOR:
                    author = v
                elif tag == _B_TXN_SEGMENT_ID:
                    segment = v
                elif tag == _B_TXN_END_SEGMENT:
                    end_segment = v != 0
                else:
                    return None
            elif wt == 2:
                ln, pos = read_varint64(data, pos, n)
                end = pos + ln
                if end > n:
                    return None
                if tag == _B_TXN_STATEMENTS:
                    stmts.append((pos, end))
                elif tag == _B_TXN_GTID:
                    p = pos
                    while p < end:
                        t = data[p]
                        v, p = read_varint64(data, p + 1, end)
                        if t == _B_GTID_SERVER_ID:
                            sid = v
                        elif t == _B_GTID_TRANS_ID:
                            tid = v
                        else:
                            return None
                elif tag == _B_TXN_IDEMPOTENCY_KEY:
                    idem = data[pos:end].decode()
                else:
                    return None
                pos = end
            elif wt == 1:
                if pos + 8 > n:
                    return None
                if tag == _B_TXN_COMMIT_TS:
                    commit_ts = _FIX64_AT(data, pos)[0]
                elif tag != _B_TXN_START_TS:
                    return None
                pos += 8
            else:
                return None
    except ValueError:  # a bad varint, a key that is not UTF-8 (UnicodeDecodeError)
        return None
    if pos != n:  # no type tag at all
        return None
    return sid, tid, epoch, author, commit_ts, stmts, idem, segment, end_segment


def parse_txn_py(data: bytes) -> ParsedTxn | None:
    """The parts of a transaction entry payload (``data[0]`` is the type tag) the fast apply
    path needs, read from the wire bytes without building messages: ``(server id, trans id,
    epoch, author, commit ts, statement spans, idempotency key)``; None for anything unusual
    (unknown fields, a rollback, a multi-byte tag, trailing garbage), which takes the general
    path. The specification of ``gateway.node._wire.parse_txn`` (which returns the plain
    tuple of the same fields)."""
    got = _txn_walk(data)
    if got is None:
        return None
    sid, tid, epoch, author, commit_ts, stmts, idem, _, _ = got
    return ParsedTxn(sid, tid, epoch, author, commit_ts, stmts, idem)


def txn_head_py(data: bytes) -> tuple[int, int, int] | None:
    """``(server id, trans id, commit ts)`` of a transaction entry payload (``data[0]`` is the
    type tag) that holds a whole transaction in one segment -- ``segment_id`` 1, ``end_segment``
    set, no rollback -- read from the top-level fields without parsing the statements; None
    for anything else (another segment, a rollback, an unknown field or wire type, a key that
    is not UTF-8, malformed bytes), which the caller parses in full. What an applier needs to
    admit the transaction before (or without) building its message. The specification of
    ``gateway.node._wire.txn_head``."""
    if not data or data[0] != _TXN:
        return None
    got = _txn_walk(data)
    if got is None:
        return None
    sid, tid, _, _, commit_ts, _, _, segment, end_segment = got
    if segment != 1 or not end_segment:
        return None
    return sid, tid, commit_ts

def gtid_bytes(sid: int, tid: int) -> bytes:
    """``Gtid(server_id=sid, trans_id=tid).SerializeToString()``."""
    out = b""
    if sid:
        out = _GTID_SERVER_ID + encode_uvarint(sid)
    if tid:
        out += _GTID_TRANS_ID + encode_uvarint(tid)
    return out


_varint_cache: dict[int, bytes] = {}


def _varint_cached(v: int) -> bytes:
    """``encode_uvarint(v)`` for values that repeat (epochs, the author): a small cache."""
    if v < 128:
        return SMALL_VARINTS[v]
    got = _varint_cache.get(v)
    if got is None:
        if len(_varint_cache) > 256:
            _varint_cache.clear()
        got = _varint_cache[v] = encode_uvarint(v)
    return got


def meta_parts_py(sid: int, tid: int, epoch: int, author: int, commit_ts: int, index: int
                   ) -> tuple[bytes, bytes, bytes]:
    """``(serialized Gtid, Row fields 6-10 as row_tail gives them, serialized WriteResult as
    write_result gives it)`` of one transaction, sharing the encoded numbers. The
    specification of ``gateway.node._wire.meta_parts``; every number is in 0..2**64-1."""
    gtid = (_GTID_SERVER_ID + _varint_cached(sid) if sid else b"") + (
        _GTID_TRANS_ID + encode_uvarint(tid) if tid else b"")
    glen = SMALL_VARINTS[len(gtid)] if len(gtid) < 128 else encode_uvarint(len(gtid))
    ev = _varint_cached(epoch) if epoch else b""
    ts = _FIXED64.pack(commit_ts) if commit_ts else b""
    iv = encode_uvarint(index) if index else b""
    tail = b"".join((
        _ROW_EPOCH + ev if epoch else b"",
        _ROW_AUTHOR + _varint_cached(author) if author else b"",
        _ROW_GTID, glen, gtid,
        _ROW_COMMIT_TS + ts if commit_ts else b"",
        _ROW_LOG_INDEX + iv if index else b""))
    result = b"".join((
        _RES_GTID, glen, gtid,
        _RES_EPOCH + ev if epoch else b"",
        _RES_COMMIT_TS + ts if commit_ts else b"",
        _RES_LOG_INDEX + iv if index else b""))
    return gtid, tail, result


def insert_rows_py(data: bytes, pos: int, end: int, prefix: bytes, head: bytes, mid: bytes,
                    tail: bytes, epoch: int, author: int, commit_ts: int
                    ) -> list[tuple[bytes, bytes, int, int, int]] | None:
    """Store operations ``(key, row, epoch, author, commit_ts)`` for the ``InsertRecord``
    fields in ``data[pos:end]`` of an insert statement whose header gave ``prefix`` (row key
    prefix), ``head`` and ``mid`` (``Row`` fields before the key values and between key and
    after values) and whose transaction gave ``tail``; None when a record needs the general
    path. The specification of the C accelerator ``gateway.node._wire.insert_rows``."""
    join = b"".join
    out = []
    try:
        while pos < end:
            if data[pos] != _B_INS_RECORDS:
                return None
            ln, r_start = decode_uvarint(data, pos + 1)
            r_end = r_start + ln
            if r_end > end:
                return None
            kparts: list[bytes] = []
            kvals: list[bytes] = []
            vals: list[bytes] = []
            p = r_start
            while p < r_end:
                tag = data[p]
                vl, v_start = decode_uvarint(data, p + 1)
                v_end = v_start + vl
                if v_end > r_end:
                    return None
                if tag == _B_REC_KEY_VALUES:
                    kp = key_part(data, v_start, v_end)
                    if kp is None:
                        return None
                    kparts.append(kp)
                    kvals.append(_ROW_KEY_VALUES + data[p + 1:v_end])
                elif tag == _B_REC_AFTER_VALUES:
                    vals.append(_ROW_VALUES + data[p + 1:v_end])
                else:
                    return None
                p = v_end
            out.append((prefix + join(kparts), join((head, join(kvals), mid, join(vals), tail)),
                        epoch, author, commit_ts))
            pos = r_end
    except (IndexError, ValueError):
        return None
    return out




def key_part(data: bytes, start: int, end: int) -> bytes | None:
    """The store-key encoding (``keys.encode_key``: type bytes 02-08 below) of the ``Value``
    ``data[start:end]`` read from its wire bytes, when it is exactly one non-null value field;
    None otherwise (the general path decides: a null key is rejected there, odd encodings go
    through the message)."""
    if end <= start:
        return None
    tag = data[start]
    p = start + 1
    if tag in (_V_STRING, _V_DECIMAL, _V_BYTES):  # decimals are canonical text
        ln, p = decode_uvarint(data, p)
        if p + ln != end:
            return None
        return (b"\x07" if tag == _V_BYTES else b"\x06") + data[p:end].replace(
            b"\x00", b"\x00\xff") + b"\x00\x01"
    if tag in (_V_INT, _V_UINT, _V_BOOL):  # int_value is zigzag (sint64)
        z, p = decode_uvarint(data, p)
        if p != end or z >= 1 << 64:
            return None
        if tag == _V_INT:
            return b"\x03" + _U64BE.pack(((z >> 1) ^ -(z & 1)) + _SINT_BIAS)
        if tag == _V_UINT:
            return b"\x04" + _U64BE.pack(z)
        return b"\x02\x01" if z else b"\x02\x00"
    if tag in (_V_DOUBLE, _V_TIMESTAMP) and p + 8 == end:  # timestamp_ns is sfixed64
        (bits,) = _U64LE.unpack_from(data, p)
        if tag == _V_TIMESTAMP:
            return b"\x08" + _U64BE.pack((bits + _SINT_BIAS) & _U64_MASK)
        bits = bits ^ _U64_MASK if bits >> 63 else bits | _SINT_BIAS
        return b"\x05" + _U64BE.pack(bits)
    return None




def write_result(gtid: bytes, epoch: int, commit_ts: int, index: int) -> bytes:
    """``WriteResult(gtid, epoch, commit_timestamp_ns, log_index).SerializeToString()`` from
    the serialized GTID (the GTID always present, zero scalars omitted)."""
    parts = [_RES_GTID + encode_uvarint(len(gtid)) + gtid]
    if epoch:
        parts.append(_RES_EPOCH + encode_uvarint(epoch))
    if commit_ts:
        parts.append(_RES_COMMIT_TS + _FIXED64.pack(commit_ts))
    if index:
        parts.append(_RES_LOG_INDEX + encode_uvarint(index))
    return b"".join(parts)




# -- the leader's check from wire bytes ------------------------------------------------------------

#: The first (tag) byte of a serialized ``Value`` per case (decimals are not here: they are
#: parsed by the full check).
_VALUE_TAG = {"null_value": _V_NULL, "bool_value": _V_BOOL, "int_value": _V_INT,
              "uint_value": _V_UINT, "double_value": _V_DOUBLE, "string_value": _V_STRING,
              "bytes_value": _V_BYTES, "timestamp_ns": _V_TIMESTAMP}


def frame_field_py(key: bytes, parts: list[bytes]) -> bytes:
    """Every bytes of ``parts`` as the length-delimited field of one-byte key ``key``, joined:
    a repeated bytes or message field serialized (a ``WriteBatchResponse`` is its results)."""
    return b"".join([key + encode_uvarint(len(p)) + p for p in parts])


_ACK_SEQ, _ACK_RESULT = W.STREAM_WRITE_ACK_SEQ_KEY, W.STREAM_WRITE_ACK_RESULT_KEY


def ack_bytes(seq: int, result: bytes) -> bytes:
    """``StreamWriteAck(seq=seq, result=WriteResult.FromString(result)).SerializeToString()``
    from the result's bytes."""
    head = _ACK_SEQ + encode_uvarint(seq) if seq else b""
    return head + _ACK_RESULT + encode_uvarint(len(result)) + result


def frame_statements_py(statements: Sequence[statement_pb2.Statement]) -> bytes:
    """``statements`` serialized as the ``statements`` field (6) of a ``Transaction``: the
    bytes a serialized transaction holds between its timestamps and its segment fields."""
    return frame_field_py(_TXN_STATEMENTS, [s.SerializeToString() for s in statements])


def _frame_write_py(data: bytes, pos: int, end: int, flags: list[bool] | None = None) -> bytes:
    """:func:`frame_statements` of the serialized ``WriteRequest`` ``data[pos:end]``: each of
    its ``statements`` fields (1) retagged as the transaction's field 6, in order; its other
    fields (the idempotency key, unknown fields) left out. With ``flags``, appends whether it
    holds a ``conditions`` field."""
    parts = []
    has = False
    while pos < end:
        tag, pos = read_varint64(data, pos, end)
        after = skip_field(data, pos, tag, end)
        if tag == _B_WRITE_STATEMENTS:
            parts.append(_TXN_STATEMENTS + data[pos:after])
        elif tag == _B_WRITE_CONDITIONS:
            has = True
        pos = after
    if flags is not None:
        flags.append(has)
    return b"".join(parts)


def frame_writes_py(data: bytes, batch: bool, writes_key: int = _B_BATCH_WRITES) -> list[bytes]:
    """The statements of serialized writes framed as :func:`frame_statements` frames them,
    from one serialization of the whole request instead of one per statement (materializing
    and serializing each statement of a parsed request is CPU on the leader for every write):
    ``data`` is
    a serialized ``WriteBatchRequest`` (``batch``; one element per ``writes`` field, in order;
    ``writes_key`` is that field's one-byte key, ``StreamWriteRequest``'s for a stream's
    request) or ``WriteRequest`` (one element). ValueError on bytes that are not a
    well-formed message (a group, a truncated field, a varint past 64 bits): callers frame
    such writes statement by statement. The specification of ``gateway.node._wire.frame_writes``."""
    return _frame_writes_py(data, batch, writes_key, None)


def frame_writes_flagged_py(data: bytes, batch: bool, writes_key: int = _B_BATCH_WRITES
                            ) -> tuple[list[bytes], list[int]]:
    """:func:`frame_writes_py`, and the indices of the writes holding a ``conditions`` field
    (``WriteRequest`` field 3), found in the same walk: a parsed write's ``conditions`` is
    non-empty exactly then, so the caller reads that field only for those writes. The
    specification of ``gateway.node._wire.frame_writes_flagged``."""
    flags: list[bool] = []
    frames = _frame_writes_py(data, batch, writes_key, flags)
    return frames, [i for i, has in enumerate(flags) if has]


def _frame_writes_py(data: bytes, batch: bool, writes_key: int, flags: list[bool] | None
                     ) -> list[bytes]:
    n = len(data)
    if not batch:
        return [_frame_write_py(data, 0, n, flags)]
    out = []
    pos = 0
    while pos < n:
        tag, pos = read_varint64(data, pos, n)
        after = skip_field(data, pos, tag, n)
        if tag == writes_key:
            _, body = read_varint64(data, pos, after)
            out.append(_frame_write_py(data, body, after, flags))
        pos = after
    return out

def insert_header_span_py(data: bytes, start: int, end: int) -> tuple[int, int] | None:
    """For the serialized ``Statement`` ``data[start:end]``: when it is exactly one insert
    (field 1) whose header fields (table, key fields, fields) all precede its records,
    ``(start of the InsertStatement body, position of its first InsertRecord field)`` -- the
    second is ``end`` when it has no records; None otherwise. A varint cut off by the end of
    ``data`` raises ``IndexError`` (callers treat it as "not this shape").

    The one walk of an insert's header shared by the leader's wire check
    (:class:`WireChecker`) and the apply fast path (``state_machine``)."""
    if start >= end or data[start] != _B_STMT_INSERT:
        return None
    ln, body = decode_uvarint(data, start + 1)
    if body + ln != end:
        return None
    p = body
    while p < end and data[p] != _B_INS_RECORDS:
        if data[p] not in (_B_INS_TABLE, _B_INS_KEY_FIELDS, _B_INS_FIELDS):
            return None
        ln, q = decode_uvarint(data, p + 1)
        p = q + ln
    if p > end:
        return None
    return body, p


def single_field_end(data: bytes, pos: int, end: int, tag: int) -> bool:
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
#: tag (``double_value``), and its rule is always checked (never NaN; a key never -0.0).
CODE_UUID, CODE_DATE, CODE_TIME, CODE_DATETIME = 0x81, 0x82, 0x83, 0x84
_TAG_OF_CODE = {CODE_UUID: _V_BYTES, CODE_DATE: _V_STRING, CODE_TIME: _V_STRING,
                CODE_DATETIME: _V_STRING}
_TEXT_RULE_OF_CODE = {CODE_DATE: date_problem, CODE_TIME: time_problem,
                      CODE_DATETIME: datetime_problem}
_CODE_OF_TYPE: dict[int, int] = {FT.FIELD_TYPE_UUID: CODE_UUID, FT.FIELD_TYPE_DATE: CODE_DATE,
                 FT.FIELD_TYPE_TIME: CODE_TIME, FT.FIELD_TYPE_DATETIME: CODE_DATETIME,
                 FT.FIELD_TYPE_DECIMAL: 0, FT.FIELD_TYPE_JSON: 0}
_NAN_EXPONENT, _MANTISSA, _NEG_ZERO = 0x7FF << 52, (1 << 52) - 1, 1 << 63


def tag_of_code(code: int) -> int:
    """The tag byte of a value of a column of wire-check code ``code`` (:func:`column_code`;
    0 for a code no value matches)."""
    return _TAG_OF_CODE.get(code, code)


def column_code(field_type: int) -> int:
    """The wire check's code of a column of ``field_type``: the tag byte of its case, a
    ``CODE_*`` for a type whose rule the wire check applies, 0 for a type it leaves to the
    full check (DECIMAL, JSON: parsing them is not worth a C twin)."""
    code = _CODE_OF_TYPE.get(field_type)
    if code is not None:
        return code
    return _VALUE_TAG.get(CASE_OF_TYPE.get(field_type, ""), 0)


def value_ok_py(raw: bytes, v: int, v_end: int, code: int, key: bool) -> bool:
    """Whether the one value field ``raw[v:v_end]``, whose tag matches ``code``, satisfies
    the rule of ``code`` (``logrules``)."""
    if code == _V_DOUBLE:
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
            if raw[pos] != _B_INS_RECORDS:
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
                    if tag != _B_REC_KEY_VALUES or got != tag_of_code(code):
                        return False
                elif i < nk + nv:
                    code = vcodes[i - nk]
                    if tag != _B_REC_AFTER_VALUES or (got != tag_of_code(code)
                                                      and got != _V_NULL):
                        return False
                else:
                    return False
                if not single_field_end(raw, v, v_end, got):
                    return False
                if got != _V_NULL and not value_ok_py(raw, v, v_end, code, i < nk):
                    return False
                i += 1
                r = v_end
            if i != nk + nv:
                return False
            pos = r_end
    except IndexError:
        return False
    return True




class WireChecker:
    """:func:`check_statements` for the leader, from the statements' wire bytes
    (:func:`frame_statements`): an insert statement's header (table, key fields, fields) is
    checked in full once and cached with the table's schema object; later statements of that
    shape only have every record's values checked from the bytes (each value one field of its
    column's case, a value column may be null, and valid for its type: see
    :func:`column_code`; so a table with NOT NULL columns is never cached). Anything else --
    another statement kind, an unseen shape, a value not in the expected case or invalid, a
    DECIMAL or JSON column, a schema that changed -- runs the full :func:`check_statements`,
    which gives the verdict and the error. The wire check never accepts what the full check
    rejects."""

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        # header bytes -> (qualified name, schema object, key codes, value codes)
        self._shapes: dict[bytes, InsertShape] = {}

    def check(self, raw: bytes, statements: Sequence[statement_pb2.Statement],
              schemas: dict[str, TableSchema], *, admin: bool = False
              ) -> list[tuple[str, TableSchema]]:
        """``check_statements(statements, schemas, admin=admin)``; ``raw`` is
        ``frame_statements(statements)``. (Only inserts take the wire check, and what an
        insert may write does not depend on ``admin``.)"""
        heads = self._fast(raw, schemas)
        if heads is not None:
            return []
        created = check_statements(statements, schemas, admin=admin)
        self._learn(raw, statements, schemas, created)
        return created

    def _heads(self, raw: bytes) -> list[tuple[bytes, int, int]] | None:
        """Per statement ``(header bytes, first record position, end)``; None if a statement
        is not an insert or is malformed."""
        out = []
        pos, n = 0, len(raw)
        while pos < n:
            if raw[pos] != _B_TXN_STATEMENTS:
                return None
            ln, s = decode_uvarint(raw, pos + 1)
            end = s + ln
            if end > n:
                return None
            span = insert_header_span(raw, s, end)
            if span is None:
                return None  # not an insert of this shape
            b, p = span
            if p == end:
                return None  # no records
            out.append((raw[b:p], p, end))
            pos = end
        return out if out else None

    def _fast(self, raw: bytes, schemas: dict[str, TableSchema]
              ) -> list[tuple[bytes, int, int]] | None:
        try:
            heads = self._heads(raw)
            if heads is None:
                return None
            shapes = self._shapes
            for hdr, pos, end in heads:
                shape = shapes.get(hdr)
                if shape is None:
                    return None
                name, schema, ktags, vtags = shape
                if schemas.get(name) is not schema \
                        or not _check_records(raw, pos, end, ktags, vtags):
                    return None
            return heads
        except IndexError:
            return None

    def _learn(self, raw: bytes, statements: Sequence[statement_pb2.Statement],
               schemas: dict[str, TableSchema], created: list[tuple[str, TableSchema]]
               ) -> None:
        """Cache the shapes of ``statements`` (just checked in full) whose tables existed.
        A cached shape whose schema object is no longer the table's in ``schemas`` is
        replaced: two proposals that created the same table concurrently give two equal
        schema objects, and the leader keeps the later one -- a shape kept with the earlier
        would send every later write of that shape to the full check (it did, for the
        leader's whole term, depending on which request came first: docs/benchmarks.md,
        "The leader's wire check keeps its fast path")."""
        try:
            heads = self._heads(raw)
        except IndexError:
            return
        if heads is None or len(heads) != len(statements):
            return
        made = {name for name, _ in created}
        for (hdr, _, _), stmt in zip(heads, statements, strict=True):
            cached = self._shapes.get(hdr)
            if cached is not None and schemas.get(cached.table) is cached.schema:
                continue
            body = stmt.insert
            name = qualified_name(body.table)
            schema = schemas.get(name)
            # a NOT NULL column (docs/schema.md): the wire check lets any value be null
            if schema is None or name in made or schema.not_null:
                continue
            ktags = bytes(column_code(f.type) for f in body.key_fields)
            vtags = bytes(column_code(f.type) for f in body.fields)
            if 0 in ktags or 0 in vtags:
                continue  # a type whose values need the full check
            if len(self._shapes) >= self._limit:
                self._shapes.clear()
            self._shapes[hdr] = InsertShape(name, schema, ktags, vtags)


#: The field keys ``_wire.meta_parts`` writes, in its order.
_META_KEYS = b"".join((_GTID_SERVER_ID, _GTID_TRANS_ID, _ROW_EPOCH, _ROW_AUTHOR, _ROW_GTID,
                       _ROW_COMMIT_TS, _ROW_LOG_INDEX, _RES_GTID, _RES_EPOCH, _RES_COMMIT_TS,
                       _RES_LOG_INDEX))
_accel = accel.load("gateway.node._wire")  # None: the Python specifications serve
# Each public name below is the C function when built, else its Python specification; it is
# typed as the specification, which the differential tests hold the C function to.
meta_parts: Callable[[int, int, int, int, int, int], tuple[bytes, bytes, bytes]] = (
    functools.partial(_accel.meta_parts, _META_KEYS) if _accel else meta_parts_py)
insert_rows: Callable[[bytes, int, int, bytes, bytes, bytes, bytes, int, int, int],
                      list[tuple[bytes, bytes, int, int, int]] | None] = (
    _accel.insert_rows if _accel else insert_rows_py)
parse_txn: Callable[[bytes], ParsedTxn | None] = _accel.parse_txn if _accel else parse_txn_py
#: The type tag and field keys ``_wire.txn_head`` reads, in its order.
_HEAD_KEYS = bytes((_TXN, _B_TXN_GTID, _B_GTID_SERVER_ID, _B_GTID_TRANS_ID, _B_TXN_EPOCH,
                    _B_TXN_AUTHOR, _B_TXN_START_TS, _B_TXN_COMMIT_TS, _B_TXN_STATEMENTS,
                    _B_TXN_SEGMENT_ID, _B_TXN_END_SEGMENT, _B_TXN_IDEMPOTENCY_KEY))
txn_head: Callable[[bytes], tuple[int, int, int] | None] = (
    functools.partial(_accel.txn_head, _HEAD_KEYS) if _accel else txn_head_py)
#: The type tag and field keys ``_wire.encode_txn`` writes, in its order.
_TXN_KEYS = b"".join((bytes((_TXN,)), _TXN_GTID, _GTID_SERVER_ID, _GTID_TRANS_ID, _TXN_EPOCH,
                      _TXN_AUTHOR, _TXN_START_TS, _TXN_COMMIT_TS, _TXN_SEGMENT_ID,
                      _TXN_END_SEGMENT, _TXN_IDEMPOTENCY_KEY))


if _accel is not None:
    _encode_txn: Callable[..., bytes] = _accel.encode_txn

    def _encode_transaction_wire_c(server_id: int, trans_id: int, epoch: int, author: int,
                                   start_ns: int, commit_ns: int, statements: bytes,
                                   idempotency_key: str = "") -> bytes:
        return _encode_txn(_TXN_KEYS, server_id, trans_id, epoch, author, start_ns,
                           commit_ns, statements, idempotency_key.encode())

    encode_transaction_wire = _encode_transaction_wire_c
else:
    encode_transaction_wire = encode_transaction_wire_py
#: The field keys ``_wire.header_span`` reads, in its order.
_HEADER_KEYS = bytes((_B_STMT_INSERT, _B_INS_TABLE, _B_INS_KEY_FIELDS, _B_INS_FIELDS,
                      _B_INS_RECORDS))
insert_header_span: Callable[[bytes, int, int], tuple[int, int] | None] = (
    functools.partial(_accel.header_span, _HEADER_KEYS) if _accel else insert_header_span_py)
frame_field: Callable[[bytes, list[bytes]], bytes] = _accel.frame if _accel else frame_field_py


def frame_statements(statements: Sequence[statement_pb2.Statement]) -> bytes:
    """:func:`frame_statements_py` through :data:`frame_field` (``_wire.frame`` when built)."""
    return frame_field(_TXN_STATEMENTS, [s.SerializeToString() for s in statements])
#: The field keys ``_wire.frame_writes`` reads and writes, in its order.
_FRAME_WRITES_KEYS = bytes((_B_BATCH_WRITES, _B_WRITE_STATEMENTS, _B_TXN_STATEMENTS))
frame_writes: Callable[[bytes, bool], list[bytes]] = (
    functools.partial(_accel.frame_writes, _FRAME_WRITES_KEYS) if _accel else frame_writes_py)
_B_STREAM_WRITES = _byte(W.STREAM_WRITE_REQUEST_WRITES_KEY)
_FRAME_STREAM_KEYS = bytes((_B_STREAM_WRITES, _B_WRITE_STATEMENTS, _B_TXN_STATEMENTS))
_frame_stream_writes: Callable[[bytes, bool], list[bytes]] = (
    functools.partial(_accel.frame_writes, _FRAME_STREAM_KEYS) if _accel
    else functools.partial(frame_writes_py, writes_key=_B_STREAM_WRITES))


def frame_request(req: gateway_pb2.WriteRequest, data: bytes | None = None) -> bytes:
    """``frame_statements(req.statements)``: the statements' bytes sliced out of ``data``,
    the bytes ``req`` was parsed from when the caller kept them (then nothing is serialized:
    the statements go into the entry as the client sent them), else out of one
    serialization of ``req``."""
    try:
        return frame_writes(req.SerializeToString() if data is None else data, False)[0]
    except ValueError:  # a group among unknown fields: statement by statement
        return frame_statements(req.statements)


def frame_batch(req: gateway_pb2.WriteBatchRequest | gateway_pb2.StreamWriteRequest,
                data: bytes | None = None) -> list[bytes]:
    """``[frame_statements(w.statements) for w in req.writes]`` (a ``WriteBatch`` or a
    ``StreamWrite`` request), sliced out of ``data`` as :func:`frame_request` does."""
    frame = _frame_stream_writes if type(req) is gateway_pb2.StreamWriteRequest \
        else frame_writes
    try:
        return frame(req.SerializeToString() if data is None else data, True)
    except ValueError:
        return [frame_statements(w.statements) for w in req.writes]


_NONE_FLAGGED: frozenset[int] = frozenset()
_FRAME_WRITES_FLAGGED_KEYS = _FRAME_WRITES_KEYS + bytes((_B_WRITE_CONDITIONS,))
_FRAME_STREAM_FLAGGED_KEYS = _FRAME_STREAM_KEYS + bytes((_B_WRITE_CONDITIONS,))
frame_writes_flagged: Callable[[bytes, bool], tuple[list[bytes], list[int]]] = (
    functools.partial(_accel.frame_writes_flagged, _FRAME_WRITES_FLAGGED_KEYS) if _accel
    else frame_writes_flagged_py)
_frame_stream_writes_flagged: Callable[[bytes, bool], tuple[list[bytes], list[int]]] = (
    functools.partial(_accel.frame_writes_flagged, _FRAME_STREAM_FLAGGED_KEYS) if _accel
    else functools.partial(frame_writes_flagged_py, writes_key=_B_STREAM_WRITES))


def frame_batch_flagged(req: gateway_pb2.WriteBatchRequest | gateway_pb2.StreamWriteRequest,
                        data: bytes | None = None) -> tuple[list[bytes], Set[int]]:
    """:func:`frame_batch`, and the indices of the writes whose ``conditions`` is not empty,
    from the same walk of the bytes: a plain write's parsed ``conditions`` field need never be
    read (reading a repeated field of a parsed message builds its container)."""
    frame = _frame_stream_writes_flagged if type(req) is gateway_pb2.StreamWriteRequest \
        else frame_writes_flagged
    try:
        frames, flagged = frame(req.SerializeToString() if data is None else data, True)
    except ValueError:
        frames = [frame_statements(w.statements) for w in req.writes]
        flagged = [i for i, w in enumerate(req.writes) if w.conditions]
    return frames, (set(flagged) if flagged else _NONE_FLAGGED)
_check_records: Callable[[bytes, int, int, bytes, bytes], bool] = (
    _accel.check_records if _accel else _check_records_py)


def put_pairs_py(d: dict[Any, Any], rows: Sequence[tuple[Any, ...]]) -> None:
    """``d[row[0]] = row[1]`` for every row of ``rows`` (tuples of two or more items), in
    order: what an apply adds to its overlay for the rows it wrote -- ``d.update(map(
    itemgetter(0, 1), rows))`` without a pair per row. Raises TypeError for a row that is not
    such a tuple (the rows before it are in ``d``). The specification of ``_wire.put_pairs``."""
    for i, row in enumerate(rows):
        if not isinstance(row, tuple) or len(row) < 2:
            raise TypeError(f"put_pairs: row {i} is not a tuple of two or more")
        d[row[0]] = row[1]


put_pairs: Callable[[dict[Any, Any], Sequence[tuple[Any, ...]]], None] = (
    _accel.put_pairs if _accel else put_pairs_py)
