"""The state machine's guards on replicated epochs (docs/conflicts.md, "Guards"), on the real
state machine of cluster 1 fed client transactions and replicated epochs of cluster 2 the
way a channel's leader proposes them:

- a conflict whose exception rows cannot be written (``schema.table$EX`` first written by an
  application with another shape) refuses the epoch with the reason -- nothing applied,
  nothing dropped -- instead of losing the exceptions and the refresh;
- a replicated transaction that clashes with this cluster's first-seen schema of a table is
  quarantined with its cause; the rest of the epoch, and the next epochs, apply;
- a rule set before its table existed is checked when the table's shape is known;
- ``last_stable_epoch`` is MySQL's: the max replicated epoch once it reached the last
  conflict epoch, never the conflict's own epoch right after it.
"""

from __future__ import annotations

from gateway.conflict import ConflictRule, Role
from gateway.core import messages
from gateway.node.state.epoch_guards import quarantine_prefix, read_quarantined
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState, build_unit
from gateway.replication.epochs import SealedEpoch
from gateway.v1 import (
    epoch_pb2,
    gtid_pb2,
    replication_pb2,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

_INT = value_pb2.FIELD_TYPE_INTEGER
_STR = value_pb2.FIELD_TYPE_VARCHAR
ME, PEER = 1, 2


def _ins(table: str, key: int | str, cols: dict[str, int | str]) -> statement_pb2.Statement:
    schema, name = table.split(".")
    kt = _INT if isinstance(key, int) else _STR

    def val(v: int | str) -> value_pb2.Value:
        return value_pb2.Value(int_value=v) if isinstance(v, int) else \
            value_pb2.Value(string_value=v)

    return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name=schema, table_name=name),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=kt)],
        fields=[statement_pb2.FieldMetadata(name=c, type=_INT if isinstance(v, int) else _STR)
                for c, v in cols.items()],
        records=[statement_pb2.InsertRecord(key_values=[val(key)],
                                            after_values=[val(v) for v in cols.values()])]))


def _upd(table: str, key: int, cols: dict[str, int | str]) -> statement_pb2.Statement:
    ins = _ins(table, key, cols).insert
    return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
        table=ins.table, key_fields=ins.key_fields, set_fields=ins.fields,
        records=[statement_pb2.UpdateRecord(key_values=r.key_values,
                                            after_values=r.after_values)
                 for r in ins.records]))


class Node:
    """Cluster 1's state machine, with a log it appends to."""

    def __init__(self, root, role: Role = Role.PRIMARY, rules: dict | None = None) -> None:
        self.sm = StoreStateMachine(str(root / "c1"), cluster_id=ME)
        self.sm.conflict_rules = rules or {}
        self.sm.conflict_role = role
        self.index = 0
        self.trans = 0
        self.view = ReplicationState(ME)
        self.peer_trans = 0
        self.peer_epoch = 0

    def local(self, *stmts: statement_pb2.Statement, epoch: int = (1 << 32) | 5):
        self.trans += 1
        txn = transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=ME, trans_id=self.trans), epoch=epoch, author=ME,
            commit_timestamp_ns=self.trans, segment_id=1, end_segment=True, statements=stmts)
        return self._apply(encode_transaction(txn, ""))

    def epoch_of_peer(self, *txns: list[statement_pb2.Statement],
                      reflect: int = 0, local_epoch: int = (1 << 32) | 6):
        """Apply one sealed epoch of cluster 2 holding one transaction per statement list
        (and, with ``reflect``, the apply-status row saying 2 applied our epoch
        ``reflect``)."""
        self.peer_epoch += 1
        items = []
        for stmts in txns:
            self.peer_trans += 1
            items.append(replication_pb2.ReplicatedItem(transaction=transaction_pb2.Transaction(
                gtid=gtid_pb2.Gtid(server_id=PEER, trans_id=self.peer_trans),
                epoch=(1 << 32) | self.peer_epoch, author=PEER,
                commit_timestamp_ns=1000 + self.peer_trans, segment_id=1, end_segment=True,
                statements=stmts)))
        if reflect:
            items.append(replication_pb2.ReplicatedItem(apply_status=epoch_pb2.ApplyStatus(
                server_id=ME, epoch=reflect, applied_by=PEER)))
        sealed = SealedEpoch((1 << 32) | self.peer_epoch, items,
                             last_log_index=self.peer_epoch)
        view = self.sm.replication.copy()  # the leader's view: what is applied
        (unit,) = build_unit(view, "fromB", PEER, sealed, local_epoch)
        unit.derived_trans_id = 10_000 + self.peer_epoch  # as the leader reserves it
        unit.derived_commit_ts = 50_000 + self.peer_epoch
        return self._apply(messages.pack(unit))

    def _apply(self, data: bytes):
        self.index += 1
        (got,) = self.sm.apply([Entry(term=1, index=self.index, type=EntryType.NORMAL,
                                      data=data)])
        return got

    def rows(self, table: str) -> dict:
        schema, name = table.split(".")
        return {r.key_values[0].int_value or r.key_values[0].string_value:
                {f.name: v for f, v in zip(r.fields, r.values, strict=True)}
                for r in self.sm.scan_rows(schema, name, [], [])}

    def counters(self) -> dict[str, int]:
        return self.sm.conflict_counters.get("fromB", {})


EPOCH_RULE = {"s.*": ConflictRule("s.*", "NDB$EPOCH")}


def test_conflicts_that_cannot_be_recorded_stop_the_channel_instead_of_being_dropped(tmp_path):
    n = Node(tmp_path, Role.PRIMARY, EPOCH_RULE)
    n.local(_ins("s.t", 1, {"v": "mine"}))
    # an application wrote the exceptions table first, with a shape of its own
    assert n.local(_ins("s.t$EX", 7, {"note": "app"})).error is None
    got = n.epoch_of_peer([_upd("s.t", 1, {"v": "theirs"})])  # concurrent: a conflict
    assert got.error is not None
    reason = str(got.error)
    assert "s.t$EX" in reason and "reserved" in reason and "channel stops" in reason
    # nothing of the epoch applied, nothing counted, the position not moved: retried
    assert n.rows("s.t") == {1: {"v": value_pb2.Value(string_value="mine")}}
    assert n.sm.replication.held(PEER) == 0
    assert not n.counters()
    # the way out is the operator's: with the rule unset the epoch applies unjudged
    n.sm.conflict_rules = {}
    n.peer_epoch -= 1
    n.peer_trans -= 1
    assert n.epoch_of_peer([_upd("s.t", 1, {"v": "theirs"})]).error is None
    assert n.rows("s.t") == {1: {"v": value_pb2.Value(string_value="theirs")}}
    n.sm.close()


def test_a_schema_clash_quarantines_the_transaction_and_the_rest_replicates(tmp_path):
    n = Node(tmp_path, Role.NONE)
    n.local(_ins("s.t", 1, {"v": "here"}))  # s.t first written here with an INTEGER key
    got = n.epoch_of_peer([_ins("s.t", "k", {"v": "there"})],  # VARCHAR key: a clash
                          [_ins("s.other", 1, {"w": "ok"})])
    assert got.error is None, got.error
    assert n.rows("s.other") == {1: {"w": value_pb2.Value(string_value="ok")}}
    assert set(n.rows("s.t")) == {1}
    # kept whole, with its cause, and counted; its GTID counts as held (not fetched again)
    (q,) = read_quarantined(n.sm.store.scan_prefix(quarantine_prefix("fromB")))
    assert q.gtid == "2:1" and q.channel == "fromB" and q.source_id == PEER
    assert "s.t" in q.cause and "key" in q.cause
    assert q.transaction.statements[0].insert.records[0].key_values[0].string_value == "k"
    assert n.counters()["quarantined_trans_count"] == 1
    assert n.sm.replication.watermarks[PEER] == 2
    # the change feed serves the epoch without the quarantined transaction's rows
    outcome = n.sm.unit_outcome(n.index)
    assert outcome is not None
    txns = [it.transaction for it in outcome.items if it.WhichOneof("item") == "transaction"]
    assert [len(t.statements) for t in txns] == [0, 1]
    # and the channel goes on: the next epoch applies
    assert n.epoch_of_peer([_ins("s.other", 2, {"w": "next"})]).error is None
    assert set(n.rows("s.other")) == {1, 2}
    n.sm.close()


def test_a_rule_set_before_its_table_is_checked_when_the_table_is_known(tmp_path):
    rules = {"s.t": ConflictRule("s.t", "NDB$MAX", ("ts",))}
    n = Node(tmp_path, Role.NONE, rules)
    n.local(_ins("s.t", 1, {"v": "a", "ts": "20"}))  # ts is a VARCHAR here
    got = n.epoch_of_peer([_upd("s.t", 1, {"v": "b", "ts": "3"})])
    assert got.error is not None
    reason = str(got.error)
    assert "s.t" in reason and "ts" in reason and "before the table's shape" in reason
    assert n.rows("s.t")[1]["v"].string_value == "a"
    n.sm.close()


def test_last_stable_epoch_follows_the_max_replicated_epoch_past_the_last_conflict(tmp_path):
    n = Node(tmp_path, Role.PRIMARY, EPOCH_RULE)
    e5, e6, e7 = ((1 << 32) | 5, (1 << 32) | 6, (1 << 32) | 7)
    n.local(_ins("s.t", 1, {"v": "mine"}), epoch=e5)
    n.local(_ins("s.t", 2, {"v": "mine"}), epoch=e5)
    assert n.epoch_of_peer([_upd("s.t", 1, {"v": "theirs"})], local_epoch=e6).error is None
    c = n.counters()
    assert c["last_conflict_epoch"] == e6 and c.get("last_stable_epoch", 0) < e6
    # a judged epoch without conflict in the same local epoch: not stable yet (2 has not
    # applied the conflict's refresh), so last_stable_epoch stays below the conflict epoch
    assert n.epoch_of_peer([_ins("s.t", 3, {"v": "theirs"})], local_epoch=e6).error is None
    c = n.counters()
    assert c["last_conflict_epoch"] == e6 and c.get("last_stable_epoch", 0) < e6
    # 2 reflects that it applied our epoch 6 (the refresh): that epoch looped back stable
    assert n.epoch_of_peer([_ins("s.t", 4, {"v": "theirs"})], reflect=e6,
                           local_epoch=e7).error is None
    assert n.counters()["last_stable_epoch"] == e6
    n.sm.close()
