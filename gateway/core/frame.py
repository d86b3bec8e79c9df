"""The transport frame of the 2008 protobuf binary log (Mats Kindahl, "The missing pieces").

A frame carries one type-tagged message over a byte stream that is not self-synchronising
(RabbitMQ message bodies, ``gateway log export``, sockets)::

    +----------------+----------+-----------------+--------------------+
    | length (1-5 B) | tag (u8) | message (length) | CRC-32 (u32, LE)   |
    +----------------+----------+-----------------+--------------------+

- ``length`` is the size of ``message`` only (not of itself, the tag or the checksum), in the
  seed's compact encoding (``encode_length``): one byte for 2..255; otherwise a marker byte L
  (0 or 1) followed by 2**(L+1) little-endian bytes.
- ``tag`` is the type-tag byte (``gateway.core.messages.TypeTag``); this module treats it as an
  opaque byte 0..255.
- the CRC-32 is ``zlib.crc32`` (CRC-32/ISO-HDLC, as in gzip and Ethernet) of every byte of the
  frame before it -- the length bytes, the tag and the message -- stored as 4 raw bytes,
  least significant first.

Lengths 0 and 1 cannot take the one-byte form (those byte values are the markers), so they take
the two-byte long form: ``00 00 00`` and ``00 01 00``. The seed's ``length_decode`` reads them
back correctly; its ``length_encode`` asserts ``length > 1`` only because its messages always
had a header, while an all-default proto3 message serializes to zero bytes.

The largest length is ``MAX_LENGTH`` = 2**31 - 1. The seed's decoder reads the fourth byte of a
4-byte long form as ``(int)byte << 24``, which overflows a 32-bit ``int`` (and sign-extends into
``size_t``) once bit 31 is set, and it reads the marker 2 (8-byte form) as the length 2; so no
longer length can be read by it. It is also protobuf's own message-size limit.

Errors (all are ``ValueError``, each with the absolute ``offset`` of the frame)::

    FrameError
    ├── TruncatedFrameError     the buffer ends inside the frame
    ├── LengthOverflowError     the length field holds more than the allowed maximum
    └── ChecksumMismatchError   the stored CRC-32 differs from the computed one

The format is specified, with a worked example, in docs/formats/transport-frame.md.
"""

from __future__ import annotations

import io
import operator
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

__all__ = [
    "CRC_SIZE",
    "MAX_LENGTH",
    "ChecksumMismatchError",
    "Frame",
    "FrameError",
    "FrameReader",
    "LengthOverflowError",
    "TruncatedFrameError",
    "decode_frame",
    "decode_length",
    "encode_frame",
    "encode_length",
    "frame_span",
]

MAX_LENGTH = 2**31 - 1
"""The largest message length a frame may declare (see the module docstring for why)."""

CRC_SIZE = 4
"""Size of the trailing CRC-32 in bytes."""

_SHORT_MIN = 2  # the one-byte form holds 2..255; 0 and 1 are the markers
_SHORT_MAX = 255
_LONG_MARKER_2_BYTES = 0
_LONG_MARKER_4_BYTES = 1

Buffer = bytes | bytearray | memoryview


class FrameError(ValueError):
    """A frame cannot be decoded. ``offset`` is the absolute offset of the frame's first byte."""

    def __init__(self, reason: str, *, offset: int) -> None:
        self.reason = reason
        self.offset = offset
        super().__init__(f"{reason} (frame at offset {offset})")


class TruncatedFrameError(FrameError):
    """The buffer ends before the frame does (a torn tail or a short read)."""


class LengthOverflowError(FrameError):
    """The length field declares more than ``MAX_LENGTH`` (or the reader's limit)."""


class ChecksumMismatchError(FrameError):
    """The CRC-32 stored in the frame does not match its bytes: the frame is damaged."""


def encode_length(n: int) -> bytes:
    """Return the compact encoding of the length ``n`` (0 <= n <= ``MAX_LENGTH``).

    2..255 take one byte; 0, 1 and 256..65535 take ``00`` + 2 bytes LE; 65536..MAX_LENGTH take
    ``01`` + 4 bytes LE. These are exactly the bytes the seed's ``length_encode`` emits for
    every length it accepts (it rejects 0 and 1). Raises ``ValueError`` outside the range.
    """
    n = operator.index(n)
    if _SHORT_MIN <= n <= _SHORT_MAX:
        return bytes((n,))
    if 0 <= n <= 0xFFFF:
        return bytes((_LONG_MARKER_2_BYTES,)) + n.to_bytes(2, "little")
    if 0 <= n <= MAX_LENGTH:
        return bytes((_LONG_MARKER_4_BYTES,)) + n.to_bytes(4, "little")
    raise ValueError(f"frame length {n} is outside 0..{MAX_LENGTH}")


def decode_length(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a compact length at ``buf[pos]``; return ``(length, position after it)``.

    Accepts everything the seed's ``length_decode`` reads correctly: a first byte above 1 is
    the length itself; 0 and 1 are markers for 2 and 4 little-endian bytes (non-minimal long
    forms such as ``00 2A 00`` are accepted, as the seed does). Raises
    ``TruncatedFrameError`` when ``buf`` ends inside the field and ``LengthOverflowError`` for
    a 4-byte value above ``MAX_LENGTH``; both carry ``offset`` = ``pos``.
    """
    return _decode_length(buf, pos, pos)


def encode_frame(type_tag: int, message: Buffer) -> bytes:
    """Return the frame holding ``message`` (the serialized body) under ``type_tag`` (0..255).

    Raises ``ValueError`` for a tag outside 0..255 or a message longer than ``MAX_LENGTH``.
    """
    type_tag = operator.index(type_tag)
    if not 0 <= type_tag <= 0xFF:
        raise ValueError(f"type tag {type_tag} is outside 0..255")
    head = encode_length(len(message)) + bytes((type_tag,))
    crc = zlib.crc32(message, zlib.crc32(head))
    return b"".join((head, message, crc.to_bytes(CRC_SIZE, "little")))


def decode_frame(buf: Buffer, pos: int = 0, *, base_offset: int = 0) -> tuple[int, bytes, int]:
    """Decode the frame starting at ``buf[pos]``; return ``(type_tag, message, next_pos)``.

    ``next_pos`` is the position just after the frame's CRC. ``base_offset`` is where ``buf``
    starts in its stream and only makes the ``offset`` of errors absolute
    (``base_offset + pos``). Raises ``TruncatedFrameError``, ``LengthOverflowError`` or
    ``ChecksumMismatchError``; never returns a message whose CRC did not match.
    """
    tag, start, end, nxt = frame_span(buf, pos, base_offset=base_offset)
    return tag, bytes(memoryview(buf)[start:end]), nxt


def frame_span(buf: Buffer, pos: int = 0, *, base_offset: int = 0) -> tuple[int, int, int, int]:
    """:func:`decode_frame` without copying the message out: ``(type_tag, start, end,
    next_pos)`` with the message at ``buf[start:end]``, checked as ``decode_frame`` checks it
    (same errors)."""
    where = base_offset + pos
    length, body = _decode_length(buf, pos, where)
    end = body + 1 + length
    if end + CRC_SIZE > len(buf):
        raise TruncatedFrameError(
            f"truncated frame: needs {end + CRC_SIZE - pos} bytes, "
            f"{len(buf) - pos} available",
            offset=where,
        )
    view = memoryview(buf)
    stored = int.from_bytes(view[end : end + CRC_SIZE], "little")
    computed = zlib.crc32(view[pos:end])
    if stored != computed:
        raise ChecksumMismatchError(
            f"CRC-32 mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}",
            offset=where,
        )
    return buf[body], body + 1, end, end + CRC_SIZE


def _decode_length(buf: Buffer, pos: int, where: int) -> tuple[int, int]:
    """``decode_length`` with errors reported at absolute offset ``where``."""
    if pos >= len(buf):
        raise TruncatedFrameError("truncated length: no bytes", offset=where)
    first = buf[pos]
    if first >= _SHORT_MIN:
        return first, pos + 1
    size = 2 << first  # 1 << (marker + 1)
    if pos + 1 + size > len(buf):
        raise TruncatedFrameError(
            f"truncated length: marker {first} needs {size} bytes, {len(buf) - pos - 1} available",
            offset=where,
        )
    length = int.from_bytes(buf[pos + 1 : pos + 1 + size], "little")
    if length > MAX_LENGTH:
        raise LengthOverflowError(
            f"length {length} exceeds the maximum {MAX_LENGTH}", offset=where
        )
    return length, pos + 1 + size


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: ``offset`` is the absolute offset of its first byte, ``size`` the
    number of bytes it occupies (length field through CRC)."""

    offset: int
    type_tag: int
    message: bytes
    size: int

    @property
    def end(self) -> int:
        """The absolute offset just after the frame (where the next one starts)."""
        return self.offset + self.size


class FrameReader:
    """Iterates the frames of a binary stream, in order, reading it incrementally.

    ``source`` is any object with ``read(n)`` returning ``bytes`` (a file opened ``"rb"``, a
    socket's ``makefile("rb")``, ``io.BytesIO``); it need not be seekable. ``offset`` is the
    absolute position of the stream's current byte (default: ``source.tell()`` if available,
    else 0) and is only used to report offsets. ``max_length`` caps the message length the
    reader will buffer, so a damaged length cannot make it wait for or allocate gigabytes.

    Iteration stops cleanly at end of stream between frames. A damaged or torn frame raises the
    matching ``FrameError`` with its absolute offset; frames are not self-synchronising, so the
    reader does not try to resynchronise after one (``FrameError.offset`` tells where to look).
    """

    def __init__(
        self,
        source: BinaryIO | io.RawIOBase | io.BufferedIOBase,
        *,
        offset: int | None = None,
        max_length: int = MAX_LENGTH,
        chunk_size: int = 1 << 16,
    ) -> None:
        if offset is None:
            try:
                offset = source.tell()
            except (AttributeError, OSError):
                offset = 0
        # read1 returns what is available instead of blocking for a full chunk (sockets).
        self._read1 = getattr(source, "read1", None)
        self._read = source.read
        self._buf = bytearray()
        self._pos = 0  # position in _buf of the next frame
        self._base = offset  # absolute offset of _buf[0]
        self._max_length = min(max_length, MAX_LENGTH)
        self._chunk_size = chunk_size

    @property
    def offset(self) -> int:
        """Absolute offset of the next frame (just after the last one yielded)."""
        return self._base + self._pos

    def __iter__(self) -> Iterator[Frame]:
        return self

    def __next__(self) -> Frame:
        if self._pos < len(self._buf):
            # Fast path: the whole frame is usually buffered already.
            try:
                tag, message, end = decode_frame(self._buf, self._pos, base_offset=self._base)
            except TruncatedFrameError:
                pass
            else:
                if len(message) <= self._max_length:
                    return self._advance(tag, message, end)
        if not self._fill(1):
            raise StopIteration
        first = self._buf[self._pos]
        self._fill(1 if first >= _SHORT_MIN else 1 + (2 << first))
        where = self.offset
        length, body = _decode_length(self._buf, self._pos, where)
        if length > self._max_length:
            raise LengthOverflowError(
                f"length {length} exceeds the reader's limit {self._max_length}", offset=where
            )
        self._fill(body - self._pos + 1 + length + CRC_SIZE)
        tag, message, end = decode_frame(self._buf, self._pos, base_offset=self._base)
        return self._advance(tag, message, end)

    def _advance(self, tag: int, message: bytes, end: int) -> Frame:
        """Return the frame ending at ``end`` and move past it, trimming consumed bytes."""
        frame = Frame(
            offset=self._base + self._pos, type_tag=tag, message=message, size=end - self._pos
        )
        self._pos = end
        if self._pos >= self._chunk_size:
            del self._buf[: self._pos]
            self._base += self._pos
            self._pos = 0
        return frame

    def _fill(self, need: int) -> bool:
        """Read until ``need`` bytes follow ``_pos`` or the stream ends; True if they do."""
        missing = self._pos + need - len(self._buf)
        while missing > 0:
            if self._read1 is not None:
                chunk = self._read1(max(missing, self._chunk_size))
            else:
                chunk = self._read(missing)
            if not chunk:
                return False
            self._buf += chunk
            missing -= len(chunk)
        return True
