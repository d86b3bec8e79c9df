"""The transactions of a replicated epoch as the bytes the entry carries them in.

A ``REPLICATED_EPOCH`` entry holds a serialized ``gateway.v1.ReplicatedEpoch``; each of its
``items`` that is a transaction holds a serialized ``Transaction``. The state machine's fast
path (``wire.parse_txn``, ``wire.insert_rows``) reads a transaction entry payload -- the
``TRANSACTION`` type tag, then the ``Transaction`` bytes -- so
:func:`transaction_payloads` cuts those bytes out of the entry instead of serializing the
parsed messages again. Every replica applies the same entry bytes, so what the fast path
builds from them is the same on every replica.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import compress

from gateway.core.messages import TypeTag
from gateway.core.varint import decode_uvarint
from gateway.node.state.store_ops import Ops
from gateway.v1 import transaction_pb2
from gateway.v1 import wire_tags as W

__all__ = ["holds_transaction", "judged_rows", "transaction_payloads"]

_TAG = bytes((TypeTag.TRANSACTION,))
_ITEMS = W.REPLICATED_EPOCH_ITEMS_KEY[0]
_ITEM_TRANSACTION = W.REPLICATED_ITEM_TRANSACTION_KEY[0]


def _skip(data: bytes, pos: int, key: int, end: int) -> int:
    """The position after the value of field key ``key`` at ``pos``; ValueError when the wire
    type is not one protobuf writes or the value runs past ``end``."""
    wt = key & 7
    if wt == 0:
        _, pos = decode_uvarint(data, pos)
    elif wt == 1:
        pos += 8
    elif wt == 2:
        ln, pos = decode_uvarint(data, pos)
        pos += ln
    elif wt == 5:
        pos += 4
    else:
        raise ValueError(f"wire type {wt}")
    if pos > end:
        raise ValueError("field past its end")
    return pos


#: What :func:`_item_transaction` returns for an item that is not a transaction.
_NOT_A_TRANSACTION = (-1, -1)


def _item_transaction(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """The span of the ``Transaction`` of the ``ReplicatedItem`` in ``data[pos:end]``;
    ``_NOT_A_TRANSACTION`` when the item is not a transaction; None when it holds the field
    twice or beside another (protobuf would merge or override: the caller serializes the
    parsed message instead)."""
    span: tuple[int, int] | None = None
    other = False
    while pos < end:
        key, pos = decode_uvarint(data, pos)
        if key == _ITEM_TRANSACTION:
            ln, start = decode_uvarint(data, pos)
            pos = start + ln
            if span is not None or pos > end:
                return None
            span = (start, pos)
        else:
            pos = _skip(data, pos, key, end)
            other = True
    if span is None:
        return _NOT_A_TRANSACTION
    return None if other else span


def _item_spans(data: bytes, pos: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each ``items`` field of the serialized ``ReplicatedEpoch`` in
    ``data[pos:]``, in order (the other fields skipped); ValueError or IndexError from the
    first that does not parse."""
    end = len(data)
    while pos < end:
        key, pos = decode_uvarint(data, pos)
        if key != _ITEMS:
            pos = _skip(data, pos, key, end)
            continue
        ln, start = decode_uvarint(data, pos)
        pos = start + ln
        if pos > end:
            raise ValueError("an item past the end of the epoch")
        yield start, pos


def transaction_payloads(data: bytes, pos: int = 0) -> list[bytes] | None:
    """The transaction entry payloads (tag ``TRANSACTION`` + the ``Transaction``'s bytes as
    received) of the transaction items of the serialized ``ReplicatedEpoch`` in
    ``data[pos:]``, in order -- ``transactions(ReplicatedEpoch.FromString(data[pos:]).items)``
    serialized, without serializing. None when the bytes hold something a parse would merge
    (an item that is a transaction twice, or a transaction beside another field) or do not
    parse: the caller serializes the parsed messages then."""
    out: list[bytes] = []
    view = memoryview(data)
    join = b"".join
    try:
        for start, stop in _item_spans(data, pos):
            # the usual item: its transaction and nothing else
            if start < stop and data[start] == _ITEM_TRANSACTION:
                t_len, t_start = decode_uvarint(data, start + 1)
                if t_start + t_len == stop:
                    out.append(join((_TAG, view[t_start:stop])))
                    continue
            span = _item_transaction(data, start, stop)
            if span is None:
                return None
            if span is not _NOT_A_TRANSACTION:
                a, b = span
                out.append(join((_TAG, view[a:b])))
    except (IndexError, ValueError):
        return None
    return out


def holds_transaction(data: bytes, pos: int = 0) -> bool | None:
    """Whether the serialized ``ReplicatedEpoch`` in ``data[pos:]`` has an item that is a
    transaction (``any(it.WhichOneof("item") == "transaction" for it in items)``), read
    from the bytes; None when they do not say it plainly (an item holding its transaction
    beside another field, bytes that do not parse): the caller parses them then."""
    try:
        for start, end in _item_spans(data, pos):
            span = _item_transaction(data, start, end)
            if span is None:
                return None
            if span is not _NOT_A_TRANSACTION:
                return True
    except (IndexError, ValueError):
        return None
    return False


def judged_rows(pre: Sequence[Ops | None], txns: Sequence[transaction_pb2.Transaction],
                judged: Sequence[transaction_pb2.Transaction],
                gone: Mapping[int, set[tuple[int, int]]]) -> list[Ops | None]:
    """The stored rows of each judged transaction, from ``pre``: the rows built for
    ``txns`` before the judgement (one per record, statements in order: insert-only
    transactions; None when not built). A transaction the judgement kept (``judged[n] is
    txns[n]``) keeps its rows; one it left records out of (``gone[n]``: their ``(statement,
    record)`` numbers) keeps the rows of the others -- the rows ``judged[n]`` builds, with
    the same transaction's metadata -- without building them again; None for any other."""
    out: list[Ops | None] = []
    for n, (rows, before, after) in enumerate(zip(pre, txns, judged, strict=True)):
        if after is before:
            out.append(rows)
            continue
        drop = gone.get(n)
        if rows is None or drop is None:
            out.append(None)
            continue
        starts = [0]
        for st in before.statements:
            starts.append(starts[-1] + len(st.insert.records))
        if starts[-1] != len(rows):  # not one row per record: build them again
            out.append(None)
            continue
        keep = bytearray(b"\x01") * len(rows)
        for s, r in drop:
            keep[starts[s] + r] = 0
        out.append(list(compress(rows, keep)))
    return out
