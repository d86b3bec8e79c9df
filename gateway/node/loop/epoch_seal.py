"""The epoch of a log entry, and the one an earlier leader left open, which a new leader seals
(docs/node.md, "Log entries, GTIDs, epochs").

A leader seals its open epoch with an ``EpochMarker`` when the epoch ends. A leader that dies
(or loses its term) first leaves the transactions of its last epoch in the log without one,
and a reader of this cluster's stream (a channel) holds an epoch back until it is sealed -- by
its marker or by any record of a later epoch. A new leader that writes nothing would leave
that epoch unapplied downstream for good. So when a node becomes leader it looks back through
its log: if the newest epoch-bearing record (a transaction, a replicated epoch) comes after
the newest marker, it proposes the marker that epoch lacks.
"""

from __future__ import annotations

from gateway.core.messages import TypeTag
from gateway.node.state.wire import decode_entry
from gateway.node.storage.storage import compacted_log
from gateway.raft import NO_LIMIT, Entry, EntryType
from gateway.raft.log import RaftLog
from gateway.v1 import epoch_pb2, replication_pb2

__all__ = ["entry_epoch", "unsealed_epoch"]

_STEP = 64


def entry_epoch(e: Entry) -> int:
    """This cluster's epoch of entry ``e`` (0: not an epoch-bearing entry)."""
    if e.type != EntryType.NORMAL or not e.data:
        return 0
    tag = e.data[0]
    if tag == TypeTag.TRANSACTION:
        txn, _ = decode_entry(e.data)
        return txn.epoch if txn is not None else 0
    if tag == TypeTag.REPLICATED_EPOCH:
        return replication_pb2.ReplicatedEpoch.FromString(e.data[1:]).local_epoch
    if tag == TypeTag.EPOCH_MARKER:
        return epoch_pb2.EpochMarker.FromString(e.data[1:]).epoch
    return 0


def unsealed_epoch(log: RaftLog, term: int) -> tuple[int, int]:
    """``(epoch, last trans id)`` of the newest record in ``log`` when no marker follows it
    (``(0, 0)``: none to seal). The trans id is what the epoch's own leader would have put in
    the marker: the newest transaction's of the epoch, or the GTID a replicated epoch after
    it reserved for what its conflicts derive (0 if the epoch has neither).

    Reads back from the last entry, ``_STEP`` entries at a time, and stops at the first
    marker or record (or, for the trans id, the first entry of an older epoch). When it
    reaches the start of a compacted log (the first index after the bootstrap entry's)
    without finding either, the records, if any, are in the snapshot and it cannot tell
    whether they were sealed: it answers ``((term << 32) - 1, 0)``, an epoch above every
    earlier term's and below every epoch of ``term``, which seals whatever an earlier leader
    left open and nothing of this one. A marker is cheap; an epoch held back downstream is
    data missing there."""
    hi = log.last_index() + 1
    first = log.first_index()
    epoch = 0
    while hi > first:
        lo = max(first, hi - _STEP)
        for e in reversed(log.slice(lo, hi, NO_LIMIT)):
            if e.type != EntryType.NORMAL or not e.data:
                continue
            tag = e.data[0]
            if tag == TypeTag.EPOCH_MARKER:
                return epoch, 0
            if tag == TypeTag.TRANSACTION:
                txn, _ = decode_entry(e.data)
                assert txn is not None
                if epoch and txn.epoch != epoch:
                    return epoch, 0
                return txn.epoch, txn.gtid.trans_id
            if tag == TypeTag.REPLICATED_EPOCH:
                unit = replication_pb2.ReplicatedEpoch.FromString(e.data[1:])
                if epoch and unit.local_epoch != epoch:
                    return epoch, 0
                epoch = unit.local_epoch
                if unit.derived_trans_id:
                    return epoch, unit.derived_trans_id
        hi = lo
    if epoch:
        return epoch, 0
    return ((term << 32) - 1 if compacted_log(first) else 0), 0
