"""rows/s of ``gateway_wal`` over ``gateway://`` (the node's ``LogRead`` RPC) against the read of
the same WAL by path, side by side in one run at ``local[2]``; prints the ratio.

    PYTHONPATH=$PWD python benchmarks/bench_spark_remote.py --transactions 20000 --runs 3
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import SparkSession

from spark_applier.datasource import register
from tests.spark.log_server import serve_wal
from tests.spark.workload import random_log, write_wal


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-spark-remote-"))
    try:
        run(work, args.transactions, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, transactions: int, runs: int) -> None:
    """Read the same written log by path and through gateway:// ``runs`` times."""
    wal = write_wal(work / "wal", random_log(1, transactions), segment_bytes=4 << 20)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    with serve_wal(str(wal)) as uri:
        best: dict[str, list[float]] = {"path": [], "gateway": []}
        rows = 0
        for _ in range(runs):
            for name, src in (("path", str(wal)), ("gateway", uri)):
                t = time.perf_counter()
                rows = spark.read.format("gateway_wal").load(src).count()
                best[name].append(rows / (time.perf_counter() - t))
    for name, rates in best.items():
        print(f"{name}: {rows} rows, rows/s per run: {', '.join(f'{r:,.0f}' for r in rates)}")
    print(f"gateway:// / path (best runs): {max(best['gateway']) / max(best['path']):.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
