"""The data sources, the bulk apply and the micro-batch runner on a real standalone cluster.

A master and two workers run in their own JVMs (``tests/spark/standalone.py``); the drivers run
as subprocesses -- ``spark-submit`` and ``gateway spark apply --master spark://...`` -- with the
paths a user types (relative to the driver's working directory), and everything they produce
is compared with local mode and with the sequential apply through the dispatcher.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gateway.core.lsm import LSMStore, export_snapshot
from spark_applier.bulk import read_log
from spark_applier.store_source import latest_versions
from tests.spark.standalone import SPARK_HOME, cluster_env
from tests.spark.test_bulk import parquet_state
from tests.spark.workload import (
    random_log,
    reference_state,
    sqlite_state,
    write_log_file,
    write_wal,
)

HERE = Path(__file__).resolve().parent
_ROW_ORDER = ("log_index", "segment_id", "op_no", "op")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=cluster_env(), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"{args[:3]} exited {result.returncode}:\n" \
                                   f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def _snapshot(where: Path) -> Path:
    store = LSMStore(str(where / "store"))
    try:
        for i in range(200):
            store.put(b"k%04d" % i, b"v1-%d" % i, epoch=1, author=2, commit_ts=10 + i)
        store.flush()
        for i in range(0, 200, 3):
            store.put(b"k%04d" % i, b"v2-%d" % i, epoch=2, author=3, commit_ts=1000 + i)
        for i in range(1, 200, 7):
            store.delete(b"k%04d" % i)
        store.flush()
        export_snapshot(store, str(where / "snap"))
    finally:
        store.close()
    return where / "snap"


def _sorted(rows: list, keys: tuple[str, ...]) -> list:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def test_spark_submit_job_on_the_standalone_cluster_equals_local_mode_and_the_dispatcher(
        spark, spark_cluster, tmp_path: Path) -> None:
    txns = random_log(41, 100, moves=True)
    write_wal(tmp_path / "node" / "wal", txns, segment_bytes=4096)
    want = reference_state(write_log_file(tmp_path / "log.bin", txns), tmp_path / "ref.db")
    _snapshot(tmp_path)
    _run([os.path.join(SPARK_HOME, "bin", "spark-submit"), "--master", spark_cluster.url,
          "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
          "--conf", "spark.sql.shuffle.partitions=2", str(HERE / "cluster_job.py"),
          "node/wal", "snap", "out"], cwd=tmp_path)
    done = json.loads((tmp_path / "out" / "done.json").read_text())
    assert done["executors"] == 3  # the driver and one executor on each worker

    local_rows = read_log(spark, str(tmp_path / "node" / "wal")).collect()
    cluster_rows = spark.read.parquet(str(tmp_path / "out" / "wal_rows")).collect()
    assert len(local_rows) > len(txns)
    assert _sorted(cluster_rows, _ROW_ORDER) == _sorted(local_rows, _ROW_ORDER)
    store = latest_versions(spark.read.format("gateway_store").load(str(tmp_path / "snap")))
    assert sorted(spark.read.parquet(str(tmp_path / "out" / "store_rows")).collect()) == \
        sorted(store.collect())

    assert done["tasks"] == [len(txns), 0] and done["parquet"] == [len(txns), 0]
    assert sqlite_state(tmp_path / "out" / "tasks.db") == want
    assert parquet_state(spark, tmp_path / "out" / "parquet") == want
    assert len(done["runner"]) >= 2 and done["runner"][-1] == len(txns)
    assert sqlite_state(tmp_path / "out" / "runner.db") == want


def test_cli_applies_a_relative_source_on_the_standalone_cluster(spark, spark_cluster,
                                                                 tmp_path: Path) -> None:
    txns = random_log(43, 60)
    write_wal(tmp_path / "node" / "wal", txns, segment_bytes=4096)
    want = reference_state(write_log_file(tmp_path / "log.bin", txns), tmp_path / "ref.db")
    result = _run([sys.executable, "-m", "gateway.cli", "spark", "apply", "--source",
                   "node/wal", "--target", "parquet:out", "--state-dir", "state",
                   "--master", spark_cluster.url, "--partition-bytes", "2048"],
                  cwd=tmp_path)
    assert f"position 0 -> {len(txns)}" in result.stdout
    assert parquet_state(spark, tmp_path / "out") == want
