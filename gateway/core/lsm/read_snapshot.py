"""Point-in-time snapshots: reads that ignore every later write, flush and compaction.

A snapshot holds the frozen memtables and the :class:`~.version.Version` current when it was
taken. Tables keep their ``mmap`` while referenced, and POSIX keeps an unlinked file's pages
for as long as they are mapped, so compaction may delete the files under a snapshot without
disturbing it. Closing the snapshot (or the store) releases them; reading through a snapshot of
a closed store raises :class:`~.errors.StoreClosedError`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import chain
from types import TracebackType

from gateway.core.lsm.errors import StoreClosedError
from gateway.core.lsm.format import (
    FLAG_TOMBSTONE,
    FRAMED_STOPPED,
    FRAMED_UNSHARED,
    RowVersion,
    StoredRow,
    entry_of,
    frame_values,
    prefix_end,
    version_of,
)
from gateway.core.lsm.memtable import Memtable, RangeView
from gateway.core.lsm.merge import Block, merge_runs
from gateway.core.lsm.version import Version

__all__ = ["ReadSnapshot"]

_RUN = 256


def _memtable_chunks(mem: Memtable, start: bytes | None, end: bytes | None) -> Iterator[Block]:
    keys, cells = mem.sorted_items()
    lo = 0 if start is None else bisect_left(keys, start)
    hi = len(keys) if end is None else bisect_left(keys, end)
    for i in range(lo, hi, _RUN):
        j = min(hi, i + _RUN)
        yield keys[i:j], cells[i:j]


class ReadSnapshot:
    """A consistent read-only view; see the module docstring."""

    def __init__(
        self, store_closed: Callable[[], bool], memtables: list[Memtable], version: Version,
        view: RangeView | None = None,
    ) -> None:
        self._store_closed = store_closed  # whether the store the view was taken of closed
        self._mems = memtables  # newest first
        self._version: Version | None = version
        # The active memtable's pairs in one key range, newer than every table above (a
        # snapshot made for a scan of that range only: ``LSMStore._range_snapshot``).
        self._view = view
        self.applied_index = max([version.applied_index, *(m.max_log_index for m in memtables),
                                  view.max_log_index if view is not None else 0])

    def _live(self) -> Version:
        if self._version is None:
            raise StoreClosedError("the snapshot is closed")
        if self._store_closed():
            raise StoreClosedError("the store is closed")
        return self._version

    def _cell(self, key: bytes) -> bytes | None:
        version = self._live()
        if self._view is not None:
            cell = self._view.get(key)
            if cell is not None:
                return cell
        for mem in self._mems:
            cell = mem.data.get(key)
            if cell is not None:
                return cell
        return version.get(key)

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` as of the snapshot, or ``None``."""
        cell = self._cell(key)
        if cell is None or cell[0] & FLAG_TOMBSTONE:
            return None
        return cell[1:] if cell[0] == 0 else cell[21:]

    def get_entry(self, key: bytes) -> StoredRow | None:
        """The value and row metadata of ``key`` as of the snapshot, or ``None``."""
        cell = self._cell(key)
        return None if cell is None else entry_of(cell)

    def get_version(self, key: bytes) -> RowVersion | None:
        """``LSMStore.get_version`` as of the snapshot (tombstones included)."""
        cell = self._cell(key)
        return None if cell is None else version_of(cell)

    def _runs(self, start: bytes | None, end: bytes | None) -> Iterator[Block]:
        version = self._live()
        sources = self._view.sources(start, end) if self._view is not None else []
        sources += [_memtable_chunks(m, start, end) for m in self._mems]
        sources += version.sources(start, end)
        for run in merge_runs(sources):
            if self._store_closed():
                raise StoreClosedError("the store is closed")
            yield run

    def scan(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Live ``(key, value)`` pairs with ``start <= key < end``, in key order."""
        return self._scan(start, end, owned=False)

    def _scan(
        self, start: bytes | None, end: bytes | None, *, owned: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        # Values are cut out a run at a time (a list comprehension) and handed on with
        # ``yield from zip(...)``: per pair that is C iteration, not a Python loop body.
        try:
            for keys, cells in self._runs(start, end):
                vals = [c[1:] if c[0] == 0 else (None if c[0] & 1 else c[21:]) for c in cells]
                if None in vals:
                    yield from [(k, v) for k, v in zip(keys, vals, strict=True) if v is not None]
                else:
                    yield from zip(keys, vals, strict=True)
        finally:
            if owned:
                self.close()

    def scan_framed(self, start: bytes | None, end: bytes | None, key: bytes, limit: int,
                    max_bytes: int, shape_fields: bytes = b""
                    ) -> tuple[bytes, int, bool, bytes | None]:
        """The live values with ``start <= key < end``, in key order, framed as the repeated
        length-delimited protobuf field of one-byte key ``key``: ``(framed, count, more,
        shape)``.

        Takes at most ``limit`` values and stops before the value that would bring their
        budget (``len(value) + 6`` each) past ``max_bytes``, but always takes one; ``more``
        tells that a live value follows the last one taken. With ``shape_fields`` the values
        are protobuf messages and ``shape`` is the first one's records of those fields, left
        out of every value whose own records of them are the same bytes; None when there is
        no value, or when a value could not be told from the others without them (then
        every value is framed whole). ``format.frame_values`` frames a run of cells at a
        time (C when built): no Python per value."""
        got = self._frame(start, end, key, limit, max_bytes, shape_fields)
        if got is None:  # a value that cannot share the shape: frame them all whole
            got = self._frame(start, end, key, limit, max_bytes, b"")
            assert got is not None
        return got

    def _frame(self, start: bytes | None, end: bytes | None, key: bytes, limit: int,
               max_bytes: int, shape_fields: bytes
               ) -> tuple[bytes, int, bool, bytes | None] | None:
        # The runs' cells are gathered until they could fill the limit, then framed in one
        # call: one buffer for the whole answer in the common case, not one per run joined.
        parts: list[bytes] = []
        have = size = 0
        shape: bytes | None = None
        gathered: list[bytes] = []
        for run in chain(self._runs(start, end), (None,)):  # None: the end, frame the rest
            if run is not None:
                gathered += run[1]
                if len(gathered) <= limit - have:
                    continue
            framed, have, size, stopped, shape = frame_values(
                gathered, key, have, limit, size, max_bytes, shape_fields, shape)
            if stopped == FRAMED_UNSHARED:
                return None
            parts.append(framed)
            gathered = []
            if stopped == FRAMED_STOPPED:
                return b"".join(parts), have, True, shape
        return b"".join(parts), have, False, shape

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Live pairs whose key starts with ``prefix``."""
        return self.scan(prefix, prefix_end(prefix))

    def scan_entries(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, StoredRow]]:
        """Live ``(key, StoredRow)`` pairs with ``start <= key < end``, in key order."""
        for keys, cells in self._runs(start, end):
            for key, cell in zip(keys, cells, strict=False):
                entry = entry_of(cell)
                if entry is not None:
                    yield key, entry

    def scan_versions(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> Iterator[tuple[bytes, RowVersion]]:
        """``(key, RowVersion)`` of every key with ``start <= key < end``, retained tombstones
        included (``value`` None, with the delete's metadata), in key order: what a copy of
        the store that must judge later changes as this one would needs."""
        for keys, cells in self._runs(start, end):
            for key, cell in zip(keys, cells, strict=True):
                yield key, version_of(cell)

    def _scan_owned(self, start: bytes | None, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """:meth:`scan` that closes this snapshot when the iteration ends."""
        return self._scan(start, end, owned=True)

    def _scan_entries_owned(
        self, start: bytes | None, end: bytes | None
    ) -> Iterator[tuple[bytes, StoredRow]]:
        try:
            yield from self.scan_entries(start, end)
        finally:
            self.close()

    def close(self) -> None:
        """Release the memtables and tables (idempotent)."""
        self._version = None
        self._mems = []
        if self._view is not None:
            self._view.close()
            self._view = None

    def __enter__(self) -> ReadSnapshot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
