"""The streaming reader follows a growing log; gateway_store reads a store snapshot."""

from __future__ import annotations

from pathlib import Path

from gateway.core import messages
from gateway.core.lsm import LSMStore, export_snapshot
from gateway.core.wal import SegmentedWal, WalEntry, WalHardState, WalOptions
from spark_applier.store_source import latest_versions
from tests.spark.workload import random_log, write_log_file


def test_streaming_reader_follows_a_growing_log_file(spark, tmp_path: Path) -> None:
    txns = random_log(4, 60, segments=False)
    log = tmp_path / "log.bin"
    write_log_file(log, txns[:20])
    df = spark.readStream.format("gateway_wal").option("partition_bytes", 2000).load(str(log))
    query = (df.select("log_index", "op_no").writeStream.format("memory")
             .queryName("gw_stream_log").outputMode("append").start())
    try:
        query.processAllAvailable()
        seen = spark.sql("SELECT DISTINCT log_index FROM gw_stream_log").collect()
        assert {r.log_index for r in seen} <= set(range(1, 21))
        assert len(seen) >= 18
        with log.open("ab") as f:  # a torn append first: only complete records are read
            full = write_log_file(tmp_path / "rest.bin", txns[20:]).read_bytes()[2:]
            f.write(full[:37])
            f.flush()
            query.processAllAvailable()
            f.write(full[37:])
        query.processAllAvailable()
        rows = spark.sql("SELECT log_index, op_no FROM gw_stream_log").collect()
        assert len(rows) == len(set(rows))  # every operation exactly once
        batch = spark.read.format("gateway_wal").load(str(log)).select("log_index", "op_no")
        assert sorted(rows) == sorted(batch.collect())
    finally:
        query.stop()


def test_streaming_reader_follows_wal_segments_up_to_the_commit_index(spark,
                                                                     tmp_path: Path) -> None:
    txns = random_log(6, 80, segments=False)
    wal = SegmentedWal(str(tmp_path / "wal"), options=WalOptions(max_segment_bytes=2048))
    entries = [WalEntry(i, 1, 0, messages.pack(t)) for i, t in enumerate(txns, 1)]
    wal.append(entries[:30])
    wal.save_hard_state(WalHardState(1, 0, 25))
    df = spark.readStream.format("gateway_wal").load(str(tmp_path / "wal"))
    query = (df.select("log_index").writeStream.format("memory").queryName("gw_stream_wal")
             .outputMode("append").start())
    try:
        query.processAllAvailable()
        first = {r.log_index for r in spark.sql("SELECT log_index FROM gw_stream_wal").collect()}
        assert max(first) <= 25
        wal.append(entries[30:])
        wal.save_hard_state(WalHardState(1, 0, 80))
        query.processAllAvailable()
        rows = [r.log_index for r in spark.sql("SELECT log_index FROM gw_stream_wal").collect()]
        assert max(rows) == 80 and set(rows) > first
        batch = spark.read.format("gateway_wal").load(str(tmp_path / "wal"))
        assert sorted(rows) == sorted(r.log_index for r in batch.select("log_index").collect())
    finally:
        query.stop()
        wal.close()


def test_store_source_reads_a_snapshot_with_newest_versions_winning(spark,
                                                                    tmp_path: Path) -> None:
    store = LSMStore(str(tmp_path / "store"))
    try:
        for i in range(300):
            store.put(b"k%04d" % i, b"v1-%d" % i, epoch=1, author=2, commit_ts=10 + i)
        store.flush()
        for i in range(0, 300, 3):
            store.put(b"k%04d" % i, b"v2-%d" % i, epoch=2, author=3, commit_ts=1000 + i)
        for i in range(1, 300, 5):
            store.delete(b"k%04d" % i)
        store.flush()
        store.put(b"k9999", b"late")
        expected = {k: v for k, v in store.scan(None, None)}
        export_snapshot(store, str(tmp_path / "snap"))
    finally:
        store.close()
    df = (spark.read.format("gateway_store").option("partition_bytes", 1024)
          .load(str(tmp_path / "snap")))
    assert df.rdd.getNumPartitions() > 2
    versions = df.count()
    latest = {bytes(r.key): (bytes(r.value), r.epoch, r.author)
              for r in latest_versions(df).collect()}
    assert {k: v[0] for k, v in latest.items()} == expected
    assert latest[b"k0003"][1:] == (2, 3)
    assert latest[b"k0004"][1:] == (1, 2)
    assert versions > len(latest)  # overwritten and deleted versions are rows too
    live = spark.read.format("gateway_store").load(str(tmp_path / "store"))
    assert {bytes(r.key) for r in latest_versions(live).collect()} == set(expected)
