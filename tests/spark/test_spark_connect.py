"""The data sources, the bulk apply and the micro-batch runner through Spark Connect (``sc://``).

One Spark Connect server, started from the installed PySpark (``tests/spark/connect_server.py``)
with its driver on the standalone cluster of ``tests/spark/standalone.py`` (so the readers and
writers run in the workers' executors), serves the module. Its clients run as subprocesses --
``tests/spark/connect_job.py`` and ``gateway spark apply --remote`` -- since a Connect session
cannot share a process with the tests' classic local session; what they produce is compared
with local mode and with the sequential apply through the dispatcher, row for row.

Slow (a JVM server and its executors on the cluster, each client a new process, over a minute
on an idle machine): the two client tests share the one server and keep their logs small.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway import ApplyError
from gateway.cli import main
from spark_applier import bulk
from spark_applier.bulk import apply_log, read_log
from spark_applier.position import SparkPositionStore
from spark_applier.store_source import latest_versions
from spark_applier.writers import SqliteTarget
from tests.spark.connect_server import ConnectServer, start_connect_server
from tests.spark.standalone import cluster_env
from tests.spark.test_cli_and_plugin import _lines
from tests.spark.test_standalone_cluster import _ROW_ORDER, _snapshot, _sorted
from tests.spark.workload import (
    random_log,
    reference_state,
    sqlite_state,
    write_log_file,
    write_wal,
)

HERE = Path(__file__).resolve().parent
_REFUSED = ("Error: the parquet target is not supported through Spark Connect (sc://): it "
            "commits each version through Hadoop's FileSystem in the driver's JVM "
            "(spark._jvm), which a Connect client does not have; run it with --master, or use "
            "the sqlite: or cassandra:// target through Spark Connect")


@pytest.fixture(scope="module")
def connect_server(spark_cluster, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[ConnectServer]:
    """A Spark Connect server whose driver runs on the standalone cluster, for this module; a
    failure to start fails the tests (never skips them)."""
    try:
        server = start_connect_server(
            tmp_path_factory.mktemp("spark-connect"), spark_cluster.url,
            conf={"spark.executor.memory": "512m", "spark.executor.cores": "1",
                  "spark.cores.max": "2"})
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def _run(args: list[str], cwd: Path, server: ConnectServer,
         expect: int = 0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=cluster_env(), capture_output=True, text=True,
                            timeout=1200)
    assert result.returncode == expect, (
        f"{args[:4]} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
        f"{result.stderr[-5000:]}\n{server.log()}")
    return result


def test_a_connect_client_on_the_cluster_equals_local_mode_and_the_dispatcher(
        spark, connect_server: ConnectServer, tmp_path: Path) -> None:
    txns = random_log(61, 60, moves=True)
    write_wal(tmp_path / "node" / "wal", txns, segment_bytes=4096)
    want = reference_state(write_log_file(tmp_path / "log.bin", txns), tmp_path / "ref.db")
    _snapshot(tmp_path)
    _run([sys.executable, str(HERE / "connect_job.py"), connect_server.url, "node/wal", "snap",
          "out"], cwd=tmp_path, server=connect_server)
    done = json.loads((tmp_path / "out" / "done.json").read_text())
    assert done["connect"] is True

    local_rows = read_log(spark, str(tmp_path / "node" / "wal")).collect()
    remote_rows = spark.read.parquet(str(tmp_path / "out" / "wal_rows")).collect()
    assert len(local_rows) > len(txns)
    assert _sorted(remote_rows, _ROW_ORDER) == _sorted(local_rows, _ROW_ORDER)
    store = latest_versions(spark.read.format("gateway_store").load(str(tmp_path / "snap")))
    assert sorted(spark.read.parquet(str(tmp_path / "out" / "store_rows")).collect()) == \
        sorted(store.collect())

    assert done["tasks"] == [len(txns), 0]
    assert sqlite_state(tmp_path / "out" / "tasks.db") == want
    assert len(done["runner"]) >= 2 and done["runner"][-1] == len(txns)
    assert sqlite_state(tmp_path / "out" / "runner.db") == want
    assert "Error: " + done["parquet"] == _REFUSED


def test_cli_applies_a_relative_source_through_spark_connect(
        spark, connect_server: ConnectServer, tmp_path: Path) -> None:
    txns = random_log(63, 60)
    write_wal(tmp_path / "node" / "wal", txns, segment_bytes=4096)
    want = reference_state(write_log_file(tmp_path / "log.bin", txns), tmp_path / "ref.db")
    apply = [sys.executable, "-m", "gateway.cli", "spark", "apply", "--source", "node/wal",
             "--state-dir", "state", "--remote", connect_server.url]
    result = _run([*apply, "--target", "sqlite:out.db", "--partition-bytes", "2048"],
                  cwd=tmp_path, server=connect_server)
    assert f"position 0 -> {len(txns)}" in result.stdout
    assert sqlite_state(tmp_path / "out.db") == want

    refused = _run([*apply, "--target", "parquet:out"], cwd=tmp_path, server=connect_server,
                   expect=2)
    assert _lines(refused.stderr) == [_REFUSED]
    assert not (tmp_path / "out").exists()


def test_cli_refuses_master_and_remote_together(tmp_path: Path) -> None:
    log = write_log_file(tmp_path / "log.bin", random_log(1, 3))
    result = CliRunner().invoke(main, ["spark", "apply", "--source", str(log), "--target",
                                       f"sqlite:{tmp_path / 'out.db'}", "--master", "local[1]",
                                       "--remote", "sc://127.0.0.1:1"])
    assert result.exit_code == 2
    assert _lines(result.output) == [
        "Error: --master and --remote exclude each other: --remote runs the job on the Spark "
        "Connect server's own master"]


def test_a_read_whose_range_reports_land_elsewhere_stops_before_writing(
        spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As with a remote Connect server whose workers write the damage reports to their own
    temporary directory: the run must not report 'no damage' for reports it never saw."""
    txns = random_log(65, 20, segments=False)
    log = write_log_file(tmp_path / "log.bin", txns)
    real = bulk.read_log
    monkeypatch.setattr(bulk, "read_log", lambda s, path, **o: real(
        s, path, **{**o, "report_dir": str(tmp_path / "elsewhere")}))
    with pytest.raises(ApplyError, match=r"^no range report of the read reached .*: the "
                                         r"executors .* set TMPDIR to a path they share"):
        apply_log(spark, str(log), SqliteTarget(str(tmp_path / "out.db")),
                  str(tmp_path / "state"))
    assert (tmp_path / "elsewhere").is_dir()  # the reports were written, just not here
    assert not (tmp_path / "out.db").exists()
    assert SparkPositionStore(tmp_path / "state", "sqlite").load().log_index == 0
