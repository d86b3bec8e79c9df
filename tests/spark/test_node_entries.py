"""Entries a node writes to its log besides transactions are counted as ``skipped`` by the
Spark reader, never as ``undecodable``: an applier position (tag 112) among transactions."""

from __future__ import annotations

from pathlib import Path

from gateway.core import messages
from gateway.core.wal import SegmentedWal, WalEntry, WalHardState
from gateway.v1 import applier_pb2
from spark_applier import layout
from spark_applier.decode import RangeReport, read_range
from tests.spark.workload import random_log


def test_an_applier_position_entry_is_skipped_not_undecodable(tmp_path: Path) -> None:
    txns = random_log(5, 6)
    position = applier_pb2.ApplierPosition(applier="rabbit", log_index=3)
    payloads = [messages.pack(t) for t in txns[:3]] + [messages.pack(position)] + \
        [messages.pack(t) for t in txns[3:]]
    wal = SegmentedWal(str(tmp_path / "wal"))
    try:
        wal.append([WalEntry(i, 1, 0, p) for i, p in enumerate(payloads, 1)])
        wal.save_hard_state(WalHardState(1, 0, len(payloads)))
    finally:
        wal.close()
    rows, reports = [], []
    for rr in layout.plan_ranges(layout.discover(tmp_path / "wal"), partition_bytes=1 << 20):
        rep = RangeReport(rr.file.path, rr.start, rr.stop)
        for batch in read_range(rr, rep):
            rows.extend(batch.to_pylist())
        reports.append(rep)
    assert sum(r.skipped for r in reports) >= 1
    assert not any(r.undecodable for r in reports)
    assert 4 not in {r["log_index"] for r in rows}
