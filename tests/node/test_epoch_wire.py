"""A replicated epoch's transactions reach the apply fast path as the bytes the entry carries
them in (``gateway.node.state.epoch_wire``), not as a new serialization of the parsed message; the
bytes cut are exactly the transactions a parse finds, and anything a parse would merge is
left to the parser."""

from __future__ import annotations

import random

import pytest

from gateway.core import messages
from gateway.core.varint import encode_uvarint
from gateway.node.state import epoch_apply
from gateway.node.state.epoch_wire import holds_transaction, transaction_payloads
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState, build_unit, transactions
from gateway.replication.epochs import SealedEpoch
from gateway.v1 import (
    epoch_pb2,
    gtid_pb2,
    replication_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

_STATUS = epoch_pb2.ApplyStatus(server_id=3, epoch=4)


def _txn(tid: int, rows: int, table: str = "t") -> transaction_pb2.Transaction:
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=2, trans_id=tid), epoch=(1 << 32) | tid, author=2,
        commit_timestamp_ns=1000 + tid, segment_id=1, end_segment=True,
        statements=[statement_pb2.Statement(insert=statement_pb2.InsertStatement(
            table=statement_pb2.TableMetadata(schema_name="s", table_name=table),
            key_fields=[statement_pb2.FieldMetadata(name="id", type=3)],
            fields=[statement_pb2.FieldMetadata(name="v", type=12)],
            records=[statement_pb2.InsertRecord(
                key_values=[value_pb2.Value(int_value=tid * 100 + r)],
                after_values=[value_pb2.Value(string_value=f"r{tid}.{r}")])
                for r in range(rows)]))])


def _epochs(n: int, seed: int, max_bytes: int = 4 << 20) -> list[Entry]:
    """Entries of ``n`` epochs of cluster 2 (some split into segments when ``max_bytes`` is
    small), with an apply-status item now and then."""
    rng = random.Random(seed)
    view = ReplicationState(1)
    out: list[Entry] = []
    tid = 0
    for e in range(1, n + 1):
        items = []
        for _ in range(rng.randint(1, 5)):
            tid += 1
            items.append(replication_pb2.ReplicatedItem(
                transaction=_txn(tid, rng.randint(1, 4), rng.choice(["t", "u"]))))
        sealed = SealedEpoch((1 << 32) | e, items, last_log_index=e)
        for part in build_unit(view, "c", 2, sealed, (3 << 32) | e, max_bytes=max_bytes):
            out.append(Entry(term=1, index=len(out) + 2, type=EntryType.NORMAL,
                             data=messages.pack(part)))
    return out


def test_payloads_are_the_transactions_a_parse_finds_serialized():
    for entry in _epochs(40, seed=3):
        unit = replication_pb2.ReplicatedEpoch.FromString(entry.data[1:])
        assert transaction_payloads(entry.data, 1) == [
            encode_transaction(t) for t in transactions(unit.items)]


def test_an_epoch_without_transactions_gives_no_payloads():
    unit = replication_pb2.ReplicatedEpoch(channel="c", source_id=2, source_epoch=5,
                                           items=[replication_pb2.ReplicatedItem(
                                               apply_status=_STATUS)])
    assert transaction_payloads(unit.SerializeToString()) == []


def _item_bytes(body: bytes) -> bytes:
    return b"\x32" + encode_uvarint(len(body)) + body


def _field(key: int, raw: bytes) -> bytes:
    return bytes((key,)) + encode_uvarint(len(raw)) + raw


def test_an_empty_item_at_the_end_is_no_transaction():
    """An item with no field set is neither a transaction nor an error."""
    data = _item_bytes(_field(0x0A, _txn(1, 1).SerializeToString())) + _item_bytes(b"")
    assert transaction_payloads(data) == [encode_transaction(_txn(1, 1))]


def test_an_item_holding_its_transaction_twice_is_left_to_the_parser():
    """A parse merges the two (protobuf's rule for a repeated message field): cutting either
    would apply something else than what the parsed message holds."""
    a, b = _txn(1, 1).SerializeToString(), _txn(2, 1).SerializeToString()
    data = _item_bytes(_field(0x0A, a) + _field(0x0A, b))
    assert len(transactions(replication_pb2.ReplicatedEpoch.FromString(data).items)) == 1
    assert transaction_payloads(data) is None


def test_an_item_with_a_transaction_beside_another_field_is_left_to_the_parser():
    data = _item_bytes(_field(0x0A, _txn(1, 1).SerializeToString())
                       + _field(0x12, _STATUS.SerializeToString()))
    assert transaction_payloads(data) is None


@pytest.mark.parametrize("cut", [1, 2, 5, 20])
def test_truncated_epoch_bytes_are_left_to_the_parser(cut):
    data = replication_pb2.ReplicatedEpoch(
        channel="c", items=[replication_pb2.ReplicatedItem(transaction=_txn(1, 3))]
    ).SerializeToString()
    assert transaction_payloads(data[:-cut]) is None


def _parsed_has_txns(data: bytes) -> bool:
    unit = replication_pb2.ReplicatedEpoch.FromString(data)
    return any(it.WhichOneof("item") == "transaction" for it in unit.items)


def test_whether_an_epoch_holds_a_transaction_is_read_from_its_bytes_as_a_parse_says():
    status = replication_pb2.ReplicatedItem(apply_status=_STATUS)
    cases = [e.data[1:] for e in _epochs(20, seed=5)] + [
        replication_pb2.ReplicatedEpoch(channel="c", items=[status]).SerializeToString(),
        replication_pb2.ReplicatedEpoch(channel="c").SerializeToString(),
        replication_pb2.ReplicatedEpoch(items=[status, replication_pb2.ReplicatedItem(
            transaction=transaction_pb2.Transaction())]).SerializeToString(),
        _item_bytes(b"") + _item_bytes(_field(0x12, _STATUS.SerializeToString())),
    ]
    for data in cases:
        assert holds_transaction(data) is _parsed_has_txns(data)
        assert epoch_apply.has_txns(b"\x00" + data) is _parsed_has_txns(data)


def test_an_epoch_the_bytes_do_not_say_plainly_is_parsed_to_know_if_it_holds_one():
    beside = _item_bytes(_field(0x0A, _txn(1, 1).SerializeToString())
                         + _field(0x12, _STATUS.SerializeToString()))
    assert holds_transaction(beside) is None
    assert epoch_apply.has_txns(b"\x00" + beside) is _parsed_has_txns(beside)
    whole = replication_pb2.ReplicatedEpoch(
        items=[replication_pb2.ReplicatedItem(transaction=_txn(1, 3))]).SerializeToString()
    assert holds_transaction(whole[:-2]) is None
    assert epoch_apply.has_txns(b"\x00" + whole[:-2]) is True  # undecodable: holds one


def _apply_all(path, entries: list[Entry]) -> tuple[list, list]:
    sm = StoreStateMachine(str(path), cluster_id=1)
    outcomes = []
    try:
        for i in range(0, len(entries), 3):
            for a in sm.apply(entries[i:i + 3]):
                outcomes.append((a.index, a.error and str(a.error)))
        return outcomes, list(sm.store.scan_prefix(b""))
    finally:
        sm.close()


def test_replicated_epochs_are_applied_without_serializing_their_transactions(
        tmp_path, monkeypatch):
    """With the entry's bytes at hand, no transaction of an epoch (one entry or several
    segments; tables created by the epoch itself included) is serialized again; the store
    ends byte-equal to applying from serialized messages."""
    entries = _epochs(30, seed=9, max_bytes=250)
    assert any(not replication_pb2.ReplicatedEpoch.FromString(e.data[1:]).end_segment
               for e in entries)  # some epochs came in segments
    with monkeypatch.context() as m:
        m.setattr(epoch_apply, "transaction_payloads", lambda data, pos=0: None)
        serialized = _apply_all(tmp_path / "serialized", entries)

    def no_serializing(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("a replicated transaction was serialized again")

    monkeypatch.setattr(epoch_apply, "encode_transaction", no_serializing)
    received = _apply_all(tmp_path / "received", entries)
    assert not any(err for _, err in received[0])
    assert received == serialized


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("fast", [True, False])
def test_judged_transactions_keep_the_rows_built_before_the_judgement(tmp_path, monkeypatch,
                                                                       seed, fast):
    """A transaction the judgement left records out of is written with the rows built for
    it before the judgement, less those records (``judged_rows``): the same writes as
    building its rows again from the judged transaction (the specification: no rows kept
    for a changed transaction), in the C judgement and in Python."""
    from tests.node.test_conflict_wire import run_recording
    from tests.node.test_epoch_judge_accelerator import _entries

    entries = _entries(100 + seed)
    kept = []
    real = epoch_apply.judged_rows

    def counting(pre, txns, judged, gone):  # type: ignore[no-untyped-def]
        out = real(pre, txns, judged, gone)
        kept.extend(r is not None for r, o, t in zip(out, txns, judged, strict=True)
                    if t is not o)
        return out

    monkeypatch.setattr(epoch_apply, "judged_rows", counting)
    got = run_recording(str(tmp_path / "kept"), entries, "NDB$EPOCH2", fast, tables="tp")
    monkeypatch.setattr(epoch_apply, "judged_rows", lambda pre, txns, judged, gone: [
        p if t is o else None for p, o, t in zip(pre, txns, judged, strict=True)])
    want = run_recording(str(tmp_path / "built"), entries, "NDB$EPOCH2", fast, tables="tp")
    assert got == want
    assert any(kept)  # the rows were kept, not built again, for some transaction
