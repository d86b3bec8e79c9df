"""Constants and codecs shared by the LSM writers and readers (the "one small header").

Every LSM file is a stuffed record stream (:mod:`gateway.core.records`); each record payload
starts with a type-tag byte from the range ``0xE0``-``0xEF``, reserved for LSM-internal records
(see ``docs/formats/sstable.md``). The bodies are fixed little-endian layouts rather than
protobuf: a point read searches a data block's payload in place (``find_cell``: one C binary
search, or the Python specification), and a scan cuts all its pairs out with a single
``struct.unpack_from`` per block.

Stored value (the *cell*) of every key, in memtables, blocks and the WAL::

    flags:u8 [epoch:u64 author:u32 commit_ts:u64] value-bytes

``flags`` bit 0 marks a tombstone (no value bytes), bit 1 says the 20 metadata bytes follow.
A cell with all metadata zero omits them, so a plain ``put`` costs one byte of overhead.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left
from typing import NamedTuple

from gateway.core.accel import load
from gateway.core.varint import encode_uvarint, read_varint64, skip_field

__all__ = [
    "FLAG_META",
    "FLAG_TOMBSTONE",
    "FRAMED_ALL",
    "FRAMED_STOPPED",
    "FRAMED_UNSHARED",
    "TAG_BLOCK",
    "TAG_BLOOM",
    "TAG_FOOTER",
    "TAG_INDEX",
    "TAG_MANIFEST_EDIT",
    "TAG_SNAPSHOT_FILE",
    "TAG_SNAPSHOT_HEADER",
    "TAG_TABLE_HEADER",
    "TAG_WAL_BATCH",
    "TOMBSTONE",
    "RowVersion",
    "StoredRow",
    "block_last_key",
    "decode_block",
    "decode_block_py",
    "decode_pairs",
    "encode_block",
    "encode_cell",
    "encode_cells",
    "encode_cells_py",
    "encode_pairs",
    "entry_of",
    "find_cell",
    "frame_values",
    "frame_values_py",
    "may_hold_tombstones",
    "prefix_end",
    "tombstone_meta",
    "value_of",
    "version_of",
]

#: SSTable header record: magic and format version (first record of every table).
TAG_TABLE_HEADER = 0xE0
#: SSTable data block: many sorted key/cell pairs.
TAG_BLOCK = 0xE1
#: SSTable sparse index: last key, offset and length of every data block.
TAG_INDEX = 0xE2
#: SSTable bloom filter.
TAG_BLOOM = 0xE3
#: SSTable footer: where the index and bloom records are, key range and counts.
TAG_FOOTER = 0xE4
#: Manifest version edit (JSON body).
TAG_MANIFEST_EDIT = 0xE8
#: Optional write-ahead log: one atomic write batch.
TAG_WAL_BATCH = 0xE9
#: Snapshot export: header (applied index, layout) and one record per file with its checksum.
TAG_SNAPSHOT_HEADER = 0xEC
TAG_SNAPSHOT_FILE = 0xED

FLAG_TOMBSTONE = 0x01
FLAG_META = 0x02
_META = struct.Struct("<BQIQ")
_META_SIZE = _META.size  # 21: flags + 20 metadata bytes
#: The cell of a delete without metadata.
TOMBSTONE = b"\x01"
_PLAIN = b"\x00"
_U64 = (1 << 64) - 1
_U32 = (1 << 32) - 1


class StoredRow(NamedTuple):
    """A live row as stored: value plus the conflict-detection metadata written with it."""

    value: bytes
    epoch: int
    author: int
    commit_ts: int


def encode_cell(value: bytes | None, epoch: int = 0, author: int = 0, commit_ts: int = 0) -> bytes:
    """Return the stored cell for ``value`` (``None`` = tombstone) with its metadata.

    Raises ``struct.error`` when a metadata field is out of range (callers validate first).
    """
    if epoch or author or commit_ts:
        flags = FLAG_META if value is not None else FLAG_META | FLAG_TOMBSTONE
        head = _META.pack(flags, epoch, author, commit_ts)
        return head if value is None else head + value
    if value is None:
        return TOMBSTONE
    return _PLAIN + value


def value_of(cell: bytes) -> bytes | None:
    """The value stored in ``cell``, or ``None`` for a tombstone."""
    flags = cell[0]
    if flags == 0:
        return cell[1:]
    if flags & FLAG_TOMBSTONE:
        return None
    return cell[_META_SIZE:]


def entry_of(cell: bytes) -> StoredRow | None:
    """The :class:`StoredRow` stored in ``cell``, or ``None`` for a tombstone."""
    flags = cell[0]
    if flags & FLAG_TOMBSTONE:
        return None
    if flags & FLAG_META:
        _, epoch, author, commit_ts = _META.unpack_from(cell)
        return StoredRow(cell[_META_SIZE:], epoch, author, commit_ts)
    return StoredRow(cell[1:], 0, 0, 0)


class RowVersion(NamedTuple):
    """The newest version of a key as stored, deletes included: ``value`` None for a
    tombstone, which keeps the metadata of the delete (this cluster's epoch, the author,
    the commit time) for as long as the tombstone is retained."""

    value: bytes | None
    epoch: int
    author: int
    commit_ts: int


def version_of(cell: bytes) -> RowVersion:
    """The :class:`RowVersion` stored in ``cell`` (a tombstone too)."""
    flags = cell[0]
    if flags & FLAG_META:
        _, epoch, author, commit_ts = _META.unpack_from(cell)
        value = None if flags & FLAG_TOMBSTONE else cell[_META_SIZE:]
        return RowVersion(value, epoch, author, commit_ts)
    return RowVersion(None if flags & FLAG_TOMBSTONE else cell[1:], 0, 0, 0)


def tombstone_meta(cell: bytes) -> tuple[int, int] | None:
    """``(epoch, author)`` of the delete a tombstone ``cell`` records (0, 0 when written
    without metadata); None when ``cell`` is not a tombstone."""
    flags = cell[0]
    if not flags & FLAG_TOMBSTONE:
        return None
    if flags & FLAG_META:
        _, epoch, author, _ = _META.unpack_from(cell)
        return epoch, author
    return 0, 0


def may_hold_tombstones(cells: list[bytes]) -> bool:
    """False when no cell of ``cells`` can be a tombstone, decided at C speed by length: a
    tombstone's cell is its flags byte alone or the flags with the 20 metadata bytes (1 or
    21 bytes), so a run whose shortest cell is longer holds none. True means some cell is
    short enough to be one (check each with :func:`tombstone_meta`)."""
    return bool(cells) and min(map(len, cells)) <= _META_SIZE


def check_metadata(epoch: int, author: int, commit_ts: int) -> None:
    """Raise ``ValueError`` unless the metadata fits its fields (u64, u32, u64)."""
    if not (0 <= epoch <= _U64 and 0 <= author <= _U32 and 0 <= commit_ts <= _U64):
        raise ValueError(
            f"metadata out of range: epoch={epoch} (u64), author={author} (u32), "
            f"commit_ts={commit_ts} (u64)"
        )


# --- data blocks -------------------------------------------------------------------------------
#
# Block payload: tag:u8 count:u32 lengths:(klen:u32 clen:u32)*count then k0 c0 k1 c1 ...
# The lengths array doubles as the cache key of a precompiled struct that cuts all keys and cells
# out of the block in one C call; blocks of equal shape (the common case) share one struct.

_COUNT = struct.Struct("<I")
_LITTLE = sys.byteorder == "little"
_SHAPES: dict[bytes, struct.Struct] = {}
_MAX_SHAPES = 4096


def encode_pairs(keys: list[bytes], cells: list[bytes]) -> bytes:
    """Return ``count:u32 (klen:u32 clen:u32)*count k0 c0 k1 c1 ...`` for the pairs."""
    n = len(keys)
    lens = [0] * (2 * n)
    lens[0::2] = map(len, keys)
    lens[1::2] = map(len, cells)
    arr = array("I", lens)
    if not _LITTLE:  # pragma: no cover - big-endian hosts
        arr.byteswap()
    parts: list[bytes] = [b""] * (2 * n)
    parts[0::2] = keys
    parts[1::2] = cells
    return _COUNT.pack(n) + arr.tobytes() + b"".join(parts)


def decode_pairs(buf: bytes, offset: int = 0) -> tuple[list[bytes], list[bytes]]:
    """Inverse of :func:`encode_pairs` for ``buf[offset:]`` (which must end with the pairs).

    Raises ``ValueError`` or ``struct.error`` when the bytes are not well-formed pairs.
    """
    (n,) = _COUNT.unpack_from(buf, offset)
    start = offset + 4 + 8 * n
    shape = buf[offset + 4 : start]
    if len(shape) != 8 * n:
        raise ValueError(f"{n} pairs announced, lengths are cut short")
    st = _SHAPES.get(shape)
    if st is None:
        arr = array("I")
        arr.frombytes(shape)
        if not _LITTLE:  # pragma: no cover
            arr.byteswap()
        st = struct.Struct("<" + "".join(map("{}s".format, arr)))
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        _SHAPES[shape] = st
    if start + st.size != len(buf):
        raise ValueError(f"{n} pairs hold {len(buf) - start} data bytes, lengths say {st.size}")
    parts = st.unpack_from(buf, start)
    return list(parts[0::2]), list(parts[1::2])


_BLOCK_TAG = bytes([TAG_BLOCK])


def encode_block(keys: list[bytes], cells: list[bytes]) -> bytes:
    """Return the payload of a data block: tag ``0xE1`` then the pairs (keys sorted)."""
    return _BLOCK_TAG + encode_pairs(keys, cells)


def decode_block_py(payload: bytes) -> tuple[list[bytes], list[bytes]]:
    """Split a data block payload into ``(keys, cells)``; ``ValueError`` (or
    ``struct.error``) if malformed. The specification of ``_block.decode``, which
    ``decode_block`` is when built (it raises ``ValueError`` alone)."""
    if not payload or payload[0] != TAG_BLOCK:
        raise ValueError(f"record tag {payload[:1].hex() or 'none'} is not a data block")
    return decode_pairs(payload, 1)


def _block_last_key_py(payload: bytes) -> bytes | None:
    """Check a data block payload's structure; its last key (``None`` for no pairs).
    ``ValueError`` or ``struct.error`` when malformed."""
    keys, _ = decode_block(payload)
    return keys[-1] if keys else None


def _find_cell_py(payload: bytes, key: bytes) -> bytes | None:
    """The cell of ``key`` in a data block payload, or ``None``; ``ValueError`` or
    ``struct.error`` when the payload is malformed."""
    keys, cells = decode_block(payload)
    i = bisect_left(keys, key)
    return cells[i] if i < len(keys) and keys[i] == key else None


def encode_cells_py(ops: object) -> dict[bytes, bytes] | None:
    """The cells of the write ops ``ops`` -- a list of tuples ``(key, value, epoch, author,
    commit_ts)``, ``value=None`` a delete -- keyed by key, a later op of a key replacing an
    earlier one (``encode_cell`` of each); None when ``ops`` is not a list or an op is
    anything else (another length, a key or value that is not ``bytes``, metadata that is not
    an ``int`` in range), which the caller's general loop takes (and refuses what it must).
    The specification of ``gateway.core.lsm._block.cells``."""
    if type(ops) is not list:
        return None
    batch: dict[bytes, bytes] = {}
    for op in ops:
        if type(op) is not tuple or len(op) != 5:
            return None
        key, value, epoch, author, commit_ts = op
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            return None
        if type(epoch) is not int or type(author) is not int or type(commit_ts) is not int:
            return None
        if not (0 <= epoch <= _U64 and 0 <= author <= _U32 and 0 <= commit_ts <= _U64):
            return None
        batch[key] = encode_cell(value, epoch, author, commit_ts)
    return batch


#: ``frame_values``' ``stopped`` codes.
FRAMED_ALL, FRAMED_STOPPED, FRAMED_UNSHARED = 0, 1, 2


def _split_records(v: bytes, fields: bytes) -> tuple[bytes, bytes] | None:
    """``(records of the fields numbered in fields, the other records)`` of the protobuf
    message ``v``, each in wire order; None when ``v`` is not a well-formed message at its
    top level (a tag or value that runs past its end, a group, a varint past 64 bits)."""
    own: list[bytes] = []
    rest: list[bytes] = []
    pos = 0
    try:
        while pos < len(v):
            start = pos
            tag, pos = read_varint64(v, pos, len(v))
            pos = skip_field(v, pos, tag, len(v))
            field = tag >> 3
            (own if field < 256 and field in fields else rest).append(v[start:pos])
    except ValueError:
        return None
    return b"".join(own), b"".join(rest)


def frame_values_py(cells: list[bytes], key: bytes, have: int, limit: int, size: int,
                    max_bytes: int, shape_fields: bytes = b"", shape: bytes | None = None
                    ) -> tuple[bytes, int, int, int, bytes | None]:
    """The values of the live ``cells`` (tombstones skipped), in order, each framed as the
    length-delimited protobuf field of one-byte key ``key`` (``key``, the length as a varint,
    the value) and joined: a repeated bytes or message field serialized, such as a scan
    response's rows. Returns ``(framed, have, size, stopped, shape)``.

    A scan that spans many calls carries ``have`` (values taken so far), ``size`` (their
    budget so far) and ``shape`` from one to the next. Each value adds ``len(value) + 6`` to
    ``size`` (an upper bound of its framing); the call stops (``stopped`` is
    ``FRAMED_STOPPED``) at the first value that comes when ``have == limit``, or that brings
    ``size`` past ``max_bytes`` while ``have > 0``: a scan always takes one value, and one
    that stops knows more values follow. An empty cell is a ``ValueError`` (a cell holds at
    least its flags byte).

    With ``shape_fields`` (field numbers, one byte each), the values are protobuf messages
    whose records of those fields are their shape. The first value's shape becomes
    ``shape`` (when it comes in None), and a value whose shape is the same bytes is framed
    without those records; any other value is framed whole, and must hold a record of field
    ``shape_fields[0]`` so that a reader can tell it from the others. A value that does not
    (or is not a well-formed message) ends the call with ``FRAMED_UNSHARED``: the caller
    frames the scan again without a shape. ``_block.frame_values`` is the C twin."""
    parts: list[bytes] = []
    stopped = FRAMED_ALL
    for c in cells:
        if not c:
            raise ValueError("an empty cell (a cell holds at least its flags byte)")
        v = value_of(c)
        if v is None:  # a tombstone
            continue
        size += len(v) + 6
        if have == limit or (have and size > max_bytes):
            stopped = FRAMED_STOPPED
            break
        body = v
        if shape_fields:
            split = _split_records(v, shape_fields)
            if split is None:
                return b"", have, size, FRAMED_UNSHARED, shape
            own, rest = split
            if shape is None:
                shape = own
            if own == shape:
                body = rest
            elif _split_records(own, shape_fields[:1]) == (b"", own):
                return b"", have, size, FRAMED_UNSHARED, shape
        parts.append(key + encode_uvarint(len(body)) + body)
        have += 1
    return b"".join(parts), have, size, stopped, shape


# Point reads search a cached block payload where it lies (``gateway.core.lsm._block``: one
# binary search, no list of keys and cells per read) when the accelerator is built.
_accel = load("gateway.core.lsm._block")
block_last_key = _block_last_key_py if _accel is None else _accel.last_key
encode_cells = encode_cells_py if _accel is None else _accel.cells
find_cell = _find_cell_py if _accel is None else _accel.find
#: A data block's ``(keys, cells)``; ``ValueError`` if malformed (a scan decodes every block
#: it reads: 2-3x faster in C).
decode_block = decode_block_py if _accel is None else _accel.decode
frame_values = frame_values_py if _accel is None else _accel.frame_values


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (``None``: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])
