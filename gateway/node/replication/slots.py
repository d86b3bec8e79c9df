"""``SlotKeeper``: the log a source keeps for the channels of other clusters reading it.

Each reader -- a channel of another cluster, identified by ``(reader cluster id, channel)``
-- has a *slot* (PostgreSQL's replication slot), replicated state of this cluster
(``gateway.node.state.slot_apply``): the newest epoch of this cluster the reader holds
durably and the log index a resume after it reads first. The keeper of every node:

- takes the positions readers acknowledge on the streams this node serves (``note``: the
  hello's ``acked_epoch``, then each ``ChannelAck``) and proposes them, the newest of each
  slot only, in one ``SlotCommand`` entry every ``FLUSH_S`` seconds at most -- from any
  role (a follower's proposal is forwarded to the leader by Raft); a position is proposed
  again until the slot shows it (a proposal lost without a leader), and applying never
  moves a slot back;
- bounds this node's log compaction (``floor``): the log is kept from the oldest slot's
  position on, except for a slot that would keep more than a ``[retention]`` bound (entries,
  bytes of log files, or age of its oldest entry), which no longer holds anything back;
- on the leader, marks lost (through the log) a slot whose position the log was compacted
  past: its reader is refused with "behind the source's log: resync" from then on
  (``channel_source``), until a resync resets the slot or ``drop-slot`` removes it;
- reports the retained span and what holds it (``retention``, ``slot_status``: Status and
  metrics).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gateway.core import messages
from gateway.node.base.config import RetentionConfig
from gateway.node.base.validation import InvalidRequest
from gateway.node.loop.epoch_seal import entry_epoch
from gateway.node.state.slot_apply import SlotId, slot_id, slot_name
from gateway.node.state.wire import decode_entry
from gateway.raft import NO_LIMIT, CompactedError, Entry, EntryType, UnavailableError
from gateway.v1 import epoch_pb2, gateway_pb2, replication_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["FLUSH_S", "SlotKeeper"]

log = logging.getLogger("gateway.node.replication.slots")

#: At most one slot proposal per this many seconds (acks arrive once per applied epoch).
FLUSH_S = 1.0
#: How far back from a resume point the keeper looks for the entry that must stay.
_BACK = 4096
_NEVER = 1 << 62


class SlotKeeper:
    """See the module docstring. ``resume_index(epoch)``: the first log index a reader that
    holds this cluster's epochs up to ``epoch`` reads (raises ``InvalidRequest`` when the
    log no longer holds it); ``propose(data)``: propose an entry from any role."""

    def __init__(self, driver: RaftDriver, retention: RetentionConfig,
                 resume_index: Callable[[int], int], propose: Callable[[bytes], None],
                 *, clock: Callable[[], int] = time.time_ns) -> None:
        self.driver = driver
        self.retention = retention
        self._resume_index = resume_index
        self._propose = propose
        self._clock = clock
        self._pending: dict[SlotId, tuple[int, int]] = {}  # slot -> (acked epoch, index hint)
        #: slot -> why the bound let compaction pass it (kept for its ``lost`` reason)
        self._over: dict[SlotId, str] = {}

    # -- inputs ---------------------------------------------------------------------------------

    def note(self, sid: SlotId, acked_epoch: int, index_hint: int = 0) -> None:
        """Reader ``sid`` holds this cluster's epochs up to ``acked_epoch`` durably;
        ``index_hint``: the log index of that epoch's marker when the reader knows it."""
        have = self._pending.get(sid)
        if have is None or acked_epoch >= have[0]:
            self._pending[sid] = (acked_epoch, index_hint)

    def reset(self, sid: SlotId, acked_epoch: int, log_index: int) -> None:
        """Reader ``sid`` starts over at this cluster's epoch ``acked_epoch`` (log index
        ``log_index``): a seed pinned there (``seed_source``). Its slot is created or
        replaced whole, lost or not, so the log is held for the stream that follows the
        seed."""
        self._pending.pop(sid, None)
        self._propose(messages.pack(replication_pb2.SlotCommand(reset=[
            replication_pb2.ChannelSlot(reader_cluster_id=sid[0], channel=sid[1],
                                        acked_epoch=acked_epoch, log_index=log_index,
                                        acked_at_ns=self._clock())])))

    async def run(self) -> None:
        """Flush and (on the leader) mark lost slots every ``FLUSH_S`` seconds, until
        cancelled (the node's stop)."""
        while True:
            await asyncio.sleep(FLUSH_S)
            try:
                self.flush()
                if self.driver.is_leader:
                    self.mark_lost()
            except Exception:  # a bug must not stop the keeper: the next round retries
                log.exception("slots: round failed")

    def flush(self) -> None:
        """Propose the pending positions that move a slot forward, in one entry. A position
        stays pending until the slot shows it applied: a proposal dropped on the way (no
        leader) is made again at the next round, also when the reader acks nothing more."""
        slots = self.driver.sm.slots
        now = self._clock()
        out = []
        for sid, (epoch, hint) in sorted(self._pending.items()):
            index = self.position_index(epoch, hint)
            have = slots.get(sid)
            if index is None or (have is not None and (
                    have.lost or (have.acked_epoch, have.log_index) >= (epoch, index))):
                # applied, overtaken, or no longer in the log (the hello refused it)
                if self._pending.get(sid) == (epoch, hint):
                    del self._pending[sid]
                continue
            out.append(replication_pb2.ChannelSlot(
                reader_cluster_id=sid[0], channel=sid[1], acked_epoch=epoch,
                log_index=index, acked_at_ns=now))
        if out:
            self._propose(messages.pack(replication_pb2.SlotCommand(advance=out)))

    def mark_lost(self) -> None:
        """Propose ``lost`` for the slots whose position this node's log was compacted past
        (the leader's log: compaction passed them only past a bound)."""
        first = self.driver.storage.first_index()
        slots = self.driver.sm.slots
        for sid in [k for k in self._over if k not in slots or slots[k].lost]:
            del self._over[sid]  # its reason recorded (or the slot dropped)
        lost = []
        for sid, s in sorted(slots.items()):
            if s.lost or s.log_index >= first:
                continue
            reason = self._over.get(sid) or f"the log was compacted up to index {first - 1}"
            lost.append(replication_pb2.ChannelSlot(reader_cluster_id=sid[0], channel=sid[1],
                                                    lost_reason=reason))
        if lost:
            for s in lost:
                log.warning("slot %s lost: %s", slot_name(slot_id(s)), s.lost_reason)
            self._propose(messages.pack(replication_pb2.SlotCommand(lost=lost)))

    # -- positions ------------------------------------------------------------------------------

    def _entries(self, lo: int, hi: int) -> list[Entry]:
        """The applied entries of ``[lo, hi)`` this node still holds (maybe none)."""
        storage = self.driver.storage
        lo = max(lo, storage.first_index())
        hi = min(hi, self.driver.sm.applied_index + 1)
        if lo >= hi:
            return []
        try:
            return storage.entries(lo, hi, NO_LIMIT)
        except (CompactedError, UnavailableError):
            return []

    def position_index(self, epoch: int, hint: int = 0) -> int | None:
        """The log index a slot at ``epoch`` keeps the log from: the last entry of this
        cluster's epochs up to ``epoch`` (its marker, normally), which a resume after
        ``epoch`` needs to find still in the log; the log's first index for epoch 0. None
        when the log no longer holds it."""
        storage = self.driver.storage
        first = storage.first_index()
        if epoch == 0:
            return first
        if hint >= first:
            got = self._entries(hint, hint + 1)
            if got and entry_epoch(got[0]) == epoch:
                return hint
        try:
            resume = self._resume_index(epoch)
        except InvalidRequest:
            return None
        hi = resume
        while hi > first and resume - hi < _BACK:
            lo = max(first, hi - 64)
            for e in reversed(self._entries(lo, hi)):
                if entry_epoch(e):
                    return e.index
            hi = lo
        return max(first, resume - 1)

    # -- compaction -----------------------------------------------------------------------------

    def over_bound(self, s: replication_pb2.ChannelSlot) -> str:
        """Why slot ``s`` keeps more than the ``[retention]`` bounds allow ("" if it does
        not)."""
        r = self.retention
        storage = self.driver.storage
        held = max(0, storage.last_index() - s.log_index + 1)
        if r.max_entries and held > r.max_entries:
            return (f"it held {held} log entries, more than retention.max_entries "
                    f"({r.max_entries})")
        if r.max_bytes:
            size = storage.log_bytes_from(s.log_index)
            if size > r.max_bytes:
                return (f"it held {size} bytes of log, more than retention.max_bytes "
                        f"({r.max_bytes})")
        if r.max_age_s:
            since = self._held_since(s.log_index + 1)
            if since and self._clock() - since > r.max_age_s * 10**9:
                return (f"its oldest entry is older than retention.max_age_s "
                        f"({r.max_age_s} s)")
        return ""

    def _held_since(self, index: int) -> int:
        """When the oldest timestamped entry from ``index`` on was written (0: none near)."""
        for e in self._entries(index, index + 64):
            if e.type != EntryType.NORMAL or not e.data:
                continue
            tag = e.data[0]
            if tag == messages.TypeTag.EPOCH_MARKER:
                return int(epoch_pb2.EpochMarker.FromString(e.data[1:]).sealed_at_ns)
            if tag == messages.TypeTag.TRANSACTION:
                txn, _ = decode_entry(e.data)
                if txn is not None and txn.commit_timestamp_ns:
                    return int(txn.commit_timestamp_ns)
            if tag == messages.TypeTag.REPLICATED_EPOCH:
                unit = replication_pb2.ReplicatedEpoch.FromString(e.data[1:])
                if unit.sealed_at_ns:
                    return int(unit.sealed_at_ns)
        return 0

    def floor(self) -> int:
        """The highest index this node may compact its log up to for the slots: below the
        oldest position of the slots within the bounds (a slot past one is remembered, for
        its ``lost`` reason, and holds nothing)."""
        out = _NEVER
        first = self.driver.storage.first_index()
        for sid, s in self.driver.sm.slots.items():
            if s.lost or s.log_index < first:
                continue  # passed already (its reason kept until it is marked lost)
            why = self.over_bound(s)
            if why:
                self._over[sid] = why
                continue
            self._over.pop(sid, None)
            out = min(out, s.log_index - 1)
        return out

    # -- status ---------------------------------------------------------------------------------

    def first_epoch(self, first: int) -> int:
        """The epoch of the first epoch-bearing entry from ``first`` on (0: none near)."""
        for e in self._entries(first, first + 64):
            got = entry_epoch(e)
            if got:
                return got
        return 0

    def retention_status(self, applier_floor: int, snapshot_floor: int
                         ) -> tuple[gateway_pb2.LogRetention, list[gateway_pb2.SlotStatus]]:
        """This node's retained span and what holds it, and each slot's share.
        ``applier_floor``/``snapshot_floor``: how far the appliers and the newest snapshot
        would let the log be compacted (the other two bounds of compaction)."""
        storage = self.driver.storage
        first = storage.first_index()
        last = storage.last_index()
        r = self.retention
        ret = gateway_pb2.LogRetention(first_index=first, first_epoch=self.first_epoch(first),
                                       max_entries=r.max_entries, max_bytes=r.max_bytes,
                                       max_age_s=r.max_age_s)
        holders: list[tuple[int, str]] = [(snapshot_floor, "snapshot")]
        if applier_floor < _NEVER:
            holders.append((applier_floor, "applier"))
        slots = []
        oldest: SlotId | None = None
        oldest_at = _NEVER
        for sid, s in sorted(self.driver.sm.slots.items()):
            held = 0 if s.lost else max(0, last - max(s.log_index, first) + 1)
            st = gateway_pb2.SlotStatus(slot=s, held_entries=held, held_bytes=(
                storage.log_bytes_from(max(s.log_index, first)) if held else 0))
            slots.append(st)
            if not s.lost and not self.over_bound(s) and s.log_index - 1 < oldest_at:
                oldest, oldest_at = sid, s.log_index - 1
        if oldest is not None:
            holders.append((oldest_at, f"slot {slot_name(oldest)}"))
        at, by = min(holders)
        if by.startswith("slot") and at < snapshot_floor:
            for st in slots:
                st.holds_log = slot_name(slot_id(st.slot)) == by[5:]
        ret.held_by = by
        return ret, slots

    # -- admin ----------------------------------------------------------------------------------

    def drop_command(self, name: str) -> bytes:
        """The entry dropping slot ``name`` (``CLUSTER/CHANNEL``); ``InvalidRequest`` naming
        the slots when there is none of that name."""
        cluster, sep, channel = name.partition("/")
        sid = (int(cluster), channel) if sep and cluster.isdigit() else None
        if sid is None or sid not in self.driver.sm.slots:
            known = ", ".join(slot_name(s) for s in sorted(self.driver.sm.slots)) or "none"
            raise InvalidRequest("name", f"no slot {name!r} (slots: {known}; a slot is "
                                 f"named READER_CLUSTER/CHANNEL)")
        return messages.pack(replication_pb2.SlotCommand(drop=[replication_pb2.ChannelSlot(
            reader_cluster_id=sid[0], channel=sid[1])]))
