"""The derived transaction of a judged epoch writes its exception rows and refreshes as runs
of rows sharing one statement (one per table and columns), the same rows in the same order
as one statement per row would."""

from __future__ import annotations

from gateway.conflict import Context, Role, RuleSet, Stored
from gateway.conflict.functions import BUILTIN
from gateway.conflict.rules import ConflictRule
from gateway.node.state.conflict_apply import (
    add_refresh,
    append_merged,
    judge_unit,
    refresh_statement,
)
from gateway.v1 import gateway_pb2, gtid_pb2, statement_pb2, transaction_pb2, value_pb2

_INT = value_pb2.FIELD_TYPE_INTEGER
_T = statement_pb2.TableMetadata(schema_name="s", table_name="t")
_KF = [statement_pb2.FieldMetadata(name="id", type=_INT)]


def _update(keys: list[int]) -> statement_pb2.Statement:
    return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
        table=_T, key_fields=_KF, set_fields=[statement_pb2.FieldMetadata(name="v", type=_INT)],
        records=[statement_pb2.UpdateRecord(key_values=[value_pb2.Value(int_value=k)],
                                            after_values=[value_pb2.Value(int_value=-k)])
                 for k in keys]))


def test_an_epochs_exception_rows_share_one_statement_per_table():
    txns = [transaction_pb2.Transaction(gtid=gtid_pb2.Gtid(server_id=2, trans_id=t),
                                        statements=[_update([3 * t, 3 * t + 1, 3 * t + 2])])
            for t in range(3)]
    rules = RuleSet([ConflictRule("s.t", "NDB$EPOCH2", ())], BUILTIN)

    def lookup(k: bytes, values: bool) -> Stored:  # every row: this cluster's, unseen by 2
        return Stored(True, {"v": 1} if values else {}, 9, 1, 1)

    got = judge_unit(txns, rules, Context(1, Role.PRIMARY), lookup, 20, 7,
                     columns=lambda s, t: {"id": _INT, "v": _INT})
    assert len(got.exceptions) == 1
    ex = got.exceptions[0].insert
    assert ex.table.table_name == "t$EX" and len(ex.records) == 9
    assert [r.key_values[3].uint_value for r in ex.records] == list(range(1, 10))  # count
    assert [r.after_values[3].int_value for r in ex.records] == list(range(9))  # id
    assert len(got.refresh) == 9


def test_refreshes_merge_by_kind_and_columns_in_order():
    row = gateway_pb2.Row(
        key_fields=_KF, fields=[statement_pb2.FieldMetadata(name="v", type=_INT)],
        key_values=[value_pb2.Value(int_value=1)], values=[value_pb2.Value(int_value=5)])
    kv = [value_pb2.Value(int_value=1)]
    stmts: list[statement_pb2.Statement] = []
    direct: list[statement_pb2.Statement] = []
    for raw in (row.SerializeToString(), row.SerializeToString(), None, None,
                row.SerializeToString()):
        append_merged(stmts, refresh_statement(_T, _KF, kv, raw))
        add_refresh(direct, _T, _KF, kv, raw)
    assert [(s.WhichOneof("kind"), len(getattr(s, s.WhichOneof("kind")).records))
            for s in stmts] == [("insert", 2), ("delete", 2), ("insert", 1)]
    assert direct == stmts
