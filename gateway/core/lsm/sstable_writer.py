"""Writes one immutable SSTable as a stuffed record stream.

Layout (see ``docs/formats/sstable.md``)::

    FE FD | header | block | block | ... | index | bloom | footer

Each ``|`` is the ``FE FD`` separator that :func:`~gateway.core.records.encode_record` appends.
Data blocks carry many sorted key/cell pairs each (about ``block_bytes`` of payload), because
per-record costs (stuffing, CRC, one Python call) are paid per block, not per key.

Contract: :meth:`SSTableWriter.add` takes keys in strictly increasing order across calls;
:meth:`SSTableWriter.finish` writes index, bloom and footer, fsyncs and closes the file and
returns the table's :class:`TableMeta`. Nothing is visible to readers until the manifest names
the file, so a crash mid-write leaves only an orphan that the next open deletes.

The file is written in chunks of ~1 MiB and synced after every ``sync_bytes`` written
(RocksDB's ``bytes_per_sync``): a compaction writing hundreds of megabytes then hands the disk
a megabyte at a time instead of all of it at ``finish``, whose one large writeback held every
other fsync on the disk -- the Raft log's, on which each write waits -- for as long as it took
(docs/benchmarks.md, "Flush and compaction"). With ``drop_cache`` each of those syncs also gives the
synced pages back to the OS (`WritableFile.drop_cache`): the data blocks go, the last
``sync_bytes`` or less (the index, bloom filter and footer that opening the table reads) stay.
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import NamedTuple

import crc32c as _crc32c

from gateway.core.accel import load
from gateway.core.fileio import FileSystem, WritableFile
from gateway.core.lsm.bloom import BloomBuilder
from gateway.core.lsm.format import TAG_FOOTER, TAG_INDEX, TAG_TABLE_HEADER, encode_block
from gateway.core.records import SEPARATOR, encode_record

__all__ = ["FOOTER", "MAGIC", "SYNC_BYTES", "SSTableWriter", "TableMeta"]

MAGIC = b"GWSST\x01"
_HEADER = struct.Struct("<B6sQ")  # tag, magic, table number
#: tag, magic, index (offset, length), bloom (offset, length), entries, blocks, smallest length,
#: then the smallest and largest keys.
FOOTER = struct.Struct("<B6sQIQIQII")
_INDEX_HEAD = struct.Struct("<BI")
_LITTLE = sys.byteorder == "little"
_WRITE_CHUNK = 1 << 20
#: Written bytes after which the file is synced while it is being written (see the module
#: docstring); ``finish`` syncs the rest.
SYNC_BYTES = 1 << 20
# Whole runs of data blocks encoded in one C call (gateway.core.lsm._block.encode_blocks);
# the per-block Python loop below is its specification and the fallback without a compiler.
_accel = load("gateway.core.lsm._block")
_encode_blocks = None if _accel is None else _accel.encode_blocks
_pairs_bytes = None if _accel is None else _accel.pairs_bytes


class TableMeta(NamedTuple):
    """What the manifest records about a table."""

    number: int
    size: int
    entries: int
    smallest: bytes
    largest: bytes


class SSTableWriter:
    """Builds one table file through ``fs``; see the module docstring for the contract."""

    def __init__(self, fs: FileSystem, path: str, number: int, block_bytes: int = 4096,
                 sync_bytes: int = SYNC_BYTES, *, drop_cache: bool = False) -> None:
        self._file: WritableFile = fs.create(path)
        self.path = path
        self.number = number
        self._block_bytes = block_bytes
        self._sync_bytes = sync_bytes
        self._drop_cache = drop_cache
        #: CRC-32C (standard form) of every byte written so far: the whole file's once
        #: finished, what a snapshot export records (``export.file_crc32c``) without reading
        #: the file back.
        self.file_crc = 0
        self._unsynced = 0
        self._pending: list[bytes] = [
            SEPARATOR,
            encode_record(_HEADER.pack(TAG_TABLE_HEADER, MAGIC, number)),
        ]
        self._pending_bytes = sum(map(len, self._pending))
        self._offset = 0  # file offset of the first pending byte
        self._last_keys: list[bytes] = []
        self._offsets = array("Q")
        self._lengths = array("I")
        self._bloom = BloomBuilder()
        self._entries = 0
        self._smallest: bytes | None = None
        self._largest: bytes | None = None
        self.data_bytes = 0

    @property
    def entries(self) -> int:
        """Pairs added so far."""
        return self._entries

    @property
    def file_bytes(self) -> int:
        """Bytes written or buffered so far (the table's size if finished now, minus metadata)."""
        return self._offset + self._pending_bytes

    def _append(self, record: bytes) -> int:
        """Buffer one encoded record; return the file offset of its stuffed bytes."""
        at = self._offset + self._pending_bytes
        self._pending.append(record)
        self._pending_bytes += len(record)
        if self._pending_bytes >= _WRITE_CHUNK:
            self._flush_pending()
        return at

    def _flush_pending(self) -> None:
        """Write the buffered records; sync once ``sync_bytes`` are written unsynced."""
        self._write_pending()
        if self._unsynced >= self._sync_bytes:
            self._file.sync()
            self._unsynced = 0
            if self._drop_cache:
                self._file.drop_cache()

    def _write_pending(self) -> None:
        crc = self.file_crc
        for part in self._pending:
            crc = _crc32c.crc32c(part, crc)
        self.file_crc = crc
        self._file.write_parts(self._pending)
        self._offset += self._pending_bytes
        self._unsynced += self._pending_bytes
        self._pending = []
        self._pending_bytes = 0

    def add(self, keys: list[bytes], cells: list[bytes]) -> None:
        """Append sorted ``keys`` with their ``cells``, cut into blocks of ~``block_bytes``."""
        n = len(keys)
        if n == 0:
            return
        if self._largest is not None and keys[0] <= self._largest:
            raise ValueError("keys must be strictly increasing across add() calls")
        if self._smallest is None:
            self._smallest = keys[0]
        self._largest = keys[-1]
        self._bloom.add_keys(keys)
        self._entries += n
        in_c = _encode_blocks is not None and type(keys) is list and type(cells) is list
        if in_c:
            assert _pairs_bytes is not None  # one module serves both
            total = _pairs_bytes(keys, cells) + 8 * n
        else:
            total = sum(map(len, keys)) + sum(map(len, cells)) + 8 * n
        per_block = max(1, (n * self._block_bytes) // max(total, 1))
        if in_c:
            self._add_encoded(keys, cells, per_block)
            return
        i = 0
        while i < n:
            j = min(n, i + per_block)
            self._add_block(keys[i:j], cells[i:j])
            i = j

    def _add_encoded(self, keys: list[bytes], cells: list[bytes], per_block: int) -> None:
        """:meth:`add`'s blocks made in C, about a write chunk's worth per call: the same
        blocks, records and index entries as the loop over :meth:`_add_block`."""
        assert _encode_blocks is not None
        i, n = 0, len(keys)
        while i < n:
            data, i, last_keys, offsets, lengths, payload_bytes = _encode_blocks(
                keys, cells, i, per_block, self._block_bytes,
                self._offset + self._pending_bytes, _WRITE_CHUNK,
            )
            self._append(data)
            self._last_keys += last_keys
            self._offsets.frombytes(offsets)
            self._lengths.frombytes(lengths)
            self.data_bytes += payload_bytes

    def _add_block(self, keys: list[bytes], cells: list[bytes]) -> None:
        payload = encode_block(keys, cells)
        if len(payload) > 2 * self._block_bytes and len(keys) > 1:
            half = len(keys) // 2  # uneven sizes: keep blocks near the target
            self._add_block(keys[:half], cells[:half])
            self._add_block(keys[half:], cells[half:])
            return
        record = encode_record(payload)
        at = self._append(record)
        self._last_keys.append(keys[-1])
        self._offsets.append(at)
        self._lengths.append(len(record) - 2)
        self.data_bytes += len(payload)

    def finish(self) -> TableMeta:
        """Write index, bloom and footer; fsync and close. Returns the table's metadata."""
        if self._smallest is None or self._largest is None:
            raise ValueError("an SSTable needs at least one entry")
        nblocks = len(self._last_keys)
        klens = array("I", map(len, self._last_keys))
        offsets, lengths = self._offsets, self._lengths
        if not _LITTLE:  # pragma: no cover
            offsets, lengths, klens = array("Q", offsets), array("I", lengths), array("I", klens)
            for a in (offsets, lengths, klens):
                a.byteswap()
        index = b"".join(
            [
                _INDEX_HEAD.pack(TAG_INDEX, nblocks),
                offsets.tobytes(),
                lengths.tobytes(),
                klens.tobytes(),
                *self._last_keys,
            ]
        )
        index_rec = encode_record(index)
        index_at = self._append(index_rec)
        bloom_rec = encode_record(self._bloom.finish())
        bloom_at = self._append(bloom_rec)
        footer = (
            FOOTER.pack(
                TAG_FOOTER,
                MAGIC,
                index_at,
                len(index_rec) - 2,
                bloom_at,
                len(bloom_rec) - 2,
                self._entries,
                nblocks,
                len(self._smallest),
            )
            + self._smallest
            + self._largest
        )
        self._append(encode_record(footer))
        self._write_pending()
        self._file.sync()
        self._file.close()
        return TableMeta(self.number, self._offset, self._entries, self._smallest, self._largest)

    def abandon(self) -> None:
        """Close without finishing (the caller removes the file)."""
        self._file.close()
