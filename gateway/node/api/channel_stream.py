"""``gateway.v1.ChannelSource.Stream`` on a node's API port: one channel session per call.

The handshake is ``gateway.node.replication.channel_source`` (reached through the node, as
the API reaches every other room): the first ``ChannelUp`` must be a hello; a refusal ends
the call with its code and one-line message. After the welcome the call carries, down:

- the ``ChangeEvent``s of ``Subscribe`` for the session's request (``log_records`` set),
  produced by the same feed (``ChangeFeed.subscribe``);
- a ``SourceProgress`` at once, then at least every ``PROGRESS_S`` seconds, also between
  events while the source is busy;

and up, the reader's ``ChannelAck``s, handed to the node's slot keeper. The call needs the
read permission, as Subscribe (``security``).

A hello asking for a seed (``ChannelHello.seed``) gets the seed instead (``_seed``: the
welcome, ``SeedStart``, the chunks, ``SeedEnd``); the call then waits for the reader's ack of
the seed's epoch, which releases the source's pins, and ends.

Events the feed framed from the log's bytes (``feed_wire.WireEvent``) go down as the bytes of
their ``ChannelDown``: the service is added by ``add_channel_source_service``, whose
serializer sends bytes as they are (the generated one takes messages only).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc

from gateway.node.api.api_handlers import serialized
from gateway.node.api.call_context import CallContext
from gateway.node.appliers.feed_wire import WireEvent
from gateway.node.base.errors import NodeError
from gateway.node.base.validation import InvalidRequest
from gateway.v1 import channel_pb2, channel_pb2_grpc, gateway_pb2

if TYPE_CHECKING:
    from gateway.node.api.api import GatewayServicer

__all__ = ["PROGRESS_S", "ChannelSourceServicer", "add_channel_source_service"]

#: A SourceProgress at least this often (seconds), idle or busy. An idle source's lag, as
#: the reader computes it, is the age of the newest progress message: half a second keeps
#: it under one second with room for a late scheduler.
PROGRESS_S = 0.5
#: Events read ahead of the call (the producer waits when the reader is slower).
_QUEUE = 1024
_END = object()


class ChannelSourceServicer(channel_pb2_grpc.ChannelSourceServicer):
    """Serves ``ChannelSource`` for the node of ``gateway`` (the ``Gateway`` servicer, whose
    error mapping it shares)."""

    def __init__(self, gateway: GatewayServicer) -> None:
        self._gateway = gateway
        self.node = gateway.node

    async def Stream(self, request_iterator: AsyncIterator[channel_pb2.ChannelUp],
                     context: CallContext) -> AsyncIterator[channel_pb2.ChannelDown | bytes]:
        source = self.node.channel_source
        ups = request_iterator.__aiter__()
        try:
            first = await anext(ups, None)
            if first is not None and first.hello.HasField("seed"):
                async for down in self._seed(first, ups, context):
                    yield down
                return
            session = await source.open(first)
        except (NodeError, InvalidRequest) as exc:
            await self._gateway._abort(context, exc)
            return
        yield channel_pb2.ChannelDown(welcome=session.welcome)
        #: events, the exception that ended the feed, or _END (the reader closed its side)
        queue: asyncio.Queue[gateway_pb2.ChangeEvent | Exception | object] = \
            asyncio.Queue(_QUEUE)

        async def produce() -> None:
            try:
                async for ev in self.node.change_feed.subscribe(session.request,
                                                                session.start):
                    await queue.put(ev)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # handed to the call, which ends with it
                await queue.put(exc)

        async def acks() -> None:
            async for up in ups:
                if up.WhichOneof("msg") == "ack":
                    source.ack(session.slot, up.ack)
            await queue.put(_END)  # the reader closed its side: the session ends

        tasks = [asyncio.create_task(produce(), name="channel-stream-feed"),
                 asyncio.create_task(acks(), name="channel-stream-acks")]
        try:
            last = 0.0
            while True:
                wait = last + PROGRESS_S - time.monotonic()
                item: gateway_pb2.ChangeEvent | Exception | object | None = None
                if not queue.empty():  # busy: no timer (a task) per event
                    item = queue.get_nowait()
                elif wait > 0:
                    with contextlib.suppress(TimeoutError):
                        item = await asyncio.wait_for(queue.get(), wait)
                if item is _END:
                    return
                if isinstance(item, Exception):
                    item = source.failed_while_streaming(session, item)
                    if isinstance(item, NodeError | InvalidRequest):
                        await self._gateway._abort(context, item)
                    await self._gateway._abort_storage(context, item)
                if isinstance(item, gateway_pb2.ChangeEvent):
                    yield channel_pb2.ChannelDown(event=item)
                elif isinstance(item, WireEvent):  # framed from the log's bytes
                    yield item.down()
                if time.monotonic() - last >= PROGRESS_S:
                    last = time.monotonic()
                    yield channel_pb2.ChannelDown(progress=source.progress())
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def _seed(self, first: channel_pb2.ChannelUp,
                    ups: AsyncIterator[channel_pb2.ChannelUp],
                    context: CallContext) -> AsyncIterator[channel_pb2.ChannelDown]:
        """The seed session of hello ``first`` (``ChannelSource.seed``), then the wait for
        the reader's ack of its end (``ChannelSource.seed_acked``)."""
        source = self.node.channel_source
        end = None
        try:
            async for down in source.seed(first):
                if down.HasField("seed_end"):
                    end = down.seed_end
                yield down
            if end is None:
                return
            async for up in ups:
                if up.WhichOneof("msg") == "ack" and await source.seed_acked(end, up.ack):
                    return
        except (NodeError, InvalidRequest) as exc:
            await self._gateway._abort(context, exc)
        except Exception as exc:
            await self._gateway._abort_storage(context, exc)


def add_channel_source_service(servicer: ChannelSourceServicer, server: grpc.aio.Server) -> None:
    """Serve ``gateway.v1.ChannelSource`` from ``servicer`` on ``server``: the generated
    registration, but with responses that may come serialized (``api_handlers.serialized``)."""
    handlers = {"Stream": grpc.stream_stream_rpc_method_handler(
        servicer.Stream, request_deserializer=channel_pb2.ChannelUp.FromString,
        response_serializer=serialized)}
    name = channel_pb2.DESCRIPTOR.services_by_name["ChannelSource"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
    server.add_registered_method_handlers(name, handlers)
