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

Workload: transactions of 7 inserts of new rows and 3 updates of earlier rows (one table,
4 columns), i.e. 10 logged operations per transaction.

    python benchmarks/bench_spark.py              # 1M operations
    python benchmarks/bench_spark.py --ops 100000 # quicker
    python benchmarks/bench_spark.py --partition-mb 8   # instead of the source's default split
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
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


def session(cores: int) -> Any:
    from pyspark.sql import SparkSession

    from spark_applier.daemon import SESSION_CONF
    from spark_applier.datasource import register

    builder = SparkSession.builder
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    spark = (builder.master(f"local[{cores}]").appName("bench-spark")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", str(2 * cores))
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


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
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    try:
        run(work, args.ops, args.partition_mb << 20 if args.partition_mb else None,
            args.repeat)
    finally:
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


def run(work: Path, ops: int, partition_bytes: int | None, repeat: int = 2) -> None:
    from spark_applier.bulk import apply_log
    from spark_applier.writers import ParquetTarget, SqliteTarget

    wal = work / "log.bin"
    secs, entries = timed(lambda: make_log(wal, ops))
    size = wal.stat().st_size
    print(f"log: {entries} entries, {entries * 10} operations, {size / 1e6:.1f} MB "
          f"(generated in {secs:.1f} s)", flush=True)
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
    for cores in (1, 2):
        spark = session(cores)
        reader = spark.read.format("gateway_wal")
        if partition_bytes:
            reader = reader.option("partition_bytes", partition_bytes)
        if not parquet_dir.exists():
            reader.load(str(wal)).write.parquet(str(parquet_dir))
        first_src, _ = timed(lambda r=reader: r.load(str(wal)).limit(1).collect())
        first_pq, _ = timed(lambda s=spark: s.read.parquet(str(parquet_dir)).limit(1).collect())
        src_secs = best(lambda r=reader: r.load(str(wal)).write.format("noop")
                        .mode("overwrite").save(), repeat)
        pq_secs = best(lambda s=spark: s.read.parquet(str(parquet_dir)).write
                       .format("noop").mode("overwrite").save(), repeat)
        results.append(("read", f"parquet local[{cores}]", pq_secs, ops_n / pq_secs, "1.00x"))
        results.append(("read", f"gateway_wal local[{cores}]", src_secs, ops_n / src_secs,
                        f"{pq_secs / src_secs:.2f}x of parquet"))
        results.append(("first row", f"parquet local[{cores}]", first_pq, 0.0, ""))
        results.append(("first row", f"gateway_wal local[{cores}]", first_src, 0.0, ""))
        db = work / f"bulk{cores}.db"
        b_secs, rep = timed(lambda s=spark, c=cores, d=db: apply_log(
            s, str(wal), SqliteTarget(str(d)), str(work / f"state-sqlite{c}"),
            partition_bytes=partition_bytes))
        assert table_rows(db) == reference, "bulk apply differs from the dispatcher"
        results.append(("bulk apply", f"spark local[{cores}] -> sqlite ({rep.ops_written} rows)",
                        b_secs, ops_n / b_secs, f"{d_secs / b_secs:.2f}x"))
        p_secs, rep = timed(lambda s=spark, c=cores: apply_log(
            s, str(wal), ParquetTarget(s, str(work / f"out{c}")),
            str(work / f"state-parquet{c}"), partition_bytes=partition_bytes))
        results.append(("bulk apply", f"spark local[{cores}] -> parquet", p_secs,
                        ops_n / p_secs, f"{d_secs / p_secs:.2f}x"))
        spark.stop()
    results.append(("read", "gateway_wal partition function, 1 process, no Spark", ip_secs,
                     ip_rows / ip_secs, ""))
    print("\n| measure | variant | seconds | ops/s | ratio |\n|---|---|---|---|---|")
    for what, variant, secs, rate, ratio in results:
        rate_s = f"{rate:,.0f}" if rate else ""
        print(f"| {what} | {variant} | {secs:.2f} | {rate_s} | {ratio} |")


if __name__ == "__main__":
    main()
