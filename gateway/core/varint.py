"""Protobuf base-128 varints: the one encoder and the one fast decoder hand-written wire code uses.

The WAL codec and the node's fast paths build and read protobuf bytes without message objects;
they share these two primitives. Contracts:

- ``encode_uvarint(v)`` returns the varint of ``0 <= v < 2**64`` (a negative ``v`` raises
  ``ValueError``); values below 128 come from a table, without allocation.
- ``decode_uvarint(data, pos)`` returns ``(value, position after it)`` for a varint known to be
  complete (bytes this process wrote or already validated): it checks nothing, and a varint cut
  off by the end of ``data`` raises ``IndexError``. Code reading untrusted bytes checks bounds
  itself (``gateway.core.wal.codec`` does).
- ``read_varint64(data, pos, end)`` and ``skip_field(data, pos, tag, end)`` read untrusted
  bytes: ``ValueError`` for a varint past ``end`` or 64 bits, a group, a field past ``end``.
  They are the Python specification of ``read_varint`` / ``skip_field`` in
  ``gateway/core/_protowire.h``, which the C accelerators share.
"""

from __future__ import annotations

__all__ = ["SMALL_VARINTS", "decode_uvarint", "encode_uvarint", "read_varint64",
           "skip_field"]

#: ``encode_uvarint(i)`` for ``i < 128``.
SMALL_VARINTS = [bytes((i,)) for i in range(128)]


def encode_uvarint(value: int) -> bytes:
    """The protobuf varint of ``value`` (unsigned)."""
    if value < 128:
        if value < 0:
            raise ValueError(f"negative value {value} cannot be a uint field")
        return SMALL_VARINTS[value]
    out = bytearray()
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``data[pos]`` and the position after it (no validation; see above)."""
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    value, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = data[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7


def read_varint64(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``data[pos]`` (before ``end``) and the position after it; ValueError if
    it runs past ``end`` or exceeds 64 bits (``read_varint`` of ``core/_protowire.h``)."""
    v = shift = 0
    while pos < end:
        c = data[pos]
        pos += 1
        if shift == 63 and c > 1:
            break
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, pos
        shift += 7
        if shift > 63:
            break
    raise ValueError(f"bad varint before {pos}")


def skip_field(data: bytes, pos: int, tag: int, end: int) -> int:
    """The position after the field whose tag ``tag`` ended at ``pos``; ValueError for a
    group or a field running past ``end`` (``skip_field`` of ``core/_protowire.h``)."""
    wt = tag & 7
    if wt == 0:
        _, pos = read_varint64(data, pos, end)
    elif wt in (1, 5):
        pos += 8 if wt == 1 else 4
    elif wt == 2:
        ln, pos = read_varint64(data, pos, end)
        pos += ln
    else:
        raise ValueError(f"wire type {wt} before {pos}")
    if pos > end:
        raise ValueError(f"field runs past {end}")
    return pos
