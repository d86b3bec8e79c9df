"""The pytest plugin (``pytest11`` entry point ``gateway``): ``gateway`` and
``gateway_cluster`` fixtures.

``gateway`` is a started single-node gateway -- a container when a Docker engine runs and the
image exists, else a local ``gateway run`` process (``GATEWAY_TEST_BACKEND`` = ``auto``,
``docker`` or ``local``) -- stopped and removed after the test, also when it fails. Mark a test
``@pytest.mark.gateway(plugins=[...], options={...}, env={...})`` to configure it.

``gateway_cluster`` is a started 3-node cluster on the same backends (``GatewayCluster``:
containers on a private Docker network; ``LocalGatewayCluster``: processes behind loopback
proxies), with ``leader()``, ``kill(n)``, ``restart(n)``, ``partition(n)``, ``heal()``,
configured by ``@pytest.mark.gateway_cluster(size=..., plugins=..., options=..., env=...)``;
removed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from . import cluster_for_tests, gateway_for_tests

if TYPE_CHECKING:
    from .cluster import GatewayCluster
    from .container import GatewayContainer
    from .local import LocalGateway
    from .local_cluster import LocalGatewayCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gateway(plugins, options, env): configure the "
                                       "gateway fixture")
    config.addinivalue_line("markers", "gateway_cluster(size, plugins, options, env): "
                                       "configure the gateway_cluster fixture")


@pytest.fixture
def gateway(request: pytest.FixtureRequest) -> Iterator[LocalGateway | GatewayContainer]:
    mark = request.node.get_closest_marker("gateway")
    kw = dict(mark.kwargs) if mark is not None else {}
    g = gateway_for_tests(**kw)
    g.start()
    try:
        yield g
    finally:
        g.stop()


@pytest.fixture
def gateway_cluster(request: pytest.FixtureRequest
                    ) -> Iterator[LocalGatewayCluster | GatewayCluster]:
    mark = request.node.get_closest_marker("gateway_cluster")
    kw = dict(mark.kwargs) if mark is not None else {}
    cluster = cluster_for_tests(**kw)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
