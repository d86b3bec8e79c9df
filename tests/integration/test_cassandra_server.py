"""Smoke tests: the Cassandra node the fixtures provide works the way the applier plugin needs.

Keyspace and table creation, prepared statements, ``execute_concurrent``, ``USING TIMESTAMP``
ordering, reads back, and a node restart after which the data is still there and the same driver
session works again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from tests.integration.servers import CassandraServer, require_module

require_module("cassandra", "cassandra-driver")

from cassandra.cluster import NoHostAvailable, OperationTimedOut  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402

pytestmark = pytest.mark.integration

T = TypeVar("T")


def retry(action: Callable[[], T], timeout: float = 120.0) -> T:
    """Run ``action`` until the driver stops reporting the node unavailable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except (NoHostAvailable, OperationTimedOut):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


@pytest.fixture
def session(cassandra_server: CassandraServer) -> Iterator[Any]:
    cluster = cassandra_server.cluster()
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


@pytest.fixture
def keyspace(session: Any) -> Iterator[str]:
    name = f"gw_smoke_{uuid.uuid4().hex[:10]}"
    session.execute(
        f"CREATE KEYSPACE {name} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    yield name
    retry(lambda: session.execute(f"DROP KEYSPACE IF EXISTS {name}"))


def create_orders(session: Any, keyspace: str) -> None:
    session.execute(
        f"CREATE TABLE {keyspace}.orders (customer int, id int, item text, qty int, "
        "PRIMARY KEY ((customer), id))"
    )


def test_node_answers_cql(cassandra_server: CassandraServer) -> None:
    version = cassandra_server.release_version()
    assert version is not None
    if cassandra_server.kind == "local":
        assert version.startswith("5.0."), version


def test_prepared_insert_and_select(session: Any, keyspace: str) -> None:
    create_orders(session, keyspace)
    insert = session.prepare(
        f"INSERT INTO {keyspace}.orders (customer, id, item, qty) VALUES (?, ?, ?, ?) "
        "USING TIMESTAMP ?"
    )
    rows = [(c, i, f"item-{c}-{i}", c * 100 + i, 1_000 + i) for c in range(5) for i in range(20)]
    results = execute_concurrent_with_args(session, insert, rows, concurrency=16)
    assert all(ok for ok, _ in results)

    select = session.prepare(f"SELECT id, item, qty FROM {keyspace}.orders WHERE customer = ?")
    for customer in range(5):
        got = [(r.id, r.item, r.qty) for r in session.execute(select, (customer,))]
        assert got == [(i, f"item-{customer}-{i}", customer * 100 + i) for i in range(20)]

    # A write with an older timestamp loses, whatever order the writes arrive in.
    session.execute(insert, (0, 0, "stale", -1, 500))
    session.execute(insert, (0, 0, "newer", 1, 2_000))
    session.execute(insert, (0, 0, "older", 2, 1_500))
    assert session.execute(select, (0,)).one().item == "newer"
    delete = session.prepare(
        f"DELETE FROM {keyspace}.orders USING TIMESTAMP ? WHERE customer = ? AND id = ?"
    )
    session.execute(delete, (2_500, 0, 0))
    session.execute(insert, (0, 0, "before-the-delete", 3, 2_400))
    assert [r.id for r in session.execute(select, (0,))] == list(range(1, 20))


def test_node_restart_keeps_data(
    restartable_cassandra: CassandraServer, session: Any, keyspace: str
) -> None:
    server = restartable_cassandra
    create_orders(session, keyspace)
    insert = session.prepare(
        f"INSERT INTO {keyspace}.orders (customer, id, item, qty) VALUES (?, ?, ?, ?)"
    )
    execute_concurrent_with_args(
        session,
        insert,
        [(7, i, f"before-{i}", i) for i in range(50)],
        concurrency=16,
        raise_on_first_error=True,
    )

    server.restart()

    # The same driver session reconnects by itself and the rows written before are there.
    count = retry(
        lambda: session.execute(f"SELECT count(*) FROM {keyspace}.orders WHERE customer = 7").one()
    )
    assert count[0] == 50
    retry(lambda: session.execute(insert, (7, 50, "after", 50)))
    items = [
        r.item for r in session.execute(f"SELECT item FROM {keyspace}.orders WHERE customer = 7")
    ]
    assert items == [f"before-{i}" for i in range(50)] + ["after"]
