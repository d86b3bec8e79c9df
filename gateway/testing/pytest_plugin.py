"""The pytest plugin (``pytest11`` entry point ``gateway``): a ``gateway`` fixture.

``gateway`` is a started single-node gateway -- a container when a Docker engine runs and the
image exists, else a local ``gateway run`` process (``GATEWAY_TEST_BACKEND`` = ``auto``,
``docker`` or ``local``) -- stopped and removed after the test, also when it fails. Mark a test
``@pytest.mark.gateway(plugins=[...], options={...}, env={...})`` to configure it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from . import gateway_for_tests


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gateway(plugins, options, env): configure the "
                                       "gateway fixture")


@pytest.fixture
def gateway(request: pytest.FixtureRequest) -> Iterator[Any]:
    mark = request.node.get_closest_marker("gateway")
    kw = dict(mark.kwargs) if mark is not None else {}
    g = gateway_for_tests(**kw)
    g.start()
    try:
        yield g
    finally:
        g.stop()
