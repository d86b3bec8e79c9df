"""Table definitions as replicated state (``gateway.node.state.schema_apply``): schema events
applied by the state machine in log order with the writes, the rows rewritten, writes checked
against the definition, refusals recorded, and all of it surviving a restart and a snapshot."""

from __future__ import annotations

import pytest

from gateway.node.base.validation import InvalidRequest, check_statements
from gateway.node.state.schema_apply import read_history
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import encode_transaction
from gateway.raft import Entry, EntryType
from gateway.schema.apply import (
    plan_add_column,
    plan_create,
    plan_drop_column,
    plan_drop_table,
    plan_rename_column,
)
from gateway.schema.codec import encode_event
from gateway.schema.model import Column
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2

FT = value_pb2.FieldType
T = "app.items"
_TABLE = statement_pb2.TableMetadata(schema_name="app", table_name="items")
_KEY = [statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)]


def _insert(k: int, **cols: str | int) -> statement_pb2.Statement:
    fields = [statement_pb2.FieldMetadata(
        name=n, type=FT.FIELD_TYPE_VARCHAR if isinstance(v, str) else FT.FIELD_TYPE_INTEGER)
        for n, v in cols.items()]
    vals = [value_pb2.Value(string_value=v) if isinstance(v, str) else value_pb2.Value(
        int_value=v) for v in cols.values()]
    return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=_TABLE, key_fields=_KEY, fields=fields, records=[statement_pb2.InsertRecord(
            key_values=[value_pb2.Value(int_value=k)], after_values=vals)]))


_TID = [0]


def _txn(*stmts: statement_pb2.Statement) -> bytes:
    _TID[0] += 1
    return encode_transaction(transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=_TID[0]), epoch=(1 << 32) | 1, author=1,
        start_timestamp_ns=1000, commit_timestamp_ns=1000, segment_id=1, end_segment=True,
        statements=list(stmts)))


def _apply(sm: StoreStateMachine, *payloads: bytes) -> list[object]:
    start = sm.applied_index + 1
    sm.apply([Entry(term=1, index=start + i, type=EntryType.NORMAL, data=p)
              for i, p in enumerate(payloads)])
    return [sm.refusal_at(start + i) for i in range(len(payloads))]


def _row(sm: StoreStateMachine, k: int) -> dict[str, object]:
    row = sm.get_row("app", "items", [value_pb2.Value(int_value=k)])
    assert row is not None
    out = {f.name: getattr(v, v.WhichOneof("kind")) for f, v in zip(row.fields, row.values,
                                                                    strict=True)}
    return {f.name: v.int_value for f, v in zip(row.key_fields, row.key_values,
                                                strict=True)} | out


def _create(sm: StoreStateMachine) -> None:
    e = plan_create(None, T, (Column("id", "INTEGER"), Column("name", "VARCHAR")), ("id",),
                    origin="1")
    assert _apply(sm, encode_event(e)) == [None]


def _change(sm: StoreStateMachine, plan, *args):  # type: ignore[no-untyped-def]
    st = sm.tables[T]
    return encode_event(plan(st.definition, T, *args, origin="1", parent=st.head))


def test_create_then_alter_rewrites_rows_and_checks_writes_against_each_version(tmp_path
                                                                               ) -> None:
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    _create(sm)
    assert sm.tables[T].version == 1
    _apply(sm, _txn(_insert(1, name="a")))
    _apply(sm, _change(sm, plan_add_column, Column("c", "INTEGER", 0)),
           _txn(_insert(2, name="b", c=5)))
    assert _row(sm, 1) == {"id": 1, "name": "a", "c": 0}
    assert _row(sm, 2) == {"id": 2, "name": "b", "c": 5}
    _apply(sm, _change(sm, plan_rename_column, "name", "title"))
    assert _row(sm, 1) == {"id": 1, "title": "a", "c": 0}
    # a write under the old name does not fit: refused naming the table and the column
    with pytest.raises(InvalidRequest, match=r"app\.items has no column 'name'"):
        check_statements([_insert(3, name="x")], sm.schemas)
    _apply(sm, _change(sm, plan_drop_column, "c"))
    assert _row(sm, 2) == {"id": 2, "title": "b"}
    assert sm.tables[T].version == 4
    assert [h.event.kind for h in read_history(sm.store.scan_prefix, T)] == [
        "create", "add_column", "rename_column", "drop_column"]


def test_the_definitions_survive_a_restart_and_a_snapshot(tmp_path) -> None:
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    _create(sm)
    _apply(sm, _txn(_insert(1, name="a")), _change(sm, plan_add_column, Column("c", "INTEGER", 7)))
    want = sm.tables[T]
    sm.flush()
    _, exported = sm.export_dir()
    sm.close()
    again = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    assert again.tables[T] == want
    assert again.schemas[T].columns == {"id": FT.FIELD_TYPE_INTEGER,
                                        "name": FT.FIELD_TYPE_VARCHAR,
                                        "c": FT.FIELD_TYPE_INTEGER}
    again.close()
    from gateway.node.storage.snapshot_files import pack_dir  # the snapshot's archive form

    other = StoreStateMachine(str(tmp_path / "other"), cluster_id=1)
    other.restore(pack_dir(exported))
    assert other.tables[T] == want
    assert _row(other, 1) == {"id": 1, "name": "a", "c": 7}
    other.close()


def test_a_change_made_on_another_version_is_refused_with_the_reason(tmp_path) -> None:
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    _create(sm)
    first = _change(sm, plan_add_column, Column("c", "INTEGER", 0))
    second = _change(sm, plan_add_column, Column("d", "INTEGER", 0))  # planned on version 1
    got = _apply(sm, first, second)
    assert got[0] is None
    assert "event version 2 does not follow version 2" in str(got[1])
    assert sm.tables[T].version == 2 and "d" not in sm.schemas[T].columns


def test_an_undeclared_tables_first_write_is_its_implicit_version_1(tmp_path) -> None:
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    _apply(sm, _txn(_insert(1, name="a")))
    st = sm.tables[T]
    assert st.version == 1 and st.definition is not None
    assert st.definition.names == ("id", "name")
    [h] = read_history(sm.store.scan_prefix, T)
    assert h.event.implicit and h.event.origin == "1"
    # and it can be altered like a declared one
    assert _apply(sm, _change(sm, plan_add_column, Column("c", "INTEGER", 1))) == [None]
    assert _row(sm, 1) == {"id": 1, "name": "a", "c": 1}


def test_drop_table_deletes_its_rows_and_a_new_first_write_continues_the_versions(tmp_path
                                                                                 ) -> None:
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    _create(sm)
    _apply(sm, _txn(_insert(1, name="a")), _change(sm, plan_drop_table))
    assert sm.get_row("app", "items", [value_pb2.Value(int_value=1)]) is None
    assert T not in sm.schemas and sm.tables[T].definition is None
    dropped = sm.tables[T].head
    _apply(sm, _txn(_insert(2, c=1)))
    assert sm.tables[T].version == 3 and sm.schemas[T].columns["c"] == FT.FIELD_TYPE_INTEGER
    assert read_history(sm.store.scan_prefix, T)[-1].event.parent == dropped
