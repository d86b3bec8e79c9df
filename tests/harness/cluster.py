"""A cluster of ``gateway run`` processes on loopback, with a fault-injecting proxy on every peer
link.

Every node ``i`` is one subprocess::

    python -m gateway.cli run --node-id i --listen 127.0.0.1:P_i --api 127.0.0.1:A_i \\
        --peers 1=127.0.0.1:X_i1,2=...,i=127.0.0.1:P_i,... --data-dir ROOT/node-i [extra args]

where ``X_ij`` is the port of the proxy ``(i, j)`` in front of node ``j`` (see
:mod:`gateway.testing.proxy`), so the test can cut, delay or reset every flow between two nodes.
A node added later (``AddNode`` carries one peer address for everyone) is reached through one
shared ingress proxy ``(0, j)``; it dials the others through its own per-pair proxies.

Clients and the harness reach each node's public API directly (``A_i``), never through a proxy.

Ports: node ports are picked below the kernel's ephemeral range (so an outgoing connection can
never take one between our pick and the node's bind) and never twice in this process; proxy
ports are bound once and held. Processes: each node runs under a tiny shim that asks the kernel
to SIGKILL it when the test process dies (``PR_SET_PDEATHSIG``), the cluster kills everything in
:meth:`ProcessCluster.close`, which also runs at exit, so an interrupted run leaves no orphans.
Each node's stdout/stderr go to ``ROOT/logs/node-i.log`` (appended across restarts with a
header line); :meth:`ProcessCluster.log_tails` collects them for failure reports.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc

from gateway.testing.proxy import ANY, ProxyNetwork
from tests.harness.api import NodeApi

T = TypeVar("T")

LOOPBACK = "127.0.0.1"

#: Runs before the node: die with the parent (the thread that spawned us), then exec the node.
_SHIM = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"  # PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[1]): os._exit(70)\n"  # parent already gone
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


class ClusterError(AssertionError):
    """The cluster did not reach the expected state in time (an AssertionError, so pytest shows
    it as a test failure with the message)."""


# ------------------------------------------------------------------------------------ ports


class PortAllocator:
    """Free loopback ports below the ephemeral range, each handed out at most once."""

    _lock = threading.Lock()
    _used: set[int] = set()

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed if seed is not None else os.getpid() ^ time.time_ns())
        low, _high = 32768, 60999
        with contextlib.suppress(OSError, ValueError):
            low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        self.low = 20000 if low > 21000 else 10000
        self.high = min(low - 1, self.low + 12000)

    def take(self) -> int:
        """A port nobody is listening on now and that this process never handed out."""
        for _ in range(1000):
            port = self._rng.randint(self.low, self.high)
            with self._lock:
                if port in self._used:
                    continue
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    try:
                        s.bind((LOOPBACK, port))
                    except OSError:
                        continue
                self._used.add(port)
                return port
        raise ClusterError("no free loopback port found")


# ------------------------------------------------------------------------------------ nodes


@dataclass
class NodeProcess:
    """One node: its ports, data directory, log file and current process (if any)."""

    id: int
    peer_port: int
    api_port: int
    data_dir: Path
    log_path: Path
    peers: dict[int, str]  # the --peers map this node is started with
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    starts: int = 0

    @property
    def api_address(self) -> str:
        return f"{LOOPBACK}:{self.api_port}"

    @property
    def peer_address(self) -> str:
        return f"{LOOPBACK}:{self.peer_port}"

    @property
    def running(self) -> bool:
        """Started, not exited (paused counts as running)."""
        return self.proc is not None and self.proc.poll() is None


def wait_until(
    what: str,
    probe: Callable[[], T | None],
    timeout: float,
    interval: float = 0.05,
    describe: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something other than None/False; raise
    :class:`ClusterError` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            got = probe()
            if got is not None and got is not False:
                return got
        except (grpc.RpcError, OSError, ValueError) as e:
            last_error = e
        if time.monotonic() >= deadline:
            detail = f"; last error: {_short(last_error)}" if last_error else ""
            extra = f"\n{describe()}" if describe else ""
            raise ClusterError(f"timed out after {timeout:.1f}s waiting for {what}{detail}{extra}")
        time.sleep(interval)


def _short(e: BaseException | None) -> str:
    if isinstance(e, grpc.RpcError):
        code = e.code() if hasattr(e, "code") else None
        details = e.details() if hasattr(e, "details") else ""
        return f"{code}: {details}"
    return repr(e)


class ProcessCluster:
    """N ``gateway run`` processes with proxies between them.

    ``node_args`` are appended to every node's command line (timing flags etc.); ``env`` is
    merged into the environment; ``program`` is what runs ``run ...`` (``gateway``'s CLI, or
    the harness's own stand-in :mod:`tests.harness.fakenode`). Call :meth:`start`, then use the
    fault methods; always :meth:`close` (a context manager and an atexit hook do).
    """

    def __init__(
        self,
        root: Path,
        size: int,
        *,
        node_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        proxied: bool = True,
        start_timeout: float = 20.0,
        program: Sequence[str] = (sys.executable, "-m", "gateway.cli"),
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        self.node_args = list(node_args)
        self.env = dict(os.environ)
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        if env:
            self.env.update(env)
        self.proxied = proxied
        self.program = list(program)
        self.start_timeout = start_timeout
        self.ports = PortAllocator()
        self.net = ProxyNetwork(seed=size)
        self.nodes: dict[int, NodeProcess] = {}
        self._apis: dict[int, NodeApi] = {}
        self._closed = False
        for i in range(1, size + 1):
            self._define(i)
        for i in self.nodes:
            self.nodes[i].peers = self._peers_of(i, self.nodes)
        atexit.register(self.close)

    # ------------------------------------------------------------------ layout

    def _define(self, i: int) -> NodeProcess:
        node = NodeProcess(
            id=i,
            peer_port=self.ports.take(),
            api_port=self.ports.take(),
            data_dir=self.root / f"node-{i}",
            log_path=self.root / "logs" / f"node-{i}.log",
            peers={},
        )
        self.nodes[i] = node
        return node

    def _peers_of(self, i: int, members: Iterable[int]) -> dict[int, str]:
        """The --peers map node ``i`` is started with: itself directly, the others through the
        proxies ``(i, j)`` (created on demand)."""
        out: dict[int, str] = {}
        for j in sorted(members):
            target = self.nodes[j]
            if j == i:
                out[j] = target.peer_address
            elif self.proxied:
                out[j] = f"{LOOPBACK}:{self.net.add_link(i, j, target.peer_port)}"
            else:
                out[j] = target.peer_address
        return out

    def command(self, i: int) -> list[str]:
        """The full ``gateway run`` command line of node ``i`` (without the shim)."""
        n = self.nodes[i]
        peers = ",".join(f"{j}={addr}" for j, addr in sorted(n.peers.items()))
        return [
            *self.program,
            "run",
            "--node-id",
            str(i),
            "--listen",
            n.peer_address,
            "--api",
            n.api_address,
            "--peers",
            peers,
            "--data-dir",
            str(n.data_dir),
            *self.node_args,
            *n.extra_args,
        ]

    # ------------------------------------------------------------------ processes

    def start(self, wait_leader: bool = True) -> ProcessCluster:
        """Start every defined node that is not running; wait for their APIs (and a leader)."""
        for i, n in self.nodes.items():
            if not n.running:
                self.spawn(i)
        for i in self.nodes:
            self.wait_api(i)
        if wait_leader:
            self.wait_for_leader()
        return self

    def spawn(self, i: int) -> None:
        """Start node ``i``'s process (its data directory is kept across restarts)."""
        n = self.nodes[i]
        if n.running:
            raise ClusterError(f"node {i} is already running (pid {n.proc.pid if n.proc else 0})")
        n.data_dir.mkdir(parents=True, exist_ok=True)
        n.starts += 1
        cmd = self.command(i)
        with n.log_path.open("ab") as log:
            log.write(f"\n===== start #{n.starts} of node {i}: {' '.join(cmd)}\n".encode())
            log.flush()
            n.proc = subprocess.Popen(
                [sys.executable, "-c", _SHIM, str(os.getpid()), *cmd],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**self.env, **n.env},
                cwd=self.root,
            )
        n.paused = False

    def wait_api(self, i: int, timeout: float | None = None) -> None:
        """Wait until node ``i`` answers Status (fails early if its process exits)."""
        n = self.nodes[i]

        def probe() -> bool:
            if n.proc is not None and n.proc.poll() is not None:
                raise ClusterError(
                    f"node {i} exited with code {n.proc.returncode} during start\n"
                    + self.log_tail(i)
                )
            self.api(i).status(timeout=1.0)
            return True

        wait_until(f"node {i}'s API on {n.api_address}", probe, timeout or self.start_timeout)

    def kill(self, i: int) -> None:
        """kill -9 node ``i`` and reap it."""
        n = self.nodes[i]
        if n.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            n.proc.send_signal(signal.SIGKILL)
        n.proc.wait(10)
        n.paused = False
        self._drop_api(i)

    def terminate(self, i: int, timeout: float = 10.0) -> int:
        """SIGTERM node ``i`` (a clean shutdown) and wait; returns the exit code."""
        n = self.nodes[i]
        if n.proc is None:
            raise ClusterError(f"node {i} was never started")
        if n.paused:
            self.resume(i)
        with contextlib.suppress(ProcessLookupError):
            n.proc.send_signal(signal.SIGTERM)
        try:
            code = n.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            n.proc.kill()
            n.proc.wait(10)
            raise ClusterError(f"node {i} did not exit within {timeout}s of SIGTERM") from None
        self._drop_api(i)
        return code

    def restart(self, i: int, wait: bool = True) -> None:
        """Start node ``i`` again on the same ports and data directory (kill it first if it
        is still running)."""
        if self.nodes[i].running:
            self.kill(i)
        self.spawn(i)
        if wait:
            self.wait_api(i)

    def pause(self, i: int) -> None:
        """SIGSTOP node ``i``: the process keeps its sockets but does nothing."""
        n = self.nodes[i]
        if n.proc is None or not n.running:
            raise ClusterError(f"node {i} is not running")
        n.proc.send_signal(signal.SIGSTOP)
        n.paused = True

    def resume(self, i: int) -> None:
        """SIGCONT node ``i``."""
        n = self.nodes[i]
        if n.proc is not None and n.running:
            n.proc.send_signal(signal.SIGCONT)
        n.paused = False

    # ------------------------------------------------------------------ API

    def api(self, i: int) -> NodeApi:
        """A cached API handle for node ``i`` (recreated after a kill)."""
        api = self._apis.get(i)
        if api is None:
            api = self._apis[i] = NodeApi(self.nodes[i].api_address)
        return api

    def _drop_api(self, i: int) -> None:
        api = self._apis.pop(i, None)
        if api is not None:
            api.close()

    def live(self) -> list[int]:
        """Nodes whose process runs and is not paused."""
        return [i for i, n in sorted(self.nodes.items()) if n.running and not n.paused]

    def statuses(
        self, among: Iterable[int] | None = None, timeout: float = 1.0
    ) -> dict[int, object]:
        """Status of each node in ``among`` (default: live ones); an exception for a node that
        did not answer."""
        out: dict[int, object] = {}
        for i in among if among is not None else self.live():
            try:
                out[i] = self.api(i).status(timeout=timeout)
            except grpc.RpcError as e:
                out[i] = e
        return out

    def leader(self, among: Iterable[int] | None = None) -> int | None:
        """The leader that every node in ``among`` (default: live) agrees on, if any: one of
        them reports role ``leader`` and all others name it with the same term."""
        nodes = list(among) if among is not None else self.live()
        sts = self.statuses(nodes)
        leaders = [i for i, s in sts.items() if not isinstance(s, Exception) and s.role == "leader"]
        if len(leaders) != 1:
            return None
        lead = leaders[0]
        term = sts[lead].term  # type: ignore[attr-defined]
        for s in sts.values():
            if isinstance(s, Exception) or s.leader_id != lead or s.term != term:
                return None
        return lead

    def majority_leader(self) -> int | None:
        """The leader of the current term as seen by a majority of the known nodes (some
        nodes may be cut off and campaigning): it reports role ``leader`` and a majority of
        nodes name it with its term."""
        sts = self.statuses(sorted(self.nodes))
        for i, s in sts.items():
            if isinstance(s, Exception) or s.role != "leader":
                continue
            term = s.term
            votes = sum(
                1
                for t in sts.values()
                if not isinstance(t, Exception) and t.leader_id == i and t.term == term
            )
            if votes > len(self.nodes) // 2:
                return i
        return None

    def wait_for_majority_leader(self, timeout: float = 20.0) -> int:
        """Wait for :meth:`majority_leader`."""
        return wait_until(
            "a leader followed by a majority", self.majority_leader, timeout, 0.1, self.describe
        )

    def wait_for_leader(self, among: Iterable[int] | None = None, timeout: float = 20.0) -> int:
        """Wait until the nodes in ``among`` (default: live) agree on one leader; return it."""
        nodes = list(among) if among is not None else None
        return wait_until(
            f"a leader agreed by nodes {nodes or self.live()}",
            lambda: self.leader(nodes),
            timeout,
            interval=0.1,
            describe=self.describe,
        )

    def wait_for_new_leader(
        self, old: int, among: Iterable[int] | None = None, timeout: float = 20.0
    ) -> int:
        """Wait for an agreed leader other than ``old``."""
        nodes = list(among) if among is not None else None

        def probe() -> int | None:
            lead = self.leader(nodes)
            return lead if lead is not None and lead != old else None

        return wait_until(f"a leader other than {old}", probe, timeout, 0.1, self.describe)

    def wait_caught_up(self, among: Iterable[int] | None = None, timeout: float = 30.0) -> int:
        """Wait until every node in ``among`` (default: live) has applied everything the
        leader has committed at the start of the wait; returns that index."""
        nodes = list(among) if among is not None else self.live()
        lead = self.wait_for_leader(nodes, timeout)
        target = self.api(lead).status().commit_index

        def probe() -> bool:
            sts = self.statuses(nodes)
            return all(
                not isinstance(s, Exception) and s.applied_index >= target  # type: ignore[attr-defined]
                for s in sts.values()
            )

        wait_until(f"nodes {nodes} applying index {target}", probe, timeout, 0.1, self.describe)
        return int(target)

    # ------------------------------------------------------------------ membership

    def add_node(self, via: int | None = None) -> int:
        """Define a new node, start it, and add it with ``AddNode`` through ``via`` (default:
        the leader); returns its id. The node joins with ``--peers`` naming the current
        members and itself."""
        members = [i for i in self.nodes if self.nodes[i].running or self.nodes[i].starts]
        new_id = max(self.nodes) + 1
        node = self._define(new_id)
        node.peers = self._peers_of(new_id, [*members, new_id])
        node.env["GATEWAY_JOIN"] = "true"  # not a founding member: wait to be added
        ingress = (
            self.net.add_link(ANY, new_id, node.peer_port) if self.proxied else node.peer_port
        )
        lead = via if via is not None else self.wait_for_leader()
        self.spawn(new_id)
        self.wait_api(new_id)
        self.api(lead).add_node(new_id, f"{LOOPBACK}:{ingress}", node.api_address)
        return new_id

    def remove_node(self, i: int, via: int | None = None) -> None:
        """``RemoveNode(i)`` through ``via`` (default: the leader), then stop the process."""
        lead = via if via is not None else self.wait_for_leader()
        self.api(lead).remove_node(i)

    def forget(self, i: int) -> None:
        """Stop node ``i`` and drop it and its proxies from the cluster's bookkeeping."""
        self.kill(i)
        self.net.remove_node(i)
        self.nodes.pop(i)

    # ------------------------------------------------------------------ reports

    def describe(self) -> str:
        """Status of every node and the proxy faults, for failure messages."""
        lines = []
        for i, n in sorted(self.nodes.items()):
            state = "paused" if n.paused else ("running" if n.running else "down")
            if n.running and not n.paused:
                try:
                    s = self.api(i).status(timeout=0.5)
                    state += (
                        f" role={s.role} term={s.term} leader={s.leader_id} "
                        f"commit={s.commit_index} applied={s.applied_index} "
                        f"first={s.first_index} last={s.last_index} "
                        f"members={[m.node_id for m in s.members]}"
                    )
                except grpc.RpcError as e:
                    state += f" status failed: {_short(e)}"
            lines.append(f"node {i}: {state}")
        if self.proxied:
            lines.append(self.net.describe())
        return "\n".join(lines)

    def log_tail(self, i: int, lines: int = 40) -> str:
        n = self.nodes.get(i)
        if n is None or not n.log_path.exists():
            return f"--- node {i}: no log"
        text = n.log_path.read_text(errors="replace").splitlines()
        return f"--- node {i} log ({n.log_path}), last {lines} lines:\n" + "\n".join(
            text[-lines:]
        )

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(self.log_tail(i, lines) for i in sorted(self.nodes))

    # ------------------------------------------------------------------ shutdown

    def close(self) -> None:
        """Kill every node process and close the proxies (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for i in list(self._apis):
            self._drop_api(i)
        for n in self.nodes.values():
            if n.proc is not None and n.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    n.proc.send_signal(signal.SIGKILL)
        for n in self.nodes.values():
            if n.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    n.proc.wait(10)
        self.net.close()
        atexit.unregister(self.close)

    def __enter__(self) -> ProcessCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
