"""The block cache: checked data block payloads shared by all tables under one byte budget.

Each table keeps its cached blocks in its own ``dict`` (block index -> payload), so a hit
is one dict lookup with an int key on the read path, with no lock and no bookkeeping.
Eviction is first-in first-out across all tables, under a lock taken only on inserts: for the
random point reads this store serves, FIFO keeps nearly LRU's hit rate without the cost of
promoting entries on every hit.

Contract: ``used_bytes <= capacity_bytes`` after every insert (an oversized block is still
returned to the caller but is not kept).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["BlockCache"]


class BlockCache:
    """FIFO cache of blocks with a byte budget (``capacity_bytes``, 0 disables)."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self.hits = 0
        self.misses = 0
        self._order: OrderedDict[tuple[int, int], tuple[dict[int, bytes], int]] = OrderedDict()
        self._lock = threading.Lock()

    def insert(
        self, owner: dict[int, bytes], owner_id: int, index: int, block: bytes, size: int
    ) -> None:
        """Cache ``block`` as ``owner[index]``, evicting the oldest blocks over budget."""
        if size > self.capacity_bytes:
            return
        with self._lock:
            key = (owner_id, index)
            if key in self._order:
                return
            owner[index] = block
            self._order[key] = (owner, size)
            self.used_bytes += size
            while self.used_bytes > self.capacity_bytes:
                (_, old_index), (old_owner, old_size) = self._order.popitem(last=False)
                old_owner.pop(old_index, None)
                self.used_bytes -= old_size

    def drop(self, owner_id: int) -> None:
        """Forget every block of table ``owner_id`` (the table was deleted or closed)."""
        with self._lock:
            stale = [k for k in self._order if k[0] == owner_id]
            for key in stale:
                owner, size = self._order.pop(key)
                owner.pop(key[1], None)
                self.used_bytes -= size
