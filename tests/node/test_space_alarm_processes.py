"""The NOSPACE alarm with real ``gateway run`` processes (issue 52, item 3): node 2's
threshold is above what its disk has free, as if its disk were nearly full (no root, no disk
filled). Every node refuses writes naming node 2 and its path; reads and Status go on;
``gateway alarm list`` shows it; a disarm while node 2 is still short comes back; once node 2
is gone, the operator's disarm lets writes through."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from tests.cluster.conftest import FAST_ENV
from tests.harness.api import LINEARIZABLE
from tests.harness.cluster import ProcessCluster, wait_until

HUGE = str(1 << 60)  # bytes: more than any disk has free
ENV = {**FAST_ENV, "GATEWAY_SPACE_CHECK_MS": "100"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **ENV})


def _refused(cluster: ProcessCluster, i: int, key: str) -> str:
    with pytest.raises(grpc.RpcError) as ei:
        cluster.api(i).put(key, "v", timeout=10.0)
    assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, ei.value.details()
    return ei.value.details()


def test_a_node_short_of_space_stops_writes_everywhere_until_disarmed(tmp_path: Path) -> None:
    cluster = ProcessCluster(tmp_path, 3, env=ENV, proxied=False)
    cluster.nodes[2].env["GATEWAY_MIN_FREE_BYTES"] = HUGE
    try:
        cluster.start()
        leader = cluster.wait_for_leader()

        def raised_everywhere() -> bool:
            return all([a.node_id for a in cluster.api(i).status().alarms] == [2]
                       for i in cluster.live())

        wait_until("node 2's alarm on every node", raised_everywhere, 30.0)
        for i in (1, 2, 3):
            details = _refused(cluster, i, f"k{i}")
            assert "NOSPACE alarm of node 2: raft/wal" in details, details
            assert str(tmp_path) not in details
        assert cluster.api(leader).get("k1", LINEARIZABLE, timeout=10.0) is None  # reads go on

        target = cluster.nodes[3].api_address
        listed = _cli("alarm", "list", "-t", target)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith("NOSPACE node 2: raft/wal: "), listed.stdout
        shown = _cli("status", "-t", target)
        assert "ALARM NOSPACE node 2: raft/wal has " in shown.stdout, shown.stdout

        disarmed = _cli("alarm", "disarm", "2", "-t", target)  # forwarded to the leader
        assert disarmed.returncode == 0, disarmed.stderr
        assert "node 2" in disarmed.stdout
        wait_until("node 2 to raise its alarm again (still short of space)",
                   raised_everywhere, 30.0)

        cluster.kill(2)  # gone: nobody clears its alarm but an operator
        assert _cli("alarm", "disarm", "2", "-t", target).returncode == 0
        up = [1, 3]
        wait_until("the alarm cleared",
                   lambda: all(not cluster.api(i).status().alarms for i in up), 30.0)
        wait_until("a leader among 1 and 3", lambda: cluster.leader(up), 30.0)
        for i in up:
            cluster.api(i).put(f"after{i}", "v", timeout=10.0)
        bad = _cli("alarm", "disarm", "-t", target)
        assert bad.returncode == 2 and "NODE_ID" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        cluster.close()
