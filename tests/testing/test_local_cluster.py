"""``gateway.testing.LocalGatewayCluster``: the Docker-free cluster backend passes the same
scenario as the container one (a killed leader, a partitioned follower, healed: no
acknowledged write missing from any node) and leaves nothing behind."""

from __future__ import annotations

import os

from gateway.testing import LocalGatewayCluster, cluster_for_tests
from tests.containers.test_cluster import survive_a_killed_leader_and_a_partition


def test_a_local_cluster_survives_a_killed_leader_and_a_partition():
    cluster = LocalGatewayCluster(3)
    try:
        cluster.start()
        root = cluster._dir
        survive_a_killed_leader_and_a_partition(cluster)
    finally:
        cluster.stop()
    assert root is not None and not os.path.exists(root)


def test_the_cluster_backend_follows_gateway_test_backend(monkeypatch):
    monkeypatch.setenv("GATEWAY_TEST_BACKEND", "local")
    assert isinstance(cluster_for_tests(), LocalGatewayCluster)
