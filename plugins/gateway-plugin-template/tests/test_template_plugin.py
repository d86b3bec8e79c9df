"""The template plugin installed like any third-party distribution: found, loaded, used."""

from __future__ import annotations

import json

import gateway_plugin_template
from click.testing import CliRunner

from gateway import APPLY, Cause, Change, Context, OpType, Stored, plugins
from gateway.cli import logtool, main
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2

FT = value_pb2.FieldType


def _log(path):
    ins = statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
        fields=[statement_pb2.FieldMetadata(name="v", type=FT.FIELD_TYPE_VARCHAR)])
    ins.records.add(key_values=[value_pb2.Value(int_value=1)],
                    after_values=[value_pb2.Value(string_value="a")])
    upd = statement_pb2.UpdateStatement(
        table=ins.table, key_fields=ins.key_fields, set_fields=ins.fields)
    upd.records.add(key_values=[value_pb2.Value(int_value=1)],
                    after_values=[value_pb2.Value(string_value="b")])
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=3, trans_id=7), epoch=2, author=3,
        commit_timestamp_ns=5, segment_id=1, end_segment=True,
        statements=[statement_pb2.Statement(insert=ins), statement_pb2.Statement(update=upd)])
    logtool.append_transaction(path, txn)


def test_the_installed_template_is_listed_with_its_hooks():
    assert "template" in {p.name for p in plugins.installed_plugins()}
    result = CliRunner().invoke(main, ["plugins", "--format", "json"])
    assert result.exit_code == 0, result.output
    (row,) = [r for r in json.loads(result.output) if r["name"] == "template"]
    assert row["distribution"] == "gateway-plugin-template" and row["loaded"]
    assert row["hooks"] == ["gateway_publish_metrics", "gateway_register_appliers",
                            "gateway_register_commands", "gateway_register_conflict_functions",
                            "gateway_schema_event"]


def test_the_template_adds_a_command_only_when_loaded():
    runner = CliRunner()
    assert runner.invoke(main, ["--plugins", "template", "template-info"]).exit_code == 0
    result = runner.invoke(main, ["--plugins", "sqlite", "template-info"])
    assert result.exit_code == 2 and "No such command" in result.output


def test_the_jsonl_applier_receives_reduced_operations_with_their_metadata(tmp_path):
    _log(tmp_path / "log.bin")
    out = tmp_path / "ops.jsonl"
    result = CliRunner().invoke(main, [
        "--plugins", "template", "apply", str(tmp_path / "log.bin"), "--applier", "jsonl",
        "-o", f"path={out}", "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    (line,) = out.read_text().splitlines()
    assert json.loads(line) == {
        "kind": "INSERT", "table": "s.t", "row": {"id": 1, "v": "b"}, "sql": None,
        "gtid": [3, 7], "log_index": 1, "epoch": 2, "author": 3, "commit_ts_ns": 5}
    assert gateway_plugin_template.LAST_METRICS["jsonl"]["applied_ops"] == 1


def test_the_jsonl_applier_is_node_scoped():
    # a file on each node's own disk: every node of a cluster appends to its own copy
    [factory] = gateway_plugin_template.gateway_register_appliers()
    assert factory.scope == "node"


def test_the_template_conflict_function_is_registered_and_rejects_an_insert_over_a_row():
    fn = plugins.conflict_functions(plugins.load_plugins(["template"]))["TEMPLATE$FIRST_WINS"]
    insert = Change(OpType.WRITE_ROW, origin=2, origin_epoch=1, after={"v": 1})
    verdict = fn(insert, Stored(True, {"v": 0}), Context(1))
    assert not verdict.apply and verdict.cause is Cause.ROW_ALREADY_EXISTS
    assert fn(insert, Stored.absent(), Context(1)) is APPLY
    assert fn(Change(OpType.UPDATE_ROW, origin=2, after={"v": 2}), Stored(True), Context(1)) \
        is APPLY


def test_the_template_applier_writes_through_the_product_file_layer(tmp_path):
    import pytest
    from gateway_plugin_template import JsonLinesApplier

    from gateway.core.rowops import statement_ops
    from gateway.fileio import FaultInjectingFileSystem, SimulatedCrash, read_file
    from gateway.v1 import gtid_pb2, transaction_pb2

    _log(tmp_path / "log.bin")
    ins = statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)])
    ins.records.add(key_values=[value_pb2.Value(int_value=1)])
    txn = transaction_pb2.Transaction(gtid=gtid_pb2.Gtid(server_id=3, trans_id=7),
                                      segment_id=1, end_segment=True,
                                      statements=[statement_pb2.Statement(insert=ins)])
    ops = statement_ops(txn, 1)
    fs = FaultInjectingFileSystem()
    applier = JsonLinesApplier("/out.jsonl", fs=fs)
    applier.apply(ops)
    first = read_file("/out.jsonl", fs=fs)
    assert first is not None and len(first.splitlines()) == 1
    fs.arm_crash(2)  # the next batch's write lands torn and its fsync never happens
    with pytest.raises(SimulatedCrash):
        applier.apply(ops)
    after = fs.crash_image()
    assert (read_file("/out.jsonl", fs=after) or b"").startswith(first)  # synced: kept


def test_the_jsonl_applier_writes_a_schema_change_between_the_operations_around_it(tmp_path):
    from gateway_plugin_template import SCHEMA_EVENTS

    from gateway import SchemaColumn, SchemaEvent, TableDef
    from gateway.appliers.dispatcher import Dispatcher
    from gateway.appliers.source import MemorySource

    def txn(trans_id: int, key: int) -> transaction_pb2.Transaction:
        ins = statement_pb2.InsertStatement(
            table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
            key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)])
        ins.records.add(key_values=[value_pb2.Value(int_value=key)])
        return transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=3, trans_id=trans_id), segment_id=1,
            end_segment=True, statements=[statement_pb2.Statement(insert=ins)])

    col = SchemaColumn("c", "INTEGER", 0)
    add = SchemaEvent("s.t", 2, "add_column", column=col, definition=TableDef(
        "s.t", 2, (SchemaColumn("id", "INTEGER"), col), ("id",)))
    pm = plugins.load_plugins(["template"])
    SCHEMA_EVENTS.clear()
    [factory] = gateway_plugin_template.gateway_register_appliers()
    applier = factory.build({"path": str(tmp_path / "ops.jsonl")})
    d = Dispatcher(applier, MemorySource([txn(1, 1), add, txn(2, 2)]), tmp_path / "state",
                   on_schema_event=plugins.schema_notifier(pm))
    d.run()
    lines = [json.loads(x) for x in (tmp_path / "ops.jsonl").read_text().splitlines()]
    assert [(x["kind"], x.get("log_index")) for x in lines] == [
        ("INSERT", 1), ("SCHEMA", None), ("INSERT", 3)]
    assert lines[1] == {"kind": "SCHEMA", "table": "s.t", "version": 2, "change": "add_column",
                        "column": "c", "old_name": None, "new_name": None,
                        "columns": [["id", "INTEGER"], ["c", "INTEGER"]], "primary_key": ["id"]}
    assert SCHEMA_EVENTS == [("jsonl", "s.t", 2, "add_column", "applied")]
    # with schema_policy=ignore the applier is not handed it, and the hook hears so
    SCHEMA_EVENTS.clear()
    quiet = factory.build({"path": str(tmp_path / "quiet.jsonl"), "schema_policy": "ignore"})
    Dispatcher(quiet, MemorySource([txn(1, 1), add]), tmp_path / "state2",
               on_schema_event=plugins.schema_notifier(pm)).run()
    assert "SCHEMA" not in (tmp_path / "quiet.jsonl").read_text()
    assert SCHEMA_EVENTS == [("jsonl", "s.t", 2, "add_column", "ignored")]
