"""``gateway.testing.LocalGatewayCluster``: the Docker-free cluster backend passes the same
scenario as the container one (a killed leader, a partitioned follower, healed: no
acknowledged write missing from any node) and leaves nothing behind."""

from __future__ import annotations

import os
import time

from gateway.testing import LocalGatewayCluster, cluster_for_tests
from tests.containers.test_cluster import _rows_of, _write_some


def test_a_local_cluster_survives_a_killed_leader_and_a_partition():
    cluster = LocalGatewayCluster(3)
    acked: list[int] = []
    try:
        cluster.start()
        root = cluster._dir
        _write_some(cluster, 0, 20, acked)
        old = cluster.leader()
        cluster.kill(old)
        _write_some(cluster, 100, 20, acked)
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
    finally:
        cluster.stop()
    assert root is not None and not os.path.exists(root)


def test_the_cluster_backend_follows_gateway_test_backend(monkeypatch):
    monkeypatch.setenv("GATEWAY_TEST_BACKEND", "local")
    assert isinstance(cluster_for_tests(), LocalGatewayCluster)
