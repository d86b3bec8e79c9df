"""What a resync would change (docs/replication.md, "Resync"): read a snapshot of the
channel's source over ``ChannelSource.Stream`` -- a seed that is read, not installed -- and
compare it, key by key, with this cluster's store.

``compare_rows`` is the pure part (chunk rows and a store lookup in, counts out). A row is
the same when its values, author, origin GTID and commit time are (its epoch and log index
are each cluster's own). The seed's pin is released at the end by the reader's ack, as after
an installed seed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from gateway.core.lsm.format import RowVersion
from gateway.v1 import channel_pb2, channel_pb2_grpc, gateway_pb2, replication_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["Differences", "compare_rows", "compare_with_source"]


@dataclass(slots=True)
class Differences:
    """Counts of the source's rows against this cluster's (see the module docstring)."""

    same: int = 0
    differ: int = 0          # both hold the row, with other values or metadata
    missing_here: int = 0    # the source holds it, this cluster does not
    deleted_there: int = 0   # the source deleted it (its tombstone retained); held here
    epoch: int = 0           # the source's epoch of the snapshot

    def line(self) -> str:
        return (f"against the source's snapshot at its epoch {self.epoch}: {self.differ} "
                f"row(s) differ, {self.missing_here} missing here, {self.deleted_there} "
                f"deleted there and held here, {self.same} the same")


def _essence(raw: bytes) -> bytes | None:
    """A stored row without what differs between clusters holding the same change (its
    epoch and log index)."""
    try:
        row = gateway_pb2.Row.FromString(raw)
    except DecodeError:
        return None
    row.ClearField("epoch")
    row.ClearField("log_index")
    return row.SerializeToString(deterministic=True)


def compare_rows(rows: Iterable[channel_pb2.SeedRow],
                 get_version: Callable[[bytes], RowVersion | None], into: Differences) -> None:
    """Add the comparison of the source's ``rows`` (row keys only; schemas are skipped) with
    this cluster's versions (``get_version``) to ``into``."""
    for r in rows:
        if not r.key.startswith(b"r"):
            continue
        mine = get_version(r.key)
        here = mine is not None and mine.value is not None
        if r.tombstone:
            if here:
                into.deleted_there += 1
            else:
                into.same += 1
        elif not here:
            into.missing_here += 1
        elif mine is not None and mine.value is not None and \
                _essence(mine.value) == _essence(r.value):
            into.same += 1
        else:
            into.differ += 1


async def compare_with_source(driver: RaftDriver, d: replication_pb2.ChannelDefinition,
                              channel: Callable[[str], grpc.aio.Channel]) -> Differences:
    """Read a snapshot of channel ``d``'s source and compare it with this cluster's store;
    tries the source's addresses in turn (``channel(address)`` opens one). Raises the last
    gRPC error when none serves it."""
    md = (("authorization", f"Bearer {d.token}"),) if d.token else None
    last: Exception | None = None
    for addr in d.sources:
        try:
            async with channel(addr) as ch:
                return await _compare(driver, d.name, ch, md)
        except grpc.aio.AioRpcError as exc:
            last = exc
    assert last is not None
    raise last


async def _compare(driver: RaftDriver, name: str, ch: grpc.aio.Channel, md: Any
                   ) -> Differences:
    out = Differences()
    store = driver.sm.store
    call = channel_pb2_grpc.ChannelSourceStub(ch).Stream(metadata=md)
    try:
        await call.write(channel_pb2.ChannelUp(hello=channel_pb2.ChannelHello(
            protocol_version=1, features=["seed"], reader_cluster_id=driver.opts.cluster_id,
            channel=name, seed=channel_pb2.SeedRequest())))
        while True:
            down = await call.read()
            if down is grpc.aio.EOF:
                return out
            kind = down.WhichOneof("msg")
            if kind == "seed_start":
                out.epoch = down.seed_start.epoch
            elif kind == "seed_chunk":
                await asyncio.to_thread(compare_rows, down.seed_chunk.rows,
                                        store.get_version, out)
            elif kind == "seed_end":  # read: the source may release its pin
                await call.write(channel_pb2.ChannelUp(ack=channel_pb2.ChannelAck(
                    acked_epoch=down.seed_end.epoch)))
                await call.done_writing()
                while await call.read() is not grpc.aio.EOF:
                    pass
                return out
    finally:
        call.cancel()
