"""Command entries applied to the store: applier positions, channel definitions and conflict
rules (the NOSPACE alarms, the fourth command, are ``alarms.apply_alarm_command``).

Each function takes what the state machine holds now and the entry's bytes (type tag
first), appends its store operations to ``ops`` and returns what the state machine holds
after -- a new mapping, never the old one mutated, so a reader on another thread always sees
a whole one -- or None when the entry changes nothing. An entry that does not parse, or names
nothing, changes nothing: the API checks commands before proposing them, and an odd entry
must not stop every replica.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from google.protobuf.message import DecodeError

from gateway.conflict import ConflictRule, Role
from gateway.conflict.rules import rule_from_proto, rule_to_proto
from gateway.node.state import keys
from gateway.node.state.epoch_apply import StagedSegment, seg_key
from gateway.node.state.store_ops import Ops, meta_op
from gateway.v1 import applier_pb2, replication_pb2

__all__ = ["ConflictSettings", "apply_channel_command", "apply_conflict_command",
           "apply_position"]


def apply_position(positions: Mapping[str, applier_pb2.ApplierPosition], data: bytes,
                   ops: Ops) -> applier_pb2.ApplierPosition | None:
    """The position an ``APPLIER_POSITION`` entry records (under ``m applier:<name>``, the
    entry's message bytes), or None when it names no applier or the recorded position of
    that applier has a larger ``log_index`` (a stale proposal of an old leader committed
    late never moves a position back)."""
    try:
        pos = applier_pb2.ApplierPosition.FromString(data[1:])
    except DecodeError:
        return None
    if not pos.applier:
        return None
    current = positions.get(pos.applier)
    if current is not None and current.log_index > pos.log_index:
        return None
    ops.append(meta_op(keys.applier_position_key(pos.applier), data[1:]))
    return pos


def apply_channel_command(channels: Mapping[str, replication_pb2.ChannelDefinition],
                          staged: dict[str, list[StagedSegment]], data: bytes, ops: Ops
                          ) -> dict[str, replication_pb2.ChannelDefinition] | None:
    """The channel definitions after a ``CHANNEL_COMMAND`` entry adds, replaces or removes
    one (``m ch:<name>``). Removing a channel also drops the segments of an epoch it had
    staged (from ``staged`` and the store)."""
    try:
        cmd = replication_pb2.ChannelCommand.FromString(data[1:])
    except DecodeError:
        return None
    name = cmd.definition.name
    if not name:
        return None
    out = dict(channels)
    key = keys.meta_key(f"ch:{name}")
    if cmd.remove:
        out.pop(name, None)
        ops.append(meta_op(key, None))
        for seg in staged.pop(name, []):
            ops.append(meta_op(seg_key(name, seg.segment.segment_id), None))
    else:
        out[name] = cmd.definition
        ops.append(meta_op(key, cmd.definition.SerializeToString()))
    return out


class ConflictSettings(NamedTuple):
    """The conflict rules by table pattern and this cluster's role."""

    rules: dict[str, ConflictRule]
    role: Role


def apply_conflict_command(current: ConflictSettings, data: bytes, ops: Ops
                           ) -> ConflictSettings | None:
    """The conflict settings after a ``CONFLICT_COMMAND`` entry sets or unsets a rule
    (``m cr:<table pattern>``) or sets the role (``m role``); None when it changes nothing
    (unsetting a rule that is not set, an unknown role)."""
    try:
        cmd = replication_pb2.ConflictCommand.FromString(data[1:])
    except DecodeError:
        return None
    if cmd.HasField("set") and cmd.set.table:
        rule = rule_from_proto(cmd.set)
        rules = dict(current.rules)
        rules[rule.pattern] = rule
        ops.append(meta_op(keys.meta_key(f"cr:{rule.pattern}"),
                           rule_to_proto(rule).SerializeToString()))
        return current._replace(rules=rules)
    if cmd.unset:
        rules = dict(current.rules)
        if rules.pop(cmd.unset, None) is None:
            return None
        ops.append(meta_op(keys.meta_key(f"cr:{cmd.unset}"), None))
        return current._replace(rules=rules)
    if cmd.role:
        try:
            role = Role(cmd.role)
        except ValueError:
            return None
        ops.append(meta_op(keys.meta_key("role"), role.value.encode()))
        return current._replace(role=role)
    return None
