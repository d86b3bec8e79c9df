"""Bookkeeping for ReadIndex requests waiting for a leadership confirmation (Raft thesis §6.4).

A request is queued with the leader's commit index at arrival; it is confirmed once a quorum
acknowledged a heartbeat carrying its context. Confirming one request confirms every request
queued before it (their heartbeats went out earlier, and a quorum acknowledged a later round).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .types import Message


@dataclass(slots=True)
class ReadIndexStatus:
    """A pending request: the original message, the commit index to read at, and the voters
    that acknowledged the heartbeat round for it."""

    req: Message
    index: int
    acks: set[int] = field(default_factory=set)


class ReadOnly:
    """Pending read-index requests keyed by their context, in arrival order."""

    __slots__ = ("pending", "queue")

    def __init__(self) -> None:
        self.pending: dict[bytes, ReadIndexStatus] = {}
        self.queue: list[bytes] = []

    def add_request(self, index: int, m: Message) -> None:
        """Queue request ``m`` to be served at ``index``; duplicates of a pending context are
        ignored."""
        ctx = m.context
        if ctx in self.pending:
            return
        self.pending[ctx] = ReadIndexStatus(m, index)
        self.queue.append(ctx)

    def recv_ack(self, node: int, ctx: bytes) -> set[int] | None:
        """Record that ``node`` acknowledged the heartbeat for ``ctx``; returns the acks so far,
        or None if ``ctx`` is not pending."""
        rs = self.pending.get(ctx)
        if rs is None:
            return None
        rs.acks.add(node)
        return rs.acks

    def advance(self, ctx: bytes) -> list[ReadIndexStatus]:
        """Dequeue and return every request up to and including ``ctx``."""
        if ctx not in self.pending:
            return []
        i = self.queue.index(ctx)
        done = self.queue[: i + 1]
        del self.queue[: i + 1]
        return [self.pending.pop(c) for c in done]

    def last_pending_request_ctx(self) -> bytes:
        return self.queue[-1] if self.queue else b""

    def reset(self) -> None:
        self.pending.clear()
        self.queue.clear()
