"""A channel's messages read from their bytes (``down_wire.read_down``) give the records the
runner keeps exactly as parsing them whole does: for random ``ChannelDown`` messages --
transaction events with and without conditions, markers, apply statuses, schema events,
welcomes, progress -- and for unusual bytes (a field given twice, a field not known here,
bytes cut short), which are left to the parser."""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError

from gateway.core.varint import encode_uvarint
from gateway.node.replication.channels import _record
from gateway.node.replication.down_wire import TxnEvent, read_down
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


def _txn(rng: random.Random) -> transaction_pb2.Transaction:
    rows = [statement_pb2.InsertRecord(
        key_values=[value_pb2.Value(int_value=rng.randrange(10**9))],
        after_values=[value_pb2.Value(string_value="v" * rng.randrange(30))])
        for _ in range(rng.randrange(0, 8))]
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=rng.randrange(1, 4), trans_id=rng.randrange(1, 99)),
        epoch=rng.randrange(0, 1 << 40), author=rng.randrange(0, 4),
        commit_timestamp_ns=rng.randrange(0, 1 << 62),
        statements=[statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
            key_fields=[statement_pb2.FieldMetadata(name="id")], records=rows))])
    if rng.random() < 0.2:
        txn.conditions.add(table="s.t")
    return txn


def _down(rng: random.Random) -> channel_pb2.ChannelDown:
    roll = rng.random()
    ev = gateway_pb2.ChangeEvent(log_index=rng.choice([0, rng.randrange(1, 1 << 40)]),
                                 epoch=rng.choice([0, rng.randrange(1, 1 << 40)]),
                                 entry_end=rng.random() < 0.5,
                                 sealed_at_ns=rng.choice([0, rng.randrange(1, 1 << 62)]))
    if roll < 0.6:
        ev.transaction.CopyFrom(_txn(rng))
    elif roll < 0.7:
        ev.epoch_marker.CopyFrom(epoch_pb2.EpochMarker(epoch=5, sealed_at_ns=9))
    elif roll < 0.8:
        ev.apply_status.CopyFrom(epoch_pb2.ApplyStatus(server_id=2, epoch=7, applied_by=1))
    elif roll < 0.85:
        ev.schema_event.CopyFrom(schema_pb2.SchemaEvent(table="s.t", version=3))
    elif roll < 0.9:
        return channel_pb2.ChannelDown(welcome=channel_pb2.ChannelWelcome(protocol_version=1))
    elif roll < 0.95:
        return channel_pb2.ChannelDown(progress=channel_pb2.SourceProgress(epoch=4))
    return channel_pb2.ChannelDown(event=ev)


def _records(data: bytes) -> tuple[object, object]:
    """What the runner records from ``data`` read both ways (None for a non-event)."""
    want = channel_pb2.ChannelDown.FromString(data)
    got = read_down(data)
    spec = _record(want.event) if want.WhichOneof("msg") == "event" else None
    if isinstance(got, TxnEvent):
        conditions = bool(got.item.transaction.conditions)
        rec = _record(got)
        # the bytes the runner keeps for the entry parse as its item (kept: no conditions)
        assert (rec.raw is None) == conditions
        assert rec.raw is None or replication_pb2.ReplicatedItem.FromString(rec.raw) == rec.item
        return spec, rec
    assert got == want
    return spec, spec


@pytest.mark.parametrize("seed", range(400))
def test_records_read_from_bytes_are_those_of_the_parsed_messages(seed: int) -> None:
    rng = random.Random(seed)
    data = _down(rng).SerializeToString()
    want, got = _records(data)
    assert got == want


def test_transaction_events_are_read_as_their_items() -> None:
    """The path is taken (the test above would pass with it never taken), and an event
    without a transaction or with its transaction empty is still an event."""
    rng = random.Random(5)
    framed = sum(isinstance(read_down(channel_pb2.ChannelDown(event=gateway_pb2.ChangeEvent(
        log_index=3, transaction=_txn(rng))).SerializeToString()), TxnEvent) for _ in range(50))
    assert framed == 50
    empty = channel_pb2.ChannelDown(event=gateway_pb2.ChangeEvent(
        log_index=3, transaction=transaction_pb2.Transaction())).SerializeToString()
    got = read_down(empty)
    assert isinstance(got, TxnEvent) and got.item.HasField("transaction")
    assert _records(empty)[0] == _records(empty)[1]


def test_unusual_bytes_are_left_to_the_parser() -> None:
    ev = gateway_pb2.ChangeEvent(log_index=3, epoch=4, transaction=_txn(random.Random(1)))
    body = ev.SerializeToString()
    frame = lambda b: b"\x12" + encode_uvarint(len(b)) + b  # noqa: E731
    for odd in (body + b"\x08\x09",                    # log_index twice: the last wins
                body + b"\xf8\x07\x01",                # a field not known here
                body + b"\x1a\x00"):                  # an epoch marker beside it
        data = frame(odd)
        got = read_down(data)
        assert isinstance(got, channel_pb2.ChannelDown)
        assert got == channel_pb2.ChannelDown.FromString(data)
    cut = frame(body)[:-3]
    with pytest.raises(DecodeError):
        read_down(cut)
    two = frame(body) + frame(body)  # the event twice: a parser merges them
    assert isinstance(read_down(two), channel_pb2.ChannelDown)
