"""Change events framed around the bytes the log holds: the Subscribe feed and channel streams.

A transaction's ``ChangeEvent`` built as a message copies the transaction -- every row -- and
serializing it walks the rows again, for every subscriber and every event (a channel stream
then copies the event once more into its ``ChannelDown``). On a replica judging conflicts,
the one subscriber of ``benchmarks/bench_channels.py`` cost a tenth of the event loop that
way. A :class:`WireEvent` keeps where the record's bytes are -- a transaction entry's payload,
an item of a replicated epoch or of the outcome record of a judged one -- and serializes to
the bytes of the message the message path builds, the record's bytes copied once and never
parsed (a ``ChangeEvent`` parsed from them equals that message).

Contracts:

- :func:`txn_event` and :func:`unit_events` read only what the events need (a transaction's
  origin and epoch; an epoch's own epoch, seal time, segment fields and items) and return
  None for anything they do not take -- a field of an unexpected wire type, an item with more
  than one field or a field an item does not define, a segmented epoch, malformed bytes --
  which the caller builds as messages (``ChangeFeed._entry_events`` with ``wire=False``, the
  specification: ``tests/node/test_feed_wire.py`` compares the two).
- A ``WireEvent`` has the attributes the feed sets and reads (``log_index``, ``epoch``,
  ``entry_end``, ``sealed_at_ns``), ``HasField`` for the fields it can hold, and
  ``SerializeToString`` / :meth:`WireEvent.down` (the ``ChannelDown`` carrying it).
- :func:`unit_wires` gives the appliers an epoch's transactions the same way: as their bytes
  and heads (``WireTransactions``), or None when the caller must parse the epoch.
"""

from __future__ import annotations

import struct
from collections.abc import Set

from gateway.appliers.source import CommittedEntry, WireTransactions
from gateway.core.messages import TypeTag
from gateway.core.varint import encode_uvarint, read_varint64, skip_field
from gateway.node.state.wire import parse_txn, txn_head
from gateway.v1 import gateway_pb2
from gateway.v1 import wire_tags as W

__all__ = ["WireEvent", "txn_event", "unit_events", "unit_wires"]

_LOG_INDEX, _EPOCH, _SEALED = (W.CHANGE_EVENT_LOG_INDEX_KEY, W.CHANGE_EVENT_EPOCH_KEY,
                               W.CHANGE_EVENT_SEALED_AT_NS_KEY)
_ENTRY_END = W.CHANGE_EVENT_ENTRY_END_KEY + b"\x01"
_TRANSACTION, _APPLY_STATUS = W.CHANGE_EVENT_TRANSACTION, W.CHANGE_EVENT_APPLY_STATUS
_KEYS = {_TRANSACTION: W.CHANGE_EVENT_TRANSACTION_KEY,
         _APPLY_STATUS: W.CHANGE_EVENT_APPLY_STATUS_KEY}
_NAMES = {_TRANSACTION: "transaction", _APPLY_STATUS: "apply_status"}
_DOWN_EVENT = W.CHANNEL_DOWN_EVENT_KEY
_FIX64 = struct.Struct("<Q")
_TXN_TAG = bytes((TypeTag.TRANSACTION,))

# ReplicatedEpoch: the fields read, and each field's wire type by number
_R_LOCAL_EPOCH, _R_SEALED, _R_ITEMS = (W.REPLICATED_EPOCH_LOCAL_EPOCH,
                                       W.REPLICATED_EPOCH_SEALED_AT_NS, W.REPLICATED_EPOCH_ITEMS)
_R_SEGMENT, _R_END = W.REPLICATED_EPOCH_SEGMENT_ID, W.REPLICATED_EPOCH_END_SEGMENT
_UNIT_TYPES = {int.from_bytes(k) >> 3: int.from_bytes(k) & 7 for k in (
    W.REPLICATED_EPOCH_CHANNEL_KEY, W.REPLICATED_EPOCH_SOURCE_ID_KEY,
    W.REPLICATED_EPOCH_SOURCE_EPOCH_KEY, W.REPLICATED_EPOCH_LOCAL_EPOCH_KEY,
    W.REPLICATED_EPOCH_SEALED_AT_NS_KEY, W.REPLICATED_EPOCH_ITEMS_KEY,
    W.REPLICATED_EPOCH_SEGMENT_ID_KEY, W.REPLICATED_EPOCH_END_SEGMENT_KEY,
    W.REPLICATED_EPOCH_SOURCE_LOG_INDEX_KEY, W.REPLICATED_EPOCH_DERIVED_TRANS_ID_KEY,
    W.REPLICATED_EPOCH_DERIVED_COMMIT_TS_KEY)}
# ReplicatedItem's oneof
_I_TXN, _I_STATUS, _I_SCHEMA = (W.REPLICATED_ITEM_TRANSACTION, W.REPLICATED_ITEM_APPLY_STATUS,
                                W.REPLICATED_ITEM_SCHEMA_EVENT)
_GTID = W.TRANSACTION_GTID
_SID_KEY, _TID_KEY = W.GTID_SERVER_ID_KEY[0], W.GTID_TRANS_ID_KEY[0]


class WireEvent:
    """A ``ChangeEvent`` holding one record (a transaction or an apply status) as the bytes
    ``buf[start:end]``, with ``log_index``, ``epoch``, ``sealed_at_ns`` and ``entry_end``."""

    __slots__ = ("_buf", "_end", "_field", "_start", "entry_end", "epoch", "log_index",
                 "sealed_at_ns")

    def __init__(self, log_index: int, field: int, buf: bytes, start: int, end: int,
                 epoch: int, sealed_at_ns: int = 0) -> None:
        self.log_index = log_index
        self._field = field
        self._buf = buf
        self._start = start
        self._end = end
        self.epoch = epoch
        self.sealed_at_ns = sealed_at_ns
        self.entry_end = False

    def HasField(self, name: str) -> bool:
        return name == _NAMES[self._field]

    def SerializeToString(self) -> bytes:
        """The bytes of the event's message, fields in number order (as protobuf writes)."""
        parts: list[bytes | memoryview] = []
        if self.log_index:
            parts += (_LOG_INDEX, encode_uvarint(self.log_index))
        parts += (_KEYS[self._field], encode_uvarint(self._end - self._start),
                  memoryview(self._buf)[self._start:self._end])
        if self.epoch:
            parts += (_EPOCH, encode_uvarint(self.epoch))
        if self.entry_end:
            parts.append(_ENTRY_END)
        if self.sealed_at_ns:
            parts += (_SEALED, _FIX64.pack(self.sealed_at_ns))
        return b"".join(parts)

    def payload(self) -> bytes:
        """A transaction event's record as a transaction entry payload: the ``TRANSACTION``
        type tag, then the transaction's bytes."""
        assert self._field == _TRANSACTION
        return b"".join((_TXN_TAG, memoryview(self._buf)[self._start:self._end]))

    def down(self) -> bytes:
        """The bytes of ``ChannelDown(event=<this event>)``."""
        data = self.SerializeToString()
        return b"".join((_DOWN_EVENT, encode_uvarint(len(data)), data))

    def message(self) -> gateway_pb2.ChangeEvent:
        """The event as a message (for readers of its fields; the feed never builds it)."""
        return gateway_pb2.ChangeEvent.FromString(self.SerializeToString())


def txn_event(index: int, data: bytes, ignore: Set[int]) -> WireEvent | bool:
    """The event of the transaction entry payload ``data`` (type tag first) at log index
    ``index``; False when its origin is in ``ignore`` (no event); True when the payload
    is not one ``parse_txn`` reads (a rollback, an unknown field): build it as a message."""
    got = parse_txn(data)
    if got is None:
        return True
    if got[0] in ignore:
        return False
    return WireEvent(index, _TRANSACTION, data, 1, len(data), got[2])


def unit_events(index: int, data: bytes, start: int, ignore: Set[int],
                after: tuple[int, int] | None, records: bool) -> list[WireEvent] | None:
    """The events of the replicated epoch serialized in ``data[start:]`` (a whole epoch: a
    one-segment entry's payload, or the outcome record of a judged one) at log index
    ``index``: each transaction whose origin is not in ``ignore`` and that is not at or
    before ``after`` = (origin, trans id), and with ``records`` each apply status, in the
    epoch's order; None when the bytes are not read here (see the module docstring)."""
    try:
        return _unit_events(index, data, start, ignore, after, records)
    except ValueError:  # a bad varint, a field past the end
        return None


def _unit_events(index: int, data: bytes, start: int, ignore: Set[int],
                 after: tuple[int, int] | None, records: bool) -> list[WireEvent] | None:
    n = len(data)
    pos = start
    epoch = sealed = 0
    segment, end_segment = 0, False
    items: list[tuple[int, int, int]] = []
    while pos < n:
        key, pos = read_varint64(data, pos, n)
        number, wt = key >> 3, key & 7
        if _UNIT_TYPES.get(number, wt) != wt:
            return None
        if number == _R_ITEMS:
            ln, pos = read_varint64(data, pos, n)
            end = pos + ln
            if end > n:
                return None
            item = _item(data, pos, end)
            if item is None:
                return None
            items.append(item)
            pos = end
        elif number in (_R_LOCAL_EPOCH, _R_SEGMENT, _R_END):
            v, pos = read_varint64(data, pos, n)
            if number == _R_LOCAL_EPOCH:
                epoch = v
            elif number == _R_SEGMENT:
                segment = v
            else:
                end_segment = v != 0
        elif number == _R_SEALED:
            if pos + 8 > n:
                return None
            sealed = _FIX64.unpack_from(data, pos)[0]
            pos += 8
        else:
            pos = skip_field(data, pos, key, n)
    if pos != n or segment > 1 or not end_segment:
        return None
    out: list[WireEvent] = []
    for number, s, e in items:
        if number == _I_TXN:
            if ignore or after is not None:
                origin = _gtid(data, s, e)
                if origin is None:
                    return None
                sid, tid = origin
                if sid in ignore or (after is not None and sid == after[0]
                                     and tid <= after[1]):
                    continue
            out.append(WireEvent(index, _TRANSACTION, data, s, e, epoch, sealed))
        elif number == _I_STATUS and records:
            out.append(WireEvent(index, _APPLY_STATUS, data, s, e, epoch, sealed))
    return out


def _item(data: bytes, pos: int, end: int) -> tuple[int, int, int] | None:
    """``(field, start, end)`` of the one field of the ``ReplicatedItem`` in
    ``data[pos:end]``; None for an empty item, one with more fields, or another field."""
    key, pos = read_varint64(data, pos, end)
    number = key >> 3
    if key & 7 != 2 or number not in (_I_TXN, _I_STATUS, _I_SCHEMA):
        return None
    ln, pos = read_varint64(data, pos, end)
    if pos + ln != end:
        return None
    return number, pos, end


def _gtid(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """``(server id, trans id)`` of the ``Transaction`` in ``data[pos:end]``, as a parser
    merges its ``gtid`` fields; None when its top-level fields do not read."""
    sid = tid = 0
    while pos < end:
        key, pos = read_varint64(data, pos, end)
        if key >> 3 != _GTID:
            pos = skip_field(data, pos, key, end)
            continue
        if key & 7 != 2:
            return None
        ln, pos = read_varint64(data, pos, end)
        stop = pos + ln
        if stop > end:
            return None
        while pos < stop:
            k, pos = read_varint64(data, pos, stop)
            if k == _SID_KEY:
                sid, pos = read_varint64(data, pos, stop)
            elif k == _TID_KEY:
                tid, pos = read_varint64(data, pos, stop)
            else:
                pos = skip_field(data, pos, k, stop)
    if pos != end:
        return None
    return sid, tid


def unit_wires(index: int, data: bytes, start: int) -> WireTransactions | None:
    """The transactions of the whole replicated epoch serialized in ``data[start:]`` (a
    one-segment entry's payload, or a judged one's outcome record) at log ``index``, as their
    bytes (``WireTransactions``) -- ``transactions(read_unit(...).items)`` without parsing --;
    None when it holds none, or something ``feed_wire.unit_events`` does not read or a
    transaction without a head (``txn_head``): the caller parses the epoch then."""
    got = unit_events(index, data, start, frozenset(), None, False)
    if not got:
        return None
    entries: list[CommittedEntry] = []
    for ev in got:
        payload = ev.payload()
        head = txn_head(payload)
        if head is None:
            return None
        entries.append(CommittedEntry(index, None, (), payload[1:], head))
    return WireTransactions(tuple(entries))
