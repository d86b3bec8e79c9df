"""A Spark backfill then the streaming plugin, into one Cassandra: the same tables, one clock.

Against a real Cassandra (the fixtures of tests/integration; marked ``integration``). The Spark
bulk apply writes a log up to an index; the ``gateway-cassandra`` applier then streams the same
log from an earlier index (re-applying entries Spark already wrote, then newer ones): the tables
must equal the sequential reference, with no second copy of any table, and stale replays from
either path must change nothing (both derive ``USING TIMESTAMP`` from the log position through
``gateway.appliers.cassandra_mapping``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway import ApplyError
from gateway.appliers import Dispatcher, DispatcherConfig, MemorySource, RetryPolicy
from gateway.v1 import transaction_pb2
from spark_applier.bulk import apply_log
from tests.spark.test_cassandra_target import _normal
from tests.spark.workload import in_schema, random_log, reference_state, write_log_file

pytest.importorskip("cassandra", reason="cassandra-driver is not installed")
gateway_cassandra = pytest.importorskip("gateway_cassandra",
                                        reason="pip install -e plugins/gateway-cassandra")

pytestmark = pytest.mark.integration

PATIENT = RetryPolicy(max_attempts=60, initial_backoff=0.1, max_backoff=2.0)
TABLES = ("orders", "tags")


@pytest.fixture
def session(cassandra_contact: tuple[str, int]) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    cluster = Cluster([cassandra_contact[0]], port=cassandra_contact[1])
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def _boundary(txns: list[transaction_pb2.Transaction], near: int) -> int:
    """The first index >= ``near`` that no multi-segment transaction spans (a stream can
    start there without a transaction's first segments behind it)."""
    spans: dict[tuple[int, int], list[int]] = {}
    for i, t in enumerate(txns, 1):
        spans.setdefault((t.gtid.server_id, t.gtid.trans_id), []).append(i)
    inside = {i for idx in spans.values() for i in range(min(idx) + 1, max(idx) + 1)}
    return next(i for i in range(near, len(txns)) if i not in inside)


def _stream(txns: list, start: int, state: Path, namespace: str,
            contact: tuple[str, int]) -> Dispatcher:
    """The plugin's applier through the dispatcher, from log index ``start``."""
    applier = gateway_cassandra.CassandraApplier(gateway_cassandra.parse_options({
        "contact": f"{contact[0]}:{contact[1]}", "status_keyspace": f"{namespace}status",
        "default_keyspace": f"{namespace}dflt", "consistency": "ONE"}))
    try:
        source = MemorySource([None] * (start - 1) + txns[start - 1:])
        dispatcher = Dispatcher(applier, source, state,
                                config=DispatcherConfig(threads=4, retry=PATIENT))
        dispatcher.run()
    finally:
        applier.close()
    assert dispatcher.metrics.dead_letters == 0
    return dispatcher


def _rows(session: Any, keyspace: str) -> dict[str, list[dict[str, Any]]]:
    return {t: sorted(({k: _normal(v) for k, v in r._asdict().items() if v is not None}
                       for r in session.execute(f'SELECT * FROM "{keyspace}"."{t}"')), key=repr)
            for t in TABLES}


def _want(reference: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {t: sorted(({k: float(v) if k == "price" else v for k, v in r.items()}
                       for r in reference.get(t, [])), key=repr) for t in TABLES}


def _tables(session: Any, namespace: str) -> set[tuple[str, str]]:
    return {(r.keyspace_name, r.table_name)
            for r in session.execute("SELECT keyspace_name, table_name FROM system_schema.tables")
            if r.keyspace_name.startswith(namespace)}


def test_a_spark_backfill_then_streaming_from_an_overlap_converges_and_stale_replays_lose(
        spark, cassandra_contact, session, tmp_path: Path) -> None:
    from spark_applier.cassandra import CassandraTarget

    namespace = f"t{uuid.uuid4().hex[:8]}_"
    keyspace = f"{namespace}shop"
    txns = random_log(56, 160, moves=True)
    in_schema(txns, keyspace)
    log = write_log_file(tmp_path / "log.bin", txns)
    want = _want(reference_state(log, tmp_path / "ref.db"))
    target = CassandraTarget(cassandra_contact, f"{namespace}dflt")

    report = apply_log(spark, str(log), target, str(tmp_path / "spark"), index_to=110)
    assert report.problems == 0 and report.end.log_index > 60
    start = _boundary(txns, 50)  # streaming re-applies [start, Spark's end], then goes on
    assert start < report.end.log_index
    _stream(txns, start, tmp_path / "stream", namespace, cassandra_contact)
    assert _rows(session, keyspace) == want
    assert _tables(session, namespace) == {(keyspace, "orders"), (keyspace, "tags"),
                                           (f"{namespace}status", "gateway_apply_status")}

    # stale replays from either path: older changes, timestamps below what the rows hold
    _stream(txns[:80], 1, tmp_path / "stale-stream", namespace, cassandra_contact)
    assert _rows(session, keyspace) == want
    stale = apply_log(spark, str(log), target, str(tmp_path / "stale-spark"), index_to=70)
    assert stale.problems == 0
    assert _rows(session, keyspace) == want

    # and Spark backfilling the whole log over the streamed tables changes nothing either
    apply_log(spark, str(log), target, str(tmp_path / "full-spark"))
    assert _rows(session, keyspace) == want
    assert len(_tables(session, namespace)) == 3


def test_a_keyspace_with_tables_of_the_old_spark_mapping_is_refused_in_one_line(
        spark, cassandra_contact, session, tmp_path: Path) -> None:
    from spark_applier.cassandra import CassandraTarget

    namespace = f"t{uuid.uuid4().hex[:8]}_"
    old = f"{namespace}old"
    txns = random_log(5, 20)
    in_schema(txns, f"{namespace}shop")
    log = write_log_file(tmp_path / "log.bin", txns)
    session.execute(f"CREATE KEYSPACE \"{old}\" WITH replication = "
                    f"{{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f'CREATE TABLE "{old}"."{namespace}shop_orders" (id bigint PRIMARY KEY)')
    with pytest.raises(ApplyError) as err:
        apply_log(spark, str(log), CassandraTarget(cassandra_contact, old),
                  str(tmp_path / "state"))
    text = str(err.value)
    assert "\n" not in text and "old Spark mapping" in text
    assert f"{old}.{namespace}shop_orders" in text and "docs/spark.md" in text
    assert (f"{namespace}shop", "orders") not in _tables(session, namespace)
