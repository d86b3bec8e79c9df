"""A channel's lag from what its source says of itself (docs/replication.md, "Channel lag").

``SourceWatch`` is kept per channel by the leader's ``NodeChannels`` for as long as the node
leads, across the channel's runners (a pause, an error, a reconnect start a new runner, the
watch stays). What feeds it:

- the source's ``SourceProgress`` on the channel stream (its newest sealed epoch and seal
  time, at least every second, also when idle), and the sealed epochs the runner reads;
- while the channel is paused, the source's ``Status`` (``sealed_epoch``, ``sealed_at_ns``)
  polled by ``poll_paused``, so a paused channel goes on hearing how far the source is.

From it, against the epoch this cluster holds of the source (durable, the apply-status
table, raised by the runner past epochs that carried nothing for this cluster):

- ``lag_epochs`` = the source's newest sealed epoch heard of - the applied epoch;
- ``lag_seconds`` = now - the seal time of the oldest source epoch heard of and not applied
  (converted to this node's clock: see ``_offset``); when nothing is known to be missing,
  now - the last time the source was heard from (so at most about the progress interval on
  a healthy idle channel, and growing once the source goes silent);
- ``since_last_heard``: the source has not been heard from for ``STALE_S`` (or never): the
  figures are what was known then, grown with the time since, and may be more.

Replicated time is not kept here: it is the seal time recorded with the applied epoch in the
replicated state (``StoreStateMachine.replicated_time``), the same on every node.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from gateway.v1 import channel_pb2, gateway_pb2, gateway_pb2_grpc, replication_pb2

__all__ = ["POLL_S", "STALE_S", "LagFigures", "SourceWatch", "merge_leader_channels",
           "poll_paused"]

log = logging.getLogger("gateway.node.replication.channels")

#: Not heard from the source for this long: its figures are marked as estimates. Several of
#: the source's progress intervals (``channel_stream.PROGRESS_S``), so a late message or two
#: do not flip it.
STALE_S = 3.0
#: Epochs heard of and not applied, kept with their seal times (the oldest matters; beyond
#: this the ones after the oldest are thinned, which only makes a later figure coarser).
_KEEP = 1024


@dataclass(frozen=True, slots=True)
class LagFigures:
    """One reading of a channel's lag (see the module docstring)."""

    source_epoch: int
    source_sealed_at_ns: int
    last_heard_ns: int
    lag_epochs: int
    lag_seconds: float
    since_last_heard: bool


@dataclass(slots=True)
class SourceWatch:
    """What one channel heard of its source, and when (see the module docstring)."""

    source_epoch: int = 0
    source_sealed_at_ns: int = 0  # source clock
    last_heard_ns: int = 0  # this node's clock
    #: (epoch, seal time on the source's clock) of epochs heard of, increasing epochs
    _heard: list[tuple[int, int]] = field(default_factory=list)
    #: this node's clock - the source's, as small as seen (a message's delay only adds to
    #: it; the smallest is the closest, and it never makes a figure go down between
    #: readings); None until a progress message said when it was sent
    _offset: int | None = None

    def heard(self, now_ns: int | None = None) -> None:
        """The source answered (any message of the stream, or its ``Status``)."""
        self.last_heard_ns = time.time_ns() if now_ns is None else now_ns

    def progress(self, p: channel_pb2.SourceProgress, now_ns: int | None = None) -> None:
        """A ``SourceProgress`` from the stream."""
        now = time.time_ns() if now_ns is None else now_ns
        self.heard(now)
        if p.sent_at_ns:
            off = now - p.sent_at_ns
            self._offset = off if self._offset is None else min(self._offset, off)
        self.sealed(p.epoch, p.sealed_at_ns)

    def sealed(self, epoch: int, sealed_at_ns: int) -> None:
        """The source sealed ``epoch`` at ``sealed_at_ns`` (its clock); epoch 0: unknown
        (a source node that has applied no epoch marker since it started)."""
        if epoch > self.source_epoch:
            self.source_epoch = epoch
            self.source_sealed_at_ns = sealed_at_ns
        if not sealed_at_ns:
            return
        # an epoch read from the stream may be older than the newest the progress named
        at = bisect.bisect_left(self._heard, (epoch,))
        if at < len(self._heard) and self._heard[at][0] == epoch:
            return
        self._heard.insert(at, (epoch, sealed_at_ns))
        if len(self._heard) > _KEEP:
            del self._heard[1]

    def prune(self, applied: int) -> None:
        """Forget the seal times of epochs up to ``applied`` (held now). Called on the event
        loop only, as ``heard`` and ``progress`` are."""
        drop = bisect.bisect_right(self._heard, (applied, 1 << 64))
        if drop:
            del self._heard[:drop]

    def figures(self, applied: int, live: bool, now_ns: int | None = None) -> LagFigures:
        """The lag of a replica holding the source's epochs up to ``applied``; ``live``: the
        channel is hearing the source now (running, or paused and polled), else its figures
        are estimates whatever the last message's age."""
        now = time.time_ns() if now_ns is None else now_ns
        heard = list(self._heard)  # read-only here: the metrics thread reads too
        first = bisect.bisect_right(heard, (applied, 1 << 64))
        lag_epochs = max(0, self.source_epoch - applied)
        if first < len(heard):
            lag_ns = now - (heard[first][1] + (self._offset or 0))
        elif self.last_heard_ns:
            lag_ns = now - self.last_heard_ns
        else:
            lag_ns = 0
        stale = not self.last_heard_ns or not live or \
            now - self.last_heard_ns > STALE_S * 1e9
        return LagFigures(self.source_epoch, self.source_sealed_at_ns, self.last_heard_ns,
                          lag_epochs, max(0.0, lag_ns / 1e9), stale)


#: The fields of a ``ChannelStatus`` that only the leader knows (its runner and watch).
_LIVE = ("state", "connected", "lag_epochs", "lag_seconds", "last_error", "epochs_applied",
         "transactions_applied", "source_epoch", "source_sealed_at_ns", "last_heard_ns",
         "since_last_heard", "seed")


def merge_leader_channels(mine: list[gateway_pb2.ChannelStatus],
                          leader: list[gateway_pb2.ChannelStatus], leader_id: int) -> None:
    """Give a follower's channel statuses ``mine`` the live fields of the leader's (from
    its ``Status``), marked with ``leader_id``; channels the leader does not list keep this
    node's view."""
    theirs = {c.name: c for c in leader}
    for st in mine:
        got = theirs.get(st.name)
        if got is None:
            continue
        for name in _LIVE:
            setattr(st, name, getattr(got, name))
        st.leader_id = leader_id


#: How often a paused channel asks its source's ``Status`` (as often as the stream's
#: progress comes).
POLL_S = 1.0


async def poll_paused(watch: SourceWatch, d: replication_pb2.ChannelDefinition,
                      open_channel: Callable[[str], grpc.aio.Channel]) -> None:
    """Until cancelled, feed ``watch`` with the newest sealed epoch of channel ``d``'s
    source from its ``Status`` (``open_channel``: the runner's, with the definition's TLS):
    a paused channel reads nothing, but its lag must go on growing with the source's
    writes. A source answering as another cluster than ``d.source_id`` is not heard."""
    md = (("authorization", f"Bearer {d.token}"),) if d.token else None
    n = 0
    while True:
        target = d.sources[n % len(d.sources)]
        try:
            async with open_channel(target) as ch:
                stub = gateway_pb2_grpc.GatewayStub(ch)
                while True:
                    st = await stub.Status(gateway_pb2.StatusRequest(), metadata=md,
                                           timeout=2.0)
                    if d.source_id and st.cluster_id != d.source_id:
                        break
                    watch.heard()
                    watch.sealed(st.sealed_epoch, st.sealed_at_ns)
                    await asyncio.sleep(POLL_S)
        except grpc.aio.AioRpcError:
            pass  # not heard: the figures age (since_last_heard)
        except Exception as exc:  # e.g. bad TLS material: the runner reports it on resume
            log.debug("channel %s: polling %s: %s", d.name, target, exc)
        n += 1
        await asyncio.sleep(POLL_S)
