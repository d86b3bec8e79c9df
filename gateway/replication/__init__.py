"""Replication between clusters: the pure, deterministic core of a channel.

Values in, decisions out; no I/O, no clock, no asyncio (the node wraps it):

- ``state``: what a cluster records about replication -- per-origin watermarks (the largest
  GTID ``trans_id`` of every origin applied here) and the apply-status table keyed by
  ``(server_id, applied_by)`` -- and the verdict on a replicated epoch (accept or refuse, the
  same on every replica);
- ``units``: the log entry a destination writes for one sealed epoch of its source (what it
  does not hold yet, the apply-status rows it learns, its position), split into segments
  when large;
- ``epochs``: a source's change stream in, sealed source epochs out.

See docs/replication.md for the model and the argument that every origin transaction is
applied exactly once, in its origin's order, in any topology.
"""

from .epochs import EpochAssembler, SealedEpoch, SourceRecord
from .state import ReplicationState, StatusRow
from .units import build_unit, join_segments, segment_items, transactions, unit_items

__all__ = [
    "EpochAssembler",
    "ReplicationState",
    "SealedEpoch",
    "SourceRecord",
    "StatusRow",
    "build_unit",
    "join_segments",
    "segment_items",
    "transactions",
    "unit_items",
]
