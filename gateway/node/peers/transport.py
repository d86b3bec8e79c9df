"""Peer transport: Raft messages between the nodes of one cluster.

Each node keeps one long-lived stream to every other member: the framed TCP stream of
``gateway.node.peers.peer_stream`` (mutual TLS when peer TLS is configured), or, to a node that
answers its preface with other bytes (an older version), the gRPC ``Peer.Send`` stream, tried
again on the framed stream every :data:`FALLBACK_SECONDS`. ``send`` never blocks: messages
for a peer whose framed stream is up and idle (nothing queued, the socket's buffer below its
high-water mark) are written to the socket at once, as one ``MessageBatch``; otherwise they
are queued, and a sender task per peer takes *everything* queued for that peer and writes it
as one batch, without waiting for earlier batches to be processed (pipelining: the socket's
write buffer, or gRPC's flow control, is the only limit). Either way a peer's messages leave
in the order they were sent. (Writing at once saves the sender task's wake-up -- a loop
iteration and a task step per peer per Ready, on the path of every write: the leader's
appends and the followers' answers; docs/benchmarks.md, "Peer messages written in the
`send` call".) Snapshot chunks travel
as ``SNAP`` messages in the same stream (always through the sender task, which notes them for
the loss report); the core chunks them and acknowledges bytes, so a broken stream resumes
where the receiver left off. Each batch names the sender's peer and API addresses: a node
started with ``--join`` learns the members' addresses from the first batches it receives, and
followers can tell clients where the leader is.

When a stream breaks or a peer is unreachable, queued messages are dropped (Raft retransmits),
``report_unreachable(peer)`` is stepped for the peer and ``report_snapshot(peer, failed)`` when
snapshot chunks were written on the lost stream, and the sender reconnects with exponential
backoff (50 ms doubling to 2 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import grpc

from gateway.node.base.config import parse_address
from gateway.node.peers.peer_codec import (
    PeerBatch,
    encode_batch,
    encode_frame_batch,
    from_message_batch,
    from_proto,
    to_proto,
)
from gateway.node.peers.peer_stream import BATCH_TAG, PREFACE, preface_state, tune_socket
from gateway.raft import Message, MessageType
from gateway.v1 import peer_pb2, peer_pb2_grpc

__all__ = ["CHANNEL_OPTIONS", "MAX_BATCH_BYTES", "PeerServicer", "PeerTransport", "cut_batch",
           "from_proto", "to_proto"]

log = logging.getLogger("gateway.node.peers.transport")

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.keepalive_timeout_ms", 5000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    # a server (these options serve the peer and API servers too) accepts those pings: by
    # default it allows one per 5 minutes without data and answers a third early one with
    # GOAWAY too_many_pings, closing the connection under the calls it carries
    ("grpc.http2.min_ping_interval_without_data_ms", 5000),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
MAX_QUEUED = 20000
_BACKOFF_MIN, _BACKOFF_MAX = 0.05, 2.0
#: How long a peer that did not answer the framed stream's preface is sent to over gRPC.
FALLBACK_SECONDS = 30.0
_CONNECT_TIMEOUT = 5.0
#: Write-buffer bytes above which the sender waits for the socket to drain.
_HIGH_WATER = 4 << 20
#: A batch is cut so that each stream message carries about this many payload bytes at most
#: (one larger message goes alone): far below the receivers' 64 MiB limit, which a follower
#: catching up (hundreds of 1 MiB appends queued at once) would otherwise exceed.
MAX_BATCH_BYTES = 16 << 20


def cut_batch(msgs: list[Message], limit: int = MAX_BATCH_BYTES) -> list[list[Message]]:
    """``msgs`` in order, in runs whose entry and snapshot-chunk bytes (plus 64 per message)
    stay within ``limit`` -- except a single message above it, which is a run alone."""
    runs: list[list[Message]] = []
    run: list[Message] = []
    size = 0
    for m in msgs:
        n = 64
        for e in m.entries:
            n += len(e.data) + 16
        if m.chunk is not None:
            n += len(m.chunk.data)
        if run and size + n > limit:
            runs.append(run)
            run, size = [], 0
        run.append(m)
        size += n
    if run:
        runs.append(run)
    return runs


#: The method path of ``Peer.Send`` (from the service descriptor).
_SEND_PATH = "/{}/Send".format(peer_pb2.DESCRIPTOR.services_by_name["Peer"].full_name)


def _as_is(data: bytes) -> bytes:
    return data


class _NotFramed(Exception):
    """The peer answered something else than the preface (an older version's gRPC server
    answers with HTTP/2 frames): it does not speak the framed stream; use gRPC for a while.
    A connection closed with no answer is not taken as evidence: proxies in front of a dead
    peer do that."""


class _Dial(asyncio.Protocol):
    """The dialing side of a framed stream: waits for the preface, then only watches for the
    connection's end (the listener never writes after its preface) and for back-pressure."""

    def __init__(self, wake: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        self.wake = wake
        self.transport: asyncio.Transport | None = None
        self.answered: asyncio.Future[None] = loop.create_future()
        self.got = b""
        self.lost: BaseException | None = None
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's
        tune_socket(transport)
        self.transport.set_write_buffer_limits(high=_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        if self.answered.done():  # nothing is expected after the preface
            self.lost = ConnectionError("unexpected bytes after the preface")
            assert self.transport is not None
            self.transport.abort()
            return
        self.got += data
        state = preface_state(self.got)
        if state is False:
            self.answered.set_exception(_NotFramed(f"answered {self.got[:16]!r}"))
        elif state:
            self.answered.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("closed by the peer")
        if not self.answered.done():  # a dead link or a proxy in front of a dead peer: retry
            self.answered.set_exception(ConnectionResetError(f"closed before answering ({exc})"))
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.wake.set()

    def pause_writing(self) -> None:
        self.drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.drained = None


class _Connected(Exception):
    """A stream that was up broke (the loss is already reported)."""


class _Peer:
    __slots__ = ("address", "channel", "event", "grpc_until", "id", "kind", "queue", "send",
                 "stream", "task")

    def __init__(self, node_id: int, address: str) -> None:
        self.id = node_id
        self.address = address
        self.queue: list[Message] = []
        self.event = asyncio.Event()
        self.channel: grpc.aio.Channel | None = None
        # Peer.Send, bytes in
        self.send: grpc.aio.StreamUnaryMultiCallable[bytes, peer_pb2.SendAck] | None = None
        self.task: asyncio.Task[None] | None = None
        self.grpc_until = 0.0  # loop time until which this peer is sent to over gRPC
        self.kind = ""  # the stream up now: "framed", "grpc" or "" (none)
        #: The framed stream's transport and protocol while it is up (``send`` writes to it
        #: directly when nothing is queued), else None.
        self.stream: tuple[asyncio.Transport, _Dial] | None = None


class PeerTransport:
    """Outgoing streams to the other members. ``report(kind, peer)`` feeds transport
    failures back to the core (``kind`` is ``"unreachable"`` or ``"snapshot-failed"``)."""

    def __init__(self, node_id: int, api_address: str, peer_address: str,
                 credentials: grpc.ChannelCredentials | None,
                 report: Callable[[str, int], None],
                 ssl_context: ssl.SSLContext | None = None) -> None:
        """``credentials`` (gRPC) and ``ssl_context`` (the framed stream) are both ``None``
        for plaintext peers, both set for mutual TLS."""
        self.node_id = node_id
        self.api_address = api_address
        self.peer_address = peer_address
        self._creds = credentials
        self._ssl = ssl_context
        self._report = report
        self._peers: dict[int, _Peer] = {}
        self.api_of: dict[int, str] = {}
        self.address_of: dict[int, str] = {}
        self._closed = False
        #: Stream writes made (one per batch of queued messages to one peer) and messages in
        #: them: the transport's batching, exported as metrics.
        self.batches_sent = 0
        self.batched_messages = 0
        self.deliver: Callable[[list[Message]], None] | None = None

    def received(self, batch: PeerBatch) -> None:
        """A batch arrived (either stream): learn the sender's addresses, step its messages."""
        sender = batch.sender
        if batch.from_api:
            self.api_of[sender] = batch.from_api
        if batch.from_peer and sender not in self.address_of:
            self.set_peer(sender, batch.from_peer)  # a joining node learns
        if self.deliver is not None:
            self.deliver(batch.messages)

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
        """Send ``msgs`` to their destinations (never blocks): written at once to a peer whose
        framed stream is up with nothing queued and its write buffer below the high-water
        mark (and no snapshot chunk among them), else queued for the peer's sender task."""
        fresh: list[_Peer] = []  # peers with nothing queued before this call
        for m in msgs:
            p = self._peers.get(m.to)
            if p is None:
                continue
            if not p.queue:
                fresh.append(p)
            elif len(p.queue) >= MAX_QUEUED:
                p.queue.clear()  # its sender task was woken when the first was queued
                self._report("unreachable", p.id)
            p.queue.append(m)
        for p in fresh:
            stream = p.stream
            if stream is None or stream[1].drained is not None or stream[1].lost is not None \
                    or any(m.type == MessageType.SNAP for m in p.queue):
                p.event.set()  # the sender task writes it (or the stream is not up)
                continue
            batch, p.queue = p.queue, []
            for run in cut_batch(batch):
                stream[0].write(self._batch(run, framed=True))

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
        # Peer.Send taking each MessageBatch as the bytes _batch already made (the generated
        # stub would want a message, parsed from them only to be serialized again).
        p.send = p.channel.stream_unary(_SEND_PATH, request_serializer=_as_is,
                                        response_deserializer=peer_pb2.SendAck.FromString)

    def streams(self) -> dict[int, str]:
        """Every peer -> the kind of its stream now up (``"framed"``, ``"grpc"``, ``""``)."""
        return {nid: p.kind for nid, p in self._peers.items()}

    def stream_kind(self, node_id: int) -> str:
        """``"framed"`` or ``"grpc"``: the stream to peer ``node_id`` now up, else ``""``."""
        return self.streams().get(node_id, "")

    def _batch(self, batch: list[Message], *, framed: bool = False) -> bytes:
        """``batch`` as a serialized ``MessageBatch`` from this node; ``framed``: inside the
        framed stream's frame (built in one buffer, ``encode_frame_batch``)."""
        self.batches_sent += 1
        self.batched_messages += len(batch)
        if framed:
            return encode_frame_batch(BATCH_TAG, self.node_id, self.api_address,
                                      self.peer_address, batch)
        return encode_batch(self.node_id, self.api_address, self.peer_address, batch)

    async def _sender(self, p: _Peer) -> None:
        backoff = _BACKOFF_MIN
        loop = asyncio.get_running_loop()
        while not self._closed:
            framed = loop.time() >= p.grpc_until
            try:
                if framed:
                    await self._stream_framed(p)
                else:
                    await self._stream_grpc(p)
            except asyncio.CancelledError:
                raise
            except _NotFramed as exc:
                log.info("peer %d (%s) does not speak the framed stream (%s): gRPC for %.0f s",
                         p.id, p.address, exc, FALLBACK_SECONDS)
                p.grpc_until = loop.time() + FALLBACK_SECONDS
            except _Connected:  # the stream worked, then broke: reconnect at once
                backoff = _BACKOFF_MIN
                await asyncio.sleep(backoff)
            except Exception as exc:  # could not connect: retry after a backoff
                log.debug("stream to peer %d (%s) failed: %s", p.id, p.address, exc)
                self._lost(p, p.queue)
                p.queue = []
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX)

    async def _stream_framed(self, p: _Peer) -> None:
        """Connect, exchange the preface, then write batches until the connection breaks
        (raises ``_Connected`` after reporting the loss); raises ``_NotFramed`` when the peer
        answers as an older version does."""
        host, port = parse_address(p.address, f"peers.{p.id}")
        host = host.strip("[]")
        loop = asyncio.get_running_loop()
        transport, proto = await asyncio.wait_for(loop.create_connection(
            lambda: _Dial(p.event), host, port, ssl=self._ssl,
            server_hostname=host if self._ssl is not None else None,
            ssl_handshake_timeout=_CONNECT_TIMEOUT if self._ssl is not None else None),
            _CONNECT_TIMEOUT)
        snapped = False
        try:
            tls = transport.get_extra_info("ssl_object")
            if tls is not None and tls.selected_alpn_protocol() == "h2":
                raise _NotFramed("its TLS selected h2")
            transport.write(PREFACE)
            await asyncio.wait_for(asyncio.shield(proto.answered), _CONNECT_TIMEOUT)
            p.kind = "framed"
            p.stream = (transport, proto)
            while True:
                if proto.lost is not None:
                    raise _Connected(proto.lost)
                if not p.queue:
                    p.event.clear()
                    await p.event.wait()
                    continue
                batch, p.queue = p.queue, []
                if not snapped:
                    snapped = any(m.type == MessageType.SNAP for m in batch)
                for run in cut_batch(batch):
                    transport.write(self._batch(run, framed=True))
                if proto.drained is not None:
                    await proto.drained
        except _Connected as exc:
            log.debug("stream to peer %d (%s) broke: %s", p.id, p.address, exc)
            self._lost(p, p.queue, snapped)
            p.queue = []
            raise
        finally:
            p.kind = ""
            p.stream = None
            transport.abort()
            if not proto.answered.done():
                proto.answered.cancel()
            elif not proto.answered.cancelled():
                proto.answered.exception()  # retrieved: never "exception was never retrieved"

    async def _stream_grpc(self, p: _Peer) -> None:
        """The gRPC ``Peer.Send`` stream, for a peer that does not speak the framed one; returns
        when the fallback period is over."""
        if p.channel is None:
            self._connect(p)
        assert p.send is not None
        loop = asyncio.get_running_loop()
        call = p.send()
        p.kind = "grpc"
        try:
            while True:
                if not p.queue:
                    p.event.clear()
                    remaining = p.grpc_until - loop.time()
                    if remaining <= 0:
                        return
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(p.event.wait(), remaining)
                    continue
                batch, p.queue = p.queue, []
                try:
                    for run in cut_batch(batch):
                        await call.write(self._batch(run))
                except BaseException:
                    self._lost(p, batch)
                    raise
        finally:
            p.kind = ""
            call.cancel()

    def _lost(self, p: _Peer, batch: list[Message], snapped: bool = False) -> None:
        self._report("unreachable", p.id)
        if snapped or any(m.type == MessageType.SNAP for m in batch):
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


ForwardContext = grpc.aio.ServicerContext[peer_pb2.ForwardRequest, peer_pb2.ForwardResponse]
#: ``forward(method, request bytes, context)``: the serialized response of a forwarded call.
ForwardHandler = Callable[[str, bytes, ForwardContext], Awaitable[bytes]]


class PeerServicer(peer_pb2_grpc.PeerServicer):
    """Server side of ``Peer``: steps received batches, runs forwarded requests."""

    def __init__(self, deliver: Callable[[list[Message]], None], transport: PeerTransport,
                 forward: ForwardHandler) -> None:
        transport.deliver = deliver
        self._transport = transport
        self._forward = forward

    async def Send(self, request_iterator: AsyncIterator[peer_pb2.MessageBatch],
                   context: grpc.aio.ServicerContext[peer_pb2.MessageBatch, peer_pb2.SendAck]
                   ) -> peer_pb2.SendAck:
        async for batch in request_iterator:
            self._transport.received(from_message_batch(batch))
        return peer_pb2.SendAck()

    async def Forward(self, request: peer_pb2.ForwardRequest, context: ForwardContext
                      ) -> peer_pb2.ForwardResponse:
        return peer_pb2.ForwardResponse(
            response=await self._forward(request.method, request.request, context))
