"""The rabbit plugin without a broker: installed and listed, options, message format."""

from __future__ import annotations

import json
from decimal import Decimal

import gateway_rabbit
import pytest
from click.testing import CliRunner
from gateway_rabbit import decode_body, encode, message_id, parse_options, routing_key

from gateway import plugins
from gateway.appliers.contract import ApplierConfigError
from gateway.cli import main
from gateway.core.frame import decode_frame
from gateway.core.messages import TypeTag
from gateway.core.rowops import Column, Gtid, OpKind, RowOp, SqlText, TableRef, Variable
from gateway.v1 import value_pb2

FT = value_pb2.FieldType
KEY = (Column("id", FT.FIELD_TYPE_INTEGER),)
ORDERS = TableRef("shop", "orders")


def _op(kind=OpKind.UPDATE, table=ORDERS, **kw) -> RowOp:
    base = dict(key_columns=KEY, key=(7,), columns=(
        Column("note", FT.FIELD_TYPE_VARCHAR), Column("raw", FT.FIELD_TYPE_BLOB),
        Column("price", FT.FIELD_TYPE_DECIMAL), Column("n", FT.FIELD_TYPE_UNSIGNED)),
        values=("x", b"\x00\xff", Decimal("1.25"), 2**64 - 1), gtid=Gtid(3, 41), log_index=9,
        epoch=2, author=3, commit_ts_ns=1_700_000_000_123_456_789, statement=2)
    base.update(kw)
    return RowOp(kind, table, **base)


def test_the_installed_plugin_is_listed_with_its_applier():
    result = CliRunner().invoke(main, ["plugins", "--format", "json"])
    assert result.exit_code == 0, result.output
    (row,) = [r for r in json.loads(result.output) if r["name"] == "rabbit"]
    assert row["distribution"] == "gateway-rabbit" and row["loaded"]
    assert row["hooks"] == ["gateway_register_appliers"]
    pm = plugins.load_plugins(["rabbit"])
    assert plugins.applier_factories(pm)["rabbit"] is gateway_rabbit.RABBIT_FACTORY


def test_options_are_checked_with_one_line_errors():
    s = parse_options({"url": "amqp://u:p@h:5672/", "format": "json", "max_batch": "8",
                       "declare": "false"})
    assert (s.format, s.max_batch, s.declare, s.exchange) == ("json", 8, False, "gateway")
    assert parse_options({}).url == "amqp://guest:guest@127.0.0.1:5672/"  # a local broker
    for bad, match in [({"url": "http://x"}, "not amqp"),
                       ({"url": "amqp://h", "format": "xml"}, "frame or json"),
                       ({"url": "amqp://h", "max_batch": "0"}, ">= 1"),
                       ({"url": "amqp://h", "declare": "maybe"}, "true or false"),
                       ({"url": "amqp://h", "exchange": ""}, "name an exchange")]:
        with pytest.raises(ApplierConfigError, match=match):
            parse_options(bad)
    with pytest.raises(ApplierConfigError, match="unknown option 'colour'"):
        gateway_rabbit.RABBIT_FACTORY.build({"url": "amqp://h", "colour": "red"})


def test_gateway_apply_reports_a_bad_url_as_bad_input(tmp_path):
    from gateway.cli import logtool
    from tests.reducer.model import insert, txn

    logtool.append_transaction(tmp_path / "log", txn(1, insert("t", [{"id": 1, "b": "x"}])))
    result = CliRunner().invoke(main, ["--plugins", "rabbit", "apply", str(tmp_path / "log"),
                                       "--applier", "rabbit", "-o", "url=http://broker"])
    assert result.exit_code == 2 and "not amqp" in result.output


def test_routing_key_is_schema_table_op_with_dots_escaped():
    assert routing_key(_op()) == "shop.orders.update"
    assert routing_key(_op(OpKind.DELETE, TableRef("a.b", "c#*%"))) == "a%2Eb.c%23%2A%25.delete"
    sql = RowOp(OpKind.SQL, TableRef("", ""), (), (), sql=SqlText("SELECT 1", (), "shop"))
    assert routing_key(sql) == "shop._.sql"


def test_the_frame_body_is_a_tagged_row_operation_that_decodes_to_the_same_op():
    op = _op()
    m = encode(op)
    tag, _, end = decode_frame(m.body)
    assert tag == TypeTag.ROW_OPERATION == 115 and end == len(m.body)
    assert m.content_type == "application/x-gateway-frame"
    assert decode_body(m.body, m.content_type) == op


@pytest.mark.parametrize("op", [
    _op(), _op(OpKind.MOVE, new_key=(8,)), _op(OpKind.DELETE, columns=(), values=()),
    RowOp(OpKind.SQL, TableRef("", ""), (), (), gtid=Gtid(1, 2), statement=1,
          sql=SqlText("UPDATE t SET a = @a", (Variable("a", FT.FIELD_TYPE_BLOB, b"\x01"),),
                      "shop", 5))])
def test_the_json_body_round_trips_every_kind(op):
    m = encode(op, "json")
    assert m.content_type == "application/json"
    assert json.loads(m.body)["kind"] == op.kind.name
    assert decode_body(m.body, m.content_type) == op
    assert decode_body(m.body) == op  # sniffed from the first byte


def test_headers_carry_the_transaction_metadata():
    h = encode(_op()).headers
    assert h["x-gateway-gtid"] == "3:41" and h["x-gateway-log-index"] == 9
    assert h["x-gateway-epoch"] == 2 and h["x-gateway-author"] == 3
    assert h["x-gateway-commit-ts-ns"] == 1_700_000_000_123_456_789
    assert h["x-gateway-statement"] == 2


def test_backfill_rows_are_marked_in_headers_and_bodies_changes_are_not():
    row = _op(OpKind.UPSERT, backfill=120)
    for fmt in ("frame", "json"):
        m = encode(row, fmt)
        assert m.headers["x-gateway-backfill"] == "true"
        assert m.headers["x-gateway-snapshot-index"] == 120
        assert m.headers["x-gateway-log-index"] == 9  # the row's last change
        assert decode_body(m.body, m.content_type).backfill == 120
    change = encode(_op(OpKind.UPSERT))
    assert "x-gateway-backfill" not in change.headers
    assert "x-gateway-snapshot-index" not in change.headers
    assert decode_body(change.body).backfill == 0
    assert change.message_id != encode(row).message_id


def test_message_ids_are_deterministic_and_differ_between_operations():
    assert message_id(_op()) == message_id(_op()) == encode(_op(), "json").message_id
    assert message_id(_op()).startswith("3-41-2-")
    others = {message_id(_op(key=(8,))), message_id(_op(values=("y", b"", Decimal(1), 0))),
              message_id(_op(OpKind.UPSERT)), message_id(_op(statement=3))}
    assert len(others) == 4 and message_id(_op()) not in others


def test_damaged_bodies_are_reported_not_misread():
    body = bytearray(encode(_op()).body)
    body[5] ^= 0xFF
    with pytest.raises(gateway_rabbit.MessageFormatError, match="CRC-32"):
        decode_body(bytes(body))
    with pytest.raises(gateway_rabbit.MessageFormatError, match="not a row operation"):
        decode_body(b'{"kind": "UPDATE"}')


def test_an_unreachable_broker_is_a_transient_error_and_close_is_clean():
    from gateway.appliers.contract import is_transient

    applier = gateway_rabbit.RabbitApplier(parse_options(
        {"url": "amqp://guest:guest@127.0.0.1:1/", "reconnect_timeout": "0.5"}))
    try:
        with pytest.raises(gateway_rabbit.RabbitUnavailableError) as info:
            applier.apply([_op()])
        assert is_transient(info.value) and "guest:guest" not in str(info.value)
    finally:
        applier.close()
    assert not applier._thread.is_alive()


def test_failed_connection_attempts_write_nothing_to_stderr():
    # Each failed attempt used to leave an unclosed aio-pika connection (a "coroutine
    # 'RobustConnection.close' was never awaited" warning when collected) and an aiormq
    # "error when creating transport" line; the applier reports the error itself.
    import subprocess
    import sys

    script = (
        "import gc, gateway_rabbit\n"
        "from gateway.core.rowops import Column, OpKind, RowOp, TableRef\n"
        "a = gateway_rabbit.RabbitApplier(gateway_rabbit.parse_options(\n"
        "    {'url': 'amqp://guest:guest@127.0.0.1:1/', 'reconnect_timeout': '0.5'}))\n"
        "op = RowOp(OpKind.INSERT, TableRef('s', 't'), (Column('id', 3),), (1,))\n"
        "for _ in range(3):\n"
        "    try:\n"
        "        a.apply([op])\n"
        "    except gateway_rabbit.RabbitUnavailableError:\n"
        "        pass\n"
        "    gc.collect()\n"
        "a.close()\n"
        "gc.collect()\n")
    run = subprocess.run([sys.executable, "-W", "default", "-c", script], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0 and run.stderr == "", run.stderr


def test_the_rabbit_applier_is_cluster_scoped():
    # one shared exchange: in a gateway cluster only the leader publishes each change
    assert gateway_rabbit.RABBIT_FACTORY.scope == "cluster"


# --- schema events (issue 57) ----------------------------------------------------------------


def _published(tmp_path, items, state="state"):
    """Run ``items`` through a RabbitApplier whose broker is a list: the messages it
    published, in the order their rounds were confirmed."""
    from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
    from gateway.appliers.source import MemorySource

    sent: list = []
    applier = gateway_rabbit.RABBIT_FACTORY.build({"url": "amqp://h", "format": "json"})

    async def publish(messages):
        sent.extend(messages)

    applier._publish = publish
    try:
        Dispatcher(applier, MemorySource(items), tmp_path / state,
                   config=DispatcherConfig(threads=1, save_interval=0.0)).run()
    finally:
        applier.close()
    return sent


def test_schema_events_are_messages_of_their_own_and_rows_carry_their_tables_version(
        tmp_path):
    from gateway_rabbit import decode_schema_body

    from tests.appliers.schema_log import events, schema_log

    sent = _published(tmp_path, schema_log())
    schema = [m for m in sent if m.routing_key.endswith(".schema")]
    assert [m.routing_key for m in schema] == ["s.items.schema"] * 4
    assert [decode_schema_body(m.body, m.content_type) for m in schema] == events()
    assert [(m.headers["x-gateway-schema-version"], m.headers["x-gateway-schema-change"])
            for m in schema] == [(1, "create"), (2, "add_column"), (3, "rename_column"),
                                 (4, "drop_column")]
    # every row message carries the version its table had when it was published
    version = 0
    for m in sent:
        if m in schema:
            version = m.headers["x-gateway-schema-version"]
        else:
            assert m.headers["x-gateway-schema-version"] == version, m.routing_key
    assert version == 4 and len(sent) > len(schema)


def test_a_restart_carries_on_with_the_versions_as_of_its_position(tmp_path):
    from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
    from gateway.appliers.source import MemorySource
    from tests.appliers.schema_log import schema_log

    items = schema_log()
    sent: list = []
    applier = gateway_rabbit.RABBIT_FACTORY.build({"url": "amqp://h"})

    async def publish(messages):
        sent.extend(messages)

    applier._publish = publish
    try:
        Dispatcher(applier, MemorySource(items), tmp_path, config=DispatcherConfig(
            threads=1, save_interval=0.0)).run(max_index=9)  # up to the rename's rows
        sent.clear()
        restarted = gateway_rabbit.RABBIT_FACTORY.build({"url": "amqp://h"})
        restarted._publish = publish
        Dispatcher(restarted, MemorySource(items), tmp_path, config=DispatcherConfig(
            threads=1, save_interval=0.0)).run()
        restarted.close()
    finally:
        applier.close()
    first = sent[0]
    assert not first.routing_key.endswith(".schema")
    assert first.headers["x-gateway-schema-version"] == 3  # CREATE, ADD and RENAME before


def test_schema_messages_round_trip_in_both_formats_with_a_stable_id():
    from gateway_rabbit import decode_schema_body, encode_schema, schema_json

    from tests.appliers.schema_log import events

    for e in events():
        for fmt in ("frame", "json"):
            m = encode_schema(e, fmt, 5)
            assert decode_schema_body(m.body, m.content_type) == e
            assert m.message_id == encode_schema(e, fmt, 6).message_id
            assert m.message_id.startswith(f"schema-s.items-{e.version}-")
    assert schema_json(events()[1])["column"] == {"name": "c", "type": "INTEGER",
                                                  "default": 0, "nullable": True}
    with pytest.raises(gateway_rabbit.MessageFormatError, match="expected 5"):
        decode_schema_body(encode(_op()).body)


def test_a_row_message_without_a_schema_version_has_no_such_header():
    assert "x-gateway-schema-version" not in encode(_op()).headers
    assert encode(_op(), schema_version=3).headers["x-gateway-schema-version"] == 3
