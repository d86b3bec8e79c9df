"""The peer port: Raft messages as a framed TCP stream, everything else relayed to gRPC.

etcd's members do not talk gRPC to each other (rafthttp streams), and neither do ours: a
grpc.aio stream message costs about ten times the CPU of a frame on a plain asyncio socket
(``benchmarks/bench_grpc_stream.py``; docs/benchmarks.md, "Peer transport: a framed TCP
stream, not grpc.aio").

**The Raft stream.** The dialing node writes :data:`PREFACE`, the listener answers it with the
same :data:`PREFACE` (so the dialer knows it is understood: a node of an older version, whose
peer port is plain gRPC, answers with HTTP/2 frames, or behind TLS selects ALPN ``h2``, and the
dialer falls back to the gRPC ``Peer.Send`` stream) and never writes again. From then on the
dialer writes frames of the 2008 transport frame (``gateway.core.frame``: length, tag, message,
CRC-32), tag :data:`BATCH_TAG`, each holding one serialized ``gateway.v1.MessageBatch`` -- the
same message the gRPC stream carries, with the sender's id and addresses. A damaged frame (CRC
mismatch, a length over :data:`MAX_FRAME`, an unknown tag, a message that does not parse)
closes the connection with a warning naming the remote address; the dialer reconnects and Raft
retransmits what was lost, as after any broken connection.

**The protocol switch.** One listener owns the peer port (``listen``). With peer TLS it
terminates mutual TLS first (a client certificate signed by ``peer_ca`` required; ALPN
``gwraft1`` selected for our dialers, ``h2`` for gRPC clients); then it looks at the first
bytes. :data:`PREFACE` makes the connection a Raft stream; anything else (gRPC's HTTP/2
preface: ``Peer.Forward``, an older node's ``Peer.Send``, a test's client) is relayed byte for
byte, with back-pressure both ways, to the node's gRPC peer server, which listens on a Unix
socket in a private (0700) directory. The socket is never reachable from the network; peer TLS,
when configured, is the listener's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from typing import cast

from gateway.core.frame import MAX_LENGTH, FrameError, TruncatedFrameError, frame_span
from gateway.node.peers.peer_codec import PeerBatch, decode_batch

__all__ = ["BATCH_TAG", "MAX_FRAME", "PREFACE", "PeerListener", "preface_state", "tune_socket"]

log = logging.getLogger("gateway.node.peers.transport")

#: The first bytes of a Raft stream, both ways (gRPC's HTTP/2 preface starts ``PRI *``).
PREFACE = b"GWRAFT1\n"
#: The frame tag of a ``MessageBatch``.
BATCH_TAG = 0x01
#: The largest frame accepted: the gRPC peer channels' 64 MiB message limit, with room.
MAX_FRAME = min(MAX_LENGTH, (64 << 20) + (1 << 20))
#: A connection silent with unacknowledged bytes for this long is dead (TCP_USER_TIMEOUT).
USER_TIMEOUT_MS = 15000


def preface_state(buf: bytes | bytearray) -> bool | None:
    """``True`` once ``buf`` starts with :data:`PREFACE`, ``None`` while it is a proper
    prefix of it (wait for more), ``False`` as soon as it holds other bytes."""
    n = min(len(buf), len(PREFACE))
    if buf[:n] != PREFACE[:n]:
        return False
    return True if n == len(PREFACE) else None


def tune_socket(transport: asyncio.BaseTransport) -> None:
    """No Nagle delay; keepalive probes after 10 s idle; give up on a peer that acknowledges
    nothing for :data:`USER_TIMEOUT_MS` (what gRPC's keepalive pings did for the old stream)."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 2)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, USER_TIMEOUT_MS)


class _Relay(asyncio.Protocol):
    """The gRPC server's side of a relayed connection: bytes from it go to the remote peer;
    each side's full write buffer pauses reading on the other."""

    def __init__(self, front: _Connection) -> None:
        self.front = front
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's

    def data_received(self, data: bytes) -> None:
        self.front.transport.write(data)

    def eof_received(self) -> bool:
        with contextlib.suppress(Exception):
            if self.front.transport.can_write_eof():
                self.front.transport.write_eof()
                return True
        self.front.transport.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.front.transport.close()

    def pause_writing(self) -> None:
        self.front.transport.pause_reading()

    def resume_writing(self) -> None:
        self.front.transport.resume_reading()


class _Connection(asyncio.Protocol):
    """One accepted connection of the peer port: undecided until :data:`PREFACE` or anything
    else arrives, then a Raft stream or a relay to the gRPC server."""

    def __init__(self, listener: PeerListener) -> None:
        self.listener = listener
        # (set by ``connection_made``, which asyncio calls before any other method)
        self.transport: asyncio.Transport
        self.buf = bytearray()
        self.mode = ""  # "" undecided, "raft", "relay"
        self.relay: _Relay | None = None
        self.remote = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's
        self.listener.connections.add(self)
        peer = transport.get_extra_info("peername")
        if peer:
            self.remote = f"{peer[0]}:{peer[1]}"
        tune_socket(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.connections.discard(self)
        if self.relay is not None and self.relay.transport is not None:
            self.relay.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.mode == "raft":
            self.buf += data
            self._frames()
        elif self.mode == "relay":
            if self.relay is not None and self.relay.transport is not None:
                self.relay.transport.write(data)
            else:
                self.buf += data
        else:
            self.buf += data
            state = preface_state(self.buf)
            if state is False:
                self._start_relay()
            elif state:
                del self.buf[:len(PREFACE)]
                self.mode = "raft"
                self.transport.write(PREFACE)
                self._frames()

    def eof_received(self) -> bool:
        if self.mode == "relay" and self.relay is not None and self.relay.transport is not None:
            with contextlib.suppress(Exception):
                if self.relay.transport.can_write_eof():
                    self.relay.transport.write_eof()
                    return self.listener.tls is None  # half-open, where TLS allows it
        return False

    def pause_writing(self) -> None:
        if self.relay is not None and self.relay.transport is not None:
            self.relay.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.relay is not None and self.relay.transport is not None:
            self.relay.transport.resume_reading()

    # -- the Raft stream --------------------------------------------------------------------

    def _frames(self) -> None:
        """Deliver every whole frame in the buffer, in order, and drop their bytes.

        Each batch is decoded straight from the buffer (a view of the frame's message, not a
        copy of it) before the delivered bytes are cut off. A damaged frame delivers what came
        before it and closes the connection; so does a batch that cannot be decoded, after
        the batches before it."""
        buf, pos, spans = self.buf, 0, []
        damage: Exception | None = None
        try:
            while pos < len(buf):
                try:
                    tag, start, end, nxt = frame_span(buf, pos)
                except TruncatedFrameError:
                    if len(buf) - pos > MAX_FRAME + 16:
                        raise FrameError("frame longer than the limit", offset=pos) from None
                    break
                if tag != BATCH_TAG:
                    raise FrameError(f"unknown frame tag {tag}", offset=pos)
                if end - start > MAX_FRAME:
                    raise FrameError(f"frame of {end - start} bytes over the limit",
                                     offset=pos)
                spans.append((start, end))
                pos = nxt
        except FrameError as exc:
            damage = exc  # what came before the damage is intact and delivered
        batches: list[PeerBatch] = []
        refused: Exception | None = None  # the first batch that did not decode
        with memoryview(buf) as view:
            for start, end in spans:
                try:
                    batches.append(decode_batch(view[start:end]))
                except Exception as exc:
                    refused = exc
                    break
        if damage is None and refused is None and pos:
            del buf[:pos]
        for batch in batches:
            self.listener.receive(batch)
        if isinstance(refused, ValueError):  # e.g. a message type this version does not know
            log.warning("peer stream from %s: cannot take a batch (%s); closing the "
                        "connection", self.remote, refused)
            self.transport.abort()
        elif refused is not None:  # protobuf's DecodeError
            self._damaged(refused)
        elif damage is not None:
            self._damaged(damage)

    def _damaged(self, exc: Exception) -> None:
        log.warning("peer stream from %s: damaged frame (%s); closing the connection",
                    self.remote, exc)
        self.transport.abort()
        self.buf = bytearray()

    # -- the relay ---------------------------------------------------------------------------

    def _start_relay(self) -> None:
        self.mode = "relay"
        self.transport.pause_reading()
        asyncio.get_running_loop().create_task(self._connect_relay())

    async def _connect_relay(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            relayed, relay = await loop.create_unix_connection(lambda: _Relay(self),
                                                               self.listener.grpc_path)
        except OSError as exc:
            log.warning("peer port: cannot reach the gRPC peer server for %s: %s",
                        self.remote, exc)
            self.transport.abort()
            return
        if self.transport.is_closing():
            relayed.close()
            return
        self.relay = relay
        if self.buf:
            relayed.write(bytes(self.buf))
            self.buf = bytearray()
        self.transport.resume_reading()


def _dual_stack(port: int) -> socket.socket | None:
    """A listening socket on every IPv6 and IPv4 address, or None when the host has no IPv6.
    Raises ``OSError`` when the port cannot be bound."""
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(("::", port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class PeerListener:
    """The peer port. ``receive(batch)`` gets every ``MessageBatch`` of every Raft stream, in
    order per connection; other connections are relayed to the gRPC server at ``grpc_path``
    (a Unix socket)."""

    def __init__(self, receive: Callable[[PeerBatch], None], grpc_path: str,
                 ssl_context: ssl.SSLContext | None) -> None:
        self.receive = receive
        self.grpc_path = grpc_path
        self.tls = ssl_context
        self.connections: set[_Connection] = set()
        self._server: asyncio.base_events.Server | None = None

    def count(self, mode: str) -> int:
        """Open connections that are Raft streams (``"raft"``) or relayed (``"relay"``)."""
        return sum(1 for c in self.connections if c.mode == mode)

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port``; return the port (useful with port 0). ``""`` and ``[::]``
        mean every address of both families on one dual-stack socket (as gRPC binds
        ``[::]``; asyncio alone would make ``::`` IPv6-only), or every IPv4 address where the
        host has no IPv6; ``0.0.0.0`` every IPv4 address. Raises ``OSError`` when it cannot
        listen."""
        host = host.strip("[]")
        loop = asyncio.get_running_loop()
        handshake = 10.0 if self.tls is not None else None  # (None: no TLS, no handshake)
        sock = _dual_stack(port) if host in ("", "::") else None
        if sock is not None:
            self._server = await loop.create_server(lambda: _Connection(self), sock=sock,
                                                    ssl=self.tls,
                                                    ssl_handshake_timeout=handshake)
        else:
            self._server = await loop.create_server(
                lambda: _Connection(self), host if host not in ("", "::") else "0.0.0.0", port,
                reuse_address=True, ssl=self.tls, ssl_handshake_timeout=handshake)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and close every open connection."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.transport.abort()
        self.connections.clear()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None
