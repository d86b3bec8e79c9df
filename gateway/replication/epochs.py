"""``EpochAssembler``: a source cluster's change stream in, its sealed epochs out.

Every record of a cluster's log carries that cluster's epoch (its own transactions their
``epoch``, a replicated entry its ``local_epoch``), and epochs never decrease along the log (one
leader per term, the term in the epoch's high bits). Epoch ``e`` of source ``S`` is sealed for
a reader when it reads ``S``'s ``EpochMarker(e)``, or any record of a later epoch (a leader
that died before sealing its last epoch leaves no marker; its successor's records seal it).
Only then is the epoch handed on, whole: a channel applies source epochs all or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.v1 import replication_pb2

__all__ = ["EpochAssembler", "EpochOrderError", "SealedEpoch", "SourceRecord"]


class EpochOrderError(ValueError):
    """The stream went back in epochs: not a cluster's log read in order."""


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One record of the source's log as the channel reads it: ``item`` (a transaction or an
    apply-status row) or a marker sealing ``marker_epoch``; ``epoch`` is the source's epoch
    of the entry holding it."""

    log_index: int
    epoch: int
    item: replication_pb2.ReplicatedItem | None = None
    marker_epoch: int = 0
    sealed_at_ns: int = 0
    #: ``item`` as the bytes it was parsed from, when the reader kept them (they serialize
    #: it: ``ReplicatedItem.FromString(raw) == item``); not part of the record's value
    raw: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class SealedEpoch:
    """Every record of one source epoch, in the source's order."""

    epoch: int
    items: list[replication_pb2.ReplicatedItem] = field(default_factory=list)
    last_log_index: int = 0
    sealed_at_ns: int = 0
    oldest_commit_ns: int = 0  # commit time of its first transaction (for lag), 0 if none
    #: ``id(item)`` -> the bytes of an item of ``items`` its record carried (``raw``)
    raws: dict[int, bytes] = field(default_factory=dict, compare=False, repr=False)


class EpochAssembler:
    """Feeds records in log order; returns the epochs they seal. ``after``: epochs up to it
    are already held (records of them are ignored, e.g. replayed after a reconnect)."""

    def __init__(self, after: int = 0) -> None:
        self.after = after
        self._open: SealedEpoch | None = None

    @property
    def open_epoch(self) -> SealedEpoch | None:
        """The epoch being assembled (not sealed yet), if any."""
        return self._open

    def add(self, rec: SourceRecord) -> list[SealedEpoch]:
        """Take one record; return the epochs it sealed (zero or one), oldest first. Raises
        ``EpochOrderError`` for a record of an epoch older than one already sealed or open."""
        out: list[SealedEpoch] = []
        cur = self._open
        if rec.marker_epoch:
            if cur is not None and rec.marker_epoch >= cur.epoch:
                cur.sealed_at_ns = rec.sealed_at_ns
                out.append(cur)
                self._open = None
            self.after = max(self.after, rec.marker_epoch)
            return out
        if rec.epoch <= self.after:
            if cur is None:
                return out  # held already, or replayed: nothing to do
            raise EpochOrderError(f"record at log index {rec.log_index} has epoch {rec.epoch}, "
                                  f"after epoch {self.after} was sealed")
        if cur is not None and rec.epoch != cur.epoch:
            if rec.epoch < cur.epoch:
                raise EpochOrderError(f"record at log index {rec.log_index} has epoch "
                                      f"{rec.epoch}, after epoch {cur.epoch}")
            out.append(cur)
            self.after = cur.epoch
            cur = None
        if cur is None:
            cur = self._open = SealedEpoch(rec.epoch)
        if rec.item is not None:
            cur.items.append(rec.item)
            if rec.raw is not None:
                cur.raws[id(rec.item)] = rec.raw
            if not cur.oldest_commit_ns and rec.item.WhichOneof("item") == "transaction":
                cur.oldest_commit_ns = rec.item.transaction.commit_timestamp_ns
        cur.last_log_index = rec.log_index
        return out
