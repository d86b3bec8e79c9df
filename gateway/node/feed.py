"""Committed transactions out of a node: the appliers' ``EntrySource`` and the Subscribe feed.

Both read the Raft log (tail cache or WAL) up to the store's applied index, so an applier or
a subscriber never sees an entry the store does not reflect yet. Entries the state machine
did not apply (idempotent duplicates, rejected writes: the ``x`` keys) and entries without a
transaction (no-ops, epoch markers, membership changes) are ``Entry(index, None)`` for the
appliers and are not sent to subscribers.

A node that installed a snapshot (or compacted its log) has no log before it: reading entries
behind the log's start raises ``EntriesCompactedError``, and the applier is rebuilt from the
store's state (``applier_rebuild``) -- it never skips entries it did not apply.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from gateway.appliers.source import CommittedEntry, EntriesCompactedError
from gateway.raft import NO_LIMIT, CompactedError, EntryType
from gateway.v1 import gateway_pb2

from .errors import NodeStoppedError
from .validation import InvalidRequest
from .wire import decode_entry

if TYPE_CHECKING:
    from .driver import RaftDriver

__all__ = ["ChangeFeed", "CommittedLogSource"]

_READ_BYTES = 4 << 20


class CommittedLogSource:
    """``gateway.appliers.EntrySource`` over a node's committed and applied log (thread-safe)."""

    def __init__(self, driver: RaftDriver) -> None:
        self._driver = driver

    def last_index(self) -> int:
        return self._driver.sm.applied_index

    def read(self, from_index: int, max_entries: int) -> list[CommittedEntry]:
        storage, sm = self._driver.storage, self._driver.sm
        from_index = max(from_index, 1)
        hi = min(sm.applied_index + 1, from_index + max_entries)
        if from_index >= hi:
            return []
        first = storage.first_index()
        if from_index < first:
            if first > 2:
                raise EntriesCompactedError(from_index, first)
            # index 1 is the bootstrap snapshot (the initial membership): no transactions
            return [CommittedEntry(i, None) for i in range(from_index, min(hi, first))]
        try:
            ents = storage.entries(from_index, hi, _READ_BYTES)
        except CompactedError:
            return []  # compacted meanwhile: the next read sees the new first index
        out = []
        for e in ents:
            txn = None
            if e.type == EntryType.NORMAL:
                txn, _ = decode_entry(e.data)
                if txn is not None and sm.skipped(e.index):
                    txn = None
            out.append(CommittedEntry(e.index, txn))
        return out


class ChangeFeed:
    """Async change streams (``Subscribe``) over the committed log."""

    def __init__(self, driver: RaftDriver) -> None:
        self._driver = driver

    async def start_index(self, req: gateway_pb2.SubscribeRequest) -> int:
        """The first log index to send for ``req``; raises ``InvalidRequest`` when the
        position is no longer in the log."""
        storage = self._driver.storage
        first = storage.first_index()
        if req.HasField("after_gtid") and req.after_gtid.trans_id:
            return self._after_gtid(req.after_gtid.server_id, req.after_gtid.trans_id)
        start = req.from_log_index or first
        if start < first <= 2:
            start = first  # index 1 is the bootstrap snapshot: it holds no transactions
        if start < first:
            raise InvalidRequest("from_log_index", f"log index {start} was compacted; the "
                                 f"log starts at {first} (resync from a snapshot)")
        return start

    def _trans_at_or_after(self, index: int, limit: int) -> tuple[int, int] | None:
        """(index, trans id) of the first transaction entry at or after ``index``."""
        storage = self._driver.storage
        while index <= limit:
            for e in storage.entries(index, min(limit + 1, index + 64), NO_LIMIT):
                txn, _ = decode_entry(e.data) if e.type == EntryType.NORMAL else (None, "")
                if txn is not None:
                    return e.index, txn.gtid.trans_id
            index += 64
        return None

    def _after_gtid(self, server_id: int, trans_id: int) -> int:
        """Binary search: this cluster's trans ids increase along the log."""
        drv = self._driver
        if server_id != drv.opts.cluster_id:
            raise InvalidRequest("after_gtid.server_id",
                                 f"this cluster's GTIDs have server_id {drv.opts.cluster_id}")
        lo, hi = drv.storage.first_index(), drv.sm.applied_index
        found = self._trans_at_or_after(lo, hi)
        if found is None:
            return hi + 1
        if found[1] > trans_id + 1:
            raise InvalidRequest("after_gtid", f"transaction {trans_id} is before the log's "
                                 f"start (compacted); resync from a snapshot")
        answer = hi + 1
        while lo <= hi:
            mid = (lo + hi) // 2
            got = self._trans_at_or_after(mid, hi)
            if got is None or got[1] > trans_id:
                answer = got[0] if got is not None else answer
                hi = mid - 1
            else:
                lo = got[0] + 1
        return answer

    def _not_compacted(self, index: int) -> None:
        first = self._driver.storage.first_index()
        if index < first and first > 2:  # index 1 is the bootstrap snapshot: no transactions
            raise InvalidRequest("from_log_index", f"log index {index} was compacted while "
                                 f"streaming; the log starts at {first} (resync from a "
                                 f"snapshot)")

    async def events(self, start: int) -> AsyncIterator[gateway_pb2.ChangeEvent]:
        """Change events from log index ``start`` on, forever (until cancelled). Raises
        ``InvalidRequest`` (``from_log_index``) when the log was compacted past the next
        entry to send -- the subscriber fell behind a snapshot and must resync, as when it
        subscribes at such a position -- rather than skip the compacted transactions."""
        drv = self._driver
        source = CommittedLogSource(drv)
        nxt = start
        while True:
            self._not_compacted(nxt)
            batch = source.read(nxt, 512)
            # Compaction runs on the I/O thread: a read that raced it got placeholders.
            self._not_compacted(nxt)
            if not batch:
                if drv.removed:
                    raise NodeStoppedError("this node was removed from the cluster")
                async with drv.applied_changed:
                    await drv.applied_changed.wait_for(
                        lambda n=nxt: drv.sm.applied_index >= n or drv.removed)
                continue
            for entry in batch:
                if entry.transaction is not None:
                    yield gateway_pb2.ChangeEvent(log_index=entry.index,
                                                  transaction=entry.transaction)
                nxt = entry.index + 1
            await asyncio.sleep(0)
