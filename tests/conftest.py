"""Session-wide fixtures shared across test directories.

The real-server fixtures live here (not in ``tests/integration/conftest.py``) so that every
directory that needs RabbitMQ or Cassandra (``tests/integration``, ``tests/spark``) shares ONE
server per session instead of starting its own. Where the servers come from is described in
``tests/integration/conftest.py``.

Fixtures (session scope): ``rabbitmq_server`` / ``cassandra_server`` (handles with ``url`` /
``contact``, ``stop()``, ``start()``, ``restart()``) and the plain ``rabbitmq_url`` and
``cassandra_contact`` (``(host, port)``); per test: ``restartable_rabbitmq`` and
``restartable_cassandra``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from tests.integration.servers import (
    CassandraServer,
    RabbitMQServer,
    ServerError,
    start_cassandra,
    start_rabbitmq,
)

S = TypeVar("S")

#: The checkout under test. Node processes the tests start (``python -m gateway.cli`` in a
#: temporary directory) must import this checkout's ``gateway``, not whichever copy pip
#: installed in editable mode (another worktree's, or an older clone's).
CHECKOUT = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(CHECKOUT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


def _started(start: Callable[[Path], S], name: str, data_dir: Path) -> S:
    """Start a server; a failure fails the test (with the launcher's output), never skips it."""
    error: ServerError | None = None
    try:
        return start(data_dir)
    except ServerError as exc:
        error = exc
    pytest.fail(f"{name} could not be started: {error}", pytrace=False)


@pytest.fixture(scope="session")
def rabbitmq_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMQServer]:
    server = _started(start_rabbitmq, "RabbitMQ", tmp_path_factory.mktemp("rabbitmq"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def rabbitmq_url(rabbitmq_server: RabbitMQServer) -> str:
    return rabbitmq_server.url


@pytest.fixture(scope="session")
def cassandra_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraServer]:
    server = _started(start_cassandra, "Cassandra", tmp_path_factory.mktemp("cassandra"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def cassandra_contact(cassandra_server: CassandraServer) -> tuple[str, int]:
    return cassandra_server.contact


@pytest.fixture
def restartable_rabbitmq(rabbitmq_server: RabbitMQServer) -> Iterator[RabbitMQServer]:
    """The broker, for tests that stop it; skips only for a server named by the environment.

    Afterwards it is brought back up if the test left it down, so later tests still have it.
    """
    if not rabbitmq_server.restartable:
        pytest.skip("GATEWAY_TEST_RABBITMQ_URL names a server the tests cannot restart")
    yield rabbitmq_server
    if not rabbitmq_server.answers():
        rabbitmq_server.start()


@pytest.fixture
def restartable_cassandra(cassandra_server: CassandraServer) -> Iterator[CassandraServer]:
    """The node, for tests that stop it; skips only for a server named by the environment.

    Afterwards it is brought back up if the test left it down, so later tests still have it.
    """
    if not cassandra_server.restartable:
        pytest.skip("GATEWAY_TEST_CASSANDRA names a server the tests cannot restart")
    yield cassandra_server
    if not cassandra_server.answers():
        cassandra_server.start()
