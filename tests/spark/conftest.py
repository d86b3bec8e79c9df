"""One small local Spark session for the whole test session (2 cores are shared)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

try:
    from pyspark.sql import SparkSession

    from spark_applier.daemon import MODULE as DAEMON
    from spark_applier.datasource import register
except ImportError:  # the spark extra is not installed: nothing here can run
    collect_ignore_glob = ["test_*.py"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs real external servers (Cassandra)")


#: Launches of Spark's JVM tried before the session fails.
_LAUNCHES = 3


def _session() -> SparkSession:
    """The tests' session. PySpark starts its JVM with ``Popen(preexec_fn=...)``, a fork in
    this process, where earlier tests' gRPC is still loaded: gRPC's fork handler may restart
    its poller in the child, which then dies on the descriptors ``close_fds`` closed before
    it reaches ``exec`` (grpc/grpc#43055: "Epoll1Poller ... epoll_wait error: Bad file
    descriptor", then JAVA_GATEWAY_EXITED). A launch that died so is tried again, said
    aloud; any other error, or a third such death, fails the tests that need Spark."""
    from pyspark.errors import PySparkRuntimeError

    builder = (SparkSession.builder.master("local[2]").appName("gateway-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .config("spark.python.daemon.module", DAEMON))
    for launch in range(1, _LAUNCHES):
        try:
            return builder.getOrCreate()
        except PySparkRuntimeError as exc:
            if "JAVA_GATEWAY_EXITED" not in str(exc):
                raise
            warnings.warn(f"Spark's JVM exited before it started (launch {launch} of "
                          f"{_LAUNCHES}): trying again", stacklevel=1)
    return builder.getOrCreate()  # the last launch: its error fails the tests


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = _session()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A standalone Spark master and two workers (``tests/spark/standalone.py``), started once
    per session; a failure to start fails the tests that use it (never skips them)."""
    from tests.spark.standalone import start_cluster

    try:
        cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"))
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
