"""Change events framed from the log's bytes (``feed_wire``) against the message path.

``ChangeFeed._entry_events`` builds each transaction and apply status as a message with
``wire=False`` (the specification); with ``wire=True`` it frames them from the entry's or the
outcome record's bytes. For random transaction entries and replicated epochs -- origins to
ignore, a resume GTID, log records on or off, judged epochs with an outcome record, segmented
and staged epochs, skipped entries, unusual bytes -- both give the same events, byte for byte.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from google.protobuf.message import DecodeError

from gateway.core.messages import TypeTag
from gateway.core.varint import encode_uvarint
from gateway.node.appliers.feed import ChangeFeed
from gateway.node.appliers.feed_wire import WireEvent, txn_event, unit_events
from gateway.raft import Entry, EntryType
from gateway.v1 import (
    channel_pb2,
    epoch_pb2,
    gateway_pb2,
    gtid_pb2,
    replication_pb2,
    schema_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)


def _txn(rng: random.Random, origin: int, tid: int) -> transaction_pb2.Transaction:
    rows = [statement_pb2.InsertRecord(
        key_values=[value_pb2.Value(int_value=rng.randrange(10**6))],
        after_values=[value_pb2.Value(string_value="x" * rng.randrange(40))])
        for _ in range(rng.randrange(1, 6))]
    stmt = statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
        key_fields=[statement_pb2.FieldMetadata(name="id")],
        fields=[statement_pb2.FieldMetadata(name="v")], records=rows))
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=origin, trans_id=tid), epoch=rng.randrange(0, 50),
        author=origin, commit_timestamp_ns=rng.randrange(1, 2**63),
        statements=[stmt] * rng.randrange(1, 3),
        idempotency_key=rng.choice(["", "k-1"]))


def _unit(rng: random.Random, index: int, segment: tuple[int, bool] = (1, True)
          ) -> replication_pb2.ReplicatedEpoch:
    items = []
    for _ in range(rng.randrange(0, 6)):
        kind = rng.random()
        if kind < 0.7:
            items.append(replication_pb2.ReplicatedItem(
                transaction=_txn(rng, rng.choice([1, 2, 3]), rng.randrange(1, 40))))
        elif kind < 0.9:
            items.append(replication_pb2.ReplicatedItem(apply_status=epoch_pb2.ApplyStatus(
                server_id=rng.choice([1, 2]), epoch=rng.randrange(1, 99), applied_by=2)))
        else:
            items.append(replication_pb2.ReplicatedItem(
                schema_event=schema_pb2.SchemaEvent(table="s.t", version=2)))
    return replication_pb2.ReplicatedEpoch(
        channel="c", source_id=1, source_epoch=rng.randrange(1, 99),
        local_epoch=rng.randrange(0, 99), sealed_at_ns=rng.choice([0, rng.randrange(1, 2**63)]),
        items=items, segment_id=segment[0], end_segment=segment[1],
        source_log_index=index, derived_trans_id=rng.choice([0, 7]))


class _Log:
    """The driver the feed reads: entries by index, the state machine's skipped indexes
    and outcome records."""

    def __init__(self) -> None:
        self.entries: dict[int, Entry] = {}
        self.outcomes: dict[int, bytes] = {}
        self.skipped_at: set[int] = set()
        self.storage = SimpleNamespace(entries=self._entries)
        self.sm = SimpleNamespace(
            skipped=self.skipped_at.__contains__, schema_at={},
            unit_outcome_bytes=self.outcomes.get,
            unit_outcome=lambda i: replication_pb2.ReplicatedEpoch.FromString(
                self.outcomes[i]) if i in self.outcomes else None)

    def _entries(self, lo: int, hi: int, _limit: int) -> list[Entry]:
        return [self.entries[i] for i in range(lo, hi)]

    def add(self, index: int, data: bytes) -> Entry:
        e = Entry(index=index, term=1, type=EntryType.NORMAL, data=data)
        self.entries[index] = e
        return e


def _both(log: _Log, e: Entry, ignore: frozenset[int], records: bool,
          after: tuple[int, int] | None) -> tuple[list[bytes], list[bytes], int]:
    spec = ChangeFeed(log, wire=False)  # type: ignore[arg-type]
    fast = ChangeFeed(log)  # type: ignore[arg-type]
    want = spec._entry_events(e, ignore, records, after)
    got = fast._entry_events(e, ignore, records, after)
    framed = sum(isinstance(ev, WireEvent) for ev in got)
    assert not any(isinstance(ev, WireEvent) for ev in want)
    return [ev.SerializeToString() for ev in want], [ev.SerializeToString() for ev in got], \
        framed


@pytest.mark.parametrize("seed", range(300))
def test_framed_events_equal_the_messages_the_specification_builds(seed: int) -> None:
    rng = random.Random(seed)
    log = _Log()
    ignore = frozenset(rng.sample([1, 2, 3], rng.randrange(0, 3)))
    after = rng.choice([None, (1, rng.randrange(0, 40)), (3, 5)])
    records = rng.random() < 0.5
    index = rng.randrange(2, 10**6)
    if rng.random() < 0.3:
        data = bytes((TypeTag.TRANSACTION,)) + _txn(rng, rng.choice([1, 2, 3]), 9) \
            .SerializeToString()
    else:
        shape = rng.random()
        if shape < 0.1:  # the last of two segments: the first is read from the log
            first = _unit(rng, index, (1, False))
            log.add(index - 1, bytes((TypeTag.REPLICATED_EPOCH,)) + first.SerializeToString())
            unit = _unit(rng, index, (2, True))
        elif shape < 0.15:  # a staged segment: no events
            unit = _unit(rng, index, (1, False))
        else:
            unit = _unit(rng, index, (rng.choice([0, 1]), True))
        data = bytes((TypeTag.REPLICATED_EPOCH,)) + unit.SerializeToString()
        if rng.random() < 0.4:  # judged: the outcome record holds what it applied
            log.outcomes[index] = _unit(rng, index).SerializeToString()
    if rng.random() < 0.1:
        log.skipped_at.add(index)
    e = log.add(index, data)
    want, got, _ = _both(log, e, ignore, records, after)
    assert got == want


def test_most_events_are_framed_not_built() -> None:
    """The wire path is taken (the test above would pass with it never taken)."""
    rng = random.Random(7)
    framed = 0
    for seed in range(40):
        rng = random.Random(seed)
        log = _Log()
        unit = _unit(rng, 5)
        e = log.add(5, bytes((TypeTag.REPLICATED_EPOCH,)) + unit.SerializeToString())
        want, got, n = _both(log, e, frozenset({3}), True, None)
        assert got == want
        framed += n
        txn = log.add(6, bytes((TypeTag.TRANSACTION,)) + _txn(rng, 1, 2).SerializeToString())
        want, got, n = _both(log, txn, frozenset(), False, None)
        assert got == want and n == 1
        framed += n
    assert framed > 80


def test_unusual_bytes_are_read_as_a_parser_reads_them() -> None:
    """Two ``gtid`` fields merge (the later trans id wins); an unknown field in a
    transaction travels; an item with two fields, an unknown field in an item or a field of
    another wire type in the epoch leave the bytes to the message path."""
    txn = _txn(random.Random(1), 1, 5)
    merged = txn.SerializeToString() + b"\x0a\x02\x10\x09" + b"\xf8\x07\x01"  # tid 9, field 127
    item = b"\x0a" + encode_uvarint(len(merged)) + merged
    unit = replication_pb2.ReplicatedEpoch(local_epoch=3, end_segment=True).SerializeToString()
    data = unit + b"\x32" + encode_uvarint(len(item)) + item
    ev = unit_events(4, data, 0, frozenset(), (1, 5), True)
    assert ev is not None and len(ev) == 1  # trans id 9 > 5: kept
    parsed = replication_pb2.ReplicatedEpoch.FromString(data).items[0].transaction
    assert parsed.gtid.trans_id == 9
    assert ev[0].message().transaction == parsed
    assert unit_events(4, data, 0, frozenset(), (1, 9), True) == []
    two = b"\x0a\x00\x12\x00"
    assert unit_events(4, unit + b"\x32\x04" + two, 0, frozenset(), None, True) is None
    assert unit_events(4, unit + b"\x32\x02\x1a\x00", 0, frozenset(), None, True) is None
    assert unit_events(4, unit + b"\x22\x00", 0, frozenset(), None, True) is None  # epoch as bytes
    assert unit_events(4, unit + b"\x32\x05\x0a\x09", 0, frozenset(), None, True) is None  # cut
    rollback = transaction_pb2.Transaction(rollback=transaction_pb2.Rollback())
    assert txn_event(4, bytes((TypeTag.TRANSACTION,)) + rollback.SerializeToString(),
                     frozenset()) is True


def test_a_damaged_entry_fails_as_the_message_path_does() -> None:
    log = _Log()
    e = log.add(3, bytes((TypeTag.REPLICATED_EPOCH,)) + b"\x32\x7f\x0a")
    for wire in (False, True):
        with pytest.raises(DecodeError):
            ChangeFeed(log, wire=wire)._entry_events(e, frozenset(), True)  # type: ignore[arg-type]


def test_a_framed_event_goes_down_a_channel_as_its_message() -> None:
    rng = random.Random(3)
    log = _Log()
    e = log.add(8, bytes((TypeTag.TRANSACTION,)) + _txn(rng, 1, 2).SerializeToString())
    got = ChangeFeed(log)._entry_events(e, frozenset(), True)  # type: ignore[arg-type]
    ev = got[0]
    assert isinstance(ev, WireEvent) and ev.entry_end and ev.HasField("transaction")
    down = channel_pb2.ChannelDown.FromString(ev.down())
    assert down.event == gateway_pb2.ChangeEvent.FromString(ev.SerializeToString())
    assert down.event.transaction.gtid.trans_id == 2 and down.event.log_index == 8


def _whole(rng: random.Random, origin: int, tid: int) -> transaction_pb2.Transaction:
    """A transaction as channels carry them: whole in one segment (``segment_id`` 1,
    ``end_segment``); now and then one that is not, or a rollback."""
    txn = _txn(rng, origin, tid)
    shape = rng.random()
    if shape < 0.9:
        txn.segment_id, txn.end_segment = 1, True
    elif shape < 0.95:
        txn.segment_id, txn.end_segment = 1, True
        txn.rollback.SetInParent()
    return txn


@pytest.mark.parametrize("seed", range(200))
def test_an_appliers_replicated_entry_holds_the_transactions_the_epoch_applied(
        seed: int) -> None:
    """``CommittedLogSource`` reads a replicated epoch's transactions -- of the entry, or of
    its outcome record when judged -- as their bytes (``WireTransactions``) when the epoch is
    whole and every transaction whole in one segment, else parses it; either way the entry
    holds the transactions ``read_unit`` / ``unit_outcome`` give, and the bytes' heads are
    theirs."""
    from gateway.appliers.source import WireTransactions
    from gateway.node.appliers.feed import CommittedLogSource
    from gateway.replication import transactions

    rng = random.Random(seed)
    log = _Log()
    index = rng.randrange(2, 10**6)

    def unit(segment: tuple[int, bool] = (1, True)) -> replication_pb2.ReplicatedEpoch:
        u = _unit(rng, index, segment)
        for item in u.items:
            if item.WhichOneof("item") == "transaction":
                item.transaction.CopyFrom(_whole(rng, item.transaction.gtid.server_id,
                                                 item.transaction.gtid.trans_id))
        return u

    shape = rng.random()
    if shape < 0.1:  # the last of two segments
        first = unit((1, False))
        log.add(index - 1, bytes((TypeTag.REPLICATED_EPOCH,)) + first.SerializeToString())
        applied = [first, unit((2, True))]
    else:
        applied = [unit((rng.choice([0, 1]), True))]
    e = log.add(index, bytes((TypeTag.REPLICATED_EPOCH,)) + applied[-1].SerializeToString())
    if rng.random() < 0.4:  # judged: the outcome record holds what it applied
        outcome = unit()
        log.outcomes[index] = outcome.SerializeToString()
        applied = [outcome]
    want = [t for u in applied for t in transactions(u.items)]
    got = CommittedLogSource(log)._entry(log.storage, e, set())  # type: ignore[arg-type]
    assert got.index == index and got.transaction is None
    assert list(got.replicated) == want
    whole = len(applied) == 1 and all(
        t.segment_id == 1 and t.end_segment and not t.HasField("rollback") for t in want)
    assert isinstance(got.replicated, WireTransactions) == (whole and bool(want))
    if isinstance(got.replicated, WireTransactions):
        for sub, t in zip(got.replicated.entries, want, strict=True):
            assert sub.index == index
            assert sub.head == (t.gtid.server_id, t.gtid.trans_id, t.commit_timestamp_ns)
            assert transaction_pb2.Transaction.FromString(sub.wire) == t
    skipped = CommittedLogSource(log)._entry(log.storage, e, {index})  # type: ignore[arg-type]
    assert not skipped.replicated
