"""One small local Spark session for the whole test session (2 cores are shared)."""

from __future__ import annotations

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


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (SparkSession.builder.master("local[2]").appName("gateway-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .config("spark.python.daemon.module", DAEMON)
               .getOrCreate())
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
