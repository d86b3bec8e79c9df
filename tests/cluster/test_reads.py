"""Read consistency right after a cluster forms: linearizable and lease reads served through
followers must see every write acknowledged before the read was invoked.

Reproducer for a stale linearizable read seen in a 5-node run: a follower answered
``get(h5) -> None`` for a read invoked after ``put(h5, 'c4-1')`` was acknowledged, ~50 ms
after the first leader was elected (the history is in the report of this test when it fails).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.harness.cluster import ProcessCluster
from tests.harness.verify import verify
from tests.harness.workload import cluster_workload


def test_reads_just_after_the_first_election_see_acknowledged_writes(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    for _ in range(3):
        cluster = make_cluster(5)
        wl = cluster_workload(
            cluster, clients=6, hot_keys=2, put=0.5, unique_put=0.0,
            get_linearizable=0.35, get_lease=0.15, get_stale=0.0,
        )
        wl.run_for(1.5)
        wl.stop()
        verify(cluster, wl, min_acknowledged=10)
        cluster.close()
