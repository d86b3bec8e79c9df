"""Network partitions through the fault-injecting proxies between peers (clients still reach
every node directly, so clients of the cut-off side keep trying there: the classic way to catch
stale reads and lost writes)."""

from __future__ import annotations

from collections.abc import Callable

from tests.harness.cluster import ProcessCluster
from tests.harness.verify import verify
from tests.harness.workload import cluster_workload as start_workload


def test_isolated_leader_loses_leadership_and_the_majority_elects_another(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    wl.acked(10)
    old = cluster.wait_for_leader()
    rest = [i for i in cluster.nodes if i != old]
    cluster.net.isolate(old)
    cluster.wait_for_new_leader(old, among=rest)
    wl.acked(len(wl.history.acknowledged_puts()) + 20, timeout=15)
    cluster.net.heal()
    wl.run_for(1.5)
    wl.stop()
    verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=30)


def test_minority_side_makes_no_progress_and_majority_side_does(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(5)
    wl = start_workload(cluster, clients=5)
    wl.acked(10)
    lead = cluster.wait_for_leader()
    # the old leader ends up in the minority with one follower
    minority = [lead, next(i for i in cluster.nodes if i != lead)]
    majority = [i for i in cluster.nodes if i not in minority]
    cluster.net.partition(minority, majority)
    new = cluster.wait_for_new_leader(lead, among=majority)
    assert new in majority
    frozen = {i: cluster.api(i).status().commit_index for i in minority}
    wl.acked(len(wl.history.acknowledged_puts()) + 20, timeout=15)
    after = {i: cluster.api(i).status().commit_index for i in minority}
    assert after == frozen, f"the minority side committed entries: {frozen} -> {after}"
    cluster.net.heal()
    wl.run_for(1.5)
    wl.stop()
    verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=30)


def test_bridge_partition_keeps_one_leader_and_linearizable_history(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(5)
    wl = start_workload(cluster, clients=5)
    wl.acked(10)
    ids = sorted(cluster.nodes)
    cluster.net.bridge(ids[:2], ids[2], ids[3:])
    wl.run_for(2.0)
    # the side without the leader cannot elect one (the bridge still hears the leader), so
    # only a majority agrees; there must never be two leaders of one term
    cluster.wait_for_majority_leader()
    wl.acked(len(wl.history.acknowledged_puts()) + 10, timeout=15)
    cluster.net.heal()
    wl.run_for(1.0)
    wl.stop()
    verify(cluster, wl, nodes=ids, min_acknowledged=20)


def test_one_way_partition_from_leader_triggers_a_new_election(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    wl.acked(10)
    old = cluster.wait_for_leader()
    for i in cluster.nodes:
        if i != old:
            cluster.net.block(old, i)  # the leader's heartbeats vanish; it still hears others
    rest = [i for i in cluster.nodes if i != old]
    cluster.wait_for_new_leader(old, among=rest)
    wl.acked(len(wl.history.acknowledged_puts()) + 15, timeout=15)
    cluster.net.heal()
    wl.run_for(1.5)
    wl.stop()
    verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=25)


def test_flapping_links_and_delays_do_not_break_linearizability(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    wl.acked(10)
    ids = sorted(cluster.nodes)
    for a in ids:
        for b in ids:
            if a != b:
                cluster.net.delay(a, b, 0.005, jitter=0.02)
    for round_ in range(4):
        a, b = ids[round_ % 3], ids[(round_ + 1) % 3]
        cluster.net.drop(a, b)
        wl.run_for(0.7)
    cluster.net.heal()
    wl.acked(len(wl.history.acknowledged_puts()) + 10, timeout=15)
    wl.stop()
    verify(cluster, wl, nodes=ids, min_acknowledged=20)
