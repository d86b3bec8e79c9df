"""The transaction reducer (Marcus Eriksson, 2010): at most one operation per row.

Pure: values in, values out. A transaction (or, in window mode, a run of consecutive
transactions) is turned into ``RowOp`` values (``gateway.core.rowops.statement_ops``) and every
row's operations are folded into one with the same end state:

=====================  ====================================================================
first, then            result
=====================  ====================================================================
INSERT, UPDATE         INSERT of the merged row
INSERT, DELETE         nothing (the row did not exist before and does not after); with
                       ``elide_insert_delete=False`` a DELETE, which is exact on any state
UPDATE, UPDATE         one UPDATE of the merged columns (later values win)
UPDATE, DELETE         DELETE
DELETE, INSERT         UPSERT of the inserted row
UPSERT, UPDATE         UPSERT of the merged row
key-changing UPDATE    DELETE of the old key + INSERT of the new key with the merged row,
                       when the full old row is known (it was inserted or upserted earlier in
                       the unit); otherwise the MOVE operation itself, as a barrier
=====================  ====================================================================

Contract (checked by the property tests in ``tests/reducer``): applying the reduced operations
to a store gives the same final state as applying the original operations one by one, for any
starting state in which the statements are valid (as they were where they were committed:
inserted keys absent, updated and deleted keys present). With ``elide_insert_delete=False`` it
holds for every starting state.

Ordering: SQL statements and unfoldable MOVEs are *barriers*. The reduced list is a sequence of
segments separated by barriers; within a segment there is at most one operation per row, rows in
the order they first appear, so the operations of a segment may be applied in any order or in
parallel, but a segment must be fully applied before its barrier and the barrier before the next
segment.

Multi-part transactions: ``SegmentAssembler`` buffers the segments of each transaction (they may
interleave with other transactions) until its last segment, then hands out the whole
transaction, or discards it if the last segment carries a rollback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.rowops import (
    Column,
    Gtid,
    MalformedTransactionError,
    OpKind,
    RowOp,
    TableRef,
    statement_ops,
)
from gateway.core.sql_value import SqlValue
from gateway.v1 import transaction_pb2

__all__ = [
    "AssembledTransaction",
    "RowReducer",
    "SegmentAssembler",
    "SegmentOrderError",
    "reduce_ops",
    "reduce_transaction",
    "reduce_window",
]

RowId = tuple[TableRef, tuple[SqlValue, ...]]
_NOTHING = None  # marker kind: the row was created and deleted inside the unit


@dataclass(slots=True)
class _Net:
    """The net effect of the operations folded so far on one row."""

    kind: OpKind | None  # None = nothing (inserted then deleted)
    # None while the row saw one operation (``last``, which then is the net effect as it
    # is: the common case costs no column map and no new operation)
    cols: dict[str, tuple[Column, SqlValue]] | None
    last: RowOp

    def columns(self) -> dict[str, tuple[Column, SqlValue]]:
        """The row's net columns (built from ``last`` on first use)."""
        cols = self.cols
        if cols is None:
            cols = self.cols = _colmap(self.last)
        return cols


class RowReducer:
    """Folds row operations (not SQL) into one per row; ``drain`` returns them.

    ``add`` accepts INSERT, UPDATE, DELETE, UPSERT and foldable MOVE operations (see
    ``can_fold``); the caller emits barriers itself after draining. Not thread-safe.
    """

    __slots__ = ("_elide", "_rows")

    def __init__(self, *, elide_insert_delete: bool = True) -> None:
        self._elide = elide_insert_delete
        self._rows: dict[RowId, _Net] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def can_fold(self, op: RowOp) -> bool:
        """True if ``add(op)`` is allowed: any non-barrier, or a MOVE whose old row is known in
        full (inserted or upserted earlier, or known not to exist)."""
        if op.kind is OpKind.SQL:
            return False
        if op.kind is not OpKind.MOVE:
            return True
        net = self._rows.get(op.row_id)
        return net is not None and net.kind in (OpKind.INSERT, OpKind.UPSERT, OpKind.DELETE,
                                                _NOTHING)

    def add(self, op: RowOp) -> None:
        """Fold ``op`` into its row's net effect. Raises ``ValueError`` if ``can_fold`` is
        false for it."""
        if op.kind is OpKind.MOVE:
            self._add_move(op)
            return
        if op.kind is OpKind.SQL:
            raise ValueError("SQL operations are barriers; they cannot be folded")
        rid = op.row_id
        net = self._rows.get(rid)
        if net is None:
            self._rows[rid] = _Net(op.kind, None, op)
            return
        self._fold(net, op.kind, op)

    def _fold(self, net: _Net, kind: OpKind, op: RowOp) -> None:
        prev = net.kind
        net.columns()  # ``last`` stops being the net effect
        net.last = op
        if kind is OpKind.UPDATE:
            if prev is OpKind.DELETE or prev is _NOTHING:
                return  # updating a row that is not there changes nothing
            net.columns().update(_colmap(op))
        elif kind is OpKind.DELETE:
            if prev is OpKind.INSERT and self._elide:
                net.kind = _NOTHING
            elif prev is not _NOTHING:
                net.kind = OpKind.DELETE
            net.cols = {}
        else:  # INSERT or UPSERT: the row now holds exactly these columns
            net.cols = _colmap(op)
            if prev is OpKind.INSERT or prev is _NOTHING:
                net.kind = OpKind.INSERT  # it did not exist before the unit
            else:
                net.kind = OpKind.UPSERT

    def _add_move(self, op: RowOp) -> None:
        if not self.can_fold(op):
            raise ValueError("MOVE of a row whose full image is unknown is a barrier")
        net = self._rows[op.row_id]
        if net.kind is OpKind.DELETE or net.kind is _NOTHING:
            net.columns()  # ``last`` stops being the net effect
            net.last = op
            return  # moving a row that is not there changes nothing
        cols = dict(net.columns())
        cols.update(_colmap(op))
        self._fold(net, OpKind.DELETE, op)
        moved = RowOp(OpKind.INSERT, op.table, op.key_columns, op.new_key or (),
                      tuple(c for c, _ in cols.values()), tuple(v for _, v in cols.values()),
                      op.gtid, op.log_index, op.epoch, op.author, op.commit_ts_ns,
                      statement=op.statement)
        self.add(moved)

    def drain(self) -> list[RowOp]:
        """Return one operation per row with a net effect, in first-appearance order, and
        reset. Rows that were inserted and deleted (with elision) produce nothing."""
        out: list[RowOp] = []
        for net in self._rows.values():
            if net.kind is _NOTHING:
                continue
            last = net.last
            if net.cols is None:
                out.append(last)  # one operation on the row: it is its own net effect
                continue
            cols = tuple(c for c, _ in net.cols.values())
            vals = tuple(v for _, v in net.cols.values())
            # last.key is the row's key also when last is a folded MOVE (its old row)
            out.append(RowOp(net.kind, last.table, last.key_columns, last.key, cols, vals,
                             last.gtid, last.log_index, last.epoch, last.author,
                             last.commit_ts_ns, statement=last.statement))
        self._rows = {}
        return out


def _colmap(op: RowOp) -> dict[str, tuple[Column, SqlValue]]:
    return {c.name: (c, v) for c, v in zip(op.columns, op.values, strict=True)}


def reduce_ops(ops: Iterable[RowOp], *, elide_insert_delete: bool = True) -> list[RowOp]:
    """Reduce a sequence of operations in log order; see the module docstring for the rules
    and the barrier ordering of the result."""
    reducer = RowReducer(elide_insert_delete=elide_insert_delete)
    out: list[RowOp] = []
    for op in ops:
        if reducer.can_fold(op):
            reducer.add(op)
        else:
            out.extend(reducer.drain())
            out.append(op)
    out.extend(reducer.drain())
    return out


def reduce_transaction(txn: transaction_pb2.Transaction, log_index: int = 0, *,
                       elide_insert_delete: bool = True) -> list[RowOp]:
    """Reduce one complete, single-segment transaction. Raises
    ``MalformedTransactionError`` for a transaction that breaks the log model."""
    return reduce_ops(statement_ops(txn, log_index), elide_insert_delete=elide_insert_delete)


def reduce_window(transactions: Iterable[AssembledTransaction
                                        | tuple[int, transaction_pb2.Transaction]], *,
                  elide_insert_delete: bool = True) -> list[RowOp]:
    """Window mode: reduce consecutive committed transactions as one unit, for bulk apply.

    Each item is an ``AssembledTransaction`` or an ``(index, Transaction)`` pair of a
    single-segment transaction. A row touched by several transactions ends up as one operation
    carrying the metadata (gtid, index, epoch, author, commit time) of the latest.
    """
    ops: list[RowOp] = []
    for item in transactions:
        if isinstance(item, AssembledTransaction):
            ops.extend(item.ops())
        else:
            index, txn = item
            ops.extend(statement_ops(txn, index))
    return reduce_ops(ops, elide_insert_delete=elide_insert_delete)


# --- segments -------------------------------------------------------------------------------


class SegmentOrderError(MalformedTransactionError):
    """A segment arrived out of order (duplicate, missing predecessor, or bad segment_id).

    ``segments`` lists the ``(index, segment)`` pairs of that transaction discarded with it
    (including the offending one), so the caller can account for them (dead-letter them).
    """

    def __init__(self, message: str,
                 segments: Sequence[tuple[int, transaction_pb2.Transaction]]) -> None:
        super().__init__(message)
        self.segments = tuple(segments)

    @property
    def indexes(self) -> tuple[int, ...]:
        return tuple(i for i, _ in self.segments)


class WholeEntry(Protocol):
    """What ``AssembledTransaction.whole`` reads of a committed entry whose transaction is
    whole in it (``gateway.appliers.source.CommittedEntry``)."""

    @property
    def index(self) -> int: ...

    @property
    def wire(self) -> bytes | None: ...

    @property
    def transaction(self) -> transaction_pb2.Transaction | None: ...


class AssembledTransaction:
    """A complete transaction: its segments in order and their log indexes.

    ``index`` (the last segment's log index) is the transaction's commit point: its
    operations carry it as their ``log_index``. ``wire``: the serialized bytes of a
    transaction whole in one segment, when its source kept them (``CommittedEntry.wire``).
    :meth:`whole` builds one from an entry without parsing it: ``segments`` is then the
    entry's transaction, parsed on first use (the columns path reads ``wire`` only).
    Read-only by contract (a plain slotted class: a frozen dataclass's ``__init__`` costs
    more per transaction on the applier's hot path).
    """

    __slots__ = ("_entry", "_segments", "gtid", "indexes", "rolled_back", "wire")

    def __init__(self, gtid: Gtid, indexes: tuple[int, ...],
                 segments: tuple[transaction_pb2.Transaction, ...] | None,
                 rolled_back: bool = False, wire: bytes | None = None, *,
                 entry: WholeEntry | None = None) -> None:
        """``segments`` None: the one segment is ``entry``'s transaction, read when first
        asked for (:meth:`whole`)."""
        self.gtid = gtid
        self.indexes = indexes
        self._segments = segments
        self.rolled_back = rolled_back
        self.wire = wire
        self._entry = entry

    @classmethod
    def whole(cls, gtid: Gtid, entry: WholeEntry) -> AssembledTransaction:
        """The transaction of ``entry`` (a ``CommittedEntry`` with a ``head``: whole in one
        segment, not rolled back), its message left unparsed until ``segments`` is read."""
        return cls(gtid, (entry.index,), None, False, entry.wire, entry=entry)

    @property
    def segments(self) -> tuple[transaction_pb2.Transaction, ...]:
        segs = self._segments
        if segs is None:
            assert self._entry is not None  # segments None: the one segment is the entry's
            txn = self._entry.transaction
            assert txn is not None  # whole() takes entries that hold a transaction
            segs = self._segments = (txn,)
        return segs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AssembledTransaction):
            return NotImplemented
        return (self.gtid, self.indexes, self.segments, self.rolled_back, self.wire) == \
            (other.gtid, other.indexes, other.segments, other.rolled_back, other.wire)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"AssembledTransaction(gtid={self.gtid!r}, indexes={self.indexes!r}, "
                f"segments={self.segments!r}, rolled_back={self.rolled_back!r}, "
                f"wire={self.wire!r})")

    @property
    def index(self) -> int:
        return self.indexes[-1]

    @property
    def last(self) -> transaction_pb2.Transaction:
        return self.segments[-1]

    def ops(self) -> list[RowOp]:
        """The unreduced operations of all segments (empty when rolled back), with the
        metadata of the last segment. Raises ``MalformedTransactionError``."""
        if self.rolled_back:
            return []
        if len(self.segments) == 1:
            return statement_ops(self.segments[0], self.index)
        merged = transaction_pb2.Transaction()
        merged.CopyFrom(self.last)
        del merged.statements[:]
        for seg in self.segments:
            merged.statements.extend(seg.statements)
        return statement_ops(merged, self.index)


@dataclass(slots=True)
class SegmentAssembler:
    """Buffers segments by GTID until the last one; not thread-safe.

    ``add`` returns the ``AssembledTransaction`` when ``txn`` completes one (``rolled_back``
    set if its last segment carries a rollback), ``None`` while segments are outstanding, and
    raises ``SegmentOrderError`` (dropping that transaction's buffered segments, whose indexes
    it carries) for a segment that does not follow the previous one.
    """

    _open: dict[Gtid, list[tuple[int, transaction_pb2.Transaction]]] = field(
        default_factory=dict)

    def add(self, index: int, txn: transaction_pb2.Transaction, gtid: Gtid | None = None,
            wire: bytes | None = None) -> AssembledTransaction | None:
        """``gtid``: ``txn``'s, when the caller has built it already; ``wire``: ``txn``
        serialized, when the caller has those bytes (kept for a whole transaction)."""
        if gtid is None:
            gtid = Gtid(txn.gtid.server_id, txn.gtid.trans_id)
        if txn.segment_id == 1 and txn.end_segment and gtid not in self._open:
            # A whole transaction in one segment (the common case): nothing to buffer.
            return AssembledTransaction(gtid, (index,), (txn,), txn.HasField("rollback"), wire)
        parts = self._open.get(gtid, [])
        expected = len(parts) + 1
        if txn.segment_id != expected:
            self._open.pop(gtid, None)
            raise SegmentOrderError(
                f"transaction {gtid} at index {index}: segment_id {txn.segment_id}, "
                f"expected {expected}", [*parts, (index, txn)])
        if not txn.end_segment:
            if txn.HasField("rollback"):
                self._open.pop(gtid, None)
                raise SegmentOrderError(
                    f"transaction {gtid} at index {index}: rollback on a segment that is "
                    f"not the last", [*parts, (index, txn)])
            parts.append((index, txn))
            self._open[gtid] = parts
            return None
        self._open.pop(gtid, None)
        parts.append((index, txn))
        return AssembledTransaction(gtid, tuple(i for i, _ in parts),
                                    tuple(t for _, t in parts), txn.HasField("rollback"))

    def add_whole(self, gtid: Gtid, entry: WholeEntry) -> AssembledTransaction | None:
        """``add`` of ``entry``, a ``CommittedEntry`` whose ``head`` says it holds a whole
        transaction: without parsing it, unless segments of ``gtid`` are buffered (then
        ``add`` decides, as for any entry)."""
        if gtid in self._open:
            txn = entry.transaction
            assert txn is not None  # an entry with a head holds a transaction
            return self.add(entry.index, txn, gtid, entry.wire)
        return AssembledTransaction.whole(gtid, entry)

    def pending_indexes(self) -> list[int]:
        """Log indexes of buffered segments of incomplete transactions, ascending."""
        return sorted(i for parts in self._open.values() for i, _ in parts)

    def __len__(self) -> int:
        return len(self._open)
