"""The memtable: an unordered dict of key -> cell with a byte budget.

As in the aurora seed the in-memory table is a hash table, not a skip list: a put is one dict
store (the fastest thing Python can do), and order is paid for once, when the table is frozen
for a flush, or when a scan or snapshot needs it (the sorted key list is cached until the next
write).

Contract: a memtable is written only by the store's writer (under the store's write lock);
readers may call :meth:`get` at any time without a lock: single dict operations are atomic
under the GIL, and :meth:`apply` installs a whole batch with one ``dict.update``, so a reader
sees all of a batch or none of it.
"""

from __future__ import annotations

__all__ = ["ENTRY_OVERHEAD", "Memtable"]

#: Approximate CPython memory per entry beyond the key and cell bytes (two bytes objects'
#: headers, the dict slot and its share of the hash index). Used for the byte budget.
ENTRY_OVERHEAD = 120


class Memtable:
    """A mutable (then frozen) set of key -> cell pairs, newest value per key.

    ``approximate_bytes`` over-counts overwrites (it never subtracts) so the budget is
    conservative. ``max_log_index`` is the highest log index written into the table, and
    ``wal_number`` the number of the WAL file that holds its writes (0 without a WAL).
    """

    __slots__ = ("_sorted", "approximate_bytes", "data", "max_log_index", "wal_number")

    def __init__(self, wal_number: int = 0) -> None:
        self.data: dict[bytes, bytes] = {}
        self.approximate_bytes = 0
        self.max_log_index = 0
        self.wal_number = wal_number
        self._sorted: tuple[list[bytes], list[bytes]] | None = None

    def __len__(self) -> int:
        return len(self.data)

    def put(self, key: bytes, cell: bytes) -> None:
        """Store ``cell`` for ``key`` (a tombstone cell for deletes)."""
        self.data[key] = cell
        self.approximate_bytes += len(key) + len(cell) + ENTRY_OVERHEAD
        self._sorted = None

    def apply(self, batch: dict[bytes, bytes]) -> None:
        """Store every pair of ``batch`` atomically (one ``dict.update``)."""
        self.data.update(batch)
        self.approximate_bytes += sum(map(len, batch)) + sum(map(len, batch.values()))
        self.approximate_bytes += ENTRY_OVERHEAD * len(batch)
        self._sorted = None

    def get(self, key: bytes) -> bytes | None:
        """The cell stored for ``key`` (possibly a tombstone), or ``None`` if absent."""
        return self.data.get(key)

    def sorted_items(self) -> tuple[list[bytes], list[bytes]]:
        """``(keys, cells)`` in key order; cached until the next write. Do not mutate."""
        cached = self._sorted
        if cached is None:
            data = self.data.copy()  # a concurrent writer must not change it under sorted()
            keys = sorted(data)
            cached = (keys, list(map(data.__getitem__, keys)))
            self._sorted = cached
        return cached

    def copy(self) -> Memtable:
        """A frozen copy (for point-in-time snapshots of a small active memtable)."""
        other = Memtable(self.wal_number)
        other.data = self.data.copy()
        other.approximate_bytes = self.approximate_bytes
        other.max_log_index = self.max_log_index
        return other
