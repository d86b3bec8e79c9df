"""The source side of the channel protocol's handshake (``gateway.v1.ChannelSource.Stream``,
proto/gateway/v1/channel.proto; docs/replication.md, "Channel protocol").

A reader's first message is a ``ChannelHello``; ``ChannelSource.open`` answers it with a
``Session`` -- the ``ChannelWelcome`` to send and the Subscribe request and start index the
stream serves from -- or raises naming what this source cannot serve, ``InvalidRequest``
(INVALID_ARGUMENT) or ``PreconditionFailed`` (FAILED_PRECONDITION), field first:

- no hello first, or protocol version 0: refused (INVALID_ARGUMENT);
- the version both speak is ``min(reader's, PROTOCOL_VERSION)``; the features, those of the
  reader this source has (``FEATURES``);
- a reader without its identity (cluster id, channel name), or naming this cluster: refused;
- a position this source's log no longer holds (compacted), or a slot marked lost:
  FAILED_PRECONDITION, "... behind the source's log: resync (gateway channel resync NAME on
  cluster N) ...". The stream never starts from the middle of what the reader misses. (On a
  follower that installed a snapshot while the reader's slot still holds the position on
  the leader: UNAVAILABLE naming the leader, and the reader tries its next address.)

On a welcome, the reader's slot is created or refreshed with the hello's ``acked_epoch``
(``SlotKeeper.note``). The gRPC plumbing (the stream, the events, progress and acks) is
``gateway.node.api.channel_stream``; this module decides only what the handshake says, so
features that extend it (seeding: ``ChannelHello.seed``, field range 10-19) add their branch
here: a hello with ``seed`` is answered by ``seed`` (``seed_source``) instead of ``open``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.node.base.config import CHANNEL_NAME
from gateway.node.base.errors import NotLeaderError, PreconditionFailed
from gateway.node.base.validation import InvalidRequest
from gateway.node.replication.seed_source import release_seed, serve_seed
from gateway.node.replication.slots import SlotKeeper
from gateway.node.state.seed_apply import seed_coverage
from gateway.node.state.slot_apply import SlotId, slot_name
from gateway.v1 import channel_pb2, gateway_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["BEHIND", "FEATURES", "PROTOCOL_VERSION", "ChannelSource", "Session",
           "behind_message"]

#: The newest version of the channel protocol this node speaks (versions 1 to it).
PROTOCOL_VERSION = 1
#: What this source supports of what a reader may ask for.
FEATURES = ("slot", "progress", "seed")
#: What every refusal of a reader behind the log says (the reader's status shows it).
BEHIND = "behind the source's log: resync"


@dataclass(frozen=True, slots=True)
class Session:
    """An accepted hello: what to send first and where the stream starts."""

    welcome: channel_pb2.ChannelWelcome
    request: gateway_pb2.SubscribeRequest  # the stream's events are Subscribe's for this
    start: int                              # the first log index to send
    slot: SlotId


def behind_message(sid: SlotId, why: str) -> PreconditionFailed:
    """The refusal of reader ``sid`` (cluster, channel) whose position this source no longer
    holds."""
    return PreconditionFailed("after_epoch", f"channel {sid[1]} of cluster {sid[0]} is "
                              f"{BEHIND} (gateway channel resync {sid[1]}, on cluster "
                              f"{sid[0]}): {why}")


class ChannelSource:
    """Answers hellos for this node (see the module docstring). ``start_index``: the
    Subscribe feed's start index of a request (raises ``InvalidRequest`` naming the field
    when the position is not in the log)."""

    def __init__(self, driver: RaftDriver, slots: SlotKeeper,
                 start_index: Callable[[gateway_pb2.SubscribeRequest], Awaitable[int]]
                 ) -> None:
        self.driver = driver
        self.slots = slots
        self._start_index = start_index

    def _hello(self, first: channel_pb2.ChannelUp | None) -> channel_pb2.ChannelHello:
        """The hello of a reader's first message ``first``, checked: raises
        ``InvalidRequest`` when it is none, speaks no version this source speaks or lacks
        the reader's identity."""
        if first is None or first.WhichOneof("msg") != "hello":
            got = "nothing" if first is None else \
                f"an {first.WhichOneof('msg') or 'empty'} message"
            raise InvalidRequest("hello", f"the first message of a channel stream must be a "
                                 f"hello (ChannelUp.hello), not {got}")
        h = first.hello
        if h.protocol_version < 1:
            raise InvalidRequest("hello.protocol_version", f"version {h.protocol_version} is "
                                 f"not one this source speaks (channel protocol versions 1 "
                                 f"to {PROTOCOL_VERSION})")
        me = self.driver.opts.cluster_id
        if not h.reader_cluster_id or not CHANNEL_NAME.fullmatch(h.channel):
            raise InvalidRequest("hello.channel", "give reader_cluster_id and the channel's "
                                 "name (the reader's identity for its slot)")
        if h.reader_cluster_id == me:
            raise InvalidRequest("hello.reader_cluster_id", f"{me} is this cluster: a cluster "
                                 f"cannot replicate from itself")
        return h

    def welcome(self, h: channel_pb2.ChannelHello) -> channel_pb2.ChannelWelcome:
        """The welcome answering hello ``h``."""
        first_index = self.driver.storage.first_index()
        return channel_pb2.ChannelWelcome(
            protocol_version=min(h.protocol_version, PROTOCOL_VERSION),
            features=[f for f in h.features if f in FEATURES],
            source_cluster_id=self.driver.opts.cluster_id, retained_first_index=first_index,
            retained_first_epoch=self.slots.first_epoch(first_index))

    async def seed(self, first: channel_pb2.ChannelUp | None
                   ) -> AsyncIterator[channel_pb2.ChannelDown]:
        """A session whose hello asks for a seed (``ChannelHello.seed``): the welcome, then
        the seed (``seed_source.serve_seed``: start, chunks, end). Raises ``InvalidRequest``
        (the hello), ``NotLeaderError`` (a new seed begins on the leader) or
        ``PreconditionFailed`` (no pin of a resumed seed here)."""
        h = self._hello(first)
        yield channel_pb2.ChannelDown(welcome=self.welcome(h))
        async for down in serve_seed(self.driver, h.seed, h.reader_cluster_id, h.channel):
            if down.HasField("seed_start"):
                # the reader's slot starts at the seed's epoch, so the log the stream after
                # the seed reads is held while the seed runs (a lost slot included; again on
                # a resume, in case the first proposal was dropped)
                start = down.seed_start
                self.slots.reset((h.reader_cluster_id, h.channel), start.epoch,
                                 start.source_log_index)
            yield down

    async def seed_acked(self, end: channel_pb2.SeedEnd, ack: channel_pb2.ChannelAck) -> bool:
        """The reader acknowledged ``ack`` after the seed's ``end``: when it holds the seed's
        epoch (it installed the end), release the pin; whether it did."""
        if ack.acked_epoch < end.epoch:
            return False
        await release_seed(self.driver, end.seed_id)
        return True

    async def open(self, first: channel_pb2.ChannelUp | None) -> Session:
        """The session of the reader whose first message is ``first`` (None: the reader
        sent nothing); raises ``InvalidRequest`` or ``PreconditionFailed``."""
        h = self._hello(first)
        sid = (h.reader_cluster_id, h.channel)
        slot = self.driver.sm.slots.get(sid)
        if slot is not None and slot.lost:
            raise behind_message(sid, f"its slot {slot_name(sid)} is lost "
                                      f"({slot.lost_reason})")
        req = gateway_pb2.SubscribeRequest(ignore_origins=h.ignore_origins, log_records=True)
        if h.HasField("after_epoch"):
            req.after_epoch.CopyFrom(h.after_epoch)
        try:
            start = await self._start_index(req)
        except InvalidRequest as exc:
            if "compacted" in str(exc):
                drv = self.driver
                if slot is not None and not drv.is_leader:
                    # A follower that installed a snapshot starts its log later than the
                    # cluster keeps it for this slot: another node (the leader) serves it.
                    raise NotLeaderError(drv.leader_id, f"node {drv.opts.node_id} no longer "
                                         f"holds this position (it installed a snapshot); "
                                         f"slot {slot_name(sid)} keeps it on the leader "
                                         f"(node {drv.leader_id})") from None
                raise behind_message(sid, exc.reason) from None
            raise InvalidRequest(f"hello.{exc.field}", exc.reason) from None
        self._check_seed_coverage(h, sid)
        self.slots.note(sid, h.acked_epoch)
        return Session(self.welcome(h), req, start, sid)

    def _check_seed_coverage(self, h: channel_pb2.ChannelHello, sid: SlotId) -> None:
        """Refuse (behind: seed or resync) a reader that lacks transactions a seed or resync
        of this cluster brought (``hello.holds`` below the watermark a seed raised an origin
        to): those are in the store, never in the log, so no stream from any position
        would bring them (docs/replication.md, "Growing a pair into a ring")."""
        sm = self.driver.sm
        at, cover = seed_coverage(sm.store.get, sm.store.scan_prefix)
        if not at:
            return
        holds = {w.origin: w.trans_id for w in h.holds}
        lacks = sorted((o, t, holds.get(o, 0)) for o, t in cover.items()
                       if o != h.reader_cluster_id and holds.get(o, 0) < t)
        if lacks:
            what = ", ".join(f"origin {o} up to trans id {t} (the reader holds up to {got})"
                             for o, t, got in lacks[:4])
            raise behind_message(sid, f"cluster {self.driver.opts.cluster_id} was seeded (last "
                                      f"seed end at log index {at}): its transactions of "
                                      f"{what} are in its store, not in its log; seed this "
                                      f"channel (gateway channel add --seed) or resync it")

    def failed_while_streaming(self, session: Session, exc: Exception) -> Exception:
        """What ends a session whose feed raised ``exc``: the behind-the-log refusal when the
        log was compacted past the next entry to send, else ``exc``."""
        if isinstance(exc, InvalidRequest) and "compacted" in str(exc):
            return behind_message(session.slot, exc.reason)
        return exc

    def ack(self, sid: SlotId, ack: channel_pb2.ChannelAck) -> None:
        """The reader ``sid`` acknowledged ``ack`` on its stream."""
        self.slots.note(sid, ack.acked_epoch, ack.source_log_index)

    def progress(self) -> channel_pb2.SourceProgress:
        """This node's newest sealed epoch, when it was sealed, and its commit index."""
        epoch, sealed_at = self.driver.sm.newest_sealed
        return channel_pb2.SourceProgress(
            epoch=epoch, sealed_at_ns=sealed_at,
            log_index=self.driver.raw.raft.raft_log.committed, sent_at_ns=time.time_ns())
