"""The reader side of the channel protocol: one session of a channel with its source
(``gateway.v1.ChannelSource.Stream``; docs/replication.md, "Channel protocol").

``ChannelReader.events`` sends the hello (protocol version ``PROTOCOL_VERSION``, the
features this node uses, the reader's identity -- this cluster's id and the channel's name --
its position ``after_epoch = (source, held)``, ``ignore_origins = [this cluster]`` and
``acked_epoch = held``), checks that the first answer is a welcome, and yields the source's
change events; ``SourceProgress`` messages are kept on the channel's state, and every
message is noted on its ``SourceWatch`` (``channel_lag``). ``ack`` sends a
``ChannelAck`` when the source epoch this cluster holds durably advanced. A source that does
not serve the protocol (an older node: UNIMPLEMENTED before any answer) is read with
``Subscribe`` as before, without acks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

import grpc

from gateway.node.replication.channel_lag import SourceWatch
from gateway.node.replication.channel_source import FEATURES, PROTOCOL_VERSION
from gateway.node.replication.down_wire import TxnEvent, read_down
from gateway.replication import SealedEpoch
from gateway.v1 import channel_pb2, gateway_pb2, gateway_pb2_grpc

__all__ = ["ChannelReader", "ChannelSession", "ReaderError"]

log = logging.getLogger("gateway.node.replication.channels")

#: ``ChannelSource.Stream``, called with ``down_wire.read_down`` as the deserializer
_STREAM = "/gateway.v1.ChannelSource/Stream"
_UP = channel_pb2.ChannelUp.SerializeToString


class _State(Protocol):
    state: str
    protocol_version: int
    source_progress: channel_pb2.SourceProgress | None
    watch: SourceWatch


class ReaderError(Exception):
    """The source broke the protocol; ``str()`` is one line for the channel's status."""


@dataclass(frozen=True, slots=True)
class ChannelSession:
    """Who reads what: this cluster, the channel, its source and the position."""

    me: int
    channel: str
    source: int
    held: int
    target: str  # the source node's HOST:PORT, for messages
    #: this cluster's watermark per origin (``ChannelHello.holds``: a seeded source checks
    #: that the reader lacks nothing its seed brought before its log)
    holds: dict[int, int] = field(default_factory=dict)


class ChannelReader:
    """One session's stream (see the module docstring); ``state`` is the channel's status
    (``state``, ``protocol_version``, ``source_progress`` are set)."""

    def __init__(self, session: ChannelSession, state: _State) -> None:
        self.s = session
        self._state = state
        #: the session's call: the channel stream, or Subscribe's (an older source)
        self._call: grpc.aio.Call | None = None
        self._ups: asyncio.Queue[channel_pb2.ChannelUp | None] | None = None
        self._acked = session.held

    def hello(self) -> channel_pb2.ChannelHello:
        s = self.s
        return channel_pb2.ChannelHello(
            protocol_version=PROTOCOL_VERSION, features=list(FEATURES),
            reader_cluster_id=s.me, channel=s.channel,
            after_epoch=gateway_pb2.EpochPosition(server_id=s.source, epoch=s.held),
            ignore_origins=[s.me], acked_epoch=s.held,
            holds=[channel_pb2.SeedWatermark(origin=o, trans_id=t)
                   for o, t in sorted(s.holds.items())])

    async def events(self, ch: grpc.aio.Channel, stub: gateway_pb2_grpc.GatewayStub,
                     md: tuple[tuple[str, str], ...] | None
                     ) -> AsyncIterator[gateway_pb2.ChangeEvent | TxnEvent]:
        """The source's change events after the session's position (``stub``: the source's
        ``Gateway`` stub on ``ch``, for the Subscribe fallback); a transaction's event read
        from the channel stream is a ``TxnEvent`` (``down_wire.read_down``)."""
        ups: asyncio.Queue[channel_pb2.ChannelUp | None] = asyncio.Queue()
        ups.put_nowait(channel_pb2.ChannelUp(hello=self.hello()))

        async def up() -> AsyncIterator[channel_pb2.ChannelUp]:
            while (msg := await ups.get()) is not None:
                yield msg

        call = ch.stream_stream(_STREAM, request_serializer=_UP, response_deserializer=read_down
                                )(up(), metadata=md)
        self._call = call
        self._ups = ups
        welcomed = False
        try:
            async for down in call:
                self._state.watch.heard()
                if isinstance(down, TxnEvent):  # a transaction, read as its item
                    if not welcomed:
                        raise ReaderError(f"{self.s.target}: the source answered the hello "
                                          f"with event, not a welcome")
                    yield down
                    continue
                kind = down.WhichOneof("msg")
                if not welcomed:
                    if kind != "welcome":
                        raise ReaderError(f"{self.s.target}: the source answered the hello "
                                          f"with {kind or 'nothing'}, not a welcome")
                    welcomed = True
                    self._state.protocol_version = down.welcome.protocol_version
                    self._state.state = "running"  # last_error stays until an epoch applies
                elif kind == "event":
                    yield down.event
                elif kind == "progress":
                    self._state.source_progress = down.progress
                    self._state.watch.progress(down.progress)
        except grpc.aio.AioRpcError as exc:
            if welcomed or exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            log.info("channel %s: %s does not serve the channel protocol: reading it with "
                     "Subscribe", self.s.channel, self.s.target)
        else:
            return
        self._ups = None
        self._state.protocol_version = 0
        sub = stub.Subscribe(gateway_pb2.SubscribeRequest(
            after_epoch=gateway_pb2.EpochPosition(server_id=self.s.source, epoch=self.s.held),
            ignore_origins=[self.s.me], log_records=True), metadata=md)
        self._call = sub
        self._state.state = "running"
        async for ev in sub:
            self._state.watch.heard()
            yield ev

    def ack(self, held: int, sealed: SealedEpoch) -> None:
        """This cluster now holds the source's epochs up to ``held`` durably (an entry
        applied, so committed here; ``sealed``: the epoch it applied): acknowledge it when
        it advanced."""
        if self._ups is None or held <= self._acked:
            return
        self._acked = held
        index = sealed.last_log_index if sealed.epoch == held else 0
        self._ups.put_nowait(channel_pb2.ChannelUp(ack=channel_pb2.ChannelAck(
            acked_epoch=held, source_log_index=index)))

    def close(self) -> None:
        """End the call (idempotent)."""
        if self._ups is not None:
            self._ups.put_nowait(None)
        if self._call is not None:
            self._call.cancel()
