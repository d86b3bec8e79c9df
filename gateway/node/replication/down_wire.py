"""A channel's messages read from their bytes: a transaction arrives as the item it becomes.

The channel reader took each ``ChannelDown`` as a parsed message, and the runner then copied
the event's transaction -- every row -- into the ``ReplicatedItem`` it records (``_record``):
a copy costs more than parsing the same bytes (62 us against 23 us for a 500-row
transaction here). :func:`read_down` is the stream's deserializer: an event holding a
transaction becomes a :class:`TxnEvent` whose item is parsed from the transaction's bytes
directly; every other message -- a welcome, progress, a marker, an apply status, a schema
event, anything with a field repeated or not known here -- is ``ChannelDown.FromString``,
as before. ``tests/node/test_down_wire.py`` checks that both give the same records.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.varint import encode_uvarint, read_varint64, skip_field
from gateway.v1 import channel_pb2, replication_pb2
from gateway.v1 import wire_tags as W

__all__ = ["TxnEvent", "read_down"]

_DOWN_EVENT = W.CHANNEL_DOWN_EVENT_KEY[0]
_LOG_INDEX = W.CHANGE_EVENT_LOG_INDEX_KEY[0]
_TRANSACTION = W.CHANGE_EVENT_TRANSACTION_KEY[0]
_EPOCH = W.CHANGE_EVENT_EPOCH_KEY[0]
#: the event's other fields a transaction event may carry (entry_end, sealed_at_ns)
_SKIPPED = frozenset({W.CHANGE_EVENT_ENTRY_END_KEY[0], W.CHANGE_EVENT_SEALED_AT_NS_KEY[0]})
_ITEM_TXN = W.REPLICATED_ITEM_TRANSACTION_KEY


@dataclass(slots=True)
class TxnEvent:
    """A change event holding a transaction: its ``log_index`` and ``epoch`` and the
    ``ReplicatedItem`` of the transaction (``ReplicatedItem(transaction=event.transaction)``),
    with the bytes it was parsed from."""

    log_index: int
    epoch: int
    item: replication_pb2.ReplicatedItem
    #: the bytes ``item`` was parsed from
    raw: bytes


def read_down(data: bytes) -> channel_pb2.ChannelDown | TxnEvent:
    """``ChannelDown.FromString(data)``, but a transaction event as a :class:`TxnEvent`
    (see the module docstring). Raises ``DecodeError`` for bytes that do not parse."""
    got = _txn_event(data)
    return got if got is not None else channel_pb2.ChannelDown.FromString(data)


def _txn_event(data: bytes) -> TxnEvent | None:
    n = len(data)
    try:
        if n < 2 or data[0] != _DOWN_EVENT:
            return None
        ln, pos = read_varint64(data, 1, n)
        if pos + ln != n:  # one field, the event, and nothing after it
            return None
        log_index = epoch = 0
        span: tuple[int, int] | None = None
        seen: set[int] = set()
        while pos < n:
            key, pos = read_varint64(data, pos, n)
            if key in seen:  # a field given twice: a parser merges or overrides
                return None
            seen.add(key)
            if key == _LOG_INDEX:
                log_index, pos = read_varint64(data, pos, n)
            elif key == _EPOCH:
                epoch, pos = read_varint64(data, pos, n)
            elif key == _TRANSACTION:
                ln, start = read_varint64(data, pos, n)
                pos = start + ln
                if pos > n:
                    return None
                span = (start, pos)
            elif key in _SKIPPED:
                pos = skip_field(data, pos, key, n)
            else:  # a marker, an apply status, a schema event, a field not known here
                return None
    except ValueError:  # a bad varint, a field past the end: the parser says what
        return None
    if span is None:
        return None
    start, end = span
    raw = b"".join((_ITEM_TXN, encode_uvarint(end - start), memoryview(data)[start:end]))
    return TxnEvent(log_index, epoch, replication_pb2.ReplicatedItem.FromString(raw), raw)
