"""A driver program the cluster tests run with ``spark-submit --master spark://...``.

``cluster_job.py WAL SNAPSHOT OUT`` (paths as given, relative ones included) reads the WAL
with ``gateway_wal`` and the snapshot with ``gateway_store`` and writes the rows to ``OUT/wal_rows``
and ``OUT/store_rows`` (Parquet, written by the executors), then bulk-applies the WAL to
``sqlite:OUT/tasks.db`` (written by the tasks) and ``parquet:OUT/parquet``, and runs the
micro-batch runner (80 entries a batch) into ``sqlite:OUT/runner.db`` until it is caught up.
``OUT/done.json`` records the positions reached; the test compares everything with local
mode and the sequential apply.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

from spark_applier.bulk import apply_log, read_log
from spark_applier.datasource import register
from spark_applier.runner import MicroBatchRunner
from spark_applier.store_source import latest_versions
from spark_applier.writers import ParquetTarget, SqliteTarget


def main(wal: str, snapshot: str, out: str) -> None:
    spark = SparkSession.builder.appName("gateway-cluster-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        read_log(spark, wal, partition_bytes=4096).write.parquet(os.path.join(out, "wal_rows"))
        store = spark.read.format("gateway_store").option("partition_bytes", 1024).load(snapshot)
        latest_versions(store).write.parquet(os.path.join(out, "store_rows"))
        done = {"executors": spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()}
        for name, target in (("tasks", SqliteTarget(os.path.join(out, "tasks.db"), mode="tasks")),
                             ("parquet", ParquetTarget(spark, os.path.join(out, "parquet")))):
            report = apply_log(spark, wal, target, os.path.join(out, f"state-{name}"),
                               partition_bytes=4096)
            done[name] = [report.end.log_index, report.problems]
        runner = MicroBatchRunner(spark, wal, SqliteTarget(os.path.join(out, "runner.db")),
                                  os.path.join(out, "state-runner"), max_entries=80)
        ends: list[int] = []
        while (batch := runner.run_once()) is not None:  # until caught up
            ends.append(batch.end.log_index)
        done["runner"] = ends
        with open(os.path.join(out, "done.json"), "w") as f:
            json.dump(done, f)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
