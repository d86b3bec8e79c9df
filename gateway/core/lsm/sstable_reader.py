"""Reads one SSTable through a file map (`FileSystem.map`, ``mmap`` on disk): footer, sparse
index and bloom filter in memory, data blocks read and checked on demand and their payloads
kept in the shared :class:`~gateway.core.lsm.cache.BlockCache`; a point read searches a payload
in place (``format.find_cell``), a scan decodes it into key and cell lists.

Opening a table checks every metadata record (header, index, bloom, footer) by its CRC and
its structure; each data block is checked by its CRC when it is read (and against the index's
last key). Any failure raises :class:`~gateway.core.lsm.errors.CorruptionError` naming the file
and the byte offset of the bad record; wrong data is never returned. :meth:`verify_all` checks
every block up front (``gateway store verify`` and ``paranoid_checks``).

Memory: the index costs one key per block (~``entries / 30`` keys for 4 KiB blocks), the
bloom filter 12 bits per key; both are proportional to the data, as RocksDB's unpartitioned
index and filter are.

Thread-safety: readers are immutable after open; concurrent ``get``/``chunks`` are safe. The
mapping stays valid after the file is unlinked by compaction (POSIX), which is what keeps
snapshot iterators valid while compaction runs.
"""

from __future__ import annotations

import itertools
import mmap
import struct
import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence, Sized
from typing import cast

from gateway.core.accel import load
from gateway.core.fileio import FileSystem, Mapped, local_fs
from gateway.core.lsm.bloom import decode_bloom
from gateway.core.lsm.cache import BlockCache
from gateway.core.lsm.errors import CorruptionError
from gateway.core.lsm.format import (
    TAG_FOOTER,
    TAG_INDEX,
    TAG_TABLE_HEADER,
    block_last_key,
    decode_block,
    find_cell,
)
from gateway.core.lsm.sstable_writer import FOOTER, MAGIC, TableMeta
from gateway.core.records import SEPARATOR, decode_record, first_nonzero

__all__ = ["SSTableReader"]

_INDEX_HEAD = struct.Struct("<BI")
_HEADER = struct.Struct("<B6sQ")
_LITTLE = sys.byteorder == "little"
_ids = itertools.count(1)
Block = tuple[list[bytes], list[bytes]]
#: Approximate CPython memory of a cached payload beyond its bytes (object header, dict slot).
_PAYLOAD_OVERHEAD = 100
# A compaction's read of a whole table, block runs decoded in C (gateway.core.lsm._block);
# the block-at-a-time loop of ``chunks`` is its specification and the fallback.
_accel = load("gateway.core.lsm._block")
_decode_blocks = None if _accel is None else _accel.decode_blocks
#: Many point reads in one call (``SSTableReader.lookup_many``), in C when built.
_find_many = None if _accel is None else _accel.find_many
#: A compaction's read of a table gives the pages it has read back every this many bytes
#: (``_all_chunks``).
RELEASE_BYTES = 4 << 20
_PAGE_MASK = ~(mmap.PAGESIZE - 1)


class _PageRelease:
    """Gives a table map's pages back to the kernel (``MADV_DONTNEED``) behind a whole-table
    read, every ``RELEASE_BYTES`` and at the end: they stay in the page cache but leave the
    process's resident set, which would otherwise hold every page of every input of a merge
    until its tables close. The map is read-only and file-backed, so a reader that touches
    such a page again faults the same bytes back in. An in-memory map (no ``madvise``) is
    left alone."""

    __slots__ = ("_offsets", "_release", "_released", "_size")

    def __init__(self, mm: Sized, offsets: Sequence[int]) -> None:
        self._release = getattr(mm, "madvise", None)
        self._offsets = offsets
        self._size = len(mm)
        self._released = 0  # the map's bytes before this offset (page-aligned) were given back

    def read_to(self, i: int) -> None:
        """Blocks before ``i`` were read and copied out (``i`` = the block count: all)."""
        if self._release is None:
            return
        last = i >= len(self._offsets)
        read = (self._size if last else self._offsets[i]) & _PAGE_MASK
        if read - self._released >= RELEASE_BYTES or (last and read > self._released):
            self._release(mmap.MADV_DONTNEED, self._released, read - self._released)
            self._released = read


class SSTableReader:
    """An open, verified-at-open table. See the module docstring for contracts."""

    def __init__(
        self, path: str, number: int, cache: BlockCache, *, fs: FileSystem | None = None,
        file_crc: int | None = None,
    ) -> None:
        self.path = path
        self.number = number
        #: CRC-32C of the whole file when the store wrote it (``SSTableWriter.file_crc``),
        #: None for a table opened from disk.
        self.file_crc = file_crc
        self._cache = cache
        self._id = next(_ids)
        self._blocks: dict[int, bytes] = {}  # block index -> checked payload (the cache's)
        self._mm: Mapped = (fs or local_fs()).map(path)
        size = len(self._mm)
        if size < 4:
            self._mm.close()
            raise CorruptionError(path, 0, f"file of {size} bytes is too short for a table")
        try:
            self._open(size)
        except BaseException:
            self._mm.close()
            raise
        self.size = size

    # --- opening ------------------------------------------------------------------------------

    def _record(self, offset: int, length: int, what: str) -> bytes:
        """Payload of the record whose stuffed bytes are ``[offset, offset + length)``."""
        mm = self._mm
        if (
            offset < 2
            or offset + length + 2 > len(mm)
            or mm[offset - 2 : offset] != SEPARATOR
            or mm[offset + length : offset + length + 2] != SEPARATOR
        ):
            raise CorruptionError(self.path, offset, f"{what}: no record at this offset")
        decoded = decode_record(mm[offset : offset + length])
        if decoded is None:
            raise CorruptionError(self.path, offset, f"{what} fails its checksum")
        return decoded[1]

    def _open(self, size: int) -> None:
        mm = self._mm
        path = self.path
        if mm[size - 2 : size] != SEPARATOR:
            raise CorruptionError(
                path, size, "file does not end with a record separator (truncated)"
            )
        sep = mm.rfind(SEPARATOR, 0, size - 2)
        if sep < 0:
            raise CorruptionError(path, 0, "no footer record")
        footer_at = sep + 2
        footer = self._record(footer_at, size - 2 - footer_at, "footer")
        try:
            (tag, magic, iat, ilen, bat, blen, entries, nblocks, slen) = FOOTER.unpack_from(footer)
        except struct.error:
            raise CorruptionError(path, footer_at, "footer record is too short") from None
        if tag != TAG_FOOTER or magic != MAGIC:
            raise CorruptionError(path, footer_at, f"not a table footer (tag {tag:#x})")
        keys = footer[FOOTER.size :]
        if slen > len(keys):
            raise CorruptionError(path, footer_at, "footer key lengths overrun the record")
        self.smallest, self.largest, self.entries = keys[:slen], keys[slen:], entries
        head_at = first_nonzero(mm) + 2
        head_end = mm.find(SEPARATOR, head_at)
        header = self._record(head_at, head_end - head_at, "table header")
        if len(header) != _HEADER.size or _HEADER.unpack(header)[:2] != (TAG_TABLE_HEADER, MAGIC):
            raise CorruptionError(path, head_at, "not an SSTable header record")
        index = self._record(iat, ilen, "index")
        try:
            self._parse_index(index, nblocks)
        except (ValueError, struct.error, IndexError) as e:
            raise CorruptionError(path, iat, f"malformed index record: {e}") from None
        if self._offsets and (self._offsets[0] < head_end or self._offsets[-1] >= iat):
            raise CorruptionError(path, iat, "index points outside the data area")
        if nblocks and (self._index_keys[-1] != self.largest):
            raise CorruptionError(path, iat, "index disagrees with the footer's key range")
        try:
            self.bloom = decode_bloom(self._record(bat, blen, "bloom filter"))
        except ValueError as e:
            raise CorruptionError(path, bat, f"malformed bloom record: {e}") from None
        self.nwords = len(self.bloom)

    def _parse_index(self, index: bytes, nblocks: int) -> None:
        tag, n = _INDEX_HEAD.unpack_from(index)
        if tag != TAG_INDEX or n != nblocks:
            raise ValueError(f"tag {tag:#x}, {n} blocks (footer says {nblocks})")
        pos = _INDEX_HEAD.size
        offsets = array("Q")
        offsets.frombytes(index[pos : pos + 8 * n])
        pos += 8 * n
        lengths = array("I")
        lengths.frombytes(index[pos : pos + 4 * n])
        pos += 4 * n
        klens = array("I")
        klens.frombytes(index[pos : pos + 4 * n])
        pos += 4 * n
        if not _LITTLE:  # pragma: no cover
            for a in (offsets, lengths, klens):
                a.byteswap()
        if len(klens) != n or pos + sum(klens) != len(index):
            raise ValueError("key lengths do not match the record size")
        ends = list(itertools.accumulate(klens, initial=pos))
        keys = [index[a:b] for a, b in itertools.pairwise(ends)]
        if any(a >= b for a, b in itertools.pairwise(keys)):
            raise ValueError("index keys are not strictly increasing")
        self._offsets, self._lengths, self._index_keys = offsets, lengths, keys
        self.nblocks = n

    # --- reading ------------------------------------------------------------------------------

    @property
    def meta(self) -> TableMeta:
        """The table's manifest metadata."""
        return TableMeta(self.number, self.size, self.entries, self.smallest, self.largest)

    def payload(self, i: int, fill_cache: bool = True) -> bytes:
        """Block ``i``'s payload, checked (CRC, structure, last key against the index), from
        the cache if present. The cache holds payloads, not decoded pairs: one bytes object a
        block, half the memory, and a point read searches it where it lies (``find_cell``)."""
        cached = self._blocks.get(i)
        if cached is not None:
            return cached
        off = self._offsets[i]
        length = self._lengths[i]
        decoded = decode_record(self._mm[off : off + length])
        if decoded is None:
            raise CorruptionError(self.path, off, f"data block {i} fails its checksum")
        payload = decoded[1]
        try:
            last = block_last_key(payload)
        except (ValueError, struct.error) as e:
            raise CorruptionError(self.path, off, f"malformed data block {i}: {e}") from None
        if last is None or last != self._index_keys[i]:
            raise CorruptionError(self.path, off, f"data block {i} disagrees with the index")
        if fill_cache:
            self._cache.insert(self._blocks, self._id, i, payload, len(payload) + _PAYLOAD_OVERHEAD)
        return payload

    def block(self, i: int, fill_cache: bool = True) -> Block:
        """Decoded block ``i`` (``(keys, cells)``), its payload from the cache if present."""
        return decode_block(self.payload(i, fill_cache))

    def lookup(self, key: bytes) -> bytes | None:
        """The cell stored for ``key`` in this table, or ``None``. No bloom check here."""
        i = bisect_left(self._index_keys, key)
        if i == self.nblocks:
            return None
        return find_cell(self._blocks.get(i) or self.payload(i), key)

    def lookup_many(self, keys: list[bytes], idxs: list[int], found: set[int]
                    ) -> list[tuple[bytes, bytes]]:
        """``(keys[i], lookup(keys[i]))`` for each ``i`` of ``idxs`` (ascending, ``keys`` sorted)
        not in ``found`` whose cell is found, in order, each such ``i`` added to ``found``: a
        version's point reads of many keys in one call (in C when built; ``_find_many_py``
        is the specification). No bloom check here."""
        if _find_many is not None:
            return cast("list[tuple[bytes, bytes]]", _find_many(
                self._index_keys, self._blocks, self.payload, keys, idxs, found))
        return _find_many_py(self, keys, idxs, found)

    def chunks(
        self, start: bytes | None, end: bytes | None, *, fill_cache: bool = True, target: int = 256
    ) -> Iterator[Block]:
        """Yield ``(keys, cells)`` runs in key order covering ``[start, end)`` (``None`` = open).

        Consecutive blocks are concatenated into runs of about ``target`` pairs so that
        merging pays its per-run cost rarely.
        """
        whole = not fill_cache and start is None and end is None  # a compaction's read
        if whole and _decode_blocks is not None:
            yield from self._all_chunks(target)
            return
        pages = _PageRelease(self._mm, self._offsets) if whole else None
        index_keys = self._index_keys
        i = 0 if start is None else bisect_left(index_keys, start)
        n = self.nblocks
        acc_k: list[bytes] = []
        acc_c: list[bytes] = []
        first = True
        while i < n:
            keys, cells = self.block(i, fill_cache)
            lo = 0
            if first and start is not None:
                lo = bisect_left(keys, start)
                first = False
            hi = len(keys)
            last = False
            if end is not None and keys[-1] >= end:
                last = True
                hi = bisect_left(keys, end)
            if lo == 0 and hi == len(keys):
                acc_k += keys
                acc_c += cells
            else:
                acc_k += keys[lo:hi]
                acc_c += cells[lo:hi]
            if last:
                break
            i += 1
            if len(acc_k) >= target:
                if pages is not None:
                    pages.read_to(i)
                yield acc_k, acc_c
                acc_k, acc_c = [], []
        if pages is not None:
            pages.read_to(n)
        if acc_k:
            yield acc_k, acc_c

    def _all_chunks(self, target: int) -> Iterator[Block]:
        """Every pair, in runs of at least ``target`` pairs (the last may be shorter) decoded
        in C, bypassing the cache: what a compaction reads. The blocks are checked as
        :meth:`payload` checks them; the first that fails raises its ``CorruptionError``.

        The pages read are given back as it goes (:class:`_PageRelease`; hundreds of MiB for
        a level-0 merge otherwise); a ``get`` on another thread that touches them again
        faults them back in, and the decoded runs are copies."""
        assert _decode_blocks is not None
        pages = _PageRelease(self._mm, self._offsets)
        i, n = 0, self.nblocks
        while i < n:
            got = _decode_blocks(
                self._mm, self._offsets, self._lengths, self._index_keys, i, target
            )
            if type(got) is int:
                self.payload(got, fill_cache=False)  # raises the block's own error
                raise CorruptionError(self.path, self._offsets[got], f"data block {got} is damaged")
            keys, cells, i = got
            pages.read_to(i)
            yield keys, cells

    def verify_all(self) -> None:
        """Read and check every data block (CRC, structure, order); raise on the first bad one."""
        prev: bytes | None = None
        count = 0
        for i in range(self.nblocks):
            keys, _ = self.block(i, fill_cache=False)
            if prev is not None and keys[0] <= prev:
                raise CorruptionError(self.path, self._offsets[i], f"block {i} is out of key order")
            if any(a >= b for a, b in itertools.pairwise(keys)):
                raise CorruptionError(self.path, self._offsets[i], f"block {i} keys are not sorted")
            prev = keys[-1]
            count += len(keys)
        if count != self.entries:
            raise CorruptionError(
                self.path, 0, f"{count} entries in blocks, footer says {self.entries}"
            )
        if self.nblocks and self.block(0, fill_cache=False)[0][0] != self.smallest:
            raise CorruptionError(self.path, self._offsets[0], "first key differs from the footer")

    def first_block_offset(self) -> int:
        """Byte offset of the first data block (for reports)."""
        return self._offsets[0] if self.nblocks else 0

    def retire(self) -> None:
        """Drop this table's cached blocks (it left the current version); mapping stays open."""
        self._cache.drop(self._id)

    def close(self) -> None:
        """Drop cached blocks and unmap the file."""
        self._cache.drop(self._id)
        self._blocks = {}
        self._mm.close()


def _find_many_py(table: SSTableReader, keys: list[bytes], idxs: list[int], found: set[int]
                  ) -> list[tuple[bytes, bytes]]:
    """The specification of ``SSTableReader.lookup_many`` (``_block.find_many``)."""
    out = []
    for i in idxs:
        if i not in found:
            cell = table.lookup(keys[i])
            if cell is not None:
                found.add(i)
                out.append((keys[i], cell))
    return out
