"""A Spark Connect client program the Connect tests run as a subprocess (a Connect session
cannot share a process with the tests' classic local session).

``connect_job.py sc://HOST:PORT WAL SNAPSHOT OUT`` (``WAL`` relative to the working directory,
as a user types it) connects to the server, registers the data sources in the Connect session
and writes what ``gateway_wal`` reads to ``OUT/wal_rows`` and what ``gateway_store`` reads to
``OUT/store_rows`` (Parquet, written by the server's executors); bulk-applies the WAL to
``sqlite:OUT/tasks.db`` (written by the tasks); runs the micro-batch runner (40 entries a
batch) into ``sqlite:OUT/runner.db`` (each unit collected through Connect as Arrow) until it is
caught up; and tries the Parquet target, which must be refused. ``OUT/done.json`` records
the session's kind, the positions reached and the refusal.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

from spark_applier.bulk import apply_log, read_log
from spark_applier.connect import ConnectUnsupported, is_connect
from spark_applier.datasource import register
from spark_applier.runner import MicroBatchRunner
from spark_applier.store_source import latest_versions
from spark_applier.writers import ParquetTarget, SqliteTarget


def main(url: str, wal: str, snapshot: str, out: str) -> None:
    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        register(spark)
        done: dict[str, object] = {"connect": is_connect(spark)}
        # DataFrame load()/save() paths are resolved by the server, in its own working
        # directory: a client passes absolute ones (read_log and the targets resolve theirs)
        out = os.path.abspath(out)
        read_log(spark, wal, partition_bytes=4096).write.parquet(os.path.join(out, "wal_rows"))
        store = (spark.read.format("gateway_store").option("partition_bytes", 1024)
                 .load(os.path.abspath(snapshot)))
        latest_versions(store).write.parquet(os.path.join(out, "store_rows"))
        report = apply_log(spark, wal, SqliteTarget(os.path.join(out, "tasks.db"), mode="tasks"),
                           os.path.join(out, "state-tasks"), partition_bytes=4096)
        done["tasks"] = [report.end.log_index, report.problems]
        runner = MicroBatchRunner(spark, wal, SqliteTarget(os.path.join(out, "runner.db")),
                                  os.path.join(out, "state-runner"), max_entries=40)
        ends: list[int] = []
        while (batch := runner.run_once()) is not None:  # until caught up
            ends.append(batch.end.log_index)
        done["runner"] = ends
        try:
            ParquetTarget(spark, os.path.join(out, "parquet"))
        except ConnectUnsupported as exc:
            done["parquet"] = str(exc)
        with open(os.path.join(out, "done.json"), "w") as f:
            json.dump(done, f)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
