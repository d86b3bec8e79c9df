"""A version: the immutable set of open tables that make up the store at one moment.

Readers take the current version and use it without locks; flush and compaction install a new
one. A version keeps its tables' mappings alive, so a snapshot holding an old version reads
consistently while compaction deletes the files it replaced.

Level 0 holds flushed memtables (key ranges overlap; newer tables shadow older ones); levels 1
and up hold tables with disjoint key ranges sorted by key, so a point read probes at most one
table per level.
"""

from __future__ import annotations

import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

import crc32c as _crc32c

from gateway.core.lsm.bloom import MASK_BITS, MASKS, key_hashes, maybe_present
from gateway.core.lsm.manifest import NUM_LEVELS
from gateway.core.lsm.merge import Block
from gateway.core.lsm.sstable_reader import SSTableReader

__all__ = ["Version"]

_crc = _crc32c.crc32c
_zcrc = zlib.crc32
_SHIFT = 32 - MASK_BITS


class Version:
    """Tables by level; ``level0`` newest first, deeper levels sorted by smallest key."""

    def __init__(self, levels: list[list[SSTableReader]], applied_index: int = 0) -> None:
        self.level0: list[SSTableReader] = sorted(levels[0], key=lambda t: -t.number)
        self.levels: list[list[SSTableReader]] = [self.level0] + [
            sorted(tables, key=lambda t: t.smallest) for tables in levels[1:]
        ]
        self.applied_index = applied_index
        # Probe lists for deeper levels: (largest keys, tables) of every non-empty level.
        self._deep = [([t.largest for t in lvl], lvl) for lvl in self.levels[1:] if lvl]

    def tables(self) -> Iterator[tuple[int, SSTableReader]]:
        """Every ``(level, table)`` pair."""
        for lvl, tables in enumerate(self.levels):
            for t in tables:
                yield lvl, t

    def level_bytes(self, level: int) -> int:
        """Total file size of ``level``."""
        return sum(t.size for t in self.levels[level])

    def get(self, key: bytes) -> bytes | None:
        """The newest cell of ``key`` in the tables (maybe a tombstone), or ``None``."""
        h1 = _crc(key)
        m = MASKS[_zcrc(key) >> _SHIFT]
        for t in self.level0:
            if (t.bloom[h1 % t.nwords] & m) == m:
                cell = t.lookup(key)
                if cell is not None:
                    return cell
        for largest, tables in self._deep:
            i = bisect_left(largest, key)
            if i < len(tables):
                t = tables[i]
                if (t.bloom[h1 % t.nwords] & m) == m and key >= t.smallest:
                    cell = t.lookup(key)
                    if cell is not None:
                        return cell
        return None

    def holds_any(self, keys: list[bytes]) -> bool:
        """True when some table holds a cell (tombstones included) for a key of ``keys``:
        ``get`` for many keys at once (see :meth:`held`), stopping at the first found."""
        return bool(self.held(keys, first=True))

    def held(self, keys: list[bytes], *, first: bool = False) -> list[bytes]:
        """The keys of ``keys`` some table holds a cell for (tombstones included), each once,
        in key order (``first``: at most one, the first found), probed as :meth:`_probe`
        probes."""
        return sorted(k for k, _ in self._probe(keys, first))

    def cells(self, keys: list[bytes]) -> dict[bytes, bytes]:
        """The newest cell (tombstones included) of each key of ``keys`` some table holds --
        ``{k: get(k)}`` for the keys ``get`` finds, absent keys left out -- probed as
        :meth:`_probe` probes."""
        return dict(self._probe(keys))

    def _probe(self, keys: list[bytes], first: bool = False) -> list[tuple[bytes, bytes]]:
        """``(key, cell)`` for each key of ``keys`` some table holds, once, with its newest
        cell (tombstones included); ``first``: at most one, the first found. The keys are
        sorted once (deduplicated in the order given: keys that come in sorted runs sort in
        one pass); each table whose key range meets them is probed for the slice of keys
        inside its range, its bloom filter tested for the whole slice in one call
        (``maybe_present``), and only the filter's hits looked up (the common answer, for
        fresh keys, is a bloom miss). Tables are visited newest first (level 0 by number,
        then each deeper level), so the cell found first for a key is ``get``'s."""
        if not keys or not (self.level0 or self._deep):
            return []
        skeys = sorted(dict.fromkeys(keys))
        lo, hi = skeys[0], skeys[-1]
        tables = [t for t in self.level0 if not (t.largest < lo or t.smallest > hi)]
        for largest, level in self._deep:
            if largest[-1] < lo or level[0].smallest > hi:
                continue
            for t in level[bisect_left(largest, lo):]:
                if t.smallest > hi:
                    break
                tables.append(t)
        if not tables:
            return []  # no table's key range meets the keys' (new keys past the end)
        h1s, masks = key_hashes(skeys)
        found: set[int] = set()
        pairs: list[tuple[bytes, bytes]] = []
        for t in tables:
            start = bisect_left(skeys, t.smallest)
            stop = bisect_right(skeys, t.largest, start)
            if start < stop:
                hits = maybe_present(t.bloom, h1s, masks, start, stop)
                if hits:
                    got = t.lookup_many(skeys, hits, found)
                    if got:
                        if first:
                            return got[:1]
                        pairs += got
        return pairs

    def sources(self, start: bytes | None, end: bytes | None) -> list[Iterator[Block]]:
        """Run iterators over ``[start, end)``, newest first (level 0, then level 1, ...)."""
        out: list[Iterator[Block]] = [t.chunks(start, end) for t in self.level0]
        for lvl in self.levels[1:]:
            if lvl:
                out.append(_level_chunks(lvl, start, end))
        return out

    def overlapping(self, level: int, lo: bytes, hi: bytes) -> list[SSTableReader]:
        """Tables of ``level`` whose key range meets ``[lo, hi]`` (inclusive)."""
        return [t for t in self.levels[level] if not (t.largest < lo or t.smallest > hi)]

    def deeper_overlap(self, level: int, lo: bytes, hi: bytes) -> bool:
        """True if any level below ``level`` holds a key in ``[lo, hi]``."""
        return any(self.overlapping(lvl, lo, hi) for lvl in range(level + 1, NUM_LEVELS))


def _level_chunks(
    tables: list[SSTableReader], start: bytes | None, end: bytes | None
) -> Iterator[Block]:
    """Chunks of a sorted, disjoint level, skipping tables outside ``[start, end)``."""
    i = 0 if start is None else bisect_left([t.largest for t in tables], start)
    for t in tables[i:]:
        if end is not None and t.smallest >= end:
            return
        yield from t.chunks(start, end)
