"""A destination's entry for a sealed epoch framed from its items' bytes
(``node.loop.unit_entries.build_entries``)
is the entry ``build_unit`` builds: the same payload byte for byte when the items' bytes
are as protobuf serializes them, the same message when they parse alike, the same
replication state after, the derived GTID where the leader sets it, and ``build_unit``'s
segments when the epoch is too large for one entry."""

from __future__ import annotations

import random

import pytest

from gateway.core import messages
from gateway.core.varint import encode_uvarint
from gateway.node.loop.unit_entries import build_entries
from gateway.replication import ReplicationState, SealedEpoch, build_unit
from gateway.v1 import (
    epoch_pb2,
    gtid_pb2,
    replication_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

Item = replication_pb2.ReplicatedItem


def _txn(rng: random.Random, origin: int, tid: int) -> transaction_pb2.Transaction:
    rows = [statement_pb2.InsertRecord(
        key_values=[value_pb2.Value(int_value=rng.randrange(10**6))],
        after_values=[value_pb2.Value(string_value="x" * rng.randrange(60))])
        for _ in range(rng.randrange(1, 8))]
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=origin, trans_id=tid), epoch=rng.randrange(1, 50),
        author=origin, commit_timestamp_ns=rng.randrange(1, 2**62), segment_id=1,
        end_segment=True, statements=[statement_pb2.Statement(
            insert=statement_pb2.InsertStatement(
                table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
                key_fields=[statement_pb2.FieldMetadata(name="id")],
                fields=[statement_pb2.FieldMetadata(name="v")], records=rows))])


def _sealed(rng: random.Random) -> tuple[SealedEpoch, SealedEpoch]:
    """The same epoch twice: read as messages, and with (most of) its items' bytes."""
    items, raws = [], []
    tid = {1: 0, 2: 0, 4: 0}
    for _ in range(rng.randrange(0, 8)):
        if rng.random() < 0.75:
            origin = rng.choice([1, 2, 4])
            tid[origin] += rng.randrange(1, 3)
            item = Item(transaction=_txn(rng, origin, tid[origin]))
        else:
            item = Item(apply_status=epoch_pb2.ApplyStatus(
                server_id=rng.choice([1, 2, 4]), epoch=rng.randrange(1, 30),
                applied_by=rng.choice([1, 2, 4])))
        items.append(item)
        raws.append(item.SerializeToString() if rng.random() < 0.8 else None)
    epoch = rng.randrange(5, 40)
    plain = SealedEpoch(epoch, items, last_log_index=rng.randrange(1, 999),
                        sealed_at_ns=rng.choice([0, rng.randrange(1, 2**62)]))
    framed = SealedEpoch(epoch, [Item.FromString(it.SerializeToString()) for it in items],
                         plain.last_log_index, plain.sealed_at_ns)
    framed.raws = {id(it): r for it, r in zip(framed.items, raws, strict=True) if r}
    return plain, framed


def _state(rng: random.Random) -> ReplicationState:
    st = ReplicationState(3)
    for origin in (1, 2, 4):
        if rng.random() < 0.5:
            st.watermarks[origin] = rng.randrange(0, 4)
    if rng.random() < 0.3:
        st.apply_status[(2, 3)] = rng.randrange(1, 10)
    return st


@pytest.mark.parametrize("seed", range(150))
def test_an_entry_framed_from_its_items_bytes_is_the_one_build_unit_builds(seed: int) -> None:
    rng = random.Random(seed)
    plain, framed = _sealed(rng)
    want_state = _state(random.Random(seed + 1000))
    got_state = want_state.copy()
    max_bytes = rng.choice([4 << 20, 400])
    want = build_unit(want_state, "c", 2, plain, 77, max_bytes=max_bytes)
    got = build_entries(got_state, "c", 2, framed, 77, max_bytes=max_bytes)
    assert (got is None) == (want == [])
    assert (got_state.watermarks, got_state.apply_status) == \
        (want_state.watermarks, want_state.apply_status)
    if got is None:
        return
    has_txns = any(it.WhichOneof("item") == "transaction" for p in want for it in p.items)
    assert got.has_txns == has_txns
    if rng.random() < 0.5:  # the leader reserved a GTID for a derived transaction
        want[-1].derived_trans_id, want[-1].derived_commit_ts = 91, 123456
        got.last.derived_trans_id, got.last.derived_commit_ts = 91, 123456
    assert got.payloads() == [messages.pack(p) for p in want]


def test_items_bytes_that_parse_alike_give_the_same_entry() -> None:
    """Bytes that are not protobuf's own serialization (a field written twice: the parser
    keeps the last) go into the entry as they came, and the entry parses as build_unit's."""
    rng = random.Random(5)
    plain, framed = _sealed(rng)
    while not any(it.WhichOneof("item") == "transaction" for it in plain.items):
        plain, framed = _sealed(rng)
    for it in framed.items:
        if it.WhichOneof("item") == "transaction":
            txn = it.transaction.SerializeToString()
            early = transaction_pb2.Transaction(epoch=it.transaction.epoch + 7)
            body = early.SerializeToString() + txn  # epoch given twice, the item's last
            raw = b"\x0a" + encode_uvarint(len(body)) + body
            assert Item.FromString(raw) == it and raw != it.SerializeToString()
            framed.raws[id(it)] = raw
    st = ReplicationState(3)
    want = build_unit(st.copy(), "c", 2, plain, 9)
    got = build_entries(st.copy(), "c", 2, framed, 9)
    assert got is not None
    (payload,) = got.payloads()
    assert messages.unpack(payload) == want[0]
