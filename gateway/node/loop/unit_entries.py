"""A channel's log entries for a sealed source epoch, framed from the bytes its items came in.

``gateway.replication.build_unit`` is the specification: it copies the epoch's items (every
row of every transaction) into a ``ReplicatedEpoch`` -- in segments when the epoch is larger
than ``max_bytes`` -- and the leader serialized the copy. The channel reader keeps each
transaction item's bytes as the stream brought them (``down_wire``; ``SealedEpoch.raws``),
so :func:`build_entries` frames the one entry of an epoch around them: the header's fields
numbered below ``items``, the items, then the rest -- the order protobuf serializes fields
in. The payload parses as ``build_unit``'s entry, and is that entry's ``messages.pack`` byte
for byte when the items' bytes are as protobuf serializes them
(``tests/replication/test_unit_entries.py``). An epoch too large for one entry takes
``build_unit``'s segments.
"""

from __future__ import annotations

from gateway.core.messages import TypeTag, pack
from gateway.core.varint import encode_uvarint
from gateway.node.state.epoch_outcome import header_parts
from gateway.replication import ReplicationState, SealedEpoch, build_unit, transactions
from gateway.replication.units import unit_items
from gateway.v1 import replication_pb2

__all__ = ["UnitEntries", "build_entries"]

_ITEMS = replication_pb2.ReplicatedEpoch.DESCRIPTOR.fields_by_name["items"].number
_ITEMS_KEY = bytes(((_ITEMS << 3) | 2,))
_UNIT_TAG = bytes((TypeTag.REPLICATED_EPOCH,))


class UnitEntries:
    """The log entries a destination proposes for one sealed epoch (:func:`build_entries`):
    ``has_txns`` whether they hold a transaction, ``last`` the last entry's header (the
    derived GTID a leader reserves is set there before :meth:`payloads`), and
    :meth:`payloads`, each entry packed (``messages.pack``)."""

    __slots__ = ("_items", "_segments", "has_txns", "last")

    def __init__(self, has_txns: bool, last: replication_pb2.ReplicatedEpoch,
                 segments: list[replication_pb2.ReplicatedEpoch] | None,
                 items: list[bytes] | None) -> None:
        self.has_txns = has_txns
        self.last = last
        self._segments = segments
        self._items = items

    def payloads(self) -> list[bytes]:
        """The entries' payloads: the segments packed, or the one entry framed around its
        items' bytes (see the module docstring)."""
        if self._segments is not None:
            return [pack(p) for p in self._segments]
        assert self._items is not None
        parts = header_parts(self.last)
        assert parts is not None  # build_entries' header holds scalars only
        lo, hi = parts
        return [b"".join((_UNIT_TAG, lo, *self._items, hi))]


def build_entries(state: ReplicationState, channel: str, source_id: int, sealed: SealedEpoch,
                  local_epoch: int, *, max_bytes: int = 4 << 20) -> UnitEntries | None:
    """``build_unit``'s entries for ``sealed`` (None: nothing to write), applied to
    ``state`` as it applies them; one entry framed from its items' bytes (``sealed.raws``,
    the others serialized), segments as ``build_unit`` builds them."""
    items = unit_items(state, source_id, sealed)
    if items is None:
        return None
    raws = sealed.raws
    data = [raws.get(id(it)) or it.SerializeToString(deterministic=True) for it in items]
    if len(data) > 1 and sum(map(len, data)) + 8 * len(data) > max_bytes:
        segments = build_unit(state, channel, source_id, sealed, local_epoch,
                              max_bytes=max_bytes)
        return UnitEntries(any(transactions(p.items) for p in segments), segments[-1],
                           segments, None)
    head = replication_pb2.ReplicatedEpoch(
        channel=channel, source_id=source_id, source_epoch=sealed.epoch,
        local_epoch=local_epoch, sealed_at_ns=sealed.sealed_at_ns, segment_id=1,
        end_segment=True, source_log_index=sealed.last_log_index)
    state.apply_items(items, source_id, sealed.epoch)
    return UnitEntries(any(it.WhichOneof("item") == "transaction" for it in items), head,
                       None, [_ITEMS_KEY + encode_uvarint(len(d)) + d for d in data])
