"""How ``gateway log dump`` renders the log model: row changes as SQL, values as literals."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import json_format

from gateway.cli import logtool, main
from gateway.cli.logtool import LogEntry, render_value
from gateway.core.messages import TypeTag
from gateway.v1 import epoch_pb2, gtid_pb2, statement_pb2, transaction_pb2, value_pb2
from gateway.v1.value_pb2 import Value

INTEGER = value_pb2.FIELD_TYPE_INTEGER
VARCHAR = value_pb2.FIELD_TYPE_VARCHAR


def drizzle_example() -> transaction_pb2.Transaction:
    """The transaction of the 2010 reducer post (seed 001), shortened to three inserts."""
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=10),
        epoch=4,
        author=1,
        start_timestamp_ns=1262812100381445000,
        commit_timestamp_ns=1262812153799963000,
        segment_id=1,
        end_segment=True,
    )
    table = statement_pb2.TableMetadata(schema_name="unittests", table_name="test1")
    key = [statement_pb2.FieldMetadata(name="id", type=INTEGER)]
    insert = txn.statements.add().insert
    insert.table.CopyFrom(table)
    insert.key_fields.extend(key)
    insert.fields.add(name="test", type=VARCHAR)
    insert.fields.add(name="ignored", type=VARCHAR)
    for row_id in (78, 79, 85):
        insert.records.add(
            key_values=[Value(int_value=row_id)],
            after_values=[Value(string_value="a"), Value(string_value="b")],
        )
    update = txn.statements.add().update
    update.table.CopyFrom(table)
    update.key_fields.extend(key)
    update.set_fields.add(name="test", type=VARCHAR)
    update.records.add(
        key_values=[Value(int_value=85)],
        before_values=[Value(string_value="a")],
        after_values=[Value(string_value="test")],
    )
    delete = txn.statements.add().delete
    delete.table.CopyFrom(table)
    delete.key_fields.extend(key)
    delete.records.add(key_values=[Value(int_value=81)])
    return txn


def entry(message: object) -> LogEntry:
    tag = {
        transaction_pb2.Transaction: TypeTag.TRANSACTION,
        epoch_pb2.EpochMarker: TypeTag.EPOCH_MARKER,
        epoch_pb2.ApplyStatus: TypeTag.APPLY_STATUS,
    }[type(message)]
    return LogEntry(offset=2, tag=tag, message=message)  # type: ignore[arg-type]


def test_row_changes_render_as_the_reducer_posts_sql() -> None:
    assert logtool.render_text(entry(drizzle_example())) == [
        "# Global Id: (1,10)",
        "# Timestamp: 1262812153799963000 (2010-01-06T21:09:13.799963000Z)",
        "# Epoch: 4, Author: 1",
        "INSERT INTO unittests.test1 (id, test, ignored) VALUES (78, 'a', 'b');",
        "INSERT INTO unittests.test1 (id, test, ignored) VALUES (79, 'a', 'b');",
        "INSERT INTO unittests.test1 (id, test, ignored) VALUES (85, 'a', 'b');",
        "UPDATE unittests.test1 SET test = 'test' WHERE id = 85;",
        "DELETE FROM unittests.test1 WHERE id = 81;",
    ]


def test_dump_of_a_file_with_row_changes(tmp_path: Path) -> None:
    log = tmp_path / "rows.bin"
    logtool.append_transaction(log, drizzle_example())
    result = CliRunner().invoke(main, ["log", "dump", str(log)])
    assert result.exit_code == 0
    assert "DELETE FROM unittests.test1 WHERE id = 81;" in result.stdout


def test_jsonl_of_row_changes_reads_back_into_the_same_transaction(tmp_path: Path) -> None:
    txn = drizzle_example()
    obj = logtool.render_json(entry(txn))
    assert obj["type"] == "transaction"
    assert json_format.ParseDict(obj["transaction"], transaction_pb2.Transaction()) == txn


def test_a_null_key_renders_as_is_null() -> None:
    txn = drizzle_example()
    del txn.statements[:2]
    txn.statements[0].delete.records[0].key_values[0].null_value = value_pb2.NULL_VALUE
    assert logtool.render_text(entry(txn))[-1] == "DELETE FROM unittests.test1 WHERE id IS NULL;"


def test_odd_identifiers_are_backquoted() -> None:
    txn = drizzle_example()
    del txn.statements[1:]
    insert = txn.statements[0].insert
    insert.table.table_name = "order lines"
    insert.fields[0].name = "we`ird"
    assert logtool.render_text(entry(txn))[3].startswith(
        "INSERT INTO unittests.`order lines` (id, `we``ird`, ignored) VALUES"
    )


def test_segments_and_rollback_are_shown() -> None:
    txn = drizzle_example()
    txn.segment_id = 3
    txn.end_segment = True
    txn.rollback.reason = "client aborted"
    lines = logtool.render_text(entry(txn))
    assert "# Segment: 3, last" in lines
    assert lines[-1] == "ROLLBACK # client aborted"


def test_epoch_markers_and_apply_status_render_as_comments() -> None:
    marker = epoch_pb2.EpochMarker(server_id=1, epoch=5, sealed_at_ns=0, last_trans_id=42)
    assert logtool.render_text(entry(marker)) == [
        "# Epoch marker: server 1 epoch 5 sealed at 0 (1970-01-01T00:00:00.000000000Z), "
        "last trans 42"
    ]
    status = epoch_pb2.ApplyStatus(server_id=2, epoch=17, applied_by=1)
    assert logtool.render_text(entry(status)) == ["# Apply status: server 2 epoch 17 applied by 1"]


def test_apply_status_inside_a_transaction_renders_as_a_comment() -> None:
    txn = transaction_pb2.Transaction(segment_id=1, end_segment=True)
    txn.statements.add().apply_status.CopyFrom(epoch_pb2.ApplyStatus(server_id=2, epoch=9))
    assert logtool.render_text(entry(txn))[-1] == "# Apply status: server 2 epoch 9 applied by 0"


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (Value(null_value=value_pb2.NULL_VALUE), "NULL"),
        (Value(bool_value=True), "TRUE"),
        (Value(bool_value=False), "FALSE"),
        (Value(int_value=-(2**63)), "-9223372036854775808"),
        (Value(uint_value=2**64 - 1), "18446744073709551615"),
        (Value(double_value=0.1), "0.1"),
        (Value(double_value=float("inf")), "'inf'"),
        (Value(decimal_value="-12.50"), "-12.50"),
        (Value(string_value="O'Brien \\ co"), "'O''Brien \\\\ co'"),
        (Value(bytes_value=b"\x00\xfe\xfd"), "X'00FEFD'"),
        (Value(timestamp_ns=1_000_000_000_000_000_001), "'2001-09-09T01:46:40.000000001Z'"),
        (Value(), "<unset>"),
    ],
)
def test_values_render_as_sql_literals(value: Value, sql: str) -> None:
    assert render_value(value) == sql
