"""Schema events through the ``cassandra`` applier against a real Cassandra node (issue 57):
CREATE from the definition, ALTER TABLE ADD and DROP, RENAME of a key column, DROP TABLE --
and what CQL cannot do (a default, a rename of a regular column) reported in one line each
and passed by under ``schema_policy = apply``, or stopping the applier under ``stop``.

One module, slow (a Cassandra node): run it on its own.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.appliers import Dispatcher, DispatcherConfig, MemorySource, RetryPolicy
from gateway.appliers.dispatcher import DispatcherError
from gateway.schema.apply import apply_event, plan_create, plan_drop_table, plan_rename_column
from gateway.schema.model import Column
from tests.appliers.schema_log import events, schema_log
from tests.integration.servers import CassandraServer, require_module

require_module("cassandra", "cassandra-driver")
require_module("gateway_cassandra", "-e plugins/gateway-cassandra")

from gateway_cassandra import CassandraApplier, parse_options  # noqa: E402

pytestmark = pytest.mark.integration

PATIENT = RetryPolicy(max_attempts=60, initial_backoff=0.1, max_backoff=2.0)


@pytest.fixture(scope="module")
def session(cassandra_server: CassandraServer) -> Iterator[Any]:
    cluster = cassandra_server.cluster()
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


@pytest.fixture
def keyspace() -> str:
    return f"t{uuid.uuid4().hex[:8]}_s"


def _applier(contact: tuple[str, int], keyspace: str, **options: str) -> CassandraApplier:
    host, port = contact
    return CassandraApplier(parse_options({
        "contact": f"{host}:{port}", "status_keyspace": f"{keyspace}_status", **options}))


def _columns(session: Any, keyspace: str, table: str) -> dict[str, str] | None:
    session.cluster.refresh_schema_metadata(max_schema_agreement_wait=20)
    ks = session.cluster.metadata.keyspaces.get(keyspace)
    if ks is None or table not in ks.tables:
        return None
    return {n: c.cql_type for n, c in ks.tables[table].columns.items()}


def _rows(session: Any, keyspace: str) -> list[dict[str, Any]]:
    rows = [r._asdict() for r in session.execute(f'SELECT * FROM "{keyspace}"."items"')]
    return sorted(rows, key=lambda r: r["id"])


def test_a_log_spanning_schema_changes_alters_the_table_and_reports_what_cql_cannot_do(
        cassandra_contact, session, keyspace, tmp_path, caplog):
    applier = _applier(cassandra_contact, keyspace)
    log = schema_log(keyspace)
    try:
        with caplog.at_level(logging.WARNING):
            d = Dispatcher(applier, MemorySource(log), tmp_path,
                           config=DispatcherConfig(threads=4, retry=PATIENT))
            d.run()
            # a replay of the whole log (a crash before the position was saved) is a no-op
            Dispatcher(applier, MemorySource(log), tmp_path / "again",
                       config=DispatcherConfig(threads=4, retry=PATIENT)).run()
    finally:
        applier.close()
    assert d.metrics.dead_letters == 0
    # ADD c and DROP b made; the rename of the regular column a is not (CQL cannot): rows
    # naming qty made that column, and the one line says so
    assert _columns(session, keyspace, "items") == {"id": "bigint", "a": "bigint",
                                                    "c": "bigint", "qty": "bigint"}
    lines = [r.getMessage() for r in caplog.records]
    renames = [m for m in lines if "CQL renames only primary-key columns" in m]
    defaults = [m for m in lines if "CQL has no column defaults" in m]
    assert len(renames) == 2 and "\n" not in renames[0]  # once per run
    assert renames[0].startswith(f"applier cassandra: schema change at log index 8, table "
                                 f"{keyspace}.items version 3 (rename_column a -> qty): not "
                                 f"applied: ")
    assert len(defaults) == 1  # the replayed ADD found the column: nothing to say
    assert d.metrics.snapshot()["schema_unsupported"] == 1
    assert _rows(session, keyspace) == [
        {"id": 1, "a": 10, "c": 9, "qty": None},
        {"id": 2, "a": 21, "c": None, "qty": 22},
        {"id": 4, "a": 40, "c": None, "qty": 41},
        {"id": 5, "a": 50, "c": 7, "qty": None},
        {"id": 6, "a": None, "c": 6, "qty": 60},
        {"id": 7, "a": 70, "c": None, "qty": None},
        {"id": 8, "a": None, "c": 8, "qty": 80},
        {"id": 9, "a": None, "c": 9, "qty": 90},  # its b is left out: never re-added
    ]


def test_create_from_a_definition_a_key_rename_and_drop_table(cassandra_contact, session,
                                                              keyspace, tmp_path):
    table = f"{keyspace}.ev"
    create = plan_create(None, table, [Column("region", "VARCHAR"), Column("seq", "INTEGER"),
                                       Column("v", "DOUBLE")], ["region", "seq"])
    rename = plan_rename_column(create.definition, table, "seq", "n")
    drop = plan_drop_table(apply_event(create.definition, rename), table)
    applier = _applier(cassandra_contact, keyspace,
                       clustering=f"{table}=seq")
    try:
        applier.apply_schema(create)
        assert _columns(session, keyspace, "ev") == {"region": "text", "seq": "bigint",
                                                     "v": "double"}
        meta = session.cluster.metadata.keyspaces[keyspace].tables["ev"]
        assert [c.name for c in meta.partition_key] == ["region"]
        assert [c.name for c in meta.clustering_key] == ["seq"]
        applier.apply_schema(rename)  # a primary-key column: CQL renames it
        applier.apply_schema(rename)  # replayed: a no-op
        assert set(_columns(session, keyspace, "ev") or ()) == {"region", "n", "v"}
        applier.apply_schema(drop)
        applier.apply_schema(drop)
        assert _columns(session, keyspace, "ev") is None
    finally:
        applier.close()


def test_policy_stop_halts_the_cassandra_applier_before_the_change(cassandra_contact, session,
                                                                   keyspace, tmp_path):
    applier = _applier(cassandra_contact, keyspace)
    applier.schema_policy = "stop"
    log = schema_log(keyspace)
    try:
        d = Dispatcher(applier, MemorySource(log), tmp_path,
                       config=DispatcherConfig(threads=2, retry=PATIENT))
        with pytest.raises(DispatcherError, match=f"table {keyspace}.items version 1 "
                                                  r"\(create\): stopped by schema_policy"):
            d.run()
    finally:
        applier.close()
    assert d.positions.load().log_index == 0
    assert _columns(session, keyspace, "items") is None
    assert events(keyspace)[0].kind == "create"
