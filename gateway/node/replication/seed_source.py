"""The source side of a seed: serve a consistent snapshot of this cluster's store, with its
rows' metadata, to a channel that seeds a replica (docs/replication.md, "Seeding a new
cluster").

``serve_seed`` answers a ``ChannelHello`` carrying a ``SeedRequest``:

1. ``seed_id`` 0 begins a seed: the leader proposes a ``SEED_PIN`` entry under a new id, and
   every node of this cluster pins its store at the next epoch boundary ``E``
   (``gateway.node.state.seed_pins``); a follower refuses (``NotLeaderError``: the reader
   tries the next address). Another ``seed_id`` resumes that seed on any node that holds its
   pin, after ``after_key``; a node that holds none refuses (``PreconditionFailed``, "seed N
   is not pinned on this node"), and the reader, finding no node that does, begins again
   under a new id.
2. ``SeedStart`` (the id, ``E``, the log index of the boundary), then ``SeedChunk``s of the
   pinned snapshot in key order -- every row and first-seen schema, retained tombstones
   included, each with its epoch, author and commit time -- read from the pin on the event
   loop a slice at a time (``_next_chunk``), so writes never wait for a whole chunk, then
   ``SeedEnd``: the apply-status table and the watermarks at ``E`` (this cluster's own: its
   last trans id at ``E``).
3. The pin is released (``release_seed``: ``SEED_PIN`` with ``release`` when this node
   leads, else here only; the other nodes' leases let theirs go) once the reader acknowledges
   the seed's epoch after installing the end -- not when the end is sent: the stream runs
   ahead of what the reader installed, and a reader restarted before the end resumes from
   the pin.

``read_chunk`` and ``seed_end`` are the pure part (a snapshot in, messages out).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from gateway.core import messages
from gateway.core.lsm.errors import StoreClosedError
from gateway.core.lsm.read_snapshot import ReadSnapshot
from gateway.node.base.errors import NodeError, NotLeaderError, PreconditionFailed
from gateway.node.state import keys
from gateway.node.state.epoch_apply import U64
from gateway.node.state.schema_apply import schema_history_of
from gateway.v1 import channel_pb2, epoch_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["CHUNK_BYTES", "CHUNK_ROWS", "ChunkCursor", "read_chunk", "release_seed", "seed_end",
           "serve_seed"]

#: A chunk ends after this many keys or bytes, whichever comes first (one Raft entry on the
#: replica each: well below the entry size limit). ``GATEWAY_SEED_CHUNK_ROWS`` sets the keys
#: (tests use small chunks to stop a seed in the middle).
CHUNK_ROWS = int(os.environ.get("GATEWAY_SEED_CHUNK_ROWS", "") or 2000)
CHUNK_BYTES = 1 << 20
#: A chunk is read on the event loop this many keys at a time (``_next_chunk``).
SLICE_ROWS = 128
#: The key range a seed copies: rows (``r``) and first-seen schemas (``s``).
SEED_LO, SEED_HI = b"r", b"t"
#: How long a new seed waits for the next epoch boundary of this cluster.
_PIN_WAIT_S = 30.0


class ChunkCursor:
    """The keys of ``snap`` after ``after_key`` (empty: from the first key), read by one scan
    from first to last chunk: a chunk continues where the previous one stopped, without a
    new seek."""

    def __init__(self, snap: ReadSnapshot, after_key: bytes = b"") -> None:
        start = after_key + b"\x00" if after_key else SEED_LO
        self._it = snap.scan_versions(start, SEED_HI)
        self.done = False

    def fill(self, chunk: channel_pb2.SeedChunk, max_rows: int, max_bytes: int,
             size: int = 0) -> int:
        """Add keys to ``chunk`` until it holds ``max_rows`` keys or its rows' bytes, ``size``
        counted before, reach ``max_bytes``, or no key is left (``done``); returns the bytes
        its rows count now."""
        rows = chunk.rows
        if len(rows) >= max_rows or size >= max_bytes:
            return size
        for key, v in self._it:
            value = v.value
            if value is None:
                rows.add(key=key, epoch=v.epoch, author=v.author, commit_ts=v.commit_ts,
                         tombstone=True)
                size += len(key) + 24
            else:
                rows.add(key=key, epoch=v.epoch, author=v.author, commit_ts=v.commit_ts,
                         value=value)
                size += len(key) + len(value) + 24
            if len(rows) >= max_rows or size >= max_bytes:
                chunk.last_key = key
                return size
        self.done = True
        if rows:
            chunk.last_key = rows[-1].key
        return size


def read_chunk(snap: ReadSnapshot, seed_id: int, after_key: bytes, chunk_no: int,
               max_rows: int = CHUNK_ROWS, max_bytes: int = CHUNK_BYTES
               ) -> channel_pb2.SeedChunk | None:
    """The next chunk of ``snap`` after ``after_key`` (empty: from the first key), or None
    when no key is left."""
    chunk = channel_pb2.SeedChunk(seed_id=seed_id, chunk_no=chunk_no)
    ChunkCursor(snap, after_key).fill(chunk, max_rows, max_bytes)
    return chunk if chunk.rows else None


def seed_end(snap: ReadSnapshot, seed_id: int, epoch: int, source_id: int, chunks: int
             ) -> channel_pb2.SeedEnd:
    """The replication state of ``snap`` (this cluster ``source_id`` at its epoch
    ``epoch``): its apply-status table and watermarks, its own last trans id as the
    watermark of ``source_id``, and every table's schema history (``schema_apply``)."""
    end = channel_pb2.SeedEnd(seed_id=seed_id, epoch=epoch, chunks=chunks)
    prefix = keys.meta_key("as:")
    for k, v in snap.scan_prefix(prefix):
        sid, by = k[len(prefix):].split(b":")
        end.apply_status.append(epoch_pb2.ApplyStatus(
            server_id=int(sid), applied_by=int(by), epoch=U64.unpack(v)[0]))
    prefix = keys.meta_key("w:")
    for k, v in snap.scan_prefix(prefix):
        origin = int(k[len(prefix):])
        if origin != source_id:
            end.watermarks.append(channel_pb2.SeedWatermark(origin=origin,
                                                            trans_id=U64.unpack(v)[0]))
    end.schema_history.extend(schema_history_of(snap.scan_prefix))
    raw = snap.get(keys.meta_key("last_trans_id"))
    own = U64.unpack(raw)[0] if raw else 0
    if own:
        end.watermarks.append(channel_pb2.SeedWatermark(origin=source_id, trans_id=own))
    return end


async def _next_chunk(cursor: ChunkCursor, seed_id: int, chunk_no: int
                      ) -> channel_pb2.SeedChunk | None:
    """The cursor's next chunk, read on the event loop ``SLICE_ROWS`` keys at a time with
    the loop's other work run between slices. Not on a worker thread: a thread reading rows
    holds the GIL for its switch interval at a time, and the loop -- which gives the GIL up
    at every socket or fsync call of the writes it serves -- waits that long to take it back
    at each of them. Small slices: every step of a write waits for at most one slice."""
    chunk = channel_pb2.SeedChunk(seed_id=seed_id, chunk_no=chunk_no)
    size = 0
    while not cursor.done and len(chunk.rows) < CHUNK_ROWS and size < CHUNK_BYTES:
        size = cursor.fill(chunk, min(CHUNK_ROWS, len(chunk.rows) + SLICE_ROWS), CHUNK_BYTES,
                           size)
        await asyncio.sleep(0)
    return chunk if chunk.rows else None


async def serve_seed(driver: RaftDriver, req: channel_pb2.SeedRequest, reader_cluster_id: int,
                     channel: str) -> AsyncIterator[channel_pb2.ChannelDown]:
    """The seed part of a channel session; see the module docstring. Raises
    ``NotLeaderError``, ``PreconditionFailed`` (and what ``submit_entry`` raises) when this
    node cannot serve it."""
    sm = driver.sm
    me = driver.opts.cluster_id
    seed_id = req.seed_id
    if not seed_id:
        if not driver.is_leader:
            raise NotLeaderError(driver.leader_id, f"a seed begins on the source's leader "
                                 f"(node {driver.leader_id or 'unknown'}), not here")
        seed_id = secrets.randbits(62) + 1
        await driver.submit_entry(messages.pack(channel_pb2.SeedPin(
            seed_id=seed_id, reader_cluster_id=reader_cluster_id, channel=channel)))
    pin = sm.seed_pins.get(seed_id)
    if pin is None:
        raise PreconditionFailed("hello.seed", f"seed {seed_id} is not pinned on this node "
                                 f"(released, expired or lost with a restart): begin a new "
                                 f"seed")
    deadline = time.monotonic() + _PIN_WAIT_S
    while pin.snapshot is None:
        if time.monotonic() > deadline:
            raise PreconditionFailed("hello.seed", f"seed {seed_id}: no epoch boundary "
                                     f"within {_PIN_WAIT_S:g} s")
        await asyncio.sleep(0.02)
    snap = pin.snapshot
    yield channel_pb2.ChannelDown(seed_start=channel_pb2.SeedStart(
        seed_id=seed_id, epoch=pin.epoch, source_log_index=pin.log_index, source_id=me))
    cursor = ChunkCursor(snap, req.after_key)
    n = 0
    while True:
        try:
            chunk = await _next_chunk(cursor, seed_id, n + 1)
        except StoreClosedError as exc:  # released (or expired) under the read
            raise PreconditionFailed("hello.seed", f"seed {seed_id} is not pinned on this "
                                     f"node any more ({exc}): begin a new seed") from None
        sm.seed_pins.get(seed_id)  # keeps the lease
        if chunk is None:
            break
        n += 1
        yield channel_pb2.ChannelDown(seed_chunk=chunk)
    end = await asyncio.to_thread(seed_end, snap, seed_id, pin.epoch, me, n)
    yield channel_pb2.ChannelDown(seed_end=end)


async def release_seed(driver: RaftDriver, seed_id: int) -> None:
    """Release the pin of ``seed_id``: on every node through the log when this node leads,
    else on this node (the others' leases end theirs)."""
    if driver.is_leader:
        try:
            await driver.submit_entry(messages.pack(channel_pb2.SeedPin(seed_id=seed_id,
                                                                        release=True)))
            return
        except NodeError:
            pass
    driver.sm.seed_pins.release(seed_id)
