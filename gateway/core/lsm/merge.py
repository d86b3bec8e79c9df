"""Merging sorted runs, newest wins, in C-speed chunks.

A classic k-way merge (``heapq.merge``) pays a Python-level step per key. Here each source
yields *runs* of sorted pairs and the merge proceeds in rounds: the round's *horizon* is the
smallest last key among the buffered runs; every source gives up its pairs ``<= horizon``;
those are combined with ``dict.update`` from oldest to newest source (so the newest cell of a
key wins) and ordered (``memtable.sorted_pairs``: in C, a large round without the GIL) —
both C loops. When only one source has pairs in the round (the common case for disjoint
ranges) its slice is passed through untouched.

Contract: every source yields ``(keys, cells)`` lists with strictly increasing keys across the
whole source; sources are given newest first. The output has the same form, holds every key of
every source exactly once with the cell of the newest source that has it, and includes
tombstone cells (the caller drops them when that is safe).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

from gateway.core.lsm.memtable import sorted_pairs

__all__ = ["Block", "merge_runs"]

Block = tuple[list[bytes], list[bytes]]


def merge_runs(sources: list[Iterator[Block]]) -> Iterator[Block]:
    """Merge ``sources`` (newest first) into one sorted stream of runs; see module contract."""
    # buffers[i] = [keys, cells, pos] for source i, or None when exhausted.
    buffers: list[list[Any] | None] = []
    for src in sources:
        buffers.append(_refill(src))
    live = [i for i, b in enumerate(buffers) if b is not None]
    while live:
        if len(live) == 1:
            i = live[0]
            buf = buffers[i]
            assert buf is not None
            keys, cells, pos = buf
            yield (keys[pos:], cells[pos:]) if pos else (keys, cells)
            yield from sources[i]
            return
        horizon = min(buffers[i][0][-1] for i in live)  # type: ignore[index]
        taken: list[tuple[list[bytes], list[bytes]]] = []
        for i in reversed(live):  # oldest first, so newer cells overwrite
            buf = buffers[i]
            assert buf is not None
            keys, cells, pos = buf
            stop = bisect_right(keys, horizon, pos)
            if stop > pos:
                if pos == 0 and stop == len(keys):
                    taken.append((keys, cells))
                else:
                    taken.append((keys[pos:stop], cells[pos:stop]))
            if stop == len(keys):
                buffers[i] = _refill(sources[i])
            else:
                buf[2] = stop
        live = [i for i in live if buffers[i] is not None]
        if len(taken) == 1:
            yield taken[0]
            continue
        merged: dict[bytes, bytes] = {}
        for keys, cells in taken:
            merged.update(zip(keys, cells, strict=False))
        yield sorted_pairs(merged)


def _refill(src: Iterator[Block]) -> list[Any] | None:
    for keys, cells in src:
        if keys:
            return [keys, cells, 0]
    return None
