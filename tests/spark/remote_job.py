"""A ``spark-submit`` job for ``test_remote_cluster.py``: read a node's log on the cluster by path
(expected to fail: the executors cannot see the node's data directory) and through
``gateway://`` (written as Parquet to ``OUT/rows``); ``OUT/done.json`` says what happened.

Usage: remote_job.py WAL_PATH GATEWAY_URI TOKEN OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from spark_applier.datasource import register


def main() -> None:
    wal, uri, token, out = sys.argv[1:5]
    spark = SparkSession.builder.appName("gateway-remote-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    done: dict[str, object] = {}
    try:
        spark.read.format("gateway_wal").option("partition_bytes", 4096).load(wal).count()
        done["path"] = "read"
    except Exception as exc:  # what a user sees: the executors' error
        text = str(exc)
        done["path"] = "failed"
        done["path_error"] = next((line for line in text.splitlines()
                                   if "FileNotFoundError" in line or "No such file" in line),
                                  text[:300])
    df = (spark.read.format("gateway_wal").option("token", token)
          .option("partition_bytes", 4096).load(uri))
    df.write.mode("overwrite").parquet(str(Path(out) / "rows"))
    done["partitions"] = df.rdd.getNumPartitions()
    done["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "done.json").write_text(json.dumps(done))
    spark.stop()


if __name__ == "__main__":
    main()
