"""Which GTID trans id a Raft log entry consumes: one answer for the leader that hands out
trans ids and for the start-up check that compares an applier's target with the log.

A cluster's trans ids are handed out by its leader, in log order, and each is consumed by
exactly one entry kind:

- a ``TRANSACTION`` entry (every segment of it, fast path or general path alike) carries its
  GTID (``server_id``, ``trans_id``);
- a ``REPLICATED_EPOCH`` entry -- another cluster's epoch applied here -- may carry, on its
  last segment, the ``derived_trans_id`` the leader reserved while conflict rules exist: the
  GTID (this cluster's id) of the transaction the state machine derives when it finds
  conflicts (exception rows and refreshes; ``StoreStateMachine._derive``). The transactions
  *inside* the unit keep their origin's GTIDs and consume none of this cluster's;
- every other kind (epoch markers, apply status, channel, conflict, alarm and slot commands,
  applier positions, no-ops, configuration changes) consumes none.

A reserved trans id counts as consumed even when applying the entry writes nothing under it
(no conflict found, or the unit refused): the leader never hands it out again, so a target
can never hold a later transaction of that id from another entry.

`tests/node/test_gtid_use.py` pins that the state machine's ``last_trans_id`` moves exactly
as `consumed_trans_id` says, for every entry kind, and that every type tag is classified
here: a new tag must be added to ``_CONSUMES`` or ``_FREE`` before it can be logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from gateway.core.messages import TypeTag
from gateway.node.state.wire import decode_entry
from gateway.v1 import replication_pb2

if TYPE_CHECKING:
    from gateway.raft import Entry

__all__ = ["Consumed", "consumed", "consumed_trans_id", "entry_trans_id"]

#: Type tags whose entries may consume a trans id (see the module docstring).
_CONSUMES = frozenset({TypeTag.TRANSACTION, TypeTag.REPLICATED_EPOCH})
#: Type tags whose entries never consume one.
_FREE = frozenset(TypeTag) - _CONSUMES


class Consumed(NamedTuple):
    """The trans id an entry consumes (0: none) and the commit time that goes with it."""

    trans_id: int = 0
    commit_ts: int = 0


_NONE = Consumed()


def consumed(data: bytes, server_id: int | None = None) -> Consumed:
    """What an entry payload ``data`` consumes, restricted to cluster ``server_id`` when
    given (a transaction entry of another cluster's GTID then consumes nothing here; a
    replicated epoch's reserved id belongs to the cluster whose log holds it, so it counts
    for any ``server_id``). Raises ``google.protobuf.message.DecodeError`` for a payload of a
    consuming kind that does not parse: the caller decides whether that is damage."""
    if not data:
        return _NONE
    tag = data[0]
    if tag == TypeTag.TRANSACTION:
        txn, _ = decode_entry(data)
        if txn is None or (server_id is not None and txn.gtid.server_id != server_id):
            return _NONE
        return Consumed(txn.gtid.trans_id, txn.commit_timestamp_ns)
    if tag == TypeTag.REPLICATED_EPOCH:
        unit = replication_pb2.ReplicatedEpoch.FromString(data[1:])
        return Consumed(unit.derived_trans_id, unit.derived_commit_ts)
    return _NONE


def consumed_trans_id(data: bytes, server_id: int | None = None) -> int:
    """The trans id of `consumed` (0: none)."""
    return consumed(data, server_id).trans_id


def entry_trans_id(e: Entry, server_id: int | None = None) -> int:
    """`consumed_trans_id` of a Raft entry: 0 for anything but a normal entry."""
    from gateway.raft import EntryType

    if e.type != EntryType.NORMAL:
        return 0
    return consumed_trans_id(e.data, server_id)
