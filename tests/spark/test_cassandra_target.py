"""The Cassandra target against a real Cassandra 5.0 (the fixtures of tests/integration).

Marked ``integration``: it needs the server the fixtures start (or name with
``GATEWAY_TEST_CASSANDRA``); see tests/integration/conftest.py.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gateway.appliers.sqlite import unsigned_blob
from spark_applier.bulk import apply_log
from tests.spark.workload import in_schema, random_log, reference_state, write_log_file

pytest.importorskip("cassandra", reason="cassandra-driver is not installed")

pytestmark = pytest.mark.integration


def _normal(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, Decimal):
        return float(v)  # Cassandra keeps the value, not its text ("0" comes back as 0.0)
    if isinstance(v, int) and v > 2**63 - 1:
        # the SQLite applier keeps an unsigned value past 2**63 - 1 exactly, as its 8-byte
        # big-endian BLOB (docs/appliers.md); Cassandra's varint keeps it exactly too
        return unsigned_blob(v)
    return v


def test_cassandra_target_equals_the_sequential_apply(spark, cassandra_contact,
                                                      tmp_path: Path) -> None:
    from cassandra.cluster import Cluster

    from spark_applier.cassandra import CassandraTarget

    txns = random_log(44, 120, moves=True)
    keyspace = f"gw_spark_{uuid.uuid4().hex[:8]}"
    in_schema(txns, keyspace)  # the shared mapping: schema -> keyspace, table -> table
    log = write_log_file(tmp_path / "log.bin", txns)
    want = reference_state(log, tmp_path / "ref.db")
    target = CassandraTarget(cassandra_contact, keyspace)
    state = str(tmp_path / "state")
    apply_log(spark, str(log), target, state, index_to=50)
    report = apply_log(spark, str(log), target, state)
    assert report.end.log_index == len(txns) and report.problems == 0
    cluster = Cluster([cassandra_contact[0]], port=cassandra_contact[1])
    try:
        session = cluster.connect()
        for table, rows in want.items():
            got = [{k: _normal(v) for k, v in r._asdict().items() if v is not None}
                   for r in session.execute(f'SELECT * FROM {keyspace}."{table}"')]
            want_rows = [{k: float(v) if k == "price" else v for k, v in r.items()}
                         for r in rows]
            assert sorted(got, key=repr) == sorted(want_rows, key=repr), table
        session.execute(f"DROP KEYSPACE {keyspace}")
    finally:
        cluster.shutdown()


def test_schema_events_make_the_tables_the_streaming_plugin_makes(spark, cassandra_contact,
                                                                 tmp_path: Path) -> None:
    """The log of tests/appliers/schema_log.py (CREATE, ADD COLUMN with a default, RENAME
    of a regular column, DROP COLUMN, with rows written under older versions after each)
    through the Spark target and through the ``gateway-cassandra`` plugin, each into its own
    keyspace: the same columns, types and rows (one mapping: plugins/gateway-cassandra,
    "Schema events") -- the dropped column gone though late rows still name it, the
    rename a new column (CQL renames only key columns). Each path stops right after the
    DROP COLUMN and a new target or applier goes on: the rows after it still naming the
    dropped column must not add it back (Cassandra's record of the drop, not the memory
    of the process that made it)."""
    from cassandra.cluster import Cluster

    from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
    from gateway.appliers.source import LogFileSource
    from spark_applier.cassandra import CassandraTarget
    from tests.appliers.schema_log import schema_log, write_log

    gateway_cassandra = pytest.importorskip("gateway_cassandra")
    tag = uuid.uuid4().hex[:8]
    by_spark, by_plugin = f"gw_sch_spark_{tag}", f"gw_sch_plugin_{tag}"
    spark_log, plugin_log = tmp_path / "spark.bin", tmp_path / "plugin.bin"
    items = schema_log(by_plugin)
    drop_at = next(i for i, item in enumerate(items, 1)
                   if getattr(item, "kind", "") == "drop_column")
    write_log(spark_log, schema_log(by_spark))
    write_log(tmp_path / "plugin-first.bin", items[:drop_at])
    write_log(plugin_log, items)

    for index_to in (drop_at, None):  # a new target for each run
        report = apply_log(spark, str(spark_log), CassandraTarget(cassandra_contact, by_spark),
                           str(tmp_path / "state"), index_to=index_to)
        assert report.problems == 0
    for log in (tmp_path / "plugin-first.bin", plugin_log):  # a new applier for each
        applier = gateway_cassandra.CassandraApplier(gateway_cassandra.parse_options({
            "contact": f"{cassandra_contact[0]}:{cassandra_contact[1]}", "consistency": "ONE",
            "status_keyspace": f"{by_plugin}_status", "default_keyspace": by_plugin}))
        try:
            dispatcher = Dispatcher(applier, LogFileSource(log), tmp_path / "stream",
                                    config=DispatcherConfig(threads=2, save_interval=0.0))
            dispatcher.run()
        finally:
            applier.close()
        assert dispatcher.metrics.dead_letters == 0

    cluster = Cluster([cassandra_contact[0]], port=cassandra_contact[1])
    try:
        session = cluster.connect()

        def table(keyspace: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
            cols = {r.column_name: r.type for r in session.execute(
                "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = %s "
                "AND table_name = 'items'", (keyspace,))}
            rows = [{k: v for k, v in r._asdict().items() if v is not None}
                    for r in session.execute(f'SELECT * FROM "{keyspace}"."items"')]
            return cols, sorted(rows, key=lambda r: r["id"])

        spark_cols, spark_rows = table(by_spark)
        assert spark_cols == {"id": "bigint", "a": "bigint", "c": "bigint", "qty": "bigint"}
        assert (spark_cols, spark_rows) == table(by_plugin)
        assert [r["id"] for r in spark_rows] == [1, 2, 4, 5, 6, 7, 8, 9]
        assert spark_rows[2] == {"id": 4, "a": 40, "qty": 41}  # no c: CQL has no defaults
        for keyspace in (by_spark, by_plugin, f"{by_plugin}_status"):
            session.execute(f'DROP KEYSPACE IF EXISTS "{keyspace}"')
    finally:
        cluster.shutdown()
