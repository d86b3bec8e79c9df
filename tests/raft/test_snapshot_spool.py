"""A receiver keeps an incoming snapshot's chunks in the spool ``Config.snapshot_spool`` makes
(default: memory): each byte appended once and in order, duplicates and gaps not appended, the
installed snapshot's data what the spool's ``finish`` returned, a newer snapshot discarding the
spool of the one it replaces."""

from __future__ import annotations

from gateway.raft import ConfState, Snapshot, SnapshotChunk, SnapshotMetadata
from gateway.raft.snapshot_transfer import MemorySpool, SnapshotReceiver

from .harness import transfer

CONF = ConfState(voters=(1, 2))
A = SnapshotMetadata(CONF, 10, 2)
B = SnapshotMetadata(CONF, 20, 3)


class Recording:
    """A spool that records what the receiver asks of it."""

    made: list[Recording] = []

    def __init__(self, meta: SnapshotMetadata, total: int) -> None:
        self.meta, self.total = meta, total
        self.parts: list[bytes] = []
        self.finished = self.discarded = False
        Recording.made.append(self)

    def append(self, data: bytes) -> None:
        assert not (self.finished or self.discarded)
        self.parts.append(data)

    def finish(self) -> bytes:
        self.finished = True
        return b"finished:" + b"".join(self.parts)

    def discard(self) -> None:
        self.discarded = True


def _chunk(meta: SnapshotMetadata, data: bytes, offset: int, size: int) -> SnapshotChunk:
    return SnapshotChunk(meta, offset, len(data), data[offset:offset + size])


def test_chunks_are_appended_once_in_order_and_finish_gives_the_data():
    Recording.made = []
    r = SnapshotReceiver(Recording)
    data = bytes(range(256)) * 4
    assert r.receive(_chunk(A, data, 100, 100)) == (0, None)  # a gap: nothing made yet
    assert Recording.made == []
    assert r.receive(_chunk(A, data, 0, 300)) == (300, None)
    assert r.receive(_chunk(A, data, 0, 300)) == (300, None)  # duplicate
    assert r.receive(_chunk(A, data, 600, 300)) == (300, None)  # gap
    assert r.receive(_chunk(A, data, 300, 300)) == (600, None)
    held, snap = r.receive(_chunk(A, data, 600, 424))
    (spool,) = Recording.made
    assert held == 1024 and (spool.meta, spool.total) == (A, 1024)
    assert b"".join(spool.parts) == data and spool.finished and not spool.discarded
    assert snap is not None and snap.metadata == A and snap.data == b"finished:" + data
    # a late duplicate of the finished snapshot is acknowledged, not spooled again
    assert r.receive(_chunk(A, data, 300, 300)) == (1024, None) and len(Recording.made) == 1


def test_a_newer_snapshot_discards_the_spool_of_the_one_it_replaces():
    Recording.made = []
    r = SnapshotReceiver(Recording)
    old, new = b"o" * 500, b"n" * 50
    r.receive(_chunk(A, old, 0, 100))
    assert r.receive(_chunk(B, new, 20, 10)) == (0, None)  # not its start: ignored
    assert not Recording.made[0].discarded
    held, snap = r.receive(_chunk(B, new, 0, 50))
    first, second = Recording.made
    assert first.discarded and not first.finished
    assert held == 50 and snap is not None and snap.data == b"finished:" + new
    r.drop()
    assert not second.discarded  # finished spools belong to the snapshot now


def test_an_empty_snapshot_finishes_without_an_append():
    Recording.made = []
    held, snap = SnapshotReceiver(Recording).receive(SnapshotChunk(A, 0, 0, b""))
    assert held == 0 and snap is not None and Recording.made[0].parts == []


def test_the_default_spool_is_memory_and_a_sender_to_it_round_trips():
    data = bytes(range(251)) * 40
    receiver = SnapshotReceiver()
    assert receiver.spool_of is MemorySpool
    got = transfer(Snapshot(A, data), receiver, chunk_size=333, window=2)
    assert got.data == data and isinstance(got.data, bytes)
