"""Spark bulk applier benchmark: the gateway_wal data source and the bulk apply.

Measures, on one generated standalone log file (``gateway log write`` format: a record stream
of transactions, read by byte ranges like WAL segments) of ``--ops`` row operations:

1. rows/s of ``spark.read.format("gateway_wal")`` versus Spark's native Parquet reader on the
   same rows (written once to Parquet), both fully materialised (``write.format("noop")``),
   with ``local[1]`` and ``local[2]``, best of ``--repeat`` runs each; the time to the first row
   of each; and, for reference, the reader's partition function run in this process without
   Spark (``spark_applier.decode.read_range`` over the same partitions);
2. rows/s of the bulk apply (``spark_applier.bulk.apply_log``) to SQLite and to Parquet versus
   the single-node dispatcher (``gateway.appliers``: reducer per transaction, 4 threads, the
   built-in SQLite applier), with ``local[1]`` and ``local[2]``. Every SQLite result is
   checked against the dispatcher's (same final tables).

3. the time to the first row (``limit(1).collect()``) of each source: the session's first
   query, then ``--first-runs`` more (p50, p99);
4. with ``--standalone``, all of it again on a standalone cluster of 2 workers x 1 core that
   the benchmark starts itself (``tests/spark/standalone.py``), and its ratios to ``local[2]``;
   ``--master spark://...`` adds any other master whose workers see this machine's files.

Every session is built with ``spark_applier.daemon.SESSION_CONF``. Bulk apply rows give the
seconds spent in the target's ``write_unit`` (collecting and writing the reduced rows); the
rest is reading, caching and reducing the log.

Workload: transactions of 7 inserts of new rows and 3 updates of earlier rows (one table,
4 columns), i.e. 10 logged operations per transaction.

    python benchmarks/bench_spark.py              # 1M operations
    python benchmarks/bench_spark.py --ops 100000 # quicker
    python benchmarks/bench_spark.py --partition-mb 8   # instead of the source's default split
    python benchmarks/bench_spark.py --ops 500000 --standalone   # the issue's figures
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import LogFileSource
from gateway.appliers.sqlite import SqliteApplier
from gateway.core import messages, records
from gateway.v1 import transaction_pb2

INT, TXT, DBL = 2, 6, 4


def make_log(path: Path, ops: int, seed: int = 1) -> int:
    """Write a log file of about ``ops`` operations; return the number of entries."""
    rng = random.Random(seed)
    out = path.open("wb")
    out.write(records.SEPARATOR)
    next_key, n, batch = 1, 0, []
    txns = ops // 10
    for i in range(1, txns + 1):
        t = transaction_pb2.Transaction(epoch=1, author=1, commit_timestamp_ns=10**18 + i,
                                        segment_id=1, end_segment=True)
        t.gtid.server_id, t.gtid.trans_id = 1, i
        ins = t.statements.add().insert
        ins.table.schema_name, ins.table.table_name = "shop", "orders"
        ins.key_fields.add(name="id", type=INT)
        for name, ft in (("item", TXT), ("qty", INT), ("price", DBL)):
            ins.fields.add(name=name, type=ft)
        for _ in range(7):
            rec = ins.records.add()
            rec.key_values.add(int_value=next_key)
            rec.after_values.add(string_value=f"item-{next_key % 97}")
            rec.after_values.add(int_value=rng.randint(1, 9))
            rec.after_values.add(double_value=rng.random() * 100)
            next_key += 1
        upd = t.statements.add().update
        upd.table.schema_name, upd.table.table_name = "shop", "orders"
        upd.key_fields.add(name="id", type=INT)
        upd.set_fields.add(name="qty", type=INT)
        for _ in range(3):
            rec = upd.records.add()
            rec.key_values.add(int_value=rng.randint(1, next_key - 1))
            rec.after_values.add(int_value=rng.randint(10, 99))
        batch.append(messages.pack(t))
        n += 1
        if len(batch) >= 5000:
            out.write(records.encode_records(batch))
            batch = []
    out.write(records.encode_records(batch))
    out.close()
    return n


def session(master: str, cores: int) -> Any:
    from pyspark.sql import SparkSession

    from spark_applier.daemon import SESSION_CONF
    from spark_applier.datasource import register

    builder = SparkSession.builder
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    builder = (builder.master(master).appName("bench-spark")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", str(2 * cores))
               .config("spark.driver.memory", "2g"))
    if master.startswith("spark://"):
        builder = builder.config("spark.executor.memory", "768m")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


class TimedTarget:
    """A target whose ``write_unit`` calls are timed (the rest of ``apply_log`` is reading,
    caching and reducing the log)."""

    def __init__(self, target: Any) -> None:
        self.target, self.name, self.write_secs = target, target.name, 0.0

    def write_unit(self, rows: Any) -> int:
        t = time.perf_counter()
        try:
            return int(self.target.write_unit(rows))
        finally:
            self.write_secs += time.perf_counter() - t

    def apply_barrier(self, op: Any, write_ts: int = 0) -> None:
        self.target.apply_barrier(op, write_ts)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, linear between the nearest ranks."""
    xs = sorted(values)
    at = q * (len(xs) - 1)
    lo = int(at)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (at - lo)


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def table_rows(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return sorted(conn.execute("SELECT id, item, qty, price FROM orders"))
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--partition-mb", type=int, default=None,
                        help="partition_bytes of the source [default: its own default]")
    parser.add_argument("--repeat", type=int, default=2, help="runs per read (best is kept)")
    parser.add_argument("--first-runs", type=int, default=20,
                        help="first-row queries per source and master (p50/p99)")
    parser.add_argument("--standalone", action="store_true",
                        help="also run on a standalone cluster of 2 workers x 1 core started "
                             "here (tests/spark/standalone.py)")
    parser.add_argument("--master", default=None,
                        help="also run on this master (e.g. spark://host:7077; its workers "
                             "must see this machine's temporary directory)")
    parser.add_argument("--only", default=None,
                        help="comma-separated masters to run instead of local[1],local[2]")
    args = parser.parse_args()
    masters = args.only.split(",") if args.only else ["local[1]", "local[2]"]
    if args.master:
        masters.append(args.master)
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    cluster = None
    try:
        if args.standalone:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from tests.spark.standalone import cluster_env, start_cluster

            os.environ.update({k: v for k, v in cluster_env().items()
                               if k in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                                        "SPARK_LOCAL_IP")})
            cluster = start_cluster(work / "cluster")
            masters.append(cluster.url)
        run(work, args.ops, args.partition_mb << 20 if args.partition_mb else None,
            args.repeat, masters, args.first_runs)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def best(fn: Any, repeat: int) -> float:
    return min(timed(fn)[0] for _ in range(max(1, repeat)))


def in_process(path: Path, partition_bytes: int | None) -> tuple[float, int, int]:
    """Seconds, rows and partitions of the source's partition function run here, no Spark."""
    from spark_applier import layout
    from spark_applier.datasource import auto_partition_bytes
    from spark_applier.decode import read_range

    lay = layout.discover(str(path))
    size = partition_bytes or auto_partition_bytes(sum(f.size for f in lay.files),
                                                   2 * (os.cpu_count() or 1))
    ranges = layout.plan_ranges(lay, partition_bytes=size)
    t = time.perf_counter()
    rows = sum(b.num_rows for rr in ranges for b in read_range(rr))
    return time.perf_counter() - t, rows, len(ranges)


def cores_of(master: str) -> int:
    """Task slots of ``master``: N of ``local[N]``, 2 for a cluster (2 workers x 1 core)."""
    if master.startswith("local[") and master[6:-1].isdigit():
        return int(master[6:-1])
    return 2


def label(master: str) -> str:
    return "standalone 2x1" if master.startswith("spark://") else master


def first_rows(load: Any, runs: int) -> tuple[float, list[float]]:
    """Seconds to the first row of the session's first query, and of ``runs`` more."""
    cold, _ = timed(lambda: load().limit(1).collect())
    return cold, [timed(lambda: load().limit(1).collect())[0] for _ in range(runs)]


def run(work: Path, ops: int, partition_bytes: int | None, repeat: int = 2,
        masters: list[str] | None = None, first_runs: int = 20) -> None:
    from spark_applier.bulk import apply_log
    from spark_applier.writers import ParquetTarget, SqliteTarget

    masters = masters or ["local[1]", "local[2]"]
    wal = work / "log.bin"
    secs, entries = timed(lambda: make_log(wal, ops))
    size = wal.stat().st_size
    print(f"log: {entries} entries, {entries * 10} operations, {size / 1e6:.1f} MB "
          f"(generated in {secs:.1f} s); load {load_average()}", flush=True)
    src = LogFileSource(wal)
    ref_db = work / "dispatcher.db"
    applier = SqliteApplier(ref_db)
    disp = Dispatcher(applier, src, work / "disp-state", config=DispatcherConfig(threads=4))
    d_secs, _ = timed(disp.run)
    applier.close()
    print(f"dispatcher: {d_secs:.1f} s", flush=True)
    reference = table_rows(ref_db)
    results: list[tuple[str, str, float, float, str]] = []
    ops_n = entries * 10
    ip_secs, ip_rows, nparts = in_process(wal, partition_bytes)
    assert ip_rows == ops_n, (ip_rows, ops_n)
    print(f"source: {nparts} partitions", flush=True)
    results.append(("bulk apply", "dispatcher x4 threads -> sqlite", d_secs, ops_n / d_secs,
                    "1.00x"))
    parquet_dir = work / "rows.parquet"
    spark = session("local[2]", 2)  # the Parquet copy, so that every session below starts cold
    spark.read.format("gateway_wal").load(str(wal)).write.parquet(str(parquet_dir))
    spark.stop()
    reads: dict[str, float] = {}
    applies: dict[tuple[str, str], float] = {}
    latency: list[str] = []
    for master in masters:
        cores, name = cores_of(master), label(master)
        spark = session(master, cores)

        def reader(s: Any = spark) -> Any:
            r = s.read.format("gateway_wal")
            return r.option("partition_bytes", partition_bytes) if partition_bytes else r

        cold_src, warm_src = first_rows(lambda r=reader: r().load(str(wal)), first_runs)
        cold_pq, warm_pq = first_rows(lambda s=spark: s.read.parquet(str(parquet_dir)),
                                      first_runs)
        for what, cold, warm in (("gateway_wal", cold_src, warm_src),
                                 ("parquet", cold_pq, warm_pq)):
            latency.append(f"| {name} | {what} | {cold:.2f} | {percentile(warm, 0.5):.2f} | "
                           f"{percentile(warm, 0.99):.2f} | "
                           f"{percentile([cold, *warm], 0.99):.2f} |")
        src_secs = best(lambda r=reader: r().load(str(wal)).write.format("noop")
                        .mode("overwrite").save(), repeat)
        pq_secs = best(lambda s=spark: s.read.parquet(str(parquet_dir)).write
                       .format("noop").mode("overwrite").save(), repeat)
        reads[master] = src_secs
        results.append(("read", f"parquet {name}", pq_secs, ops_n / pq_secs, "1.00x"))
        results.append(("read", f"gateway_wal {name}", src_secs, ops_n / src_secs,
                        f"{pq_secs / src_secs:.2f}x of parquet"))
        tag = name.replace(" ", "-").replace("[", "").replace("]", "")
        db = work / f"bulk-{tag}.db"
        sq = TimedTarget(SqliteTarget(str(db)))
        b_secs, rep = timed(lambda s=spark, t=sq, c=tag: apply_log(
            s, str(wal), t, str(work / f"state-sqlite-{c}"), partition_bytes=partition_bytes))
        assert table_rows(db) == reference, "bulk apply differs from the dispatcher"
        applies[(master, "sqlite")] = b_secs
        results.append(("bulk apply", f"spark {name} -> sqlite ({rep.ops_written} rows; "
                        f"writes {sq.write_secs:.1f} s)", b_secs, ops_n / b_secs,
                        f"{d_secs / b_secs:.2f}x"))
        pt = TimedTarget(ParquetTarget(spark, str(work / f"out-{tag}")))
        p_secs, rep = timed(lambda s=spark, t=pt, c=tag: apply_log(
            s, str(wal), t, str(work / f"state-parquet-{c}"), partition_bytes=partition_bytes))
        applies[(master, "parquet")] = p_secs
        results.append(("bulk apply", f"spark {name} -> parquet (writes {pt.write_secs:.1f} s)",
                        p_secs, ops_n / p_secs, f"{d_secs / p_secs:.2f}x"))
        spark.stop()
        print(f"{name} done; load {load_average()}", *results[-6:], *latency[-2:], sep="\n",
              flush=True)
    results.append(("read", "gateway_wal partition function, 1 process, no Spark", ip_secs,
                     ip_rows / ip_secs, ""))
    print(f"\nload after: {load_average()}")
    print("\n| measure | variant | seconds | ops/s | ratio |\n|---|---|---|---|---|")
    for what, variant, secs, rate, ratio in results:
        rate_s = f"{rate:,.0f}" if rate else ""
        print(f"| {what} | {variant} | {secs:.2f} | {rate_s} | {ratio} |")
    print(f"\nFirst row (limit(1).collect()), seconds: the session's first query, then "
          f"{first_runs} more\n\n| master | source | first query | p50 | p99 | p99 with the "
          f"first |\n|---|---|---|---|---|---|")
    print("\n".join(latency))
    clusters = [m for m in masters if m.startswith("spark://")]
    if clusters and "local[2]" in masters:
        m = clusters[0]
        print(f"\nstandalone 2x1 / local[2] (seconds): read {reads[m] / reads['local[2]']:.2f}x, "
              f"apply -> sqlite {applies[(m, 'sqlite')] / applies[('local[2]', 'sqlite')]:.2f}x, "
              f"apply -> parquet "
              f"{applies[(m, 'parquet')] / applies[('local[2]', 'parquet')]:.2f}x")


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


if __name__ == "__main__":
    main()
