"""Fixtures for the multi-process cluster tests (marker ``cluster``).

``make_cluster(n, **kw)`` starts an ``n``-node :class:`~tests.harness.cluster.ProcessCluster`
under the test's tmp directory with short Raft timings (set through the ``GATEWAY_*``
environment overrides documented in docs/node.md, so a flag rename cannot silently drop them);
every cluster is closed when the test ends, and when the test failed the report gets each
node's log tail and the cluster's status/proxy state.

Select only these tests with ``pytest -m cluster``, or leave them out with ``-m "not cluster"``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.cluster import ProcessCluster

#: Node settings for tests: 30 ms ticks, elections after 10-20 ticks (the core randomises),
#: heartbeats every tick; epochs sealed every 100 ms; fsync stays on (the crash tests need it).
FAST_ENV = {
    "GATEWAY_TICK_MS": "30",
    "GATEWAY_ELECTION_TICKS": "10",
    "GATEWAY_HEARTBEAT_TICKS": "1",
    "GATEWAY_FSYNC": "true",
    "GATEWAY_LOG_LEVEL": "info",
    "GATEWAY_LOG_FORMAT": "text",
    # only the built-in SQLite applier: plugins other engineers install must not change runs
    "GATEWAY_PLUGINS": "sqlite",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cluster: multi-process gateway clusters on loopback (tests/cluster)"
    )


#: Overrides the program that runs ``run --node-id ...`` (shell words), e.g. to test a
#: development build: ``GATEWAY_TEST_NODE_PROGRAM="python /path/to/launcher.py"``.
PROGRAM_ENV = "GATEWAY_TEST_NODE_PROGRAM"


def node_program() -> list[str] | None:
    text = os.environ.get(PROGRAM_ENV, "").strip()
    return shlex.split(text) if text else None


def node_is_present() -> bool:
    """True once ``gateway run`` exists (the node has landed) or a program is named in
    ``GATEWAY_TEST_NODE_PROGRAM``. Until then these tests are skipped; from then on they
    always run."""
    if node_program():
        return True
    try:
        from gateway.cli import main
    except ImportError:
        return False
    return "run" in getattr(main, "commands", {})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    absent = None if node_is_present() else pytest.mark.skip(
        reason="`gateway run` does not exist yet (the node has not landed)"
    )
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)
            if absent is not None:
                item.add_marker(absent)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for cluster in getattr(item, "_gateway_clusters", []):
            try:
                report.sections.append(("gateway cluster state", cluster.describe()))
            except Exception as e:  # the state is a courtesy; never hide the real failure
                report.sections.append(("gateway cluster state", f"unavailable: {e!r}"))
            report.sections.append(("gateway node logs", cluster.log_tails(60)))


@pytest.fixture
def make_cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., ProcessCluster]]:
    clusters: list[ProcessCluster] = []
    request.node._gateway_clusters = clusters

    def make(size: int, *, env: dict[str, str] | None = None, start: bool = True,
             **kw: Any) -> ProcessCluster:
        program = node_program()
        if program:
            kw.setdefault("program", program)
        c = ProcessCluster(tmp_path / f"cluster{len(clusters)}", size,
                           env={**FAST_ENV, **(env or {})}, **kw)
        clusters.append(c)
        if start:
            c.start()
        return c

    yield make
    for c in clusters:
        c.close()
