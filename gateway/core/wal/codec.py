"""Payload codec of the WAL's records: a type-tag byte, then a protobuf message.

The messages are those of ``proto/gateway/v1/wal.proto`` (the generated ``gateway.v1.wal_pb2``
documents them too). They are encoded and decoded here by hand, in protobuf wire format,
because the generated classes cost several microseconds per entry on the append path. The
encoders emit exactly what ``SerializeToString(deterministic=True)`` emits (fields in number
order, zero values omitted); the decoders accept any valid encoding (any field order, repeated
fields last-wins, unknown fields skipped), so a future writer may add fields.

Type tags (the WAL's block of the storage-metadata range 32-63 in ``gateway.core.messages``)::

    32  ENTRY           WalEntry          {index=1, term=2, type=3, data=4}
    33  SEGMENT_HEADER  WalSegmentHeader  {first_index=1, format_version=2}
    34  SEGMENT_INDEX   WalSegmentIndex   {first_index=1, count=2, bounds=3, term_runs=4,
                                           last_marker=5 (an embedded WalHardState)}
    35  SEGMENT_FOOTER  WalSegmentFooter  {first_index=1, count=2, index_offset=3, index_end=4,
                                           index_crc32c=5, format_version=6}
    36  LOG_START       WalLogStart       {first_index=1, prev_term=2}
    37  HARD_STATE      WalHardState      {term=1, vote=2, commit=3, seq=4, log_end=5}
                    (a batch's commit marker in segments; saved by structural operations in
                    the meta file)

Decoders raise `PayloadError` (a ``ValueError``) with the offset inside the payload; callers add
the file and the record's offset.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from gateway.core.varint import SMALL_VARINTS, encode_uvarint

__all__ = [
    "FORMAT_VERSION",
    "LogStart",
    "Marker",
    "PayloadError",
    "SegmentFooter",
    "SegmentHeader",
    "SegmentIndex",
    "WalEntry",
    "WalHardState",
    "WalTag",
    "decode_fields",
    "decode_marker",
    "decode_wal_entry",
    "encode_entry",
    "encode_marker",
    "encode_message",
    "entry_head",
]

#: Version written in segment headers and footers; readers reject larger ones.
FORMAT_VERSION = 1


class WalTag(IntEnum):
    """Type tags of the WAL's record payloads (reserved in the storage-metadata range)."""

    ENTRY = 32
    SEGMENT_HEADER = 33
    SEGMENT_INDEX = 34
    SEGMENT_FOOTER = 35
    LOG_START = 36
    HARD_STATE = 37


class PayloadError(ValueError):
    """A record payload is not a valid WAL message. ``offset`` is inside the payload."""

    def __init__(self, reason: str, offset: int = 0) -> None:
        self.reason = reason
        self.offset = offset
        super().__init__(f"{reason} (payload byte {offset})")


class WalEntry(NamedTuple):
    """One Raft log entry as the WAL stores it. Attribute names match ``gateway.raft``'s
    ``Entry``, so either can be appended."""

    index: int  # type: ignore[assignment]  # shadows tuple.index: the name is the format's
    term: int
    type: int = 0
    data: bytes = b""


class WalHardState(NamedTuple):
    """Raft's hard state: current term, vote in that term (0 = none), commit index."""

    term: int = 0
    vote: int = 0
    commit: int = 0


class Marker(NamedTuple):
    """A saved hard state with its write sequence number (``seq``: +1 per save, the highest
    wins) and, in the meta file, ``log_end`` (every entry up to it was complete when saved)."""

    term: int = 0
    vote: int = 0
    commit: int = 0
    seq: int = 0
    log_end: int = 0

    @property
    def hard_state(self) -> WalHardState:
        """The Raft hard state alone."""
        return WalHardState(self.term, self.vote, self.commit)


class LogStart(NamedTuple):
    """Where the log begins after compaction: its first index and the term of the entry
    before it (0 when ``first_index`` is 1)."""

    first_index: int = 1
    prev_term: int = 0


class SegmentHeader(NamedTuple):
    first_index: int
    format_version: int = FORMAT_VERSION


class SegmentIndex(NamedTuple):
    first_index: int
    count: int  # type: ignore[assignment]  # shadows tuple.count: the name is the format's
    bounds: bytes
    term_runs: bytes
    last_marker: bytes = b""
    """The encoded ``WalHardState`` message (no tag byte) of the segment's last marker."""


class SegmentFooter(NamedTuple):
    first_index: int
    count: int  # type: ignore[assignment]  # shadows tuple.count: the name is the format's
    index_offset: int
    index_end: int
    index_crc32c: int
    format_version: int = FORMAT_VERSION


# --------------------------------------------------------------------------------------------
# wire format primitives

def encode_message(tag: WalTag, fields: list[tuple[int, int | bytes]]) -> bytes:
    """Tag byte + deterministic protobuf encoding of ``fields`` (``(number, value)`` pairs in
    ascending number order; ints are varints, bytes are length-delimited; zero/empty omitted).
    """
    out = [SMALL_VARINTS[tag]]
    for number, value in fields:
        if isinstance(value, int):
            if value:
                out.append(SMALL_VARINTS[number << 3])
                out.append(encode_uvarint(value))
        elif value:
            out.append(SMALL_VARINTS[(number << 3) | 2])
            out.append(encode_uvarint(len(value)))
            out.append(bytes(value))
    return b"".join(out)


def encode_entry(index: int, term: int, type_: int, data: bytes) -> bytes:
    """The ``ENTRY`` payload for one entry: :func:`entry_head` followed by ``data``."""
    return entry_head(index, term, type_, len(data)) + data


def entry_head(index: int, term: int, type_: int, data_len: int) -> bytes:
    """The ``ENTRY`` payload of an entry whose data is ``data_len`` bytes, up to the data
    itself (the hot path of ``append``: the data follows it in the same record without
    being concatenated, see ``records.encode_record``'s ``prefix``)."""
    out = [b"\x20\x08", encode_uvarint(index)]  # tag 32, field 1 (index is never 0)
    if term:
        out.append(b"\x10")
        out.append(encode_uvarint(term))
    if type_:
        out.append(b"\x18")
        out.append(encode_uvarint(type_))
    if data_len:
        out.append(b"\x22")
        out.append(encode_uvarint(data_len))
    return b"".join(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise PayloadError("truncated varint", pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise PayloadError("varint longer than 10 bytes", pos)


def decode_fields(payload: bytes, start: int = 1) -> dict[int, int | bytes]:
    """Parse the protobuf message in ``payload[start:]`` into ``{field number: value}``.

    Varints come back as ints, length-delimited fields as bytes; fixed32/fixed64 fields are
    skipped (the WAL's messages have none). Raises `PayloadError` on malformed input.
    """
    fields: dict[int, int | bytes] = {}
    pos = start
    n = len(payload)
    while pos < n:
        key, pos = _read_varint(payload, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise PayloadError("field number 0", pos)
        if wire == 0:
            fields[number], pos = _read_varint(payload, pos)
        elif wire == 2:
            length, pos = _read_varint(payload, pos)
            if pos + length > n:
                raise PayloadError("length-delimited field runs past the payload", pos)
            fields[number] = payload[pos : pos + length]
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise PayloadError(f"unsupported wire type {wire}", pos)
        if pos > n:
            raise PayloadError("fixed-width field runs past the payload", n)
    return fields


def _int(fields: dict[int, int | bytes], number: int) -> int:
    value = fields.get(number, 0)
    if not isinstance(value, int):
        raise PayloadError(f"field {number} must be a varint")
    return value


def _bytes(fields: dict[int, int | bytes], number: int) -> bytes:
    value = fields.get(number, b"")
    if not isinstance(value, bytes):
        raise PayloadError(f"field {number} must be length-delimited")
    return value


def decode_wal_entry(payload: bytes) -> WalEntry:
    """Decode an ``ENTRY`` payload (tag byte included)."""
    if not payload or payload[0] != WalTag.ENTRY:
        raise PayloadError("not an entry record")
    fields = decode_fields(payload)
    return WalEntry(_int(fields, 1), _int(fields, 2), _int(fields, 3), _bytes(fields, 4))


def decode_header(payload: bytes) -> SegmentHeader:
    f = decode_fields(payload)
    return SegmentHeader(_int(f, 1), _int(f, 2))


def decode_index(payload: bytes) -> SegmentIndex:
    f = decode_fields(payload)
    return SegmentIndex(_int(f, 1), _int(f, 2), _bytes(f, 3), _bytes(f, 4), _bytes(f, 5))


def decode_footer(payload: bytes) -> SegmentFooter:
    f = decode_fields(payload)
    return SegmentFooter(_int(f, 1), _int(f, 2), _int(f, 3), _int(f, 4), _int(f, 5), _int(f, 6))


def decode_log_start(payload: bytes) -> LogStart:
    f = decode_fields(payload)
    return LogStart(_int(f, 1), _int(f, 2))


def decode_hard_state(payload: bytes) -> WalHardState:
    f = decode_fields(payload)
    return WalHardState(_int(f, 1), _int(f, 2), _int(f, 3))


def decode_marker(payload: bytes, start: int = 1) -> Marker:
    """Decode a ``HARD_STATE`` payload (tag byte included; ``start=0`` for the bare message
    embedded in a segment index) with its ``seq`` and ``log_end``."""
    f = decode_fields(payload, start)
    return Marker(_int(f, 1), _int(f, 2), _int(f, 3), _int(f, 4), _int(f, 5))


def encode_header(h: SegmentHeader) -> bytes:
    return encode_message(WalTag.SEGMENT_HEADER, [(1, h.first_index), (2, h.format_version)])


def encode_index(ix: SegmentIndex) -> bytes:
    return encode_message(
        WalTag.SEGMENT_INDEX, [(1, ix.first_index), (2, ix.count), (3, ix.bounds),
                               (4, ix.term_runs), (5, ix.last_marker)]
    )


def encode_footer(ft: SegmentFooter) -> bytes:
    return encode_message(
        WalTag.SEGMENT_FOOTER,
        [(1, ft.first_index), (2, ft.count), (3, ft.index_offset), (4, ft.index_end),
         (5, ft.index_crc32c), (6, ft.format_version)],
    )


def encode_log_start(ls: LogStart) -> bytes:
    return encode_message(WalTag.LOG_START, [(1, ls.first_index), (2, ls.prev_term)])


def encode_hard_state(hs: WalHardState) -> bytes:
    return encode_message(WalTag.HARD_STATE, [(1, hs.term), (2, hs.vote), (3, hs.commit)])


def encode_marker(m: Marker) -> bytes:
    """The ``HARD_STATE`` payload of ``m`` (tag byte included)."""
    return encode_message(WalTag.HARD_STATE, [(1, m.term), (2, m.vote), (3, m.commit),
                                              (4, m.seq), (5, m.log_end)])
