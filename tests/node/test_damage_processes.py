"""The issue-12 scenario with real ``gateway run`` processes: acknowledged writes, a stop
(clean or kill -9), the newest WAL segment cut short, and a start that must refuse in one line
instead of reusing log indexes (which made the SQLite applier skip acknowledged writes).

And issue 52's flipped byte in a table block: the node started silently over it and died
later; ``gateway run`` must refuse in one line naming the table and offset, every time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.core import records
from gateway.core.lsm.format import TAG_BLOCK
from gateway.core.records import SEPARATOR
from tests.cluster.conftest import FAST_ENV
from tests.harness.cluster import ProcessCluster

WRITES = 300


def _write_and_stop(root: Path, how: str) -> ProcessCluster:
    cluster = ProcessCluster(root, 1, env=FAST_ENV, proxied=False)
    cluster.start()
    api = cluster.api(1)
    for i in range(WRITES):
        api.put(f"k{i:04d}", "v" * 200, timeout=10.0)
    if how == "clean":
        assert cluster.terminate(1) == 0
    else:
        cluster.kill(1)
    return cluster


def _cut_newest_segment(data_dir: Path) -> None:
    """Cut the newest segment inside a record (a cut that happened to fall on a record
    boundary left a shorter but untorn log, and recovery had no torn tail to report)."""
    newest = sorted((data_dir / "raft" / "wal").glob("*.wal"))[-1]
    data = newest.read_bytes()
    cut = max(len(data) - 60000, len(data) // 3)
    while SEPARATOR in data[cut - 3:cut + 3]:
        cut -= 1
    os.truncate(newest, cut)


@pytest.mark.parametrize("how", ["clean", "kill-9"])
def test_cut_wal_after_stop_refuses_start_in_one_line(tmp_path: Path, how: str) -> None:
    cluster = _write_and_stop(tmp_path, how)
    try:
        node = cluster.nodes[1]
        _cut_newest_segment(node.data_dir)
        cluster.spawn(1)
        assert node.proc is not None
        code = node.proc.wait(60)
        log = node.log_path.read_text()
        last_start = log[log.rindex("===== start #2"):]
        assert code != 0, last_start
        assert "Traceback" not in last_start, last_start
        final = last_start.rstrip().splitlines()[-1]
        assert final.startswith("Error: ") and "are lost" in final, last_start
        assert "rejoining the cluster" in final
        assert "WAL recovery: torn-tail" in last_start  # the cut itself is logged
        # a second start refuses the same way: nothing was "repaired" by the first attempt
        cluster.spawn(1)
        assert node.proc.wait(60) != 0
    finally:
        cluster.close()


def _last_start(log: str, n: int) -> str:
    return log[log.rindex(f"===== start #{n}"):]


def test_a_flipped_byte_in_a_table_block_refuses_every_start_in_one_line(tmp_path: Path) -> None:
    cluster = _write_and_stop(tmp_path, "clean")
    try:
        node = cluster.nodes[1]
        table = sorted((node.data_dir / "store").glob("*.sst"))[0]
        data = bytearray(table.read_bytes())
        block = next(r for r in records.scan(bytes(data)) if r.payload[0] == TAG_BLOCK)
        data[block.end - 3] ^= 0x20
        table.write_bytes(bytes(data))
        for n in (2, 3):  # the second start refuses the same way: nothing was "repaired"
            cluster.spawn(1)
            assert node.proc is not None
            code = node.proc.wait(60)
            last_start = _last_start(node.log_path.read_text(), n)
            assert code != 0, last_start
            assert "Traceback" not in last_start, last_start
            final = last_start.rstrip().splitlines()[-1]
            assert final.startswith("Error: ") and f"{table}: byte offset {block.offset}" in \
                final and "fails its checksum" in final, last_start
            assert "rejoining the cluster" in final
    finally:
        cluster.close()
