"""The log entry a destination writes for one sealed epoch of its source.

``unit_items`` decides, from the destination's state (its leader's view: the applied state
plus every entry already in its log), which records of a sealed source epoch go into the
destination's log, in the source's order:

- a transaction of origin ``O`` when ``O`` is not the destination and its ``trans_id`` is above
  the destination's watermark for ``O`` (otherwise the destination holds it already: it came
  around a ring, or by another path of a mesh);
- an apply-status row ``(X, e, Y)`` when ``Y`` is not the destination (its own row came back)
  and it raises what the destination knows of ``(X, Y)`` (a row that tells nothing new is not
  passed on, which bounds the traffic of rows in meshes and rings);
- after such a row with ``X`` not the destination, the derived row ``(X, e, destination)``
  when it raises that pair: whoever logged ``(X, e, Y)`` held all of ``X``'s log up to ``e``
  before that point of its log, and the destination holds everything before that point of the
  source's log, so it now holds ``X``'s log up to ``e`` too (this is what lets a failover
  resume from the newest epoch of ``X`` held through a lost cluster);
- last, the position row ``(source, source_epoch, destination)``.

Rows reflecting this cluster's own epochs (``X`` = destination) are kept when they raise:
they are how ``max_replicated_epoch`` per peer rises, and the destination's log shows them.

**An epoch that brings no transaction** (everything in it is held already, or it only
carries apply-status rows) is written only when it reflects one of the destination's own
epochs, and then with those reflection rows alone: no rows for others, no position row (the
entry still moves the channel's position, which its header names). This is MySQL Cluster's
rule that an epoch with no changes is not logged (``ndb_log_empty_epochs`` off): without it,
every entry would carry a new position row that is news to the next cluster, which would
write an entry carrying its own position row, and so on around every cycle for ever. Rows
ride with data; reflection reaches an origin along the paths its transactions took.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gateway.v1 import epoch_pb2, replication_pb2, transaction_pb2

from .epochs import SealedEpoch
from .state import ReplicationState

__all__ = ["build_unit", "join_segments", "segment_items", "transactions", "unit_items"]

Item = replication_pb2.ReplicatedItem


def unit_items(state: ReplicationState, source_id: int, sealed: SealedEpoch
               ) -> list[replication_pb2.ReplicatedItem] | None:
    """The items of the destination's entry for ``sealed`` (see the module docstring), or
    ``None`` when nothing is to be written (the destination holds that epoch of
    ``source_id`` already, or it brings nothing the destination must record). Does not
    change ``state``."""
    me = state.self_id
    if sealed.epoch <= state.held(source_id):
        return None
    trial = state.copy()
    out: list[replication_pb2.ReplicatedItem] = []
    reflections: list[replication_pb2.ReplicatedItem] = []
    txns = 0
    for item in sealed.items:
        kind = item.WhichOneof("item")
        if kind == "transaction":
            g = item.transaction.gtid
            if g.server_id == me or g.trans_id <= trial.watermarks.get(g.server_id, 0):
                continue
            trial.watermarks[g.server_id] = g.trans_id
            out.append(item)
            txns += 1
        elif kind == "schema_event":
            # a schema event (docs/schema.md): every cluster but its origin takes it (one
            # already known is a no-op there), and it makes the epoch worth writing
            if item.schema_event.origin != str(me):
                out.append(item)
                txns += 1
        elif kind == "apply_status":
            r = item.apply_status
            if r.applied_by == me:
                continue
            if trial.raise_status(r.server_id, r.applied_by, r.epoch):
                out.append(item)
                if r.server_id == me:
                    reflections.append(item)
            if r.server_id != me and trial.raise_status(r.server_id, me, r.epoch):
                out.append(Item(apply_status=epoch_pb2.ApplyStatus(
                    server_id=r.server_id, epoch=r.epoch, applied_by=me)))
    if not txns:
        return reflections or None
    out.append(Item(apply_status=epoch_pb2.ApplyStatus(
        server_id=source_id, epoch=sealed.epoch, applied_by=me)))
    return out


def build_unit(state: ReplicationState, channel: str, source_id: int, sealed: SealedEpoch,
               local_epoch: int, *, max_bytes: int = 4 << 20
               ) -> list[replication_pb2.ReplicatedEpoch]:
    """The entries (one, or segments when larger than ``max_bytes``) this cluster proposes
    for ``sealed``; empty when there is nothing to write (:func:`unit_items`). Applies the
    whole entry to ``state`` (the leader's view) exactly as the state machine will."""
    items = unit_items(state, source_id, sealed)
    if items is None:
        return []
    parts = segment_items(items, max_bytes)
    out = []
    for i, part in enumerate(parts, 1):
        out.append(replication_pb2.ReplicatedEpoch(
            channel=channel, source_id=source_id, source_epoch=sealed.epoch,
            local_epoch=local_epoch, sealed_at_ns=sealed.sealed_at_ns, items=part,
            segment_id=i, end_segment=i == len(parts),
            source_log_index=sealed.last_log_index))
    state.apply(join_segments(out))
    return out


def join_segments(segments: Sequence[replication_pb2.ReplicatedEpoch]
                  ) -> replication_pb2.ReplicatedEpoch:
    """The whole entry of ``segments`` (in order, the last one ``end_segment``): the last
    segment's header with every segment's items. One segment is returned as it is."""
    if len(segments) == 1:
        return segments[0]
    unit = replication_pb2.ReplicatedEpoch()
    unit.CopyFrom(segments[-1])
    del unit.items[:]
    for seg in segments:
        unit.items.extend(seg.items)
    return unit


def transactions(items: Iterable[replication_pb2.ReplicatedItem]
                 ) -> list[transaction_pb2.Transaction]:
    """The transactions among ``items``, in order."""
    return [it.transaction for it in items if it.WhichOneof("item") == "transaction"]


def segment_items(items: Iterable[replication_pb2.ReplicatedItem], max_bytes: int
                  ) -> list[list[replication_pb2.ReplicatedItem]]:
    """Split ``items`` in order into runs of at most ``max_bytes`` serialized bytes (an item
    larger than that is a run of its own); at least one run."""
    parts: list[list[replication_pb2.ReplicatedItem]] = [[]]
    size = 0
    for item in items:
        n = item.ByteSize() + 8
        if parts[-1] and size + n > max_bytes:
            parts.append([])
            size = 0
        parts[-1].append(item)
        size += n
    return parts
