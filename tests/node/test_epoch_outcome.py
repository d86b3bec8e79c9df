"""The outcome record of a judged epoch (``m dx:<index>``) assembled by parts
(``epoch_outcome.outcome_bytes``) is the specification's serialization (``outcome_record``:
the epoch copied, its transactions replaced by those applied, the derived one added), on
random epochs: every header field set or not, items of every kind, transactions accepted
as they came, with records dropped, or emptied, with and without a derived transaction,
fields this build does not know."""

from __future__ import annotations

import random

import pytest

from gateway.node.state.epoch_outcome import outcome_bytes, outcome_record
from gateway.v1 import (
    epoch_pb2,
    gtid_pb2,
    replication_pb2,
    schema_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)


def _txn(rng: random.Random, n: int) -> transaction_pb2.Transaction:
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=rng.choice([1, 2]), trans_id=n), epoch=rng.randrange(1 << 40),
        author=rng.randrange(3), commit_timestamp_ns=rng.randrange(1 << 62),
        segment_id=1, end_segment=True,
        statements=[statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
            key_fields=[statement_pb2.FieldMetadata(name="id")],
            records=[statement_pb2.InsertRecord(
                key_values=[value_pb2.Value(int_value=k)],
                after_values=[value_pb2.Value(string_value="é" * rng.randrange(200))])
                for k in range(rng.randrange(4))])) for _ in range(rng.randrange(3))])


def _unit(rng: random.Random) -> tuple[replication_pb2.ReplicatedEpoch,
                                       list[transaction_pb2.Transaction]]:
    unit = replication_pb2.ReplicatedEpoch()
    for name, value in (("channel", "bench"), ("source_id", 2), ("source_epoch", 1 << 33),
                        ("local_epoch", 7), ("sealed_at_ns", 1 << 60), ("segment_id", 1),
                        ("end_segment", True), ("source_log_index", 300),
                        ("derived_trans_id", 12), ("derived_commit_ts", 99)):
        if rng.random() < 0.7:
            setattr(unit, name, value)
    accepted = []
    for n in range(rng.randrange(6)):
        roll = rng.random()
        if roll < 0.6:
            t = _txn(rng, n)
            unit.items.add(transaction=t)
            accepted.append(t if rng.random() < 0.5 else _txn(rng, n))
        elif roll < 0.8:
            unit.items.add(apply_status=epoch_pb2.ApplyStatus(
                server_id=rng.randrange(9), epoch=rng.randrange(1 << 40)))
        else:
            unit.items.add(schema_event=schema_pb2.SchemaEvent(table="s.t", version=n))
    return unit, accepted


@pytest.mark.parametrize("seed", range(200))
def test_the_outcome_record_assembled_by_parts_is_the_specifications(seed):
    rng = random.Random(seed)
    unit, accepted = _unit(rng)
    derived = _txn(rng, 1000) if rng.random() < 0.7 else None
    if rng.random() < 0.2:  # a field of a newer build, kept by the copy
        unit = replication_pb2.ReplicatedEpoch.FromString(
            unit.SerializeToString() + b"\xf8\x07\x05")
    assert outcome_bytes(unit, accepted, derived) == outcome_record(unit, accepted, derived)
    if derived is not None:  # its serialization at hand: taken as it is, the same bytes
        assert outcome_bytes(unit, accepted, derived, derived.SerializeToString()) == \
            outcome_record(unit, accepted, derived)


def test_the_outcome_record_holds_the_applied_transactions_then_the_derived_one():
    rng = random.Random(1)
    unit = replication_pb2.ReplicatedEpoch(channel="c", source_id=2, derived_trans_id=5)
    first, second = _txn(rng, 1), _txn(rng, 2)
    unit.items.add(transaction=first)
    unit.items.add(apply_status=epoch_pb2.ApplyStatus(server_id=2, epoch=3))
    unit.items.add(transaction=second)
    kept = transaction_pb2.Transaction(gtid=gtid_pb2.Gtid(server_id=2, trans_id=1))
    derived = transaction_pb2.Transaction(gtid=gtid_pb2.Gtid(server_id=1, trans_id=5))
    got = replication_pb2.ReplicatedEpoch.FromString(outcome_bytes(unit, [kept, second],
                                                                   derived))
    assert [it.WhichOneof("item") for it in got.items] == \
        ["transaction", "apply_status", "transaction", "transaction"]
    assert got.items[0].transaction == kept and got.items[2].transaction == second
    assert got.items[3].transaction == derived
    assert (got.channel, got.source_id, got.derived_trans_id) == ("c", 2, 5)
