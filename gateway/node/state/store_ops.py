"""The named values that cross the modules of the state machine (``state_machine`` and its
parts ``txn_apply``, ``epoch_apply``, ``command_apply``) and the wire codec (``wire``).

They are NamedTuples, so a plain tuple of the same fields -- what the C accelerator
``gateway.node._wire`` returns, and what the store's batch encoder requires (:class:`StoreOp`)
-- is the same value (equal, unpacked alike). Code on the apply fast path unpacks them once
(``sid, tid, ... = parsed``) instead of reading attributes in its loops; everywhere else the
names serve.
"""

from __future__ import annotations

import enum
from operator import itemgetter
from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from gateway.node.base.validation import TableSchema

__all__ = ["MISSING", "OP_KEY", "OP_KEY_VALUE", "InsertShape", "Missing", "Ops", "ParsedTxn",
           "RowMeta", "StoreOp", "meta_op"]


class Missing(enum.Enum):
    """The type of :data:`MISSING`."""

    MISSING = 0


#: The default of ``overlay.get(key, MISSING)``: a key this ``apply`` has not written (an
#: overlay's None is a deletion). An enum member, so that ``is MISSING`` narrows the type.
MISSING: Final = Missing.MISSING


class StoreOp(NamedTuple):
    """One operation of a store batch (``LSMStore.write_batch``): ``value`` None deletes
    ``key``; ``epoch``, ``author`` and ``commit_ts`` are the cell's metadata (0 for the
    node's own bookkeeping keys), what conflict detection reads without parsing the row.

    The fields of every operation the state machine collects, which are nevertheless plain
    tuples (:data:`Ops`): the store encodes a batch in one C call only when every operation is
    exactly a tuple (``format.encode_cells``), and takes its general Python loop otherwise.
    Read them by unpacking (``for key, value, epoch, author, commit_ts in ops``)."""

    key: bytes
    value: bytes | None
    epoch: int
    author: int
    commit_ts: int


#: The operations one ``apply`` call collects, written as one atomic batch: plain tuples with
#: the fields of :class:`StoreOp`, whether built in Python or in C (``wire.insert_rows``).
Ops = list[tuple[bytes, bytes | None, int, int, int]]
#: a store op's key, and its ``(key, value)`` (an overlay's item): ``map`` them over ``Ops``
OP_KEY, OP_KEY_VALUE = itemgetter(0), itemgetter(0, 1)


def meta_op(key: bytes, value: bytes | None) -> tuple[bytes, bytes | None, int, int, int]:
    """The store operation (a :class:`StoreOp`'s fields, as a plain tuple) on one of the
    node's bookkeeping keys: no row metadata."""
    return (key, value, 0, 0, 0)


class RowMeta(NamedTuple):
    """The metadata a stored row carries: this cluster's epoch of the change (the origin's
    for a client transaction, the local epoch for a replicated one), the author cluster and
    the commit timestamp."""

    epoch: int
    author: int
    commit_ts: int


class ParsedTxn(NamedTuple):
    """What the fast apply path reads of a transaction entry's wire bytes
    (``wire.parse_txn``): the GTID, the epoch, the author, the commit timestamp, the spans
    ``(start, end)`` of its statements in the entry's bytes, and its idempotency key ('' when
    none)."""

    server_id: int
    trans_id: int
    epoch: int
    author: int
    commit_ts: int
    statements: list[tuple[int, int]]
    idempotency_key: str


class InsertShape(NamedTuple):
    """A checked shape of insert statement (``wire.WireChecker``): its ``table``'s qualified
    name, the first-seen ``schema`` it was checked against (the shape holds while the table
    keeps that very schema object), and the column type codes of its key values and of its
    values (``rowops.column_code``), what the records are checked against in C."""

    table: str
    schema: TableSchema
    key_codes: bytes
    value_codes: bytes
