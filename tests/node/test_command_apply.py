"""The command entries (``gateway.node.state.command_apply``) as values in, values out: each returns
what the state machine holds after the entry -- a new mapping, the old one left as it was,
so a reader on another thread sees a whole one -- with the store operations appended, or
None, changing nothing, for an entry that does not parse or names nothing."""

from __future__ import annotations

from gateway.conflict import Role
from gateway.core.messages import TypeTag
from gateway.node.state.command_apply import (
    ConflictSettings,
    apply_channel_command,
    apply_conflict_command,
    apply_position,
)
from gateway.node.state.epoch_apply import StagedSegment, seg_key
from gateway.node.state.keys import applier_position_key, meta_key
from gateway.node.state.store_ops import StoreOp
from gateway.v1 import applier_pb2, replication_pb2


def _entry(tag: int, msg) -> bytes:  # type: ignore[no-untyped-def]
    return bytes((tag,)) + msg.SerializeToString()


def test_store_operations_are_exact_tuples_for_the_batch_encoder():
    """The store encodes a batch in one C call only when every operation is exactly a tuple:
    a NamedTuple among them would send every apply to the general loop."""
    ops: list = []
    apply_position({}, _entry(TypeTag.APPLIER_POSITION,
                              applier_pb2.ApplierPosition(applier="a", log_index=1)), ops)
    apply_conflict_command(ConflictSettings({}, Role.NONE), _entry(
        TypeTag.CONFLICT_COMMAND, replication_pb2.ConflictCommand(role="PRIMARY")), ops)
    assert ops and all(type(op) is tuple for op in ops)


def test_a_position_is_recorded_as_the_entry_carries_it():
    pos = applier_pb2.ApplierPosition(applier="a", log_index=7)
    ops: list = []
    got = apply_position({}, _entry(TypeTag.APPLIER_POSITION, pos), ops)
    assert got == pos
    assert ops == [(applier_position_key("a"), pos.SerializeToString(), 0, 0, 0)]


def test_a_stale_position_changes_nothing():
    current = {"a": applier_pb2.ApplierPosition(applier="a", log_index=9)}
    ops: list = []
    stale = applier_pb2.ApplierPosition(applier="a", log_index=8)
    assert apply_position(current, _entry(TypeTag.APPLIER_POSITION, stale), ops) is None
    assert ops == []


def test_entries_that_do_not_parse_or_name_nothing_change_nothing():
    ops: list = []
    assert apply_position({}, b"\x05\xff\xff", ops) is None
    assert apply_position({}, _entry(TypeTag.APPLIER_POSITION,
                                     applier_pb2.ApplierPosition()), ops) is None
    assert apply_channel_command({}, {}, b"\x06\xff", ops) is None
    assert apply_channel_command({}, {}, _entry(TypeTag.CHANNEL_COMMAND,
                                                replication_pb2.ChannelCommand()), ops) is None
    settings = ConflictSettings({}, Role.NONE)
    assert apply_conflict_command(settings, b"\x07\xff", ops) is None
    assert apply_conflict_command(settings, _entry(
        TypeTag.CONFLICT_COMMAND, replication_pb2.ConflictCommand(role="boss")), ops) is None
    assert apply_conflict_command(settings, _entry(
        TypeTag.CONFLICT_COMMAND, replication_pb2.ConflictCommand(unset="s.t")), ops) is None
    assert ops == []


def test_removing_a_channel_drops_what_it_staged_and_leaves_the_old_mapping_alone():
    old = {"c": replication_pb2.ChannelDefinition(name="c"),
           "d": replication_pb2.ChannelDefinition(name="d")}
    seg = replication_pb2.ReplicatedEpoch(channel="c", segment_id=1)
    staged = {"c": [StagedSegment(seg, seg.SerializeToString())]}
    ops: list = []
    cmd = replication_pb2.ChannelCommand(definition=old["c"], remove=True)
    got = apply_channel_command(old, staged, _entry(TypeTag.CHANNEL_COMMAND, cmd), ops)
    assert got == {"d": old["d"]} and set(old) == {"c", "d"}
    assert staged == {}
    assert ops == [(meta_key("ch:c"), None, 0, 0, 0), (seg_key("c", 1), None, 0, 0, 0)]


def test_a_conflict_command_returns_new_settings():
    before = ConflictSettings({}, Role.NONE)
    ops: list = []
    role = apply_conflict_command(before, _entry(
        TypeTag.CONFLICT_COMMAND, replication_pb2.ConflictCommand(role="PRIMARY")), ops)
    assert role == ConflictSettings({}, Role.PRIMARY) and before.role is Role.NONE
    assert role.rules is before.rules  # unchanged rules stay the same object (rule caches)
    rule = replication_pb2.ConflictRule(table="s.t", function="NDB$MAX(v)")
    got = apply_conflict_command(role, _entry(
        TypeTag.CONFLICT_COMMAND, replication_pb2.ConflictCommand(set=rule)), ops)
    assert got is not None and list(got.rules) == ["s.t"] and role.rules == {}
    gone = apply_conflict_command(got, _entry(
        TypeTag.CONFLICT_COMMAND, replication_pb2.ConflictCommand(unset="s.t")), ops)
    assert gone is not None and gone.rules == {} and list(got.rules) == ["s.t"]
    assert [StoreOp(*op).key for op in ops] == [meta_key("role"), meta_key("cr:s.t"),
                                                meta_key("cr:s.t")]
