"""Membership changes under write load: a new node joins and catches up from a snapshot (the log
it would need was compacted away first), and a node is removed."""

from __future__ import annotations

from collections.abc import Callable

from tests.harness.cluster import ProcessCluster, wait_until
from tests.harness.verify import converged_state, verify
from tests.harness.workload import cluster_workload as start_workload


def members_of(cluster: ProcessCluster, node: int) -> set[int]:
    return {m.node_id for m in cluster.api(node).status().members}


def test_new_node_joins_and_catches_up_by_snapshot(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3, env={"GATEWAY_SNAPSHOT_ENTRIES": "50"})
    wl = start_workload(cluster)
    wl.acked(60)
    for i in sorted(cluster.nodes):  # compact every log so a joiner cannot replay from index 1
        cluster.api(i).snapshot()
    lead = cluster.wait_for_leader()
    first = cluster.api(lead).status().first_index
    assert first > 1, f"the leader's log still starts at {first} after Snapshot"

    new = cluster.add_node()
    wait_until(
        f"node {new} in every member list",
        lambda: all(new in members_of(cluster, i) for i in cluster.live()),
        20,
        describe=cluster.describe,
    )
    wl.acked(len(wl.history.acknowledged_puts()) + 20, timeout=15)
    wl.stop()
    verify(cluster, wl, nodes=sorted(cluster.nodes), min_acknowledged=80)
    st = cluster.api(new).status()
    assert st.first_index > 1, "the joiner replayed the whole log instead of a snapshot"
    assert st.applied_index >= first


def test_removed_node_leaves_the_configuration_and_the_rest_keep_committing(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(5)
    wl = start_workload(cluster, clients=4)
    wl.acked(15)
    lead = cluster.wait_for_leader()
    gone = next(i for i in sorted(cluster.nodes) if i != lead)
    cluster.remove_node(gone)
    rest = [i for i in sorted(cluster.nodes) if i != gone]
    wait_until(
        f"node {gone} out of every remaining member list",
        lambda: all(gone not in members_of(cluster, i) for i in rest),
        20,
        describe=cluster.describe,
    )
    cluster.forget(gone)
    wl.acked(len(wl.history.acknowledged_puts()) + 20, timeout=15)
    wl.stop()
    verify(cluster, wl, nodes=rest, min_acknowledged=35)


def test_removing_the_leader_hands_leadership_to_a_remaining_node(
    make_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = make_cluster(3)
    wl = start_workload(cluster)
    wl.acked(10)
    lead = cluster.wait_for_leader()
    rest = [i for i in sorted(cluster.nodes) if i != lead]
    cluster.remove_node(lead, via=lead)
    new = cluster.wait_for_new_leader(lead, among=rest)
    assert new in rest
    wait_until(
        f"node {lead} out of the member lists",
        lambda: all(lead not in members_of(cluster, i) for i in rest),
        20,
        describe=cluster.describe,
    )
    cluster.forget(lead)
    wl.acked(len(wl.history.acknowledged_puts()) + 15, timeout=15)
    wl.stop()
    verify(cluster, wl, nodes=rest, min_acknowledged=25)
    converged_state(cluster, rest)
