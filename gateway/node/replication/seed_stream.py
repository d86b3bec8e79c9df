"""The seed branch of ``gateway.v1.ChannelSource.Stream``: a hello carrying a
``SeedRequest`` is answered with the seed (``SeedStart``, chunks, ``SeedEnd``:
``gateway.node.replication.seed_source.serve_seed``); the reader, once it installed the
end, acknowledges the seed's epoch (``ChannelAck``), the pin is released and the call ends;
the reader's next session streams after the seed's epoch.

``seed_downs`` maps the refusals to gRPC codes (no pin here, not the leader for a new seed:
FAILED_PRECONDITION and UNAVAILABLE, one line each) for whatever serves the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc

from gateway.core.lsm.errors import StoreClosedError
from gateway.node.base.errors import NodeError
from gateway.node.replication.seed_source import SeedUnavailable, release_seed, serve_seed
from gateway.v1 import channel_pb2, channel_pb2_grpc

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["SeedOnlySource", "seed_downs"]


async def seed_downs(driver: RaftDriver, hello: channel_pb2.ChannelHello,
                     context: grpc.aio.ServicerContext
                     ) -> AsyncIterator[channel_pb2.ChannelDown]:
    """The messages answering seed hello ``hello``; aborts the call with a clear code and
    line when this node cannot serve it."""
    try:
        async for down in serve_seed(driver, hello.seed, hello.reader_cluster_id,
                                     hello.channel):
            yield down
    except SeedUnavailable as exc:
        code = grpc.StatusCode.UNAVAILABLE if "leader" in str(exc) else \
            grpc.StatusCode.FAILED_PRECONDITION
        await context.abort(code, str(exc))
    except StoreClosedError as exc:  # the pin was released under the read
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                            f"seed {hello.seed.seed_id} is not pinned any more: {exc}")
    except NodeError as exc:
        await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))


class SeedOnlySource(channel_pb2_grpc.ChannelSourceServicer):
    """``ChannelSource`` serving seed hellos only (the stream of events is ``Subscribe``'s
    until the channel protocol's stream serves it)."""

    def __init__(self, driver: RaftDriver) -> None:
        self.driver = driver

    async def Stream(self, request_iterator: Any, context: Any
                     ) -> AsyncIterator[channel_pb2.ChannelDown]:
        first = None
        async for up in request_iterator:
            first = up
            break
        if first is None or not first.hello.HasField("seed"):
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                "hello.seed: this source serves seeds only on this stream")
        end = None
        async for down in seed_downs(self.driver, first.hello, context):
            if down.HasField("seed_end"):
                end = down.seed_end
            yield down
        if end is None:
            return
        async for up in request_iterator:
            if up.HasField("ack") and up.ack.acked_epoch >= end.epoch:
                await release_seed(self.driver, end.seed_id)
                return
