"""Fixtures for tests against real RabbitMQ and Cassandra servers.

Where the servers come from, in this order:

1. ``GATEWAY_TEST_RABBITMQ_URL`` (``amqp://user:pass@host:port/``) and ``GATEWAY_TEST_CASSANDRA``
   (``host:port``) point at servers that are already running (they cannot be restarted, so tests
   that restart a server skip);
2. where a Docker engine answers ``docker info`` and testcontainers is installed, containers
   (``RabbitMqContainer`` / ``CassandraContainer``);
3. otherwise the launchers in ``deploy/local/`` install and start local servers on loopback (free
   ports, data under pytest's temporary directory) and stop them at the end of the session.

``GATEWAY_TEST_SERVERS=local`` or ``=testcontainers`` forces 3 or 2. A server that cannot be
started fails the tests that need it, with the launcher's output; it never skips them.

Fixtures (session scope): ``rabbitmq_server`` / ``cassandra_server`` (handles with ``url`` /
``contact``, ``stop()``, ``start()``, ``restart()``) and the plain ``rabbitmq_url`` and
``cassandra_contact`` (``(host, port)``). After a restart read the endpoint from the handle again:
a container may come back on another host port.
"""

from __future__ import annotations

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

HERE = Path(__file__).resolve().parent
S = TypeVar("S")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "integration: needs real external servers (RabbitMQ, Cassandra); see "
        "tests/integration/conftest.py",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


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
