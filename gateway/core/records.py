"""The checksummed, word-stuffed record stream (Backtrace's ``record_stream``), in Python.

A *record* is ``crc:u32 LE | generation:u32 LE | payload``, word-stuffed (:mod:`.stuffing`) and
followed by the separator ``FE FD``. ``crc`` is CRC-32C (Castagnoli) computed the way the
reference computes it with ``_mm_crc32_*``: initial value 0, no final inversion, over the whole
unstuffed record with the crc field set to ``FF FF FF FF``. The start and the end of a buffer
also count as separators. See ``docs/formats/record-stream.md`` for a worked example.

Reading follows the reference iterator exactly, so that both recover the same records from the
same damaged stream:

- Leading zero bytes are skipped (a punched or zero-filled hole at the head of a file); the
  first record may start right after them without a separator.
- Every later record starts after a separator and ends at the next separator (or the end of the
  buffer). A chunk that does not unstuff, is shorter than the 8-byte header, or fails its CRC
  is skipped; reading resumes at the next separator. Nothing here ever raises on damaged data.
- A record *belongs* to the byte position of the separator before it (or, for the first record,
  to its own first byte). ``scan(buf, start, stop)`` yields exactly the records whose position
  lies in ``[start, stop)``, so any split of a buffer into adjacent ranges reads every record
  exactly once.

One deliberate difference from the reference: it rejects records whose stuffed size exceeds
1024 bytes; here records of any size (MBs) are written and read. A reference reader skips such
records as damaged; every record the reference writes is read identically here.

When the C accelerator :mod:`gateway.core._recordstream` is built it serves the hot loops; the
pure-Python code below is the specification and the fallback (set ``GATEWAY_PURE_PYTHON=1`` to
force it). Both are tested against each other.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol, Self, TypeVar, cast

import crc32c as _crc32c

from gateway.core import accel
from gateway.core.stuffing import SEPARATOR, StuffingError, stuff, unstuff

__all__ = [
    "HEADER_SIZE",
    "SEPARATOR",
    "DamagedRange",
    "Record",
    "StreamReport",
    "crc32c_raw",
    "decode_record",
    "encode_record",
    "encode_records",
    "first_nonzero",
    "scan",
    "verify",
]

#: Size of the unstuffed record header (crc + generation).
HEADER_SIZE = 8
_HEADER = struct.Struct("<II")
_CRC_FILL = b"\xff\xff\xff\xff"
_crc = _crc32c.crc32c
#: ``crc32c`` (standard form) of the four ``FF`` bytes that stand in for the crc field, starting
#: from the reference's raw initial state 0 (standard-form value ``0xFFFFFFFF``).
_AFTER_FILL = _crc(_CRC_FILL, 0xFFFFFFFF)
_MAX_GENERATION = 0xFFFFFFFF
#: Longest stuffed record that can be a single terminal run (length byte + 251 bytes).
MAX_SHORT = 252


def crc32c_raw(data: bytes | bytearray | memoryview, state: int = 0) -> int:
    """CRC-32C as the reference computes it: initial ``state`` (default 0), no inversions."""
    return _crc(data, state ^ 0xFFFFFFFF) ^ 0xFFFFFFFF


class Record(NamedTuple):
    """One valid record found in a buffer.

    ``offset`` is the position of the record's first stuffed byte (just after its separator);
    ``end`` is the position just past its last stuffed byte (where the next separator starts,
    or the end of the buffer). ``position`` is the byte the record belongs to for range splits:
    its separator's position, or ``offset`` for the record that starts the stream (the first
    nonzero byte) without a separator.
    """

    offset: int
    end: int
    generation: int
    payload: bytes
    position: int


class DamagedRange(NamedTuple):
    """A half-open byte range ``[start, end)`` holding bytes that are not a valid record."""

    start: int
    end: int


class StreamReport(NamedTuple):
    """What :func:`verify` found: valid records, their payload bytes, and damaged ranges.

    ``torn_tail`` is true when the last damaged range reaches the end of the buffer (typical of
    an interrupted append), as opposed to damage followed by valid records.
    """

    records: int
    payload_bytes: int
    damaged: list[DamagedRange]
    torn_tail: bool

    @property
    def ok(self) -> bool:
        return not self.damaged


def _encode_py(payload: bytes | bytearray | memoryview, generation: int = 0) -> bytes:
    """Pure-Python :func:`encode_record`."""
    if not 0 <= generation <= _MAX_GENERATION:
        raise ValueError(f"generation {generation} does not fit in 32 bits")
    data = bytes(payload)
    gen = generation.to_bytes(4, "little")
    crc = _crc(gen + data, _AFTER_FILL) ^ 0xFFFFFFFF
    return stuff(crc.to_bytes(4, "little") + gen + data) + SEPARATOR


def _decode_py(stuffed: bytes | bytearray) -> tuple[int, bytes] | None:
    """Pure-Python :func:`decode_record`."""
    size = len(stuffed)
    if 9 <= size <= MAX_SHORT and stuffed[0] == size - 1:
        # one terminal run: the common case for short records (bytes() copies only a
        # bytearray's slice: payloads are bytes whatever the buffer, as the C scanner's are)
        body = bytes(stuffed[1:])
    else:
        try:
            body = unstuff(stuffed)
        except StuffingError:
            return None
        if len(body) < HEADER_SIZE:
            return None
    crc, generation = _HEADER.unpack_from(body)
    if _crc(body[4:], _AFTER_FILL) ^ 0xFFFFFFFF != crc:
        return None
    return generation, body[HEADER_SIZE:]


#: What the record functions read: any bytes-like object (a memory map included).
Buffer = bytes | bytearray | memoryview | mmap.mmap
#: A buffer with ``find`` and slicing to bytes (what ``_as_searchable`` makes of a ``Buffer``).
_Searchable = bytes | bytearray | mmap.mmap


class _Ordered(Protocol):
    """A search key: ordered against keys of its own type."""

    def __lt__(self, other: Self, /) -> bool: ...

    def __ge__(self, other: Self, /) -> bool: ...


_K = TypeVar("_K", bound=_Ordered)

def _first_nonzero_py(buf: _Searchable, start: int = 0) -> int:
    n = len(buf)
    pos = start
    block = 4096
    zeros = bytes(block)
    while pos + block <= n and buf[pos : pos + block] == zeros:
        pos += block
    while pos < n and buf[pos] == 0:
        pos += 1
    return pos


def _chunks_py(buf: _Searchable, start: int, stop: int) -> Iterator[tuple[int, int, int]]:
    """Yield ``(position, offset, end)`` of every chunk whose position is in ``[start, stop)``.

    A chunk is the bytes between a separator (or the first nonzero byte) and the next
    separator (or the end of the buffer): the candidate encoding of one record.
    """
    n = len(buf)
    head = _first_nonzero_py(buf)
    pos = max(start, head)
    if pos >= stop:
        return
    find = buf.find
    if pos == head:
        data = pos
        position = pos
    else:
        sep = find(SEPARATOR, pos)
        if sep < 0 or sep >= stop:
            return
        data = sep + 2
        position = sep
    while True:
        nxt = find(SEPARATOR, data)
        if nxt < 0:
            nxt = n
        yield position, data, nxt
        if nxt >= stop or nxt >= n:
            return
        position = nxt
        data = nxt + 2


def _scan_py(buf: _Searchable, start: int, stop: int) -> Iterator[Record]:
    for position, offset, end in _chunks_py(buf, start, stop):
        if end - offset < 9:
            continue
        decoded = _decode_py(buf[offset:end])
        if decoded is not None:
            yield Record(offset, end, decoded[0], decoded[1], position)


def _as_searchable(buf: Buffer) -> _Searchable:
    """Return ``buf`` itself if it supports ``find`` and slicing to bytes, else a bytes copy."""
    if isinstance(buf, bytes | bytearray) or hasattr(buf, "find"):
        return cast(_Searchable, buf)
    return bytes(buf)


class _RecordStreamC(Protocol):
    """The functions of the C accelerator ``_recordstream.c`` (their Python specifications
    are the ``_py`` functions of this module)."""

    def encode_record(self, payload: bytes | bytearray | memoryview, generation: int,
                      prefix: bytes, /) -> bytes: ...

    def encode_records(self, payloads: list[bytes], generation: int, /) -> bytes: ...

    def decode_record(self, stuffed: bytes | bytearray | memoryview, /
                      ) -> tuple[int, bytes] | None: ...

    def scan_batch(self, buf: _Searchable, start: int, stop: int, head: int,
                   record: type[Record], limit: int, /) -> tuple[list[Record], int]: ...


_accel = cast("_RecordStreamC | None", accel.load("gateway.core._recordstream"))

#: True when the C accelerator serves encode/scan.
ACCELERATED = _accel is not None


def encode_record(payload: bytes | bytearray | memoryview, generation: int = 0,
                  prefix: bytes = b"") -> bytes:
    """Return the stuffed record for ``prefix + payload`` followed by the ``FE FD`` separator.

    These are exactly the bytes the reference writer appends for the same payload and
    generation. ``generation`` is an arbitrary 32-bit value stored in the record header.
    ``prefix`` saves the caller a concatenation (and a copy of a large ``payload``) when the
    record's payload is a small head followed by data it already holds.
    """
    if _accel is not None:
        return _accel.encode_record(payload, generation, prefix)
    return _encode_py(prefix + bytes(payload) if prefix else payload, generation)


def encode_records(payloads: list[bytes], generation: int = 0) -> bytes:
    """Concatenation of :func:`encode_record` for each payload (one call, one buffer)."""
    if _accel is not None:
        return _accel.encode_records(payloads, generation)
    return b"".join([_encode_py(p, generation) for p in payloads])


def decode_record(stuffed: bytes | bytearray | memoryview) -> tuple[int, bytes] | None:
    """Decode one record's stuffed bytes (without separators) to ``(generation, payload)``.

    Returns ``None`` when the bytes are not a valid record (bad stuffing, short, bad CRC).
    """
    if _accel is not None:
        return _accel.decode_record(stuffed)
    return _decode_py(bytes(stuffed))


def first_nonzero(buf: Buffer, start: int = 0) -> int:
    """Position of the first nonzero byte at or after ``start`` (``len(buf)`` if none)."""
    return _first_nonzero_py(_as_searchable(buf), start)


def scan(buf: Buffer, start: int = 0, stop: int | None = None) -> Iterator[Record]:
    """Iterate the valid records of ``buf`` whose position lies in ``[start, stop)``.

    ``buf`` is any bytes-like object (``bytes``, ``bytearray``, ``mmap``, ``memoryview``).
    Damaged bytes are skipped silently; use :func:`verify` to report them. Never raises on
    damaged data.
    """
    buf = _as_searchable(buf)
    n = len(buf)
    stop = n if stop is None else min(stop, n)
    start = max(start, 0)
    if start >= stop:
        return iter(())
    if _accel is not None:
        return _scan_accel(buf, start, stop)
    return _scan_py(buf, start, stop)


def _scan_accel(buf: _Searchable, start: int, stop: int) -> Iterator[Record]:
    head = _first_nonzero_py(buf)
    assert _accel is not None  # only called when it is
    batch = _accel.scan_batch
    while True:
        records, resume = batch(buf, start, stop, head, Record, 4096)
        yield from records
        if resume < 0:
            return
        start = resume


def verify(buf: Buffer, start: int = 0, stop: int | None = None) -> StreamReport:
    """Check every chunk of ``buf`` and report valid records and damaged byte ranges.

    A chunk that is empty (two adjacent separators) or entirely zero bytes is not damage;
    anything else that is not a valid record is. Adjacent damaged chunks are merged into one
    range that includes the separators between them.
    """
    buf = _as_searchable(buf)
    n = len(buf)
    stop = n if stop is None else min(stop, n)
    records = 0
    payload_bytes = 0
    damaged: list[DamagedRange] = []
    for _position, offset, end in _chunks_py(buf, max(start, 0), stop):
        if offset == end:
            continue
        decoded = decode_record(buf[offset:end]) if end - offset >= 9 else None
        if decoded is not None:
            records += 1
            payload_bytes += len(decoded[1])
            continue
        if _first_nonzero_py(buf, offset) >= end:
            continue  # a zero-filled hole
        if damaged and damaged[-1].end + 2 >= offset:
            damaged[-1] = DamagedRange(damaged[-1].start, end)
        else:
            damaged.append(DamagedRange(offset, end))
    torn = bool(damaged) and damaged[-1].end >= n
    return StreamReport(records, payload_bytes, damaged, torn)


def search(
    buf: Buffer,
    target: _K,
    key: Callable[[Record], _K | None],
    *,
    k: int = 0,
    start: int = 0,
    stop: int | None = None,
    interpolate: Callable[[_K], float] | None = None,
) -> Record | None:
    """Return the first record (in stream order) whose ``key(record) >= target``, or ``None``.

    The stream must be *k-sorted* on the key: for records ``i < j`` with ``j - i > k``,
    ``key(i) <= key(j)`` (``k = 0`` means sorted). ``key`` may return ``None`` for records
    that carry no key; those are ignored. The search probes byte offsets (binary search, or
    interpolation search when ``interpolate`` maps a key to a number) and never needs an index:
    every probe resynchronises on the next separator. Cost: O(log(size)) probes of ``k + 1``
    keyed records each, then a short linear scan.
    """
    buf = _as_searchable(buf)
    n = len(buf)
    stop = n if stop is None else min(stop, n)
    lo, hi = max(start, 0), stop
    lo_key: float | None = None
    hi_key: float | None = None
    window = k + 1
    # Invariant: every keyed record whose position is < lo has key < target.
    while hi - lo > 4096:
        if interpolate is not None and lo_key is not None and hi_key is not None and (
            hi_key > lo_key
        ):
            frac = (interpolate(target) - lo_key) / (hi_key - lo_key)
            frac = min(max(frac, 0.125), 0.875)  # keep progress even on skewed keys
            mid = lo + int((hi - lo) * frac)
        else:
            mid = (lo + hi) // 2
        keys: list[_K] = []
        last_end = mid
        for record in scan(buf, mid, stop):
            kv = key(record)
            if kv is None:
                continue
            keys.append(kv)
            last_end = record.end
            if len(keys) == window:
                break
        if keys and all(kv < target for kv in keys):
            lo = last_end
            if interpolate is not None:
                lo_key = interpolate(keys[-1])
        else:
            hi = mid
            if interpolate is not None and keys:
                hi_key = interpolate(min(keys))
    for record in scan(buf, lo, stop):
        kv = key(record)
        if kv is not None and kv >= target:
            return record
    return None
