"""Peer transport over grpc.aio: Raft messages between the nodes of one cluster.

Each node keeps one long-lived client stream (``Peer.Send``) to every other member. ``send``
only queues; a sender task per peer takes *everything* queued for that peer and writes it as
one ``MessageBatch`` (batching), without waiting for earlier batches to be processed
(pipelining: gRPC flow control is the only limit). Snapshot chunks travel as ``SNAP`` messages
in the same stream; the core chunks them and acknowledges bytes, so a broken stream resumes
where the receiver left off. Each batch names the sender's peer and API addresses: a node
started with ``--join`` learns the members' addresses from the first batches it receives.

When a stream breaks or a peer is unreachable, queued messages are dropped (Raft retransmits),
``report_unreachable(peer)`` is stepped for the peer and ``report_snapshot(peer, failed)`` for
snapshot chunks lost, and the sender reconnects with exponential backoff (50 ms doubling to
2 s). Each batch also carries the sender's public API address so followers can tell clients
where the leader is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import grpc

from gateway.raft import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    SnapshotChunk,
    SnapshotMetadata,
)
from gateway.v1 import peer_pb2, peer_pb2_grpc

__all__ = ["CHANNEL_OPTIONS", "PeerServicer", "PeerTransport", "from_proto", "to_proto"]

log = logging.getLogger("gateway.node.transport")

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.keepalive_timeout_ms", 5000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
MAX_QUEUED = 20000
_BACKOFF_MIN, _BACKOFF_MAX = 0.05, 2.0


def to_proto(m: Message) -> peer_pb2.RaftMessage:
    """The wire form of a Raft message."""
    pm = peer_pb2.RaftMessage(type=m.type, to=m.to, term=m.term, log_term=m.log_term,
                              index=m.index, commit=m.commit, reject=m.reject,
                              reject_hint=m.reject_hint, context=m.context, lease=m.lease)
    setattr(pm, "from", m.from_)
    if m.entries:
        add = pm.entries.add
        for e in m.entries:
            add(term=e.term, index=e.index, type=e.type, data=e.data)
    c = m.chunk
    if c is not None:
        cs = c.metadata.conf_state
        pm.chunk.CopyFrom(peer_pb2.RaftSnapshotChunk(
            conf_state=peer_pb2.RaftConfState(
                voters=cs.voters, learners=cs.learners, voters_outgoing=cs.voters_outgoing,
                learners_next=cs.learners_next, auto_leave=cs.auto_leave),
            index=c.metadata.index, term=c.metadata.term, offset=c.offset, total=c.total,
            data=c.data))
    return pm


def from_proto(pm: peer_pb2.RaftMessage) -> Message:
    """Inverse of :func:`to_proto`."""
    chunk = None
    if pm.HasField("chunk"):
        c = pm.chunk
        cs = c.conf_state
        meta = SnapshotMetadata(ConfState(tuple(cs.voters), tuple(cs.learners),
                                          tuple(cs.voters_outgoing), tuple(cs.learners_next),
                                          cs.auto_leave), c.index, c.term)
        chunk = SnapshotChunk(meta, c.offset, c.total, c.data)
    normal, conf = EntryType.NORMAL, EntryType.CONF_CHANGE
    return Message(
        MessageType(pm.type), pm.to, getattr(pm, "from"), pm.term, pm.log_term, pm.index,
        [Entry(e.term, e.index, conf if e.type else normal, e.data) for e in pm.entries],
        pm.commit, None, chunk, pm.reject, pm.reject_hint, pm.context, pm.lease)


class _Peer:
    __slots__ = ("address", "channel", "event", "id", "queue", "stub", "task")

    def __init__(self, node_id: int, address: str) -> None:
        self.id = node_id
        self.address = address
        self.queue: list[Message] = []
        self.event = asyncio.Event()
        self.channel: grpc.aio.Channel | None = None
        self.stub: peer_pb2_grpc.PeerStub | None = None
        self.task: asyncio.Task[None] | None = None


class PeerTransport:
    """Outgoing streams to the other members. ``report(kind, peer)`` feeds transport
    failures back to the core (``kind`` is ``"unreachable"`` or ``"snapshot-failed"``)."""

    def __init__(self, node_id: int, api_address: str, peer_address: str,
                 credentials: grpc.ChannelCredentials | None,
                 report: Callable[[str, int], None]) -> None:
        self.node_id = node_id
        self.api_address = api_address
        self.peer_address = peer_address
        self._creds = credentials
        self._report = report
        self._peers: dict[int, _Peer] = {}
        self.api_of: dict[int, str] = {}
        self.address_of: dict[int, str] = {}
        self._closed = False
        #: Stream writes made (one per batch of queued messages to one peer) and messages in
        #: them: the transport's batching, exported as metrics.
        self.batches_sent = 0
        self.batched_messages = 0

    def set_peer(self, node_id: int, address: str) -> None:
        """Add or re-address peer ``node_id`` (no-op for this node itself)."""
        self.address_of[node_id] = address
        if node_id == self.node_id:
            return
        old = self._peers.get(node_id)
        if old is not None and old.address == address:
            return
        if old is not None:
            self._drop(old)
        p = _Peer(node_id, address)
        self._peers[node_id] = p
        if not self._closed:
            p.task = asyncio.get_running_loop().create_task(self._sender(p),
                                                            name=f"peer-send-{node_id}")

    def remove_peer(self, node_id: int) -> None:
        p = self._peers.pop(node_id, None)
        if p is not None:
            self._drop(p)

    def _drop(self, p: _Peer) -> None:
        if p.task is not None:
            p.task.cancel()
        if p.channel is not None:
            ch = p.channel
            asyncio.get_running_loop().create_task(ch.close())

    def send(self, msgs: list[Message]) -> None:
        """Queue ``msgs`` for their destinations (never blocks)."""
        for m in msgs:
            p = self._peers.get(m.to)
            if p is None:
                continue
            if len(p.queue) >= MAX_QUEUED:
                p.queue.clear()
                self._report("unreachable", p.id)
            p.queue.append(m)
            p.event.set()

    def channel(self, node_id: int) -> grpc.aio.Channel | None:
        """The channel to peer ``node_id`` (for forwarding), if it is a known peer."""
        p = self._peers.get(node_id)
        if p is None:
            return None
        if p.channel is None:
            self._connect(p)
        return p.channel

    def _connect(self, p: _Peer) -> None:
        if self._creds is not None:
            p.channel = grpc.aio.secure_channel(p.address, self._creds, options=CHANNEL_OPTIONS)
        else:
            p.channel = grpc.aio.insecure_channel(p.address, options=CHANNEL_OPTIONS)
        p.stub = peer_pb2_grpc.PeerStub(p.channel)

    async def _sender(self, p: _Peer) -> None:
        backoff = _BACKOFF_MIN
        while not self._closed:
            if p.channel is None:
                self._connect(p)
            assert p.stub is not None
            call = p.stub.Send()
            try:
                while True:
                    if not p.queue:
                        p.event.clear()
                        await p.event.wait()
                    batch, p.queue = p.queue, []
                    req = peer_pb2.MessageBatch(messages=[to_proto(m) for m in batch],
                                                from_api=self.api_address,
                                                from_peer=self.peer_address)
                    setattr(req, "from", self.node_id)
                    self.batches_sent += 1
                    self.batched_messages += len(batch)
                    try:
                        await call.write(req)
                    except BaseException:
                        self._lost(p, batch)
                        raise
                    backoff = _BACKOFF_MIN
            except asyncio.CancelledError:
                call.cancel()
                raise
            except Exception as exc:  # the stream broke: reconnect after a backoff
                log.debug("stream to peer %d (%s) broke: %s", p.id, p.address, exc)
                call.cancel()
                self._lost(p, p.queue)
                p.queue = []
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX)

    def _lost(self, p: _Peer, batch: list[Message]) -> None:
        self._report("unreachable", p.id)
        if any(m.type == MessageType.SNAP for m in batch):
            self._report("snapshot-failed", p.id)

    async def close(self) -> None:
        self._closed = True
        for p in list(self._peers.values()):
            if p.task is not None:
                p.task.cancel()
        for p in list(self._peers.values()):
            if p.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await p.task
            if p.channel is not None:
                await p.channel.close()
        self._peers.clear()


ForwardHandler = Callable[[str, bytes, grpc.aio.ServicerContext], Awaitable[bytes]]


class PeerServicer(peer_pb2_grpc.PeerServicer):
    """Server side of ``Peer``: steps received batches, runs forwarded requests."""

    def __init__(self, deliver: Callable[[list[Message]], None], transport: PeerTransport,
                 forward: ForwardHandler) -> None:
        self._deliver = deliver
        self._transport = transport
        self._forward = forward

    async def Send(self, request_iterator, context):  # type: ignore[no-untyped-def]
        async for batch in request_iterator:
            sender = getattr(batch, "from")
            if batch.from_api:
                self._transport.api_of[sender] = batch.from_api
            if batch.from_peer and sender not in self._transport.address_of:
                self._transport.set_peer(sender, batch.from_peer)  # a joining node learns
            self._deliver([from_proto(m) for m in batch.messages])
        return peer_pb2.SendAck()

    async def Forward(self, request, context):  # type: ignore[no-untyped-def]
        return peer_pb2.ForwardResponse(
            response=await self._forward(request.method, request.request, context))
