"""Chunked snapshot transfer (the seed's SyncData): a window of chunks in flight, acknowledged
by the receiver with the number of contiguous bytes it holds; retransmission from the last
acknowledged byte on every heartbeat response while the transfer lasts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .types import Snapshot, SnapshotChunk, SnapshotData, SnapshotMetadata


class SnapshotSpool(Protocol):
    """Where a receiver keeps the bytes of one incoming snapshot (``Config.snapshot_spool``
    makes one per snapshot): ``append`` the next bytes; ``finish`` once all arrived returns
    the image as the ``data`` of the installed ``Snapshot``; ``discard`` drops a transfer
    that will not finish (a newer snapshot started). Called on the core's thread."""

    def append(self, data: bytes) -> None: ...

    def finish(self) -> SnapshotData | bytes: ...

    def discard(self) -> None: ...


class MemorySpool:
    """The default spool: the snapshot's bytes in memory."""

    __slots__ = ("buf",)

    def __init__(self, meta: SnapshotMetadata, total: int) -> None:
        self.buf = bytearray()

    def append(self, data: bytes) -> None:
        self.buf += data

    def finish(self) -> bytes:
        return bytes(self.buf)

    def discard(self) -> None:
        self.buf = bytearray()


#: Makes the spool of the snapshot ``meta`` of ``total`` bytes.
SpoolFactory = Callable[[SnapshotMetadata, int], SnapshotSpool]


class _Transfer:
    __slots__ = ("acked", "sent", "sent_any", "snap")

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.sent = 0
        self.acked = 0
        self.sent_any = False


class SnapshotSender:
    """Leader side: one transfer per follower."""

    __slots__ = ("chunk_size", "transfers", "window")

    def __init__(self, chunk_size: int, window: int) -> None:
        self.chunk_size = chunk_size
        self.window = window
        self.transfers: dict[int, _Transfer] = {}

    def start(self, to: int, snap: Snapshot) -> None:
        self.transfers[to] = _Transfer(snap)

    def stop(self, to: int) -> None:
        self.transfers.pop(to, None)

    def reset(self) -> None:
        self.transfers.clear()

    def next_chunks(self, to: int) -> list[SnapshotChunk]:
        """Chunks that fit in the window after the last one sent."""
        tr = self.transfers.get(to)
        if tr is None:
            return []
        data = tr.snap.data
        total = len(data)
        meta = tr.snap.metadata
        out: list[SnapshotChunk] = []
        limit = self.window * self.chunk_size
        while (tr.sent < total or not tr.sent_any) and tr.sent - tr.acked < limit:
            end = min(total, tr.sent + self.chunk_size)
            out.append(SnapshotChunk(meta, tr.sent, total, data[tr.sent : end]))
            tr.sent = end
            tr.sent_any = True
            if total == 0:
                break
        return out

    def ack(self, to: int, index: int, offset: int) -> None:
        """The receiver holds ``offset`` contiguous bytes of the snapshot at ``index``."""
        tr = self.transfers.get(to)
        if tr is None or tr.snap.metadata.index != index:
            return
        if offset < tr.acked:
            tr.sent = offset  # the receiver lost its buffer (restart): start over from there
        tr.acked = offset
        tr.sent = max(tr.sent, offset)

    def complete(self, to: int) -> bool:
        """Whether every byte of the transfer to ``to`` was acknowledged (or none exists)."""
        tr = self.transfers.get(to)
        return tr is None or (tr.sent_any and tr.acked >= len(tr.snap.data))

    def retransmit(self, to: int) -> list[SnapshotChunk]:
        """Resend from the last acknowledged byte (lost chunks are detected this way)."""
        tr = self.transfers.get(to)
        if tr is None:
            return []
        if tr.acked >= len(tr.snap.data) and tr.sent_any:
            return []
        tr.sent = tr.acked
        tr.sent_any = tr.acked > 0
        return self.next_chunks(to)


class SnapshotReceiver:
    """Follower side: reassembles the chunks of one snapshot at a time in a spool made by
    ``spool`` (default: in memory)."""

    __slots__ = ("done", "held", "meta", "spool", "spool_of")

    def __init__(self, spool: SpoolFactory | None = None) -> None:
        self.spool_of: SpoolFactory = spool or MemorySpool
        self.meta: SnapshotMetadata | None = None
        self.spool: SnapshotSpool | None = None
        self.held = 0
        self.done: tuple[SnapshotMetadata, int] | None = None

    def receive(self, chunk: SnapshotChunk) -> tuple[int, Snapshot | None]:
        """Take one chunk; returns the contiguous byte count now held (to acknowledge) and
        the complete snapshot once the last byte arrived."""
        if self.done is not None and self.done[0] == chunk.metadata:
            return self.done[1], None
        if self.meta != chunk.metadata or self.spool is None:
            if chunk.offset != 0:
                return 0, None
            self.drop()
            self.spool = self.spool_of(chunk.metadata, chunk.total)
            self.meta = chunk.metadata
        if chunk.offset == self.held and chunk.data:
            self.spool.append(chunk.data)
            self.held += len(chunk.data)
        held = self.held
        if held == chunk.total:
            snap = Snapshot(chunk.metadata, self.spool.finish())
            self.done = (chunk.metadata, held)
            self.meta, self.spool, self.held = None, None, 0
            return held, snap
        return held, None

    def drop(self) -> None:
        """Discard the transfer in progress, if any."""
        if self.spool is not None:
            self.spool.discard()
        self.meta, self.spool, self.held = None, None, 0
