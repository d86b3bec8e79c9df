"""The replica side of a seed: a channel whose seed state (``m seed:<channel>``,
``gateway.node.state.seed_apply``) asks for one reads a snapshot of its source over
``ChannelSource.Stream`` and installs it through this cluster's Raft log, before it streams
(docs/replication.md, "Seeding a new cluster").

``SeedReader.run`` is one attempt, on the leader, from the replicated seed state:

- it says hello with a ``SeedRequest``: the seed id and last installed key of the state
  (resume), or id 0 (begin);
- ``SeedStart`` of another id than the state's is proposed as ``begin`` (a new seed, or one
  restarted from scratch: the installer removes what an earlier attempt installed);
- every ``SeedChunk`` is proposed as the state's next chunk (``chunk_no`` one above the last
  installed; this cluster's current epoch stamped as the rows' epoch) and awaited before the
  next, so a kill -9 of this leader loses at most the chunk in flight: the next leader
  resumes after the last installed key;
- ``SeedEnd`` is proposed as ``end``; once applied, the seed state is gone and the channel's
  position is the source's epoch of the snapshot: the runner streams from there.

A source that refuses to resume (no node holds the pin any more: every address answered
``FAILED_PRECONDITION``) makes the next attempt begin a new seed: ``restarts`` counts them
and the channel's status shows it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from gateway.core import messages
from gateway.v1 import channel_pb2, channel_pb2_grpc

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["SeedError", "SeedProgress", "SeedReader", "seed_line"]

log = logging.getLogger("gateway.node.replication.seed_reader")


def seed_line(state: channel_pb2.SeedInstall) -> str:
    """The seed state of a channel as its status shows it on any node."""
    if not state.begin.seed_id:
        return "seed requested (not started)"
    return (f"seed {state.begin.seed_id} at source epoch {state.begin.epoch}: "
            f"{state.chunk.chunk_no} chunk(s) installed")


class SeedError(Exception):
    """A seed attempt ended early; ``str()`` is one line for the channel's status."""


@dataclass(slots=True)
class SeedProgress:
    """What the channel's status shows of its seed."""

    seed_id: int = 0
    epoch: int = 0
    chunks: int = 0          # installed, of this seed (all attempts)
    chunks_received: int = 0  # received by this runner (re-sent ones after a resume too)
    restarts: int = 0        # seeds begun again from scratch under a new id
    refused: int = 0         # consecutive addresses that held no pin of the seed

    def line(self) -> str:
        out = f"seed {self.seed_id or '(starting)'}"
        if self.epoch:
            out += f" at source epoch {self.epoch}"
        out += f": {self.chunks} chunk(s) installed"
        if self.restarts:
            out += f", restarted from scratch {self.restarts} time(s) (the source lost its pin)"
        return out


class SeedReader:
    """Installs the seed of channel ``name`` (see the module docstring)."""

    def __init__(self, driver: RaftDriver, name: str, source_id: int) -> None:
        self.driver = driver
        self.name = name
        self.source_id = source_id
        self.progress = SeedProgress()
        self._fresh = False  # the next hello begins a new seed

    def pending(self) -> bool:
        return self.name in self.driver.sm.seeds

    async def run(self, ch: grpc.aio.Channel, md: Any, addresses: int) -> None:
        """One attempt over channel ``ch`` to the source (``addresses``: how many source
        addresses there are, to tell a lost pin from one node's). Returns once the seed's
        end is applied; raises ``SeedError`` or gRPC errors otherwise."""
        drv = self.driver
        state = drv.sm.seeds[self.name]
        p = self.progress
        p.chunks = state.chunk.chunk_no
        req = channel_pb2.SeedRequest()
        if state.begin.seed_id and not self._fresh:
            req.seed_id = state.begin.seed_id
            req.after_key = state.chunk.last_key
        p.seed_id = req.seed_id
        if req.seed_id:
            log.info("channel %s: seed %d resumes after chunk %d", self.name, req.seed_id,
                     p.chunks)
        call = channel_pb2_grpc.ChannelSourceStub(ch).Stream(metadata=md)
        try:
            await call.write(channel_pb2.ChannelUp(hello=channel_pb2.ChannelHello(
                protocol_version=1, features=["seed"], reader_cluster_id=drv.opts.cluster_id,
                channel=self.name, seed=req)))
            while True:
                down = await call.read()
                if down is grpc.aio.EOF:
                    raise SeedError("the source ended the seed before its end")
                kind = down.WhichOneof("msg")
                if kind == "seed_start":
                    await self._start(down.seed_start)
                elif kind == "seed_chunk":
                    await self._chunk(down.seed_chunk)
                elif kind == "seed_end":
                    await self._end(down.seed_end)
                    # installed: the source may release its pin now
                    await call.write(channel_pb2.ChannelUp(ack=channel_pb2.ChannelAck(
                        acked_epoch=down.seed_end.epoch)))
                    await call.done_writing()
                    while await call.read() is not grpc.aio.EOF:
                        pass
                    return
                # a welcome, progress: nothing to install
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION and req.seed_id and \
                    "not pinned" in (exc.details() or ""):
                p.refused += 1
                if p.refused >= addresses:  # no source node holds the pin: begin again
                    self._fresh = True
                    p.refused = 0
                    p.restarts += 1
            raise
        finally:
            call.cancel()

    async def _propose(self, step: channel_pb2.SeedInstall) -> None:
        step.channel = self.name
        step.source_id = self.source_id
        await self.driver.submit_entry(messages.pack(step))

    async def _start(self, start: channel_pb2.SeedStart) -> None:
        if start.source_id and start.source_id != self.source_id:
            raise SeedError(f"the seed comes from cluster {start.source_id}, not from the "
                            f"channel's source {self.source_id}")
        p = self.progress
        p.seed_id, p.epoch, p.refused = start.seed_id, start.epoch, 0
        self._fresh = False
        state = self.driver.sm.seeds.get(self.name)
        if state is None:
            raise SeedError("the seed was cancelled")
        if state.begin.seed_id != start.seed_id:
            log.info("channel %s: seed %d begins at source epoch %d", self.name,
                     start.seed_id, start.epoch)
            await self._propose(channel_pb2.SeedInstall(begin=start))
        p.chunks = self.driver.sm.seeds[self.name].chunk.chunk_no

    async def _chunk(self, chunk: channel_pb2.SeedChunk) -> None:
        p = self.progress
        p.chunks_received += 1
        state = self.driver.sm.seeds.get(self.name)
        if state is None or state.begin.seed_id != chunk.seed_id:
            raise SeedError(f"chunk of seed {chunk.seed_id}, but the seed state is "
                            f"{state.begin.seed_id if state is not None else 'gone'}")
        chunk.chunk_no = state.chunk.chunk_no + 1
        await self._propose(channel_pb2.SeedInstall(chunk=chunk,
                                                    local_epoch=self.driver.epoch()))
        after = self.driver.sm.seeds.get(self.name)
        if after is None or after.chunk.chunk_no != chunk.chunk_no:
            raise SeedError(f"chunk {chunk.chunk_no} of seed {chunk.seed_id} was not "
                            f"installed (another leader's step came first)")
        p.chunks = chunk.chunk_no

    async def _end(self, end: channel_pb2.SeedEnd) -> None:
        state = self.driver.sm.seeds.get(self.name)
        if state is None or state.begin.seed_id != end.seed_id:
            raise SeedError(f"end of seed {end.seed_id}, but the seed state is "
                            f"{state.begin.seed_id if state is not None else 'gone'}")
        end.chunks = state.chunk.chunk_no
        await self._propose(channel_pb2.SeedInstall(end=end))
        self.driver.replication_changed()
        if self.name in self.driver.sm.seeds:
            raise SeedError(f"the end of seed {end.seed_id} was not installed")
        p = self.progress
        log.info("channel %s: seed %d installed at source epoch %d: %d chunk(s), %d received "
                 "by this leader, %d restart(s)", self.name, end.seed_id, end.epoch,
                 end.chunks, p.chunks_received, p.restarts)
