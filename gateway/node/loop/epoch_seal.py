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

from collections.abc import Iterator

from gateway.core.messages import TypeTag
from gateway.node.state.wire import decode_entry
from gateway.node.storage.storage import compacted_log
from gateway.raft import NO_LIMIT, CompactedError, Entry, EntryType
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
    reaches the start of a compacted log (the first index after the bootstrap entry's), or
    an entry that no longer reads (a damaged WAL segment), without finding either, the
    records, if any, are out of its reach and it cannot tell whether they were sealed: it
    answers ``((term << 32) - 1, 0)``, an epoch above every earlier term's and below every
    epoch of ``term``, which seals whatever an earlier leader left open and nothing of this
    one. A marker is cheap; an epoch held back downstream is data missing there."""
    first = log.first_index()
    epoch = 0
    unreadable = False
    for e in _newest_first(log, first, log.last_index() + 1):
        if e is None:
            unreadable = True
            break
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
    if epoch:
        return epoch, 0
    return ((term << 32) - 1 if unreadable or compacted_log(first) else 0), 0


def _newest_first(log: RaftLog, first: int, hi: int) -> Iterator[Entry | None]:
    """The entries ``first .. hi - 1`` of ``log``, newest first, read ``_STEP`` at a time.

    An entry that no longer reads (a ``LogDamagedError``, which is a ``CompactedError``: a
    sealed WAL segment damaged after the node started) ends the walk as the start of a
    compacted log would: the entries after it are yielded one by one, then ``None``. It
    does not escape: the caller runs in the Raft loop, which stops the node on any error,
    and a damaged entry the node already applied is no reason to stop leading."""
    while hi > first:
        lo = max(first, hi - _STEP)
        try:
            chunk: list[Entry] | None = log.slice(lo, hi, NO_LIMIT)
        except CompactedError:
            chunk = None
        if chunk is not None:
            yield from reversed(chunk)
        else:  # one by one, to the entry that does not read
            for i in range(hi - 1, lo - 1, -1):
                try:
                    one = log.slice(i, i + 1, NO_LIMIT)
                except CompactedError:
                    yield None
                    return
                yield from one
        hi = lo
