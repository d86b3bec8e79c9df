"""``gateway.testing.GatewayCluster``: three gateway containers on a private network. The
leader's container killed under writes, another node partitioned away and healed: no
acknowledged write is missing from any node, and nothing is left behind."""

from __future__ import annotations

import subprocess
import time

from gateway.client import GatewayError, row_insert


def _left(prefix: str) -> tuple[str, str]:
    ps = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={prefix}"],
                        capture_output=True, text=True, check=True).stdout.strip()
    nets = subprocess.run(["docker", "network", "ls", "-q", "--filter", f"name={prefix}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return ps, nets


def _write_some(cluster, first: int, count: int, acked: list[int]) -> None:
    with cluster.client(timeout=30) as c:
        for i in range(first, first + count):
            try:
                c.write([row_insert("s.t", {"id": i}, {"v": f"v{i}"})])
                acked.append(i)
            except GatewayError:
                pass  # unknown outcome: not counted as acknowledged


def _rows_of(cluster, n: int) -> set[int]:
    from gateway.client import GatewayClient

    with GatewayClient(cluster.api(n), timeout=30) as c:
        return {r.key_values[0].int_value for r in c.scan("s.t", consistency="stale").rows}


def survive_a_killed_leader_and_a_partition(cluster) -> None:
    """On a started 3-node ``cluster`` (either backend): writes through a killed leader and a
    partitioned follower, healed; every acknowledged write reaches every node."""
    acked: list[int] = []
    _write_some(cluster, 0, 20, acked)
    old = cluster.leader()
    cluster.kill(old)
    _write_some(cluster, 100, 20, acked)  # the survivors elect a leader and go on
    assert cluster.leader() != old
    cluster.restart(old)
    follower = next(n for n in (1, 2, 3) if n != cluster.leader())
    cluster.partition(follower)
    _write_some(cluster, 200, 20, acked)
    cluster.heal()
    assert len(acked) >= 40
    deadline = time.monotonic() + 60
    while True:
        views = {n: _rows_of(cluster, n) for n in (1, 2, 3)}
        if all(set(acked) <= v for v in views.values()):
            break
        assert time.monotonic() < deadline, {n: sorted(set(acked) - v)
                                             for n, v in views.items()}
        time.sleep(0.5)


def test_a_cluster_survives_a_killed_leader_and_a_partition_losing_no_acknowledged_write():
    from gateway.testing import GatewayCluster

    cluster = GatewayCluster(3)
    prefix = f"gateway-{cluster._id}"
    try:
        cluster.start()
        survive_a_killed_leader_and_a_partition(cluster)
    finally:
        cluster.stop()
    assert _left(prefix) == ("", "")
