"""Fixtures for tests against real RabbitMQ and Cassandra servers.

Where the servers come from, in this order:

1. ``GATEWAY_TEST_RABBITMQ_URL`` (``amqp://user:pass@host:port/``) and ``GATEWAY_TEST_CASSANDRA``
   (``host:port``) point at servers that are already running (they cannot be restarted, so tests
   that restart a server skip);
2. otherwise the launchers in ``deploy/local/`` install and start local servers on loopback (free
   ports, data under pytest's temporary directory) and stop them at the end of the session --
   also where Docker runs: no image registry is assumed reachable;
3. with ``GATEWAY_TEST_SERVERS=testcontainers``, containers of the public images
   (``RabbitMqContainer`` / ``CassandraContainer``; a Docker engine and testcontainers needed).

A server that cannot be started fails the tests that need it, with the launcher's output; it
never skips them.

The fixtures themselves (``rabbitmq_server``, ``cassandra_server``, ``rabbitmq_url``,
``cassandra_contact``, ``restartable_*``) are in ``tests/conftest.py`` so that all test
directories share one server per session. After a restart read the endpoint from the handle
again: a container may come back on another host port.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


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
