"""``gateway.testing.launcher``, the one launcher of local test clusters: its nodes die with
the process that launched them (also when a short-lived thread launched them), and their ports
come from below the kernel's ephemeral range, never twice."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gateway.testing.launcher import Launcher, PortAllocator

FAKE = (sys.executable, "-m", "tests.harness.fakenode")
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="PR_SET_PDEATHSIG and /proc are Linux's")


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    """The pids still alive after waiting up to ``timeout`` for them to die."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_a_local_gateways_node_dies_when_the_launching_process_is_sigkilled(tmp_path):
    # the public fixture backend, in a process of its own that is then killed -9: no stop(),
    # no atexit hook runs, only the kernel can take the node down
    script = (
        "import time\n"
        "from gateway.testing import LocalGateway\n"
        "g = LocalGateway(start_timeout=120).start()\n"
        "print(g._node.nodes[1].proc.pid, g.api, flush=True)\n"
        "time.sleep(120)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             text=True, cwd=tmp_path)
    pid = 0
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline().split()
        assert len(line) == 2, "the gateway did not start"
        pid, api = int(line[0]), line[1]
        assert alive(pid)
        assert int(api.rsplit(":", 1)[1]) < ephemeral_low()
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        assert wait_dead([pid]) == [], "the node outlived the process that launched it"
    finally:
        owner.kill()
        owner.wait(10)
        if pid and alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_nodes_launched_from_a_short_lived_thread_outlive_the_thread(tmp_path):
    # the kernel's parent-death signal follows the forking *thread*: a fixture started from a
    # worker thread must not lose its nodes when that thread ends
    launcher = Launcher(tmp_path, 2, program=FAKE, env={"PYTHONPATH": str(REPO)})
    try:
        errors: list[BaseException] = []

        def launch() -> None:
            try:
                launcher.start(wait_leader=False)
            except BaseException as exc:  # re-raised below, in the test's thread
                errors.append(exc)

        t = threading.Thread(target=launch)
        t.start()
        t.join(60)
        assert not errors, errors
        pids = [n.proc.pid for n in launcher.nodes.values() if n.proc is not None]
        assert len(pids) == 2
        time.sleep(0.5)  # a parent-death SIGKILL would have arrived by now
        assert all(alive(p) for p in pids)
        for i in launcher.nodes:
            launcher.status(i, timeout=5)
    finally:
        launcher.close()
    assert wait_dead(pids) == []


def test_ports_come_from_below_the_ephemeral_range_and_never_twice(tmp_path):
    low = ephemeral_low()
    launchers = [Launcher(tmp_path / str(k), 3, proxied=False) for k in range(3)]
    try:
        ports = [p for la in launchers for n in la.nodes.values()
                 for p in (n.peer_port, n.api_port)]
        ports += [PortAllocator().take() for _ in range(20)]  # while the launchers hold theirs
    finally:
        for la in launchers:
            la.close()
    assert len(set(ports)) == len(ports)
    assert all(1024 < p < low for p in ports), (low, sorted(ports))


def test_a_closed_launcher_gives_its_ports_back(tmp_path):
    # the range below the ephemeral ports is small: a long suite must not exhaust it
    allocator = PortAllocator()
    pool = allocator.high - allocator.low + 1
    for k in range(pool // 6 + 10):  # more nodes than the range has ports, over time
        Launcher(tmp_path / str(k), 3, proxied=False).close()
