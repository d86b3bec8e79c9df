"""Conditional writes: the checks a write's ``conditions`` name, and the refusal they give.

A client computes a write from rows it read (a bank transfer, a list append) and sends with it
the row states it read (``WriteRequest.conditions``, docs/node.md "Conditional writes"). The
conditions are logged in the transaction (``Transaction.conditions``) and checked by every
replica **when it applies the committed entry**, against the rows as they stand after every
earlier entry (of this apply batch too) and before the transaction's own statements -- never
at the leader before proposing, which would race the writes already proposed and not yet
applied (etcd's Txn compare works the same way). So every replica decides alike, and a
restart that re-applies the entry from the log decides as before.

Three kinds (``Condition.expect``): ``absent`` (no row with the key), ``gtid`` (the row exists
and the transaction with that GTID wrote it last: ``Row.gtid`` as Read returned it) and
``values`` (the row exists and each named column holds the value: same case and equal; a
null expected value matches null or a column the row has never been written with).

A condition that does not hold refuses the **whole** transaction (:class:`PreconditionFailed`:
FAILED_PRECONDITION, ``conditions[i]: schema.table key (..): why``). The refused entry keeps
its GTID and log index (its trans id is consumed, like a rejected entry's), is marked
``x<index>`` with ``refused: conditions[i]: why`` (:func:`refusal_marker`), changes no row and
no schema, and so reaches no applier, subscriber or channel; its idempotency key records the
write's result as usual, and a retry with that key is answered with the same refusal
(:func:`refusal_of_marker` reads it back).

This module is pure: the leader's checks of a request (:func:`check_conditions`), the
evaluation against stored rows (:func:`refusal`), the entry's conditions field
(:func:`conditions_field`) and the outcome marker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gateway.core.logrules import value_problem
from gateway.core.rowops import CASE_OF_TYPE
from gateway.node.base.errors import PreconditionFailed
from gateway.node.base.validation import (
    InvalidRequest,
    TableSchema,
    check_key_values,
    split_table_name,
)
from gateway.node.state import keys
from gateway.v1 import gateway_pb2, transaction_pb2, value_pb2
from gateway.v1 import wire_tags as W

__all__ = ["MAX_CONDITIONS", "check_conditions", "conditions_field", "refusal",
           "refusal_marker", "refusal_of_marker"]

#: Conditions one write may carry (each costs a row lookup on every replica).
MAX_CONDITIONS = 1024
_REFUSED = b"refused: "
_KEY = W.TRANSACTION_CONDITIONS_KEY


def conditions_field(conditions: Sequence[transaction_pb2.Condition]) -> bytes:
    """``conditions`` serialized as the ``conditions`` field (11) of a ``Transaction``: the
    bytes to append to an entry built by ``wire.encode_transaction_wire`` (whose last field
    is 10), giving what serializing the whole ``Transaction`` gives."""
    from gateway.core.varint import encode_uvarint

    out = []
    for c in conditions:
        body = c.SerializeToString(deterministic=True)
        out.append(_KEY + encode_uvarint(len(body)) + body)
    return b"".join(out)


def _case_problem(v: value_pb2.Value, ftype: int) -> str | None:
    """Why the value ``v`` cannot be compared with a column of type ``ftype``, or None."""
    got = v.WhichOneof("kind")
    if got == "null_value":
        return None
    want = CASE_OF_TYPE.get(ftype)
    if got is None:
        return "value has no case set"
    if got != want:
        return f"{got} for a {value_pb2.FieldType.Name(ftype)} column (expected {want})"
    return value_problem(v, ftype, key=False)


def check_conditions(conditions: Sequence[transaction_pb2.Condition],
                     schemas: Mapping[str, TableSchema], path: str = "conditions") -> None:
    """The leader's check of a request's conditions before proposing (INVALID_ARGUMENT,
    :class:`InvalidRequest` naming ``path[i]...``): a valid ``schema.table``, a key without
    nulls, exactly one expectation (``absent`` true, a ``gtid`` with a trans id, ``values``
    with as many values as distinct non-empty column names); when the table is known, the key
    fits its key columns and every value column exists with the value in its type's case."""
    if len(conditions) > MAX_CONDITIONS:
        raise InvalidRequest(path, f"{len(conditions)} conditions, at most {MAX_CONDITIONS}")
    for i, c in enumerate(conditions):
        p = f"{path}[{i}]"
        split_table_name(c.table, f"{p}.table")
        if not c.key:
            raise InvalidRequest(f"{p}.key", "missing key")
        shape = schemas.get(c.table)
        if shape is not None:
            if len(c.key) != len(shape.key_fields):
                raise InvalidRequest(f"{p}.key", f"missing key: {len(c.key)} values for "
                                     f"{len(shape.key_fields)} key fields")
            check_key_values(c.key, shape.key_fields, f"{p}.key")
        else:
            for j, v in enumerate(c.key):
                if v.WhichOneof("kind") in (None, "null_value"):
                    raise InvalidRequest(f"{p}.key[{j}]", "missing key: null or no value")
        kind = c.WhichOneof("expect")
        if kind is None:
            raise InvalidRequest(p, "no expectation: set absent, gtid or values")
        if kind == "absent" and not c.absent:
            raise InvalidRequest(f"{p}.absent", "must be true (leave it out otherwise)")
        if kind == "gtid" and not c.gtid.trans_id:
            raise InvalidRequest(f"{p}.gtid.trans_id", "must be positive")
        if kind == "values":
            _check_values(c.values, shape, f"{p}.values")


def _check_values(rv: transaction_pb2.RowValues, shape: TableSchema | None, path: str) -> None:
    if not rv.fields:
        raise InvalidRequest(f"{path}.fields", "no columns")
    if len(rv.fields) != len(rv.values):
        raise InvalidRequest(f"{path}.values", f"{len(rv.values)} values for "
                             f"{len(rv.fields)} fields")
    seen: set[str] = set()
    for j, (name, v) in enumerate(zip(rv.fields, rv.values, strict=True)):
        if not name or name in seen:
            raise InvalidRequest(f"{path}.fields[{j}]", "empty or repeated column name")
        seen.add(name)
        if shape is None:
            if v.WhichOneof("kind") is None:
                raise InvalidRequest(f"{path}.values[{j}]", "value has no case set")
            continue
        ftype = shape.columns.get(name)
        if ftype is None:
            raise InvalidRequest(f"{path}.fields[{j}]", f"the table has no column {name!r}")
        reason = _case_problem(v, ftype)
        if reason is not None:
            raise InvalidRequest(f"{path}.values[{j}]", f"column {name!r}: {reason}")


def _render(v: value_pb2.Value) -> str:
    case = v.WhichOneof("kind")
    if case is None or case == "null_value":
        return "NULL"
    got = getattr(v, case)
    if case == "bytes_value":
        return f"x'{got.hex()}'"
    if case in ("string_value", "decimal_value"):
        return repr(got)
    return str(got).lower() if case == "bool_value" else str(got)


def _where(c: transaction_pb2.Condition) -> str:
    return f"{c.table} key ({', '.join(_render(v) for v in c.key)})"


def _same(a: value_pb2.Value, b: value_pb2.Value) -> bool:
    """Whether stored ``a`` equals expected ``b``: the same case and equal values (a null
    equals a null)."""
    ca, cb = a.WhichOneof("kind"), b.WhichOneof("kind")
    if ca != cb:
        return False
    return ca is None or ca == "null_value" or getattr(a, ca) == getattr(b, cb)


def refusal(conditions: Sequence[transaction_pb2.Condition],
            schemas: Mapping[str, TableSchema], get: Callable[[bytes], bytes | None],
            path: str = "conditions") -> PreconditionFailed | None:
    """The refusal of the first of ``conditions`` that does not hold, or None when all hold.

    ``get(store key)``: the serialized ``Row`` stored under a row key, as the entry being
    applied sees it (earlier entries of its batch included), or None. ``schemas``: the
    recorded first-seen schemas. A depends only on them, so every replica gives the same
    verdict. Raises :class:`InvalidRequest` when a condition's key does not fit its table's
    key columns (the table was created with other key types after the leader checked it):
    the entry is then rejected like one whose statements raced a schema change."""
    for i, c in enumerate(conditions):
        p = f"{path}[{i}]"
        shape = schemas.get(c.table)
        raw = None
        if shape is not None:
            if len(c.key) != len(shape.key_fields):
                raise InvalidRequest(f"{p}.key", f"missing key: {len(c.key)} values for "
                                     f"{len(shape.key_fields)} key fields")
            check_key_values(c.key, shape.key_fields, f"{p}.key")
            schema, _, table = c.table.partition(".")
            raw = get(keys.row_key(schema, table, c.key))
        kind = c.WhichOneof("expect")
        if kind == "absent":
            if raw is not None:
                g = gateway_pb2.Row.FromString(raw).gtid
                return PreconditionFailed(p, f"{_where(c)}: expected no row, but the row "
                                          f"exists (last written by {g.server_id}:"
                                          f"{g.trans_id})")
            continue
        if raw is None:
            return PreconditionFailed(p, f"{_where(c)}: the row does not exist")
        row = gateway_pb2.Row.FromString(raw)
        if kind == "gtid":
            expected, last = c.gtid, row.gtid
            if (expected.server_id, expected.trans_id) != (last.server_id, last.trans_id):
                return PreconditionFailed(p, f"{_where(c)}: expected the row last written by "
                                          f"{expected.server_id}:{expected.trans_id}, but "
                                          f"{last.server_id}:{last.trans_id} wrote it last")
            continue
        if kind != "values":  # no expectation: the leader refuses these; never true here
            return PreconditionFailed(p, f"{_where(c)}: no expectation")
        stored = {f.name: v for f, v in zip(row.key_fields, row.key_values, strict=False)}
        stored.update((f.name, v) for f, v in zip(row.fields, row.values, strict=False))
        null = value_pb2.Value(null_value=value_pb2.NULL_VALUE)
        for name, want in zip(c.values.fields, c.values.values, strict=False):
            got = stored.get(name, null)
            if not _same(got, want):
                return PreconditionFailed(p, f"{_where(c)}: expected {name} = {_render(want)}, "
                                          f"found {_render(got)}")
    return None


def refusal_marker(exc: PreconditionFailed) -> bytes:
    """The outcome marker (``x<index>`` value) of a refused entry."""
    return _REFUSED + str(exc).encode()


def refusal_of_marker(marker: bytes | None) -> PreconditionFailed | None:
    """The refusal an outcome marker records, or None (no marker, a duplicate, a rejection)."""
    if not marker or not marker.startswith(_REFUSED):
        return None
    field, _, reason = marker[len(_REFUSED):].decode().partition(": ")
    return PreconditionFailed(field, reason)
