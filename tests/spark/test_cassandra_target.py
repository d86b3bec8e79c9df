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
