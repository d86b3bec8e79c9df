"""Channel slots as replicated state: what this cluster keeps for each reader of its log.

A slot (``gateway.v1.ChannelSlot``) is keyed by the reader's identity, ``(reader cluster id,
channel name)``, and stored under ``m slot:<reader>/<channel>``, so it is in every node's
store and in every snapshot, like the channel definitions. ``SLOT_COMMAND`` entries change
slots (``apply_slot_command``):

- ``advance``: create a slot, or move its position forward -- never back (acks of two nodes
  serving the same reader one after the other may commit out of order), never for a lost
  slot (the log it stood for is gone: only a ``reset`` brings it back);
- ``lost``: mark a slot lost, keeping its position for the status;
- ``drop``: remove a slot (``gateway channel drop-slot``);
- ``reset``: create or replace a slot whole, lost or not (a resync sets the new position).

An entry that does not parse changes nothing (as every command: ``command_apply``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from google.protobuf.message import DecodeError

from gateway.node.state import keys
from gateway.node.state.store_ops import Ops, meta_op
from gateway.v1 import replication_pb2

__all__ = ["SLOT_PREFIX", "SlotId", "apply_slot_command", "load_slots", "slot_id", "slot_name"]

SLOT_PREFIX = keys.meta_key("slot:")
#: A slot's identity: (reader cluster id, channel name in the reader).
SlotId = tuple[int, str]


def slot_id(s: replication_pb2.ChannelSlot) -> SlotId:
    return s.reader_cluster_id, s.channel


def slot_name(sid: SlotId) -> str:
    """``CLUSTER/CHANNEL``, as ``gateway channel slots`` shows it and ``drop-slot`` takes it."""
    return f"{sid[0]}/{sid[1]}"


def _key(sid: SlotId) -> bytes:
    return SLOT_PREFIX + slot_name(sid).encode()


def load_slots(scan_prefix: Callable[[bytes], Iterable[tuple[bytes, bytes]]]
               ) -> dict[SlotId, replication_pb2.ChannelSlot]:
    """The slots a store holds."""
    out = {}
    for _k, v in scan_prefix(SLOT_PREFIX):
        s = replication_pb2.ChannelSlot.FromString(v)
        out[slot_id(s)] = s
    return out


def apply_slot_command(slots: Mapping[SlotId, replication_pb2.ChannelSlot], data: bytes,
                       ops: Ops) -> dict[SlotId, replication_pb2.ChannelSlot] | None:
    """The slots after a ``SLOT_COMMAND`` entry (``data``, type tag first), or None when it
    changes nothing (see the module docstring for the rules)."""
    try:
        cmd = replication_pb2.SlotCommand.FromString(data[1:])
    except DecodeError:
        return None
    out = dict(slots)
    changed: set[SlotId] = set()
    for s in cmd.reset:
        if s.channel:
            out[slot_id(s)] = s
            changed.add(slot_id(s))
    for s in cmd.advance:
        sid = slot_id(s)
        have = out.get(sid)
        if not s.channel or (have is not None and (
                have.lost or s.acked_epoch < have.acked_epoch
                or (s.acked_epoch == have.acked_epoch and s.log_index <= have.log_index))):
            continue
        new = replication_pb2.ChannelSlot()
        new.CopyFrom(s)
        new.lost, new.lost_reason = False, ""
        out[sid] = new
        changed.add(sid)
    for s in cmd.lost:
        sid = slot_id(s)
        have = out.get(sid)
        if have is None or have.lost:
            continue
        new = replication_pb2.ChannelSlot()
        new.CopyFrom(have)
        new.lost, new.lost_reason = True, s.lost_reason
        out[sid] = new
        changed.add(sid)
    for s in cmd.drop:
        sid = slot_id(s)
        if out.pop(sid, None) is not None:
            changed.add(sid)
    if not changed:
        return None
    for sid in sorted(changed):
        got = out.get(sid)
        ops.append(meta_op(_key(sid), got.SerializeToString() if got is not None else None))
    return out
