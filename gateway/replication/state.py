"""``ReplicationState``: a cluster's replicated bookkeeping of other clusters' transactions.

Two tables, both only ever raised (a ``max``), both changed only by applying log entries, so
every replica of a cluster holds the same values at the same log index:

- ``watermarks[origin]``: the largest ``trans_id`` of cluster ``origin`` applied here.
  Every log holds each origin's transactions as a prefix of the origin's own sequence, in its
  order (the origin's log does; a channel delivers its source's log in order from a position
  below which the destination holds everything; a destination applies only ``trans_id >
  watermark``). So "apply iff origin is not this cluster and ``trans_id`` is above the
  watermark" applies each origin transaction exactly once, in order, whatever the topology.
- ``apply_status[(server_id, applied_by)]``: the newest epoch of cluster ``server_id`` known to
  be applied by cluster ``applied_by`` (MySQL Cluster's ``ndb_apply_status``, keyed by the
  pair). Two readings matter to this cluster ``self``:

  * ``held(S) = apply_status[(S, self)]``: this cluster holds every record of ``S``'s log up to
    ``S``'s epoch ``held(S)``: where a channel from ``S`` resumes, also after a failover to a
    new source (MySQL's ``MAX(epoch) ... WHERE server_id = S``);
  * ``max_replicated_epoch(P) = apply_status[(self, P)]``: the newest epoch of this cluster
    that peer ``P`` is known to have applied (reflection; one per peer).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gateway.v1 import replication_pb2

__all__ = ["ReplicationState", "StatusRow"]


@dataclass(frozen=True, slots=True)
class StatusRow:
    """An apply-status row: epoch ``epoch`` of cluster ``server_id`` is applied on cluster
    ``applied_by``."""

    server_id: int
    epoch: int
    applied_by: int


class ReplicationState:
    """Watermarks and apply-status table of cluster ``self_id``; see the module docstring."""

    __slots__ = ("apply_status", "self_id", "watermarks")

    def __init__(self, self_id: int) -> None:
        self.self_id = self_id
        self.watermarks: dict[int, int] = {}
        self.apply_status: dict[tuple[int, int], int] = {}

    def copy(self) -> ReplicationState:
        out = ReplicationState(self.self_id)
        out.watermarks = dict(self.watermarks)
        out.apply_status = dict(self.apply_status)
        return out

    # -- readings -------------------------------------------------------------------------------

    def held(self, source: int) -> int:
        """Newest epoch of ``source`` whose whole log content this cluster holds (0: none)."""
        return self.apply_status.get((source, self.self_id), 0)

    def max_replicated_epoch(self, peer: int) -> int:
        """Newest epoch of this cluster that ``peer`` is known to have applied (0: none)."""
        return self.apply_status.get((self.self_id, peer), 0)

    def tombstone_floor(self) -> tuple[int, dict[int, int]]:
        """Which tombstones a conflict check may still need, as ``(default, {author:
        floor})``: a delete authored by cluster X in an epoch above the floor of X. A change
        from peer P meets a delete it had not seen when the delete's epoch is above P's max
        replicated epoch, and matters only if P did not write the delete itself; so X's
        floor is the smallest max replicated epoch among the known peers other than X.
        ``1 << 64`` means keep none (no such peer: e.g. a cluster alone, or the deletes a
        one-way replica applies from its only source)."""
        mre = sorted((self.max_replicated_epoch(p), p) for p in self.peers())
        none = 1 << 64
        if not mre:
            return none, {}
        lowest, p1 = mre[0]
        return lowest, {p1: mre[1][0] if len(mre) > 1 else none}

    def peers(self) -> list[int]:
        """Clusters this cluster knows anything about, sorted."""
        ids = {o for o in self.watermarks}
        for sid, by in self.apply_status:
            ids.add(sid)
            ids.add(by)
        ids.discard(self.self_id)
        ids.discard(0)
        return sorted(ids)

    # -- the verdict on a replicated epoch -------------------------------------------------------

    def refusal(self, unit: replication_pb2.ReplicatedEpoch) -> str | None:
        """Why this cluster must not apply ``unit`` (a whole, reassembled ``ReplicatedEpoch``),
        or ``None`` when it applies. A unit is applied whole or not at all; a refused one
        changes nothing. Its leader filtered it against the same rules, so a refusal means a
        duplicate proposal (two leaders of this cluster proposed the same source epoch) or a
        malformed entry."""
        src, me = unit.source_id, self.self_id
        if src == 0 or src == me:
            return f"source cluster id {src} is not another cluster"
        if unit.source_epoch <= self.held(src):
            return (f"epoch {unit.source_epoch} of cluster {src} is already held (up to "
                    f"{self.held(src)})")
        seen: dict[int, int] = {}
        for item in unit.items:
            if item.WhichOneof("item") != "transaction":
                continue
            g = item.transaction.gtid
            if g.server_id == me:
                return f"transaction {g.server_id}:{g.trans_id} is this cluster's own"
            last = seen.get(g.server_id, self.watermarks.get(g.server_id, 0))
            if g.trans_id <= last:
                return (f"transaction {g.server_id}:{g.trans_id} is not after "
                        f"{g.server_id}:{last}, already applied here")
            seen[g.server_id] = g.trans_id
        return None

    def apply(self, unit: replication_pb2.ReplicatedEpoch
              ) -> tuple[set[int], set[tuple[int, int]]]:
        """Record an accepted ``unit`` (see :meth:`refusal`): raise the watermarks of its
        transactions' origins, the apply-status rows it carries, and the channel's position
        ``(source_id, source_epoch, self)``. Returns the changed keys ``(origins, pairs)``."""
        return self.apply_items(unit.items, unit.source_id, unit.source_epoch)

    def apply_items(self, items: Iterable[replication_pb2.ReplicatedItem], source_id: int,
                    source_epoch: int) -> tuple[set[int], set[tuple[int, int]]]:
        """:meth:`apply` of a unit of ``source_id``'s ``source_epoch`` holding ``items``."""
        origins: set[int] = set()
        pairs: set[tuple[int, int]] = set()
        for item in items:
            kind = item.WhichOneof("item")
            if kind == "transaction":
                g = item.transaction.gtid
                if g.trans_id > self.watermarks.get(g.server_id, 0):
                    self.watermarks[g.server_id] = g.trans_id
                    origins.add(g.server_id)
            elif kind == "apply_status":
                r = item.apply_status
                if self.raise_status(r.server_id, r.applied_by, r.epoch):
                    pairs.add((r.server_id, r.applied_by))
        if self.raise_status(source_id, self.self_id, source_epoch):
            pairs.add((source_id, self.self_id))
        return origins, pairs

    def raise_status(self, server_id: int, applied_by: int, epoch: int) -> bool:
        """``apply_status[(server_id, applied_by)] = max(..., epoch)``; whether it rose."""
        key = (server_id, applied_by)
        if epoch > self.apply_status.get(key, 0):
            self.apply_status[key] = epoch
            return True
        return False
