"""The process-cluster manager, the workload and the verification, run against the harness's
stand-in node (:mod:`tests.harness.fakenode`): a correct stand-in passes, deliberately broken
ones (stale follower reads, acknowledged-but-dropped writes) are caught. No gateway node needed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.harness.cluster import ProcessCluster
from tests.harness.verify import verify
from tests.harness.workload import UNKNOWN, Workload, WorkloadConfig

FAKE = (sys.executable, "-m", "tests.harness.fakenode")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_cluster(tmp_path: Path) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, 3, program=FAKE, env={"PYTHONPATH": str(REPO)})
    yield c
    c.close()


def broken(tmp_path: Path, bug: str) -> ProcessCluster:
    return ProcessCluster(
        tmp_path, 3, program=FAKE, node_args=["--bug", bug], env={"PYTHONPATH": str(REPO)}
    )


def workload(c: ProcessCluster, **kw: object) -> Workload:
    cfg = WorkloadConfig(**{"timeout": 1.0, **kw})  # type: ignore[arg-type]
    return Workload(lambda: {i: n.api_address for i, n in c.nodes.items()}, cfg).start()


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_correct_cluster_passes_verification(fake_cluster: ProcessCluster) -> None:
    fake_cluster.start()
    assert fake_cluster.wait_for_leader() == 1
    wl = workload(fake_cluster)
    wl.acked(60)
    wl.stop()
    v = verify(fake_cluster, wl, min_acknowledged=60)
    assert v.leader == 1
    assert len(v.state) > 6


def test_stale_follower_reads_are_reported_as_not_linearizable(tmp_path: Path) -> None:
    with broken(tmp_path, "stale-reads") as c:
        c.start()
        wl = workload(c, clients=6, hot_keys=2, get_stale=0, unique_put=0)
        wl.acked(150, timeout=30)
        wl.stop()
        with pytest.raises(AssertionError, match="not linearizable"):
            verify(c, wl)


def test_acknowledged_but_dropped_writes_are_reported(tmp_path: Path) -> None:
    with broken(tmp_path, "lose-writes") as c:
        c.start()
        wl = workload(c, unique_put=1.0, put=0.2)
        wl.acked(40)
        wl.stop()
        with pytest.raises(AssertionError, match=r"missing|not linearizable"):
            verify(c, wl)


def test_blackholed_forwarding_makes_writes_unknown_not_failed(
    fake_cluster: ProcessCluster,
) -> None:
    fake_cluster.start()
    fake_cluster.net.isolate(2)
    api = fake_cluster.api(2)
    with pytest.raises(grpc.RpcError):
        api.put("k", "v", timeout=2.5)
    wl = workload(fake_cluster, clients=1, put=1.0, unique_put=0, get_linearizable=0,
                  get_lease=0, get_stale=0)
    # client 0 starts on node 1 (ok), so pin it to node 2 through the targets view
    wl.targets = lambda: {2: fake_cluster.nodes[2].api_address}
    wl.run_for(2.5)
    wl.stop()
    fake_cluster.net.heal()
    outcomes = {e.outcome for e in wl.history.events if e.node == 2}
    assert outcomes == {UNKNOWN}
    verify(fake_cluster, wl, min_acknowledged=0)


def test_kill_pause_restart_and_close_leave_no_processes(fake_cluster: ProcessCluster) -> None:
    fake_cluster.start()
    pids = {i: n.proc.pid for i, n in fake_cluster.nodes.items() if n.proc}
    fake_cluster.pause(2)
    assert fake_cluster.live() == [1, 3]
    with pytest.raises(grpc.RpcError) as err:
        fake_cluster.api(2).status(timeout=0.5)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    fake_cluster.resume(2)
    fake_cluster.api(2).status(timeout=2)
    fake_cluster.kill(3)
    assert not alive(pids[3])
    fake_cluster.restart(3)
    assert fake_cluster.nodes[3].starts == 2
    assert fake_cluster.api(3).status().role == "follower"
    new_pids = [n.proc.pid for n in fake_cluster.nodes.values() if n.proc]
    fake_cluster.close()
    assert not any(alive(p) for p in new_pids)
    log = fake_cluster.nodes[3].log_path.read_text()
    assert log.count("===== start #") == 2


def test_node_dies_with_the_test_process(tmp_path: Path) -> None:
    # a child python process owns a cluster and is killed -9: its nodes must die too
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tests.harness.cluster import ProcessCluster\n"
        f"c = ProcessCluster(Path({str(tmp_path)!r}), 2, program={FAKE!r})\n"
        "c.start(wait_leader=False)\n"
        "print(' '.join(str(n.proc.pid) for n in c.nodes.values()), flush=True)\n"
        "time.sleep(60)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline().decode()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 5
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(p) for p in pids), "node processes outlived their owner"
    finally:
        owner.kill()
        owner.wait(10)
