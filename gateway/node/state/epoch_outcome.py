"""What a replicated-epoch entry finally holds (``m dx:<index>``), serialized by parts.

``outcome_record`` is the specification: a copy of the entry's ``ReplicatedEpoch`` whose
transaction items are replaced by the transactions as applied, then this cluster's derived
transaction, serialized. Copying the epoch (every transaction of it) and each accepted
transaction into the copy costs as much as serializing them, so ``outcome_bytes`` writes
the same bytes without the copies: the epoch's other fields as a message of their own
(those numbered below ``items`` before the items, the rest after them, which is the order
protobuf serializes fields in), each item as its length-delimited field. It falls back to
the specification when it could differ: the epoch holds fields this build does not know, or
a field that is not a scalar besides ``items``. ``tests/node/test_epoch_outcome.py`` holds
both to the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import unknown_fields

from gateway.core.varint import encode_uvarint
from gateway.v1 import replication_pb2, transaction_pb2

__all__ = ["header_parts", "outcome_bytes", "outcome_record"]

_ITEMS = replication_pb2.ReplicatedEpoch.DESCRIPTOR.fields_by_name["items"].number
_ITEMS_KEY = bytes(((_ITEMS << 3) | 2,))
_TXN_KEY = bytes(((replication_pb2.ReplicatedItem.DESCRIPTOR.fields_by_name[
    "transaction"].number << 3) | 2,))


def outcome_record(unit: replication_pb2.ReplicatedEpoch,
                   accepted: Sequence[transaction_pb2.Transaction],
                   derived: transaction_pb2.Transaction | None) -> bytes:
    """The specification: ``unit`` with its transactions as applied (``accepted``, in
    order) and then ``derived`` (None: none), serialized."""
    outcome = replication_pb2.ReplicatedEpoch()
    outcome.CopyFrom(unit)
    del outcome.items[:]
    it_accepted = iter(accepted)
    for it in unit.items:
        if it.WhichOneof("item") == "transaction":
            outcome.items.add(transaction=next(it_accepted))
        else:
            outcome.items.append(it)
    if derived is not None:
        outcome.items.add(transaction=derived)
    return outcome.SerializeToString()


def _ld(key: bytes, payload: bytes) -> bytes:
    return key + encode_uvarint(len(payload)) + payload


def outcome_bytes(unit: replication_pb2.ReplicatedEpoch,
                  accepted: Sequence[transaction_pb2.Transaction],
                  derived: transaction_pb2.Transaction | None,
                  derived_bytes: bytes | None = None) -> bytes:
    """``outcome_record``'s bytes, assembled without copying the messages (see the module
    docstring). ``derived_bytes``: ``derived.SerializeToString()`` when the caller has it
    (the derived transaction built from bytes), not serialized again; ``derived`` may then
    be None (parsed from them if needed)."""
    def spec() -> bytes:
        d = derived if derived is not None or derived_bytes is None else \
            transaction_pb2.Transaction.FromString(derived_bytes)
        return outcome_record(unit, accepted, d)

    if len(unknown_fields.UnknownFieldSet(unit)):
        return spec()
    parts = header_parts(unit)
    if parts is None:
        return spec()
    lo, hi = parts
    out = [lo]
    it_accepted = iter(accepted)
    for it in unit.items:
        if it.WhichOneof("item") == "transaction":
            out.append(_ld(_ITEMS_KEY, _ld(_TXN_KEY, next(it_accepted).SerializeToString())))
        else:
            out.append(_ld(_ITEMS_KEY, it.SerializeToString()))
    data = derived_bytes if derived_bytes is not None else \
        derived.SerializeToString() if derived is not None else None
    if data is not None:
        out.append(_ld(_ITEMS_KEY, _ld(_TXN_KEY, data)))
    out.append(hi)
    return b"".join(out)


def header_parts(unit: replication_pb2.ReplicatedEpoch) -> tuple[bytes, bytes] | None:
    """``unit``'s fields other than ``items``, serialized as two parts: those numbered below
    ``items`` and those above, so that ``lo``, the items' fields, ``hi`` is how protobuf
    serializes the whole epoch. None when one of them is not a scalar (a message, repeated,
    an extension): the caller serializes the message then. Unknown fields are not looked
    at (the caller checks for them when it may meet them)."""
    lo = replication_pb2.ReplicatedEpoch()
    hi = replication_pb2.ReplicatedEpoch()
    for fd, value in unit.ListFields():
        if fd.number == _ITEMS:
            continue
        if fd.message_type is not None or fd.is_repeated or fd.is_extension:
            return None
        setattr(lo if fd.number < _ITEMS else hi, fd.name, value)
    return lo.SerializeToString(deterministic=True), hi.SerializeToString(deterministic=True)
