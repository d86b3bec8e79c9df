"""Leveled compaction: which tables to merge next, and the merge itself.

Why leveled (not tiered): the gateway's store is read on every replicated change (the row's
epoch and author decide conflicts) and hot rows are rewritten often. Leveled compaction bounds
a point read to the level-0 tables plus one table per deeper level and keeps space
amplification near 1.1x; tiered compaction writes less but leaves several overlapping runs per
tier to probe. In Python each probe is interpreted code, so read amplification costs more than
in C, while write amplification is spent on a background thread. The Raft log, not the store,
bounds write throughput. See ``docs/lsm.md``.

Policy (LevelDB's): level 0 is compacted into level 1 when it holds ``l0_trigger`` tables;
level L >= 1 is compacted when its bytes exceed ``base_level_bytes * multiplier**(L-1)``,
one table at a time, round-robin over the key space (the *compaction pointer*), together with
the overlapping tables of level L+1. A table with no overlap below is moved, not rewritten.

Tombstones are dropped only when no level below the output level holds any key in the
compaction's key range: then no older value can reappear -- and only those of deletes in
epochs up to the store's ``tombstone_floor`` for their author: a newer delete's epoch and
author may still decide a replicated change's conflict (docs/lsm.md). Snapshots pin whole
versions (the old tables), so dropping tombstones or shadowed values in new tables never
changes what a snapshot reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from gateway.core.fileio import FileSystem
from gateway.core.lsm.format import may_hold_tombstones, tombstone_meta
from gateway.core.lsm.manifest import NUM_LEVELS
from gateway.core.lsm.merge import Block, merge_runs
from gateway.core.lsm.sstable_reader import SSTableReader
from gateway.core.lsm.sstable_writer import SSTableWriter, TableMeta
from gateway.core.lsm.version import Version

__all__ = ["Compaction", "LeveledPolicy", "TombstoneFloor", "run_compaction"]

#: ``(default, {author: floor})``: tombstones of deletes in epochs above the floor of their
#: author are kept when a merge could drop them.
TombstoneFloor = tuple[int, Mapping[int, int]]


@dataclass
class Compaction:
    """One unit of work: ``inputs`` of ``level`` merged with ``overlaps`` of ``level + 1``."""

    level: int
    inputs: list[SSTableReader]
    overlaps: list[SSTableReader]
    drop_tombstones: bool
    pointer: bytes

    @property
    def output_level(self) -> int:
        return self.level + 1

    @property
    def is_move(self) -> bool:
        """A single table with nothing to merge below: move it down without rewriting."""
        return self.level > 0 and len(self.inputs) == 1 and not self.overlaps


@dataclass
class LeveledPolicy:
    """Sizes and triggers of the leveled policy; :meth:`pick` chooses the next compaction.
    The defaults are the store's (``LSMStore``'s options default to them)."""

    l0_trigger: int = 8
    base_level_bytes: int = 256 << 20
    multiplier: int = 10

    def max_bytes(self, level: int) -> int:
        """Size limit of ``level`` (>= 1)."""
        return self.base_level_bytes * int(self.multiplier ** (level - 1))

    def scores(self, version: Version) -> list[float]:
        """Pressure per level (>= 1.0 means compaction is due); the last level never is."""
        out = [len(version.level0) / self.l0_trigger]
        for lvl in range(1, NUM_LEVELS - 1):
            out.append(version.level_bytes(lvl) / self.max_bytes(lvl))
        return out

    def pick(self, version: Version, pointers: dict[int, bytes]) -> Compaction | None:
        """The most urgent compaction, or ``None`` when every level is within its limits."""
        scores = self.scores(version)
        level = max(range(len(scores)), key=scores.__getitem__)
        if scores[level] < 1.0:
            return None
        if level == 0:
            inputs = list(version.level0)
        else:
            tables = version.levels[level]
            pointer = pointers.get(level)
            candidates = [t for t in tables if pointer is None or t.smallest > pointer]
            inputs = [candidates[0] if candidates else tables[0]]
        lo = min(t.smallest for t in inputs)
        hi = max(t.largest for t in inputs)
        overlaps = version.overlapping(level + 1, lo, hi)
        if overlaps:
            lo = min(lo, overlaps[0].smallest)
            hi = max(hi, overlaps[-1].largest)
        drop = not version.deeper_overlap(level + 1, lo, hi)
        return Compaction(level, inputs, overlaps, drop, hi)


#: The merged pairs a compaction hands its output writer at a time (``_batched``): at least
#: this many, or this many bytes of cells. Runs this long let the writer's bloom hashing and
#: block encoding run without the GIL (they release it from 4,096 keys / 64 KiB); the
#: merge's runs of ~256 pairs kept it -- on a replica judging conflicts, a tenth of the
#: process's GIL time was compaction. The bytes bound keeps the buffer small for large rows.
WRITE_RUN_PAIRS = 4096
WRITE_RUN_BYTES = 1 << 20


def run_compaction(
    c: Compaction,
    fs: FileSystem,
    new_table: Callable[[], tuple[int, str]],
    *,
    block_bytes: int,
    target_file_bytes: int,
    should_stop: Callable[[], bool] = lambda: False,
    tombstone_floor: TombstoneFloor = (1 << 64, {}),
    drop_cache: bool = False,
) -> list[tuple[TableMeta, str, int]]:
    """Merge ``c``'s tables into new files of about ``target_file_bytes``; return their
    metadata, paths and whole-file CRC-32Cs (``SSTableWriter.file_crc``).

    ``new_table()`` allocates a file number and path; ``drop_cache`` is `SSTableWriter`'s.
    Output tables are fsynced; the caller fsyncs the directory and installs the edit. On any
    exception the partial outputs are removed and the exception propagates (the inputs are
    untouched).
    """
    sources = [t.chunks(None, None, fill_cache=False) for t in c.inputs]  # level 0: newest first
    sources += [_chain(c.overlaps)]
    outputs: list[tuple[TableMeta, str, int]] = []
    writer: SSTableWriter | None = None
    try:
        for keys, cells in _batched(_kept(merge_runs(sources), c.drop_tombstones,
                                          tombstone_floor, should_stop)):
            if writer is None:
                number, path = new_table()
                writer = SSTableWriter(fs, path, number, block_bytes, drop_cache=drop_cache)
            writer.add(keys, cells)
            if writer.file_bytes >= target_file_bytes:
                outputs.append((writer.finish(), writer.path, writer.file_crc))
                writer = None
        if writer is not None:
            outputs.append((writer.finish(), writer.path, writer.file_crc))
            writer = None
    except BaseException:
        if writer is not None:
            writer.abandon()
            outputs.append((TableMeta(writer.number, 0, 0, b"", b""), writer.path, 0))
        for _, path, _ in outputs:
            with contextlib.suppress(Exception):  # best effort; the next open removes orphans
                fs.discard(path)
        raise
    return outputs


def _kept(runs: Iterator[Block], drop_tombstones: bool, floor: TombstoneFloor,
          should_stop: Callable[[], bool]) -> Iterator[Block]:
    """The merged ``runs`` without the tombstones a compaction drops (``drop_tombstones``:
    those below ``floor``), empty runs left out; raises ``InterruptedError`` between runs
    once ``should_stop()``."""
    for keys, cells in runs:
        if should_stop():
            raise InterruptedError("store is closing")
        if drop_tombstones:
            keys, cells = _drop_tombstones(keys, cells, floor)
            if not keys:
                continue
        yield keys, cells


def _batched(runs: Iterator[Block]) -> Iterator[Block]:
    """``runs`` joined, in order, into runs of at least ``WRITE_RUN_PAIRS`` pairs or
    ``WRITE_RUN_BYTES`` bytes of cells (the last one may be shorter)."""
    acc_k: list[bytes] = []
    acc_c: list[bytes] = []
    size = 0
    for keys, cells in runs:
        acc_k += keys
        acc_c += cells
        size += sum(map(len, cells))
        if len(acc_k) >= WRITE_RUN_PAIRS or size >= WRITE_RUN_BYTES:
            yield acc_k, acc_c
            acc_k, acc_c, size = [], [], 0
    if acc_k:
        yield acc_k, acc_c


def _chain(tables: list[SSTableReader]) -> Iterator[Block]:
    for t in tables:
        yield from t.chunks(None, None, fill_cache=False)


def _drop_tombstones(keys: list[bytes], cells: list[bytes], floor: TombstoneFloor
                     ) -> tuple[list[bytes], list[bytes]]:
    """Without the tombstones a merge may drop: ``floor = (default, {author: floor})``, those
    of deletes in epochs up to the floor of their author (a tombstone without metadata counts
    as epoch 0)."""
    if not may_hold_tombstones(cells):
        return keys, cells
    default, per_author = floor
    dead = []
    for i, cell in enumerate(cells):
        meta = tombstone_meta(cell)
        if meta is not None and meta[0] <= per_author.get(meta[1], default):
            dead.append(i)
    if not dead:
        return keys, cells
    gone = set(dead)
    keep = [i for i in range(len(keys)) if i not in gone]
    return [keys[i] for i in keep], [cells[i] for i in keep]
