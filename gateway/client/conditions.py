"""Conditions of a conditional write (docs/node.md, "Conditional writes").

::

    from gateway.client import Condition, PreconditionFailed, row_update

    resp = c.read("bank.accounts", 1)
    try:
        c.write([row_update("bank.accounts", {"id": 1}, {"balance": 90})],
                conditions=[Condition.gtid("bank.accounts", 1, resp.row.gtid)])
    except PreconditionFailed as exc:   # someone else wrote the row since: read again
        print(exc.table, exc.key, exc.field)

A write carries the row states it was computed from; every replica checks them when it
applies the committed write, and refuses the whole write if one does not hold (gRPC
FAILED_PRECONDITION, raised as :class:`PreconditionFailed` naming the condition, its table
and key). Three kinds: :meth:`Condition.absent` (the row does not exist),
:meth:`Condition.gtid` (the row exists and the transaction with that GTID wrote it last: what
``read`` returned as ``row.gtid``) and :meth:`Condition.values` (the row exists and these
columns hold these values; ``None`` matches NULL). A condition may name a row the write does
not change. Keys and values are converted as in ``row_insert`` (a ``Value`` message is taken
as it is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gateway.client.errors import PreconditionFailed
from gateway.v1 import gtid_pb2, transaction_pb2, value_pb2

__all__ = ["Condition", "PreconditionFailed", "serialize_conditions"]


def _value(v: object) -> value_pb2.Value:
    from gateway.client import to_value  # the client's one conversion of Python values

    return to_value(v)[0]


def _key(key: object) -> list[value_pb2.Value]:
    """Key values: one value, a list or tuple of them, or a mapping of key columns (its
    values in order)."""
    if isinstance(key, Mapping):
        key = list(key.values())
    items = key if isinstance(key, list | tuple) else [key]
    return [_value(k) for k in items]


class Condition:
    """Builders of ``gateway.v1.Condition`` messages (what every write method's
    ``conditions=`` takes)."""

    @staticmethod
    def absent(table: str, key: object) -> transaction_pb2.Condition:
        """The row of ``table`` (``schema.table``) with primary key ``key`` does not exist."""
        return transaction_pb2.Condition(table=table, key=_key(key), absent=True)

    @staticmethod
    def gtid(table: str, key: object, gtid: gtid_pb2.Gtid | tuple[int, int]
             ) -> transaction_pb2.Condition:
        """The row exists and was last written by transaction ``gtid`` (a ``Gtid``, e.g.
        ``read(...).row.gtid``, or ``(server_id, trans_id)``)."""
        if not isinstance(gtid, gtid_pb2.Gtid):
            gtid = gtid_pb2.Gtid(server_id=gtid[0], trans_id=gtid[1])
        return transaction_pb2.Condition(table=table, key=_key(key), gtid=gtid)

    @staticmethod
    def values(table: str, key: object, values: Mapping[str, object]) -> transaction_pb2.Condition:
        """The row exists and each column of ``values`` holds its value (``None``: NULL)."""
        return transaction_pb2.Condition(table=table, key=_key(key), values=transaction_pb2.
                                         RowValues(fields=list(values),
                                                   values=[_value(v) for v in values.values()]))


def serialize_conditions(conditions: Iterable[transaction_pb2.Condition]) -> bytes:
    """``conditions`` serialized as the ``conditions`` field (3) of a ``WriteRequest``, to
    append to its other fields."""
    from gateway.client.prepared import repeated

    return repeated(b"\x1a", [c.SerializeToString() for c in conditions])
