"""The cassandra plugin without a node: listing, options, CQL text, timestamps, errors."""

from __future__ import annotations

import json
import uuid

import gateway_cassandra
import pytest
from cassandra import InvalidRequest, WriteTimeout
from cassandra.cluster import NoHostAvailable
from click.testing import CliRunner
from gateway_cassandra import (
    CassandraUnavailableError,
    CqlRejectedError,
    RowClock,
    TableMapping,
    classify,
    parse_options,
    write_timestamp,
)
from gateway_cassandra import schema as cql

from gateway.appliers.contract import ApplierConfigError, UnsupportedOperationError, is_transient
from gateway.cli import main
from gateway.core.rowops import Column, Gtid, OpKind, RowOp, TableRef
from gateway.v1 import value_pb2

FT = value_pb2.FieldType
REF = TableRef("shop", "orders")
KEY = (Column("region", FT.FIELD_TYPE_VARCHAR), Column("id", FT.FIELD_TYPE_INTEGER))


def _op(log_index=5, statement=1, key=("eu", 1), kind=OpKind.UPDATE) -> RowOp:
    return RowOp(kind, REF, KEY, key, (Column("v", FT.FIELD_TYPE_VARCHAR),), ("x",),
                 Gtid(1, log_index), log_index, statement=statement)


def test_the_installed_plugin_is_listed_with_its_applier():
    result = CliRunner().invoke(main, ["plugins", "--format", "json"])
    assert result.exit_code == 0, result.output
    (row,) = [r for r in json.loads(result.output) if r["name"] == "cassandra"]
    assert row["distribution"] == "gateway-cassandra" and row["loaded"]
    assert row["hooks"] == ["gateway_register_appliers"]


def test_options_are_parsed_and_checked_with_one_line_errors():
    s = parse_options({"contact": "10.0.0.1:9142,10.0.0.2:9142", "consistency": "one",
                       "clustering": "shop.orders=id; shop.lines=a,b", "create": "false"})
    assert s.hosts == ("10.0.0.1", "10.0.0.2") and s.port == 9142
    assert s.consistency == "ONE" and not s.create
    assert s.clustering == {"shop.orders": ("id",), "shop.lines": ("a", "b")}
    assert parse_options({"contact": "h", "port": "9000"}).port == 9000
    assert parse_options({}).hosts == ("127.0.0.1",)  # a local server
    assert parse_options({}).port == 9042
    for bad, match in [({"contact": ","}, "'contact' names no host"),
                       ({"contact": "a:1,b:2"}, "different ports"),
                       ({"contact": "h", "consistency": "MOST"}, "unknown consistency"),
                       ({"contact": "h", "clustering": "orders=id"}, "schema.table=col1"),
                       ({"contact": "h", "concurrency": "0"}, ">= 1"),
                       ({"contact": "h", "request_timeout": "soon"}, "not a number")]:
        with pytest.raises(ApplierConfigError, match=match):
            parse_options(bad)


def test_tables_map_to_keyspace_and_table_with_partition_and_clustering_keys():
    cols = (Column("v", FT.FIELD_TYPE_VARCHAR), Column("n", FT.FIELD_TYPE_UNSIGNED),
            Column("u", FT.FIELD_TYPE_UUID), Column("t", FT.FIELD_TYPE_TIMESTAMP))
    plain = TableMapping.of(REF, "gateway", {})
    assert cql.create_table(plain, REF, KEY, cols) == (
        'CREATE TABLE IF NOT EXISTS "shop"."orders" ("region" text, "id" bigint, "v" text, '
        '"n" varint, "u" uuid, "t" bigint, PRIMARY KEY (("region", "id")))')
    clustered = TableMapping.of(REF, "gateway", {"shop.orders": ("id",)})
    assert cql.create_table(clustered, REF, KEY, ()).endswith(
        'PRIMARY KEY (("region"), "id"))')
    assert TableMapping.of(TableRef("", "t"), "dflt", {}).keyspace == "dflt"


def test_names_cassandra_cannot_hold_are_unsupported_not_renamed():
    with pytest.raises(UnsupportedOperationError, match="not a Cassandra name"):
        TableMapping.of(TableRef("my-shop", "orders"), "gateway", {})
    everything = TableMapping.of(REF, "gateway", {"shop.orders": ("region", "id")})
    with pytest.raises(UnsupportedOperationError, match="none is left for the partition key"):
        cql.create_table(everything, REF, KEY, ())


def test_every_write_statement_binds_a_timestamp():
    m = TableMapping.of(REF, "gateway", {})
    assert cql.insert_row(m, ["region", "v"]) == (
        'INSERT INTO "shop"."orders" ("region", "v") VALUES (?, ?) USING TIMESTAMP ?')
    assert cql.update_row(m, ["region"], ["v"]) == (
        'UPDATE "shop"."orders" USING TIMESTAMP ? SET "v" = ? WHERE "region" = ?')
    assert cql.delete_row(m, ["region", "id"]) == (
        'DELETE FROM "shop"."orders" USING TIMESTAMP ? WHERE "region" = ? AND "id" = ?')
    assert "USING TIMESTAMP ?" in cql.status_insert("gw")
    assert cql.quote('we"ird') == '"we""ird"'


def test_uuid_values_bind_as_uuids():
    u = uuid.uuid4()
    assert cql.cql_value(Column("u", FT.FIELD_TYPE_UUID), u.bytes) == u
    assert cql.cql_value(Column("b", FT.FIELD_TYPE_BLOB), b"\x01") == b"\x01"
    with pytest.raises(UnsupportedOperationError, match="16"):
        cql.cql_value(Column("u", FT.FIELD_TYPE_UUID), b"\x01")


def test_later_log_positions_always_get_larger_timestamps():
    order = [(1, 1, 0, 0), (1, 1, 0, 1), (1, 1, 1, 0), (1, 2, 0, 1), (1, 70000, 0, 1),
             (2, 0, 0, 0), (2**30, 1, 0, 1), (gateway_cassandra.MAX_LOG_INDEX, 1, 255, 1)]
    stamps = [write_timestamp(*args) for args in order]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert stamps[-1] < 2**63
    assert write_timestamp(3, 2) == ((3 << 16 | 2) << 8) << 1 | 1
    with pytest.raises(ValueError, match="outside"):
        write_timestamp(gateway_cassandra.MAX_LOG_INDEX + 1, 1)


def test_the_row_clock_counts_writes_of_one_statement_to_one_row():
    clock = RowClock()
    a, b, c = _op(statement=1), _op(statement=1, kind=OpKind.DELETE), _op(statement=2)
    assert clock.sub(a.row_id, a) == 0
    assert clock.sub(a.row_id, a) == 0  # a retry of the same operation keeps its sub
    assert clock.sub(b.row_id, b) == 1  # a second write from the same statement comes after
    assert clock.sub(c.row_id, c) == 0  # a new statement starts over
    assert clock.sub(("other", 1), a) == 0


def test_the_row_clock_forgets_the_least_recently_written_rows():
    clock = RowClock(capacity=2)
    for n in range(5):
        clock.sub(("row", n), _op())
    assert len(clock._rows) == 2


def test_driver_errors_are_classified_transient_or_rejected_with_the_cql():
    unavailable = classify(NoHostAvailable("down", {}), "SELECT 1")
    assert isinstance(unavailable, CassandraUnavailableError) and is_transient(unavailable)
    timeout = classify(WriteTimeout("slow", write_type=0))
    assert isinstance(timeout, CassandraUnavailableError)
    rejected = classify(InvalidRequest("Undefined column name x"), 'INSERT INTO "s"."t"')
    assert isinstance(rejected, CqlRejectedError) and not is_transient(rejected)
    assert str(rejected) == ('InvalidRequest: Undefined column name x '
                             '[CQL: INSERT INTO "s"."t"]')


def test_an_unreachable_cluster_is_a_transient_error(tmp_path):
    applier = gateway_cassandra.CassandraApplier(parse_options(
        {"contact": "127.0.0.1:1", "reconnect_timeout": "0.2"}))
    try:
        with pytest.raises(CassandraUnavailableError, match="NoHostAvailable"):
            applier.apply([_op()])
    finally:
        applier.close()


def test_the_cassandra_applier_is_cluster_scoped():
    # one shared keyspace: in a gateway cluster only the leader writes each row
    assert gateway_cassandra.CASSANDRA_FACTORY.scope == "cluster"


def test_an_exceptions_table_maps_to_a_cassandra_name():
    m = TableMapping.of(TableRef("shop", "orders$EX"), "gateway", {})
    assert (m.keyspace, m.table) == ("shop", "orders__ex")


def test_loading_the_plugin_leaves_the_driver_unloaded():
    # ``gateway run`` loads every installed plugin: a node without a cassandra applier must not
    # hold the driver (and numpy) in memory. This checkout's package, in a fresh interpreter.
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parents[1]
    code = ("import sys, gateway_cassandra as g; g.gateway_register_appliers(); "
            "assert 'cassandra' not in sys.modules, 'driver imported'; "
            "assert g.CassandraApplier.__name__ == 'CassandraApplier'; "
            "assert 'cassandra' in sys.modules")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(here), *filter(None, [os.environ.get("PYTHONPATH", "")])])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
