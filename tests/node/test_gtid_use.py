"""Which trans id each kind of log entry consumes (``gateway.node.state.gtid_use``), and the
start-up check that reads the log with it (``consistency.last_logged_trans_id``): one case per entry
kind, each checked against what the state machine records when it applies the entry."""

from __future__ import annotations

import pytest

from gateway.conflict import ConflictRule, Role
from gateway.core import messages
from gateway.core.messages import TypeTag
from gateway.node.state.consistency import last_logged_trans_id
from gateway.node.state.gtid_use import consumed, consumed_trans_id, entry_trans_id
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.v1 import (
    applier_pb2,
    channel_pb2,
    epoch_pb2,
    gtid_pb2,
    replication_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

_E1 = (1 << 32) | 1
_TABLE = statement_pb2.TableMetadata(schema_name="s", table_name="t")
_KEY = [statement_pb2.FieldMetadata(name="id", type=value_pb2.FIELD_TYPE_INTEGER)]
_V = [statement_pb2.FieldMetadata(name="v", type=value_pb2.FIELD_TYPE_VARCHAR)]


def _insert(k: int, v: str) -> statement_pb2.Statement:
    return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=_TABLE, key_fields=_KEY, fields=_V, records=[statement_pb2.InsertRecord(
            key_values=[value_pb2.Value(int_value=k)],
            after_values=[value_pb2.Value(string_value=v)])]))


def _update(k: int, v: str) -> statement_pb2.Statement:
    return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
        table=_TABLE, key_fields=_KEY, set_fields=_V, records=[statement_pb2.UpdateRecord(
            key_values=[value_pb2.Value(int_value=k)],
            after_values=[value_pb2.Value(string_value=v)])]))


def _txn(server_id: int, trans_id: int, *stmts: statement_pb2.Statement,
         ts: int = 1000) -> transaction_pb2.Transaction:
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=server_id, trans_id=trans_id), epoch=_E1,
        author=server_id, start_timestamp_ns=ts, commit_timestamp_ns=ts, segment_id=1,
        end_segment=True, statements=list(stmts))


def _unit(derived: int, *txns: transaction_pb2.Transaction, end: bool = True,
          source_epoch: int = 5) -> bytes:
    return messages.pack(replication_pb2.ReplicatedEpoch(
        channel="fromB", source_id=2, source_epoch=source_epoch, local_epoch=_E1 + 1,
        items=[replication_pb2.ReplicatedItem(transaction=t) for t in txns],
        segment_id=1, end_segment=end, derived_trans_id=derived if end else 0,
        derived_commit_ts=5000 if derived and end else 0))


#: one payload per type tag: (payload, trans id of cluster 1 it consumes). A new type tag
#: fails ``test_every_type_tag_is_classified`` until it gets a case here and in gtid_use.
SAMPLES: dict[TypeTag, tuple[bytes, int]] = {
    TypeTag.TRANSACTION: (encode_transaction(_txn(1, 7, _insert(1, "a"))), 7),
    TypeTag.EPOCH_MARKER: (messages.pack(epoch_pb2.EpochMarker(
        server_id=1, epoch=_E1, last_trans_id=99)), 0),
    TypeTag.APPLY_STATUS: (messages.pack(epoch_pb2.ApplyStatus(
        server_id=2, epoch=3, applied_by=1)), 0),
    TypeTag.REPLICATED_EPOCH: (_unit(9, _txn(2, 40, _insert(2, "b"))), 9),
    TypeTag.SCHEMA_EVENT: (bytes([TypeTag.SCHEMA_EVENT]), 0),
    TypeTag.WAL_ENTRY: (bytes([TypeTag.WAL_ENTRY]), 0),
    TypeTag.WAL_SEGMENT_HEADER: (bytes([TypeTag.WAL_SEGMENT_HEADER]), 0),
    TypeTag.WAL_SEGMENT_INDEX: (bytes([TypeTag.WAL_SEGMENT_INDEX]), 0),
    TypeTag.WAL_SEGMENT_FOOTER: (bytes([TypeTag.WAL_SEGMENT_FOOTER]), 0),
    TypeTag.WAL_LOG_START: (bytes([TypeTag.WAL_LOG_START]), 0),
    TypeTag.WAL_HARD_STATE: (bytes([TypeTag.WAL_HARD_STATE]), 0),
    TypeTag.CHANNEL_COMMAND: (messages.pack(replication_pb2.ChannelCommand(
        definition=replication_pb2.ChannelDefinition(name="x", sources=["h:1"]))), 0),
    TypeTag.CONFLICT_COMMAND: (bytes([TypeTag.CONFLICT_COMMAND]), 0),
    TypeTag.ALARM_COMMAND: (bytes([TypeTag.ALARM_COMMAND]), 0),
    TypeTag.SLOT_COMMAND: (messages.pack(replication_pb2.SlotCommand(advance=[
        replication_pb2.ChannelSlot(reader_cluster_id=2, channel="c", acked_epoch=_E1)])), 0),
    TypeTag.SEED_PIN: (messages.pack(channel_pb2.SeedPin(seed_id=5)), 0),
    TypeTag.SEED_INSTALL: (messages.pack(channel_pb2.SeedInstall(
        channel="x", source_id=2, request=True)), 0),
    TypeTag.APPLIER_POSITION: (messages.pack(applier_pb2.ApplierPosition(
        applier="sqlite", log_index=3)), 0),
    TypeTag.DEAD_LETTER: (bytes([TypeTag.DEAD_LETTER]), 0),
    TypeTag.DEAD_LETTER_RESOLUTION: (bytes([TypeTag.DEAD_LETTER_RESOLUTION]), 0),
    TypeTag.ROW_OPERATION: (bytes([TypeTag.ROW_OPERATION]), 0),
}


def test_every_type_tag_is_classified():
    assert set(SAMPLES) == set(TypeTag)


@pytest.mark.parametrize("tag", list(SAMPLES), ids=[t.name for t in SAMPLES])
def test_each_entry_kind_consumes_what_its_case_says(tag):
    data, want = SAMPLES[tag]
    assert consumed_trans_id(data, 1) == want
    assert entry_trans_id(Entry(term=1, index=1, type=EntryType.NORMAL, data=data), 1) == want


def _sm(tmp_path, rules: bool = False) -> StoreStateMachine:
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    if rules:
        sm.conflict_rules = {"s.t": ConflictRule("s.t", "NDB$EPOCH")}
        sm.conflict_role = Role.PRIMARY
    return sm


def _apply(sm: StoreStateMachine, *payloads: bytes) -> None:
    start = sm.applied_index + 1
    for a in sm.apply([Entry(term=1, index=start + i, type=EntryType.NORMAL, data=p)
                       for i, p in enumerate(payloads)]):
        assert a.error is None, a.error


@pytest.mark.parametrize("payloads", [
    pytest.param([encode_transaction(_txn(1, 7, _insert(1, "a")))], id="insert-fast-path"),
    pytest.param([encode_transaction(_txn(1, 3, _insert(1, "a"))),
                  encode_transaction(_txn(1, 8, _update(1, "b")))], id="update-general-path"),
    pytest.param([_unit(9, _txn(2, 40, _insert(2, "b")))], id="replicated-epoch-reserved"),
    pytest.param([_unit(0, _txn(2, 40, _insert(2, "b")))], id="replicated-epoch-none"),
    pytest.param([SAMPLES[TypeTag.EPOCH_MARKER][0]], id="epoch-marker"),
    pytest.param([SAMPLES[TypeTag.APPLIER_POSITION][0]], id="applier-position"),
    pytest.param([SAMPLES[TypeTag.CHANNEL_COMMAND][0]], id="channel-command"),
    pytest.param([SAMPLES[TypeTag.SEED_PIN][0]], id="seed-pin"),
    pytest.param([SAMPLES[TypeTag.SEED_INSTALL][0]], id="seed-install"),
    pytest.param([b""], id="no-op"),
])
def test_the_state_machine_records_the_trans_id_each_entry_consumes(tmp_path, payloads):
    sm = _sm(tmp_path)
    _apply(sm, *payloads)
    assert sm.last_trans_id == max(consumed_trans_id(p) for p in payloads)


def test_a_realigned_conflict_consumes_the_reserved_trans_id_of_its_derived_transaction(
        tmp_path):
    """The PRIMARY's own row (1:1), changed by the other cluster in an epoch that had not
    seen it: the state machine writes exception rows and a refresh under the reserved GTID
    1:2, which the replicated-epoch entry is the only entry to name."""
    sm = _sm(tmp_path, rules=True)
    local = encode_transaction(_txn(1, 1, _insert(1, "A")))
    unit = _unit(2, _txn(2, 40, _update(1, "B"), ts=2000))
    _apply(sm, local, unit)
    derived = [r for r in sm.scan_rows("s", "t$EX", [], [])]
    assert derived and {(r.gtid.server_id, r.gtid.trans_id) for r in derived} == {(1, 2)}
    assert sm.last_trans_id == consumed(unit).trans_id == 2
    assert consumed(unit).commit_ts == 5000


def test_a_transaction_of_another_cluster_consumes_none_of_this_clusters_ids():
    data = encode_transaction(_txn(2, 50, _insert(1, "a")))
    assert consumed_trans_id(data, 1) == 0
    assert consumed_trans_id(data, 2) == consumed_trans_id(data) == 50


def test_a_replicated_epochs_first_segments_consume_nothing():
    assert consumed_trans_id(_unit(9, _txn(2, 40, _insert(2, "b")), end=False), 1) == 0


def test_a_conf_change_entry_consumes_nothing():
    data = SAMPLES[TypeTag.TRANSACTION][0]
    assert entry_trans_id(Entry(term=1, index=1, type=EntryType.CONF_CHANGE, data=data)) == 0


class _Storage:
    """A recovered log of ``payloads`` at indexes 1.. (the shape `last_logged_trans_id`
    reads)."""

    def __init__(self, payloads: list[bytes]) -> None:
        self.log = [Entry(term=1, index=i, type=EntryType.NORMAL, data=p)
                    for i, p in enumerate(payloads, 1)]

    def first_index(self) -> int:
        return 1

    def last_index(self) -> int:
        return len(self.log)

    def entries(self, lo: int, hi: int, _max: int) -> list[Entry]:
        return self.log[lo - 1:hi - 1]


@pytest.mark.parametrize(("payloads", "want"), [
    pytest.param([encode_transaction(_txn(1, 4, _insert(1, "a"))),
                  _unit(5, _txn(2, 40, _update(1, "b")))], 5, id="replicated-epoch-last"),
    pytest.param([encode_transaction(_txn(1, 4, _insert(1, "a"))),
                  _unit(5, _txn(2, 40, _update(1, "b"))),
                  SAMPLES[TypeTag.EPOCH_MARKER][0], SAMPLES[TypeTag.APPLIER_POSITION][0],
                  b""], 5, id="replicated-epoch-then-others"),
    pytest.param([_unit(5, _txn(2, 40, _update(1, "b"))),
                  encode_transaction(_txn(1, 6, _insert(1, "a"))),
                  _unit(0, _txn(2, 41, _update(1, "c")))], 6, id="transaction-last"),
    pytest.param([encode_transaction(_txn(1, 4, _insert(1, "a"))),
                  _unit(0, _txn(2, 40, _update(1, "b"))),
                  encode_transaction(_txn(2, 70, _insert(3, "c")))], 4,
                 id="other-clusters-ids-skipped"),
    pytest.param([SAMPLES[TypeTag.EPOCH_MARKER][0]], 3, id="none-in-log-store-counter"),
])
def test_the_last_logged_trans_id_counts_every_entry_kind_that_consumes_one(payloads, want):
    assert last_logged_trans_id(_Storage(payloads), 3, 1) == want  # type: ignore[arg-type]
