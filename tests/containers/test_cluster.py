"""``gateway.testing.GatewayCluster``: three gateway containers on a private network. The
leader's container killed with writes in flight, another node partitioned away and healed: no
acknowledged write is missing from any node, and nothing is left behind."""

from __future__ import annotations

import subprocess
import threading
import time

from gateway.client import GatewayError, row_insert


def _left(prefix: str) -> tuple[str, str]:
    ps = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={prefix}"],
                        capture_output=True, text=True, check=True).stdout.strip()
    nets = subprocess.run(["docker", "network", "ls", "-q", "--filter", f"name={prefix}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return ps, nets


class _Writer(threading.Thread):
    """Writes rows ``s.t(id, v=f"v{id}")`` one after another through the cluster's reachable
    nodes until stopped, recording the ids whose write was acknowledged. A failed write (node
    killed or cut off mid-call, no leader yet) has an unknown outcome: not recorded; the next
    one goes through a new client of the nodes reachable then."""

    def __init__(self, cluster) -> None:
        super().__init__(daemon=True)
        self.cluster, self.acked = cluster, []
        self.halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            try:
                with self.cluster.client(timeout=10) as c:
                    while not self.halt.is_set():
                        c.write([row_insert("s.t", {"id": i}, {"v": f"v{i}"})])
                        self.acked.append(i)
                        i += 1
            except (GatewayError, RuntimeError):
                i += 1  # the next write is a new row
                time.sleep(0.2)

    def more(self, count: int, timeout: float = 90.0) -> None:
        """Wait until ``count`` more writes are acknowledged."""
        want = len(self.acked) + count
        deadline = time.monotonic() + timeout
        while len(self.acked) < want:
            assert self.is_alive(), "the writer stopped"
            assert time.monotonic() < deadline, f"{len(self.acked)}/{want} writes acknowledged"
            time.sleep(0.05)

    def stop(self) -> list[int]:
        self.halt.set()
        self.join(60)
        return list(self.acked)


def _rows_of(cluster, n: int) -> set[int]:
    from gateway.client import GatewayClient

    ids: set[int] = set()
    start = None
    with GatewayClient(cluster.api(n), timeout=30) as c:
        while True:  # page by page
            page = c.scan("s.t", start=start, limit=10000, consistency="stale")
            ids.update(r.key_values[0].int_value for r in page.rows)
            if not page.more:
                return ids
            start = max(ids) + 1


def survive_a_killed_leader_and_a_partition(cluster) -> list[int]:
    """On a started 3-node ``cluster`` (either backend): writes through a killed leader and a
    partitioned follower, healed; every acknowledged write reaches every node. Returns the ids
    of the acknowledged rows (``s.t``, ``v = f"v{id}"``). A writer thread writes all along:
    the faults strike with writes in flight."""
    writer = _Writer(cluster)
    writer.start()
    try:
        writer.more(20)
        old = cluster.leader()
        cluster.kill(old)
        writer.more(20)  # the survivors elect a leader and go on
        assert cluster.leader() != old
        cluster.restart(old)
        writer.more(10)
        follower = next(n for n in (1, 2, 3) if n != cluster.leader())
        cluster.partition(follower)
        writer.more(20)  # the majority goes on without it
        cluster.heal()
        writer.more(10)
    finally:
        acked = writer.stop()
    deadline = time.monotonic() + 60
    while True:
        views = {n: _rows_of(cluster, n) for n in (1, 2, 3)}
        if all(set(acked) <= v for v in views.values()):
            break
        assert time.monotonic() < deadline, {n: sorted(set(acked) - v)
                                             for n, v in views.items()}
        time.sleep(0.5)
    return acked


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
