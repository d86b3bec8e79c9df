"""One test per reduction rule of the 2010 reducer post, plus barriers and window mode."""

from __future__ import annotations

import pytest

from gateway.core.reducer import RowReducer, reduce_ops, reduce_transaction, reduce_window
from gateway.core.rowops import (
    APPLY_STATUS_TABLE,
    Gtid,
    MalformedTransactionError,
    OpKind,
    TableRef,
    statement_ops,
)
from gateway.v1 import epoch_pb2, statement_pb2
from tests.reducer.model import apply_all, delete, insert, sql, txn, update

T = TableRef("s", "t")


def kinds(ops):
    return [(op.kind, op.key, op.row() if op.kind is not OpKind.SQL else op.sql.query)
            for op in ops]


def test_seed_example_reduces_to_inserts_only():
    t = txn(10, insert("t", [{"id": k, "test": "a", "ignored": "b"} for k in range(78, 88)]),
            update("t", ["test"], [(85, ["test"])]), delete("t", [81]))
    ops = reduce_transaction(t, 7)
    assert all(op.kind is OpKind.INSERT for op in ops)
    assert [op.key for op in ops] == [(k,) for k in range(78, 88) if k != 81]
    assert ops[85 - 78 - 1].row() == {"id": 85, "test": "test", "ignored": "b"}
    assert all(op.log_index == 7 and op.gtid == Gtid(1, 10) for op in ops)


def test_insert_then_update_is_one_insert_of_the_merged_row():
    t = txn(1, insert("t", [{"id": 1, "a": 1, "b": "x"}]), update("t", ["a"], [(1, [2])]))
    assert kinds(reduce_transaction(t)) == [(OpKind.INSERT, (1,), {"id": 1, "a": 2, "b": "x"})]


def test_insert_then_delete_is_nothing():
    t = txn(1, insert("t", [{"id": 1, "a": 1}]), delete("t", [1]))
    assert reduce_transaction(t) == []


def test_insert_then_delete_is_a_delete_without_elision():
    t = txn(1, insert("t", [{"id": 1, "a": 1}]), delete("t", [1]))
    assert kinds(reduce_transaction(t, elide_insert_delete=False)) == [
        (OpKind.DELETE, (1,), {"id": 1})]


def test_update_then_update_merges_columns_later_values_win():
    t = txn(1, update("t", ["a"], [(1, [1])]), update("t", ["b", "a"], [(1, ["y", 3])]))
    assert kinds(reduce_transaction(t)) == [(OpKind.UPDATE, (1,), {"id": 1, "a": 3, "b": "y"})]


def test_update_then_delete_is_a_delete():
    t = txn(1, update("t", ["a"], [(1, [1])]), delete("t", [1]))
    assert kinds(reduce_transaction(t)) == [(OpKind.DELETE, (1,), {"id": 1})]


def test_external_row_updated_twice_then_deleted_is_only_the_delete():
    t = txn(1, update("t", ["a"], [(5, [1])]), update("t", ["a"], [(5, [2])]), delete("t", [5]))
    assert kinds(reduce_transaction(t)) == [(OpKind.DELETE, (5,), {"id": 5})]


def test_delete_then_insert_is_an_upsert():
    t = txn(1, delete("t", [1]), insert("t", [{"id": 1, "a": 9}]))
    assert kinds(reduce_transaction(t)) == [(OpKind.UPSERT, (1,), {"id": 1, "a": 9})]


def test_delete_then_insert_then_update_is_an_upsert_of_the_merged_row():
    t = txn(1, delete("t", [1]), insert("t", [{"id": 1, "a": 9, "b": "p"}]),
            update("t", ["b"], [(1, ["q"])]))
    assert kinds(reduce_transaction(t)) == [(OpKind.UPSERT, (1,), {"id": 1, "a": 9, "b": "q"})]


def test_key_changing_update_of_a_known_row_is_delete_old_and_insert_new():
    t = txn(1, insert("t", [{"id": 1, "a": 1, "b": "x"}]), delete("t", [2]),
            update("t", ["id", "a"], [(1, [2, 5])]))
    # row 1 was created inside the transaction: nothing to delete; row 2 was deleted and is
    # re-created: an upsert of the moved row.
    assert kinds(reduce_transaction(t)) == [(OpKind.UPSERT, (2,), {"id": 2, "a": 5, "b": "x"})]
    t2 = txn(1, delete("t", [1]), insert("t", [{"id": 1, "a": 1, "b": "x"}]),
             update("t", ["id", "a"], [(1, [2, 5])]))
    assert kinds(reduce_transaction(t2)) == [
        (OpKind.DELETE, (1,), {"id": 1}), (OpKind.INSERT, (2,), {"id": 2, "a": 5, "b": "x"})]


def test_key_changing_update_of_an_unknown_row_is_a_move_barrier():
    t = txn(1, update("t", ["a"], [(3, [0])]), update("t", ["id"], [(1, [2])]),
            insert("t", [{"id": 4, "a": 4}]))
    ops = reduce_transaction(t)
    assert [op.kind for op in ops] == [OpKind.UPDATE, OpKind.MOVE, OpKind.INSERT]
    assert ops[1].key == (1,) and ops[1].new_key == (2,) and ops[1].is_barrier


def test_update_setting_the_key_to_its_own_value_is_a_plain_update():
    t = txn(1, update("t", ["id", "a"], [(1, [1, 7])]))
    assert kinds(reduce_transaction(t)) == [(OpKind.UPDATE, (1,), {"id": 1, "a": 7})]


def test_sql_is_a_barrier_rows_on_both_sides_are_not_merged():
    t = txn(1, insert("t", [{"id": 1, "a": 1}]), sql("UPDATE s.t SET a = a + 1"),
            update("t", ["a"], [(1, [5])]))
    ops = reduce_transaction(t)
    assert [op.kind for op in ops] == [OpKind.INSERT, OpKind.SQL, OpKind.UPDATE]
    assert ops[1].sql.query == "UPDATE s.t SET a = a + 1"


def test_rows_keep_first_appearance_order_and_tables_are_distinct():
    t = txn(1, insert("t", [{"id": 2, "a": 1}]), insert("u", [{"id": 2, "a": 1}]),
            insert("t", [{"id": 1, "a": 1}]), update("t", ["a"], [(2, [3])]))
    ops = reduce_transaction(t)
    assert [(op.table.name, op.key) for op in ops] == [("t", (2,)), ("u", (2,)), ("t", (1,))]


def test_window_merges_rows_across_transactions_and_keeps_the_latest_metadata():
    t1 = txn(1, insert("t", [{"id": 1, "a": 1}]), commit_ts_ns=10, epoch=3)
    t2 = txn(2, update("t", ["a"], [(1, [2])]), commit_ts_ns=20, epoch=4, author=9)
    t3 = txn(3, insert("t", [{"id": 2, "a": 1}]), delete("t", [2]))
    ops = reduce_window([(5, t1), (6, t2), (7, t3)])
    assert kinds(ops) == [(OpKind.INSERT, (1,), {"id": 1, "a": 2})]
    assert (ops[0].gtid, ops[0].log_index, ops[0].epoch, ops[0].author, ops[0].commit_ts_ns) \
        == (Gtid(1, 2), 6, 4, 9, 20)


def test_apply_status_statement_is_an_upsert_of_the_apply_status_table():
    st = statement_pb2.Statement(apply_status=epoch_pb2.ApplyStatus(
        server_id=2, epoch=7, applied_by=1))
    (op,) = statement_ops(txn(1, st))
    assert op.kind is OpKind.UPSERT and op.table == APPLY_STATUS_TABLE
    assert op.row() == {"server_id": 2, "epoch": 7, "applied_by": 1}


def test_reduced_ops_touch_each_row_at_most_once_between_barriers():
    t = txn(1, *[update("t", ["a"], [(k % 3, [k])]) for k in range(12)])
    ops = reduce_transaction(t)
    assert len(ops) == 3 and len({op.row_id for op in ops}) == 3
    assert apply_all({}, ops) == apply_all({}, statement_ops(t))


def test_row_reducer_refuses_sql_and_unknown_moves():
    r = RowReducer()
    (op,) = statement_ops(txn(1, sql("SELECT 1")))
    with pytest.raises(ValueError, match="barrier"):
        r.add(op)
    (mv,) = statement_ops(txn(1, update("t", ["id"], [(1, [2])])))
    assert not r.can_fold(mv)
    with pytest.raises(ValueError, match="barrier"):
        r.add(mv)


@pytest.mark.parametrize("bad, message", [
    (lambda s: s.insert.records[0].after_values.pop(), "record 1: 0 values for 1 fields"),
    (lambda s: s.insert.records[0].key_values[0].Clear(),
     "record 1 key column 'id': value has no case set"),
    (lambda s: s.insert.records[0].after_values[0].CopyFrom(
        statement_pb2.Statement().insert.records.add().after_values.add(string_value="x")),
     "record 1 column 'a': string_value in a FIELD_TYPE_INTEGER column"),
    (lambda s: s.insert.ClearField("key_fields"), "no key_fields"),
    (lambda s: s.insert.table.ClearField("table_name"), "table has no name"),
])
def test_malformed_statements_are_named_errors(bad, message):
    st = insert("t", [{"id": 1, "a": 1}])
    bad(st)
    with pytest.raises(MalformedTransactionError, match=message) as info:
        reduce_transaction(txn(4, st))
    assert "transaction (1,4) statement 1" in str(info.value)


def test_reduce_ops_of_empty_input_is_empty():
    assert reduce_ops([]) == []


def test_segments_are_buffered_until_the_last_and_interleave():
    from gateway.core.reducer import SegmentAssembler

    asm = SegmentAssembler()
    assert asm.add(1, txn(1, insert("t", [{"id": 1, "a": 1}]), end_segment=False)) is None
    single = asm.add(2, txn(2, delete("t", [5])))
    assert single is not None and single.indexes == (2,)
    assert asm.pending_indexes() == [1]
    done = asm.add(3, txn(1, update("t", ["a"], [(1, [2])]), segment_id=2))
    assert done is not None and done.indexes == (1, 3) and not done.rolled_back
    assert kinds(reduce_window([done])) == [(OpKind.INSERT, (1,), {"id": 1, "a": 2})]
    assert reduce_window([done])[0].log_index == 3  # the commit point: the last segment
    assert len(asm) == 0


def test_rollback_on_the_last_segment_discards_the_whole_transaction():
    from gateway.core.reducer import SegmentAssembler

    asm = SegmentAssembler()
    asm.add(1, txn(1, insert("t", [{"id": 1, "a": 1}]), end_segment=False))
    done = asm.add(2, txn(1, segment_id=2, rollback=True))
    assert done is not None and done.rolled_back and done.ops() == []


@pytest.mark.parametrize("segment_id, first", [(2, False), (1, True), (0, False)])
def test_out_of_order_segments_are_named_errors_carrying_the_dropped_segments(segment_id, first):
    from gateway.core.reducer import SegmentAssembler, SegmentOrderError

    asm = SegmentAssembler()
    if first:
        asm.add(1, txn(1, end_segment=False))
    with pytest.raises(SegmentOrderError, match="segment_id") as info:
        asm.add(5, txn(1, segment_id=segment_id))
    assert info.value.indexes == ((1, 5) if first else (5,))
    assert len(asm) == 0


def test_values_convert_decimals_and_nulls_and_name_a_bad_decimal():
    from decimal import Decimal

    from gateway.v1 import value_pb2

    FT = value_pb2.FieldType
    ins = statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
        fields=[statement_pb2.FieldMetadata(name="price", type=FT.FIELD_TYPE_DECIMAL),
                statement_pb2.FieldMetadata(name="note", type=FT.FIELD_TYPE_VARCHAR)])
    ins.records.add(key_values=[value_pb2.Value(int_value=1)],
                    after_values=[value_pb2.Value(decimal_value="1.50"),
                                  value_pb2.Value(null_value=value_pb2.NULL_VALUE)])
    ins.records.add(key_values=[value_pb2.Value(int_value=2)],
                    after_values=[value_pb2.Value(decimal_value="2"),
                                  value_pb2.Value(string_value="x")])
    ops = statement_ops(txn(1, statement_pb2.Statement(insert=ins)))
    assert [op.row() for op in ops] == [{"id": 1, "price": Decimal("1.50"), "note": None},
                                        {"id": 2, "price": Decimal("2"), "note": "x"}]
    ins.records[1].after_values[0].decimal_value = "two"
    with pytest.raises(MalformedTransactionError,
                       match="record 2 column 'price': decimal_value 'two' is not a number"):
        statement_ops(txn(1, statement_pb2.Statement(insert=ins)))
