"""The memtable: an unordered dict of key -> cell with a byte budget.

As in the aurora seed the in-memory table is a hash table, not a skip list: a put is one dict
store (the fastest thing Python can do), and order is paid for once, when the table is frozen
for a flush, or when a scan or snapshot needs it (the sorted key list is cached until the next
write).

Contract: a memtable is written only by the store's writer (under the store's write lock);
readers may call :meth:`get` at any time without a lock: single dict operations are atomic
under the GIL, and :meth:`apply` installs a whole batch with one ``dict.update``, so a reader
sees all of a batch or none of it.

A range of the *active* table is read without freezing it (:meth:`view`, under the write
lock). The table keeps sorted runs of its keys, made only when a range is asked for: a key is
never removed from a memtable (a delete stores a tombstone) and a dict keeps insertion order,
so the keys added since the runs were last brought up to date are exactly the last
``len(data) - covered`` keys of the dict. They are sorted into a new run, and runs are merged
so that each is at least twice the size of the next (at most ~log2(n) of them; each key is
merged ~log2(n) times over the table's life). A :class:`RangeView` holds, per run, the index
range of its keys -- runs are never changed once made -- and reads cells lazily from the live
dict; a write that replaces a cell a live view may still read first saves the old cell in the
view (copy on write), so the view reads the table as it was when it was made. A scan then
costs a bisection per run and the work for the keys it reads: no sort of the table, no frozen
table (a level-0 file and the compaction behind it) per scan.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import islice

from gateway.core.accel import load

__all__ = ["ENTRY_OVERHEAD", "Memtable", "RangeView", "sorted_pairs"]

_RUN = 256  # keys per block a view yields

# A table's sort in C, without the GIL for large tables (``_sorted_items_py`` is the spec).
_memsort = load("gateway.core.lsm._memsort")
_sorted_pairs = None if _memsort is None else _memsort.sorted_pairs
_pairs_bytes = None if _memsort is None else _memsort.pairs_bytes

#: Approximate CPython memory per entry beyond the key and cell bytes (two bytes objects'
#: headers, the dict slot and its share of the hash index). Used for the byte budget.
ENTRY_OVERHEAD = 120


def _batch_bytes(batch: dict[bytes, bytes]) -> int:
    """The lengths of ``batch``'s keys and values added up (in C when built; bytes-like
    pairs that are not ``bytes`` take the loop)."""
    if _pairs_bytes is not None:
        with contextlib.suppress(TypeError):
            return int(_pairs_bytes(batch))
    return sum(map(len, batch)) + sum(map(len, batch.values()))


def sorted_pairs(data: dict[bytes, bytes]) -> tuple[list[bytes], list[bytes]]:
    """``data``'s keys in order and their cells: ``_memsort.sorted_pairs`` when built (a
    large dict sorted without the GIL), else ``_sorted_pairs_py``."""
    return _sorted_pairs(data) if _sorted_pairs is not None else _sorted_pairs_py(data)


def _sorted_pairs_py(data: dict[bytes, bytes]) -> tuple[list[bytes], list[bytes]]:
    """``sorted()`` and a lookup per key: the specification of ``_memsort.sorted_pairs``."""
    keys = sorted(data)
    return keys, list(map(data.__getitem__, keys))


class Memtable:
    """A mutable (then frozen) set of key -> cell pairs, newest value per key.

    ``approximate_bytes`` over-counts overwrites (it never subtracts) so the budget is
    conservative. ``max_log_index`` is the highest log index written into the table, and
    ``wal_number`` the number of the WAL file that holds its writes (0 without a WAL).
    """

    __slots__ = ("_covered", "_runs", "_sort_lock", "_sorted", "_views", "approximate_bytes",
                 "data", "max_log_index", "wal_number")

    def __init__(self, wal_number: int = 0) -> None:
        self.data: dict[bytes, bytes] = {}
        self.approximate_bytes = 0
        self.max_log_index = 0
        self.wal_number = wal_number
        self._sorted: tuple[list[bytes], list[bytes]] | None = None
        self._sort_lock = threading.Lock()
        self._runs: list[list[bytes]] = []  # sorted key runs, sizes decreasing (module doc)
        self._covered = 0  # how many of the first-inserted keys the runs hold
        self._views: list[weakref.ref[RangeView]] = []  # views that may still read

    def __len__(self) -> int:
        return len(self.data)

    def put(self, key: bytes, cell: bytes) -> None:
        """Store ``cell`` for ``key`` (a tombstone cell for deletes)."""
        if self._views:
            self.preserve((key,))
        self.data[key] = cell
        self.approximate_bytes += len(key) + len(cell) + ENTRY_OVERHEAD
        self._sorted = None

    def apply(self, batch: dict[bytes, bytes]) -> None:
        """Store every pair of ``batch`` atomically (one ``dict.update``)."""
        if self._views:
            self.preserve(batch)
        self.data.update(batch)
        self.approximate_bytes += _batch_bytes(batch) + ENTRY_OVERHEAD * len(batch)
        self._sorted = None

    def get(self, key: bytes) -> bytes | None:
        """The cell stored for ``key`` (possibly a tombstone), or ``None`` if absent."""
        return self.data.get(key)

    def sorted_items(self) -> tuple[list[bytes], list[bytes]]:
        """``(keys, cells)`` in key order; cached until the next write. Do not mutate.

        One thread sorts, others wait for its result: a frozen table is sorted by the flush
        thread and, often at the same moment, by the first scan after the freeze -- each
        sorting it alone doubled the CPU (and the GIL held) at every freeze."""
        cached = self._sorted
        if cached is not None:
            return cached
        with self._sort_lock:
            cached = self._sorted
            if cached is None:
                cached = _sorted_pairs(self.data) if _sorted_pairs is not None \
                    else self._sorted_items_py()
                self._sorted = cached
        return cached

    def _sorted_items_py(self) -> tuple[list[bytes], list[bytes]]:
        """:meth:`sorted_items` in Python, the specification of ``_memsort.sorted_pairs`` (which
        reads the dict at one moment under the GIL and sorts without it)."""
        data = self.data.copy()  # a concurrent writer must not change it under sort
        runs = self._runs
        if not runs:
            return _sorted_pairs_py(data)
        # sorted runs made for views: sort merges them (fewer compares)
        keys = [k for run in runs for k in run]
        keys += self._uncovered(data)
        keys.sort()
        return keys, list(map(data.__getitem__, keys))

    def view(self, start: bytes | None, end: bytes | None) -> RangeView:
        """A view of this table's pairs with ``start <= key < end`` (``None``: open) as they
        are now, which later writes do not change (see the module docstring). Caller holds
        the store's write lock, as every writer of this table does."""
        data = self.data
        runs = self._runs
        new = self._uncovered(data)
        if new:
            new.sort()
            runs.append(new)
            self._covered = len(data)
            while len(runs) > 1 and len(runs[-2]) < 2 * len(runs[-1]):
                last = runs.pop()
                merged = runs.pop() + last
                merged.sort()  # two sorted runs: one merge pass
                runs.append(merged)
        pieces = []
        for run in runs:
            lo = 0 if start is None else bisect_left(run, start)
            hi = len(run) if end is None else bisect_left(run, end, lo)
            if lo < hi:
                pieces.append((run, lo, hi))
        v = RangeView(data, pieces, start, end, self.max_log_index)
        if pieces:
            self._live_views()  # forget the closed and collected ones first
            self._views.append(weakref.ref(v))
        return v

    def _uncovered(self, data: dict[bytes, bytes]) -> list[bytes]:
        """The keys of ``data`` (this table's dict or a copy of it) no run holds yet: the
        last ones inserted (see the module docstring)."""
        return list(islice(reversed(data), len(data) - self._covered))

    def _live_views(self) -> list[RangeView]:
        """The views that may still read; forgets the closed and collected ones."""
        live = [v for v in (r() for r in self._views) if v is not None and not v.closed]
        self._views = [weakref.ref(v) for v in live]
        return live

    def preserve(self, keys: Iterable[bytes]) -> None:
        """Before ``keys`` are written: save their current cells in every live view whose
        range holds them (caller holds the write lock; writers call it when ``_views``)."""
        live = self._live_views()
        if not live:
            return
        get = self.data.get
        for k in keys:
            old = get(k)
            if old is None:
                continue
            for v in live:
                if (v.start is None or k >= v.start) and (v.end is None or k < v.end):
                    v.saved.setdefault(k, old)

    def copy(self) -> Memtable:
        """A frozen copy (for point-in-time snapshots of a small active memtable)."""
        other = Memtable(self.wal_number)
        other.data = self.data.copy()
        other.approximate_bytes = self.approximate_bytes
        other.max_log_index = self.max_log_index
        return other


class RangeView:
    """Pairs of an active memtable in ``[start, end)`` as of the view's making
    (``Memtable.view``): per run of the table's sorted keys, the index range of those keys,
    read lazily; cells come from the live dict unless a later write saved the old one in
    ``saved`` first.

    Thread-safe for one reader beside the table's writer: a reader takes a cell from the dict
    *before* looking in ``saved``, and a writer saves the old cell *before* replacing it, so
    whichever it sees, the reader gets the old cell."""

    __slots__ = ("__weakref__", "closed", "data", "end", "max_log_index", "pieces", "saved",
                 "start")

    def __init__(self, data: dict[bytes, bytes], pieces: list[tuple[list[bytes], int, int]],
                 start: bytes | None, end: bytes | None, max_log_index: int) -> None:
        self.data = data
        self.pieces = pieces
        self.start, self.end = start, end
        self.max_log_index = max_log_index
        self.saved: dict[bytes, bytes] = {}
        self.closed = False

    def _cells(self, keys: list[bytes]) -> list[bytes]:
        cells = list(map(self.data.__getitem__, keys))  # the dict first (class docstring)
        saved = self.saved
        if saved:
            for i, k in enumerate(keys):
                old = saved.get(k)
                if old is not None:
                    cells[i] = old
        return cells

    def get(self, key: bytes) -> bytes | None:
        """The cell of ``key`` as of the view's making, or None (absent then, or outside the
        view's range)."""
        for run, lo, hi in self.pieces:
            i = bisect_left(run, key, lo, hi)
            if i < hi and run[i] == key:
                return self._cells([key])[0]
        return None

    def sources(self, start: bytes | None, end: bytes | None
                ) -> list[Iterator[tuple[list[bytes], list[bytes]]]]:
        """One block stream per run for ``[start, end)`` within the view's range: the runs
        hold disjoint keys, so ``merge_runs`` may take them in any order."""
        out = []
        for run, lo, hi in self.pieces:
            if start is not None:
                lo = bisect_left(run, start, lo, hi)
            if end is not None:
                hi = bisect_left(run, end, lo, hi)
            if lo < hi:
                out.append(self._blocks(run, lo, hi))
        return out

    def _blocks(self, run: list[bytes], lo: int, hi: int
                ) -> Iterator[tuple[list[bytes], list[bytes]]]:
        for i in range(lo, hi, _RUN):
            keys = run[i:min(hi, i + _RUN)]
            yield keys, self._cells(keys)

    def close(self) -> None:
        """Stop being kept up to date (writes no longer save cells for it)."""
        self.closed = True
        self.saved = {}
