"""Schema events across clusters (``gateway.node.state.schema_replica``): a replicated entry
brings the source's schema events before its transactions; the replica applies them with the
winner rule, upcasts transactions written under another version, records losers with their
cause, and two clusters that saw the same events hold the same rows -- whichever order the
events came in. In-process state machines; the real processes are in
tests/replication/test_schema_channel_processes.py."""

from __future__ import annotations

from gateway.core import messages
from gateway.node.state.schema_replica import read_lost
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.schema.apply import plan_add_column, plan_create, plan_rename_column
from gateway.schema.codec import encode_event, event_to_proto
from gateway.schema.model import Column, SchemaEvent
from gateway.v1 import gtid_pb2, replication_pb2, statement_pb2, transaction_pb2, value_pb2

FT = value_pb2.FieldType
T = "app.items"
_TABLE = statement_pb2.TableMetadata(schema_name="app", table_name="items")
_KEY = [statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)]
_E = 1 << 32


def _insert(k: int, **cols: str | int) -> statement_pb2.Statement:
    fields = [statement_pb2.FieldMetadata(
        name=n, type=FT.FIELD_TYPE_VARCHAR if isinstance(v, str) else FT.FIELD_TYPE_INTEGER)
        for n, v in cols.items()]
    vals = [value_pb2.Value(string_value=v) if isinstance(v, str) else value_pb2.Value(
        int_value=v) for v in cols.values()]
    return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=_TABLE, key_fields=_KEY, fields=fields, records=[statement_pb2.InsertRecord(
            key_values=[value_pb2.Value(int_value=k)], after_values=vals)]))


class Cluster:
    """One cluster's state machine and what it logged (its own transactions and events)."""

    def __init__(self, root: object, cid: int) -> None:
        self.cid = cid
        self.sm = StoreStateMachine(str(root / f"c{cid}"), cluster_id=cid)  # type: ignore[operator]
        self.tid = 0
        self.epoch = 0
        self.sent: list[replication_pb2.ReplicatedItem] = []  # not yet sent to the other

    def _apply(self, data: bytes) -> object:
        i = self.sm.applied_index + 1
        self.sm.apply([Entry(term=1, index=i, type=EntryType.NORMAL, data=data)])
        return self.sm.refusal_at(i)

    def write(self, *stmts: statement_pb2.Statement) -> None:
        self.tid += 1
        txn = transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=self.cid, trans_id=self.tid), epoch=_E | 1,
            author=self.cid, start_timestamp_ns=1000, commit_timestamp_ns=1000 + self.tid,
            segment_id=1, end_segment=True, statements=list(stmts))
        at = self.sm.applied_index + 1
        assert self._apply(encode_transaction(txn)) is None
        for ev, _ in self.sm.schema_at.get(at, []):  # an implicit create, sent before it
            self.sent.append(replication_pb2.ReplicatedItem(schema_event=event_to_proto(ev)))
        self.sent.append(replication_pb2.ReplicatedItem(transaction=txn))

    def change(self, plan, *args) -> SchemaEvent:  # type: ignore[no-untyped-def]
        st = self.sm.tables.get(T)
        e = plan(st.definition if st else None, T, *args, origin=str(self.cid),
                 parent=st.head if st else b"")
        assert self._apply(encode_event(e)) is None
        self.sent.append(replication_pb2.ReplicatedItem(schema_event=event_to_proto(e)))
        return e

    def receive(self, other: Cluster) -> None:
        """Apply what ``other`` logged since the last time, as one replicated epoch."""
        if not other.sent:
            return
        other.epoch += 1
        unit = replication_pb2.ReplicatedEpoch(
            channel=f"from{other.cid}", source_id=other.cid, source_epoch=_E | other.epoch,
            local_epoch=_E | 1, items=other.sent, segment_id=1, end_segment=True)
        other.sent = []
        assert self._apply(messages.pack(unit)) is None

    def rows(self) -> dict[int, dict[str, object]]:
        out = {}
        for k in range(1, 100):
            row = self.sm.get_row("app", "items", [value_pb2.Value(int_value=k)])
            if row is not None:
                out[k] = {f.name: None if v.WhichOneof("kind") == "null_value" else
                          getattr(v, v.WhichOneof("kind")) for f, v in zip(
                              row.fields, row.values, strict=True)}
        return out

    def names(self) -> tuple[str, ...]:
        d = self.sm.tables[T].definition
        assert d is not None
        return d.names


def _pair(tmp_path) -> tuple[Cluster, Cluster]:  # type: ignore[no-untyped-def]
    return Cluster(tmp_path, 1), Cluster(tmp_path, 2)


def _create(a: Cluster, b: Cluster) -> None:
    a.change(plan_create, (Column("id", "INTEGER"), Column("name", "VARCHAR")), ("id",))
    b.receive(a)


def test_an_added_column_reaches_the_replica_and_old_version_writes_get_its_default(tmp_path
                                                                                   ) -> None:
    a, b = _pair(tmp_path)
    _create(a, b)
    assert b.names() == ("id", "name") and b.sm.tables[T].version == 1
    a.write(_insert(1, name="a1"))
    a.change(plan_add_column, Column("c", "INTEGER", 0))
    a.write(_insert(2, name="a2", c=5))
    b.write(_insert(11, name="b-old"))  # B does not know c yet
    b.receive(a)
    a.receive(b)  # A gets B's write made under version 1
    b.write(_insert(12, name="b-new"))  # B's write without c after it knows c
    a.receive(b)
    assert a.names() == b.names() == ("id", "name", "c")
    assert a.rows() == b.rows()
    assert a.rows()[11] == {"name": "b-old", "c": 0}
    assert a.rows()[12] == {"name": "b-new", "c": 0}
    assert b.rows()[1] == {"name": "a1", "c": 0}
    for c in (a, b):
        assert read_lost(c.sm.store.scan_prefix) == []
        assert not any(n.get("quarantined_trans_count") for n in
                       c.sm.conflict_counters.values())


def test_a_write_to_a_renamed_columns_old_name_lands_in_the_new_one(tmp_path) -> None:
    a, b = _pair(tmp_path)
    _create(a, b)
    a.write(_insert(1, name="before"))  # sent in the same epoch as the rename after it
    a.change(plan_rename_column, "name", "title")
    b.write(_insert(11, name="written-as-name"))  # concurrent with the rename
    a.receive(b)
    b.receive(a)
    assert a.names() == b.names() == ("id", "title")
    assert a.rows() == b.rows() == {1: {"title": "before"}, 11: {"title": "written-as-name"}}
    assert not any(c.sm.conflict_counters.get("from1", {}).get("quarantined_trans_count")
                   for c in (a, b))


def test_the_same_column_added_with_two_types_ends_with_one_winner_recorded_everywhere(
        tmp_path) -> None:
    a, b = _pair(tmp_path)
    _create(a, b)
    a.change(plan_add_column, Column("c", "INTEGER", 0))
    b.change(plan_add_column, Column("c", "VARCHAR", "none"))
    a.write(_insert(1, name="a", c=7))
    b.write(_insert(2, name="b", c="x"))
    a.receive(b)
    b.receive(a)
    da, db = a.sm.tables[T].definition, b.sm.tables[T].definition
    assert da == db and da is not None
    # the smaller origin wins when no cluster is PRIMARY (docs/schema.md): cluster 1's
    assert da.column("c") == Column("c", "INTEGER", 0)
    assert a.sm.tables[T].head == b.sm.tables[T].head
    assert a.rows() == b.rows() == {1: {"name": "a", "c": 7}, 2: {"name": "b", "c": 0}}
    for c in (a, b):
        [lost] = read_lost(c.sm.store.scan_prefix)
        assert lost.event.origin == "2" and "lost to add_column from 1" in lost.cause
    assert b.sm.conflict_counters["from1"]["schema_lost_count"] == 1
    assert a.sm.conflict_counters["from2"]["schema_lost_count"] == 1


def test_an_undeclared_table_first_written_differently_on_two_clusters_converges(tmp_path
                                                                                ) -> None:
    a, b = _pair(tmp_path)
    a.write(_insert(1, x=1))
    b.write(_insert(2, y="b"))
    b.receive(a)
    a.receive(b)
    a.write(_insert(3, x=3))
    b.receive(a)
    assert a.names() == b.names() == ("id", "x")
    # both implicit: the smaller origin's shape wins; B's row keeps its key, x is NULL
    assert a.rows() == b.rows() == {1: {"x": 1}, 2: {"x": None}, 3: {"x": 3}}
    for c in (a, b):
        [lost] = read_lost(c.sm.store.scan_prefix)
        assert lost.event.implicit and lost.event.origin == "2"
        assert not c.sm.conflict_counters.get(f"from{3 - c.cid}", {}).get(
            "quarantined_trans_count")


def test_the_outcome_does_not_depend_on_which_cluster_receives_first(tmp_path) -> None:
    got = []
    for first in (0, 1):
        a, b = Cluster(tmp_path / f"r{first}", 1), Cluster(tmp_path / f"r{first}", 2)
        _create(a, b)
        a.change(plan_rename_column, "name", "title")
        b.change(plan_add_column, Column("c", "INTEGER", 4))
        a.write(_insert(1, title="a"))
        b.write(_insert(2, name="b", c=9))
        pair = [(a, b), (b, a)] if first == 0 else [(b, a), (a, b)]
        for dst, src in pair:
            dst.receive(src)
        assert a.rows() == b.rows()
        assert a.sm.tables[T] == b.sm.tables[T]
        got.append((a.sm.tables[T], a.rows()))
    assert got[0] == got[1]
