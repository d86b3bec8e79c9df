"""Protobuf base-128 varints: the one encoder and the one fast decoder hand-written wire code uses.

The WAL codec and the node's fast paths build and read protobuf bytes without message objects;
they share these two primitives. Contracts:

- ``encode_uvarint(v)`` returns the varint of ``0 <= v < 2**64`` (a negative ``v`` raises
  ``ValueError``); values below 128 come from a table, without allocation.
- ``decode_uvarint(data, pos)`` returns ``(value, position after it)`` for a varint known to be
  complete (bytes this process wrote or already validated): it checks nothing, and a varint cut
  off by the end of ``data`` raises ``IndexError``. Code reading untrusted bytes checks bounds
  itself (``gateway.core.wal.codec`` does).
"""

from __future__ import annotations

__all__ = ["SMALL_VARINTS", "decode_uvarint", "encode_uvarint"]

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
