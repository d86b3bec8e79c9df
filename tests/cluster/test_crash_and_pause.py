"""Process faults under write load: kill -9 and SIGSTOP/SIGCONT of leaders and followers.

Every test ends with :func:`tests.harness.verify.verify`: the history is linearizable, no
acknowledged write is missing, and every replica's store is equal.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.harness.cluster import ProcessCluster
from tests.harness.verify import verify
from tests.harness.workload import cluster_workload as start_workload


def test_killed_leader_under_write_load_loses_no_acknowledged_write(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    wl.acked(20)
    old = cluster.wait_for_leader()
    cluster.kill(old)
    cluster.wait_for_new_leader(old, among=[i for i in cluster.nodes if i != old])
    before = len(wl.history.acknowledged_puts())
    wl.acked(before + 20)  # the survivors keep committing
    cluster.restart(old)
    wl.run_for(1.5)
    wl.stop()
    v = verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=40)
    assert len(v.state) >= 20


def test_killed_follower_restarts_and_catches_up(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    lead = cluster.wait_for_leader()
    follower = next(i for i in cluster.nodes if i != lead)
    wl.acked(10)
    cluster.kill(follower)
    wl.acked(len(wl.history.acknowledged_puts()) + 20)
    cluster.restart(follower)
    wl.run_for(1.0)
    wl.stop()
    verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=30)


def test_whole_cluster_killed_and_restarted_keeps_every_acknowledged_write(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    wl.acked(30)
    for i in cluster.nodes:
        cluster.kill(i)
    wl.stop()
    for i in cluster.nodes:
        cluster.spawn(i)
    for i in cluster.nodes:
        cluster.wait_api(i)
    verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=30)


def test_paused_leader_is_replaced_and_rejoins_as_follower(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    wl.acked(10)
    old = cluster.wait_for_leader()
    cluster.pause(old)
    new = cluster.wait_for_new_leader(old, among=[i for i in cluster.nodes if i != old])
    wl.acked(len(wl.history.acknowledged_puts()) + 15)
    cluster.resume(old)  # wakes up believing it leads: must step down, not serve stale data
    wl.run_for(1.5)
    wl.stop()
    v = verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=25)
    assert new != old
    assert v.leader in cluster.nodes


def test_paused_follower_does_not_stall_writes_and_catches_up(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    lead = cluster.wait_for_leader()
    follower = next(i for i in cluster.nodes if i != lead)
    wl.acked(10)
    cluster.pause(follower)
    wl.acked(len(wl.history.acknowledged_puts()) + 20, timeout=15)
    cluster.resume(follower)
    wl.run_for(1.0)
    wl.stop()
    verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=30)


def test_five_nodes_survive_two_killed_including_the_leader(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(5)
    wl = start_workload(cluster, clients=5)
    wl.acked(15)
    old = cluster.wait_for_leader()
    other = next(i for i in cluster.nodes if i != old)
    cluster.kill(old)
    cluster.kill(other)
    survivors = [i for i in cluster.nodes if i not in (old, other)]
    cluster.wait_for_new_leader(old, among=survivors)
    wl.acked(len(wl.history.acknowledged_puts()) + 20, timeout=15)
    cluster.restart(old)
    cluster.restart(other)
    wl.run_for(1.0)
    wl.stop()
    verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=35)
