"""The one way to start local ``gateway run`` processes for tests: ports, processes, logs.

Every local cluster Gateway's tests and tools start goes through :class:`Launcher` -- the
public fixtures' ``LocalGateway`` and ``LocalGatewayCluster``, the project's own fault harness
(``tests/harness/cluster.py``'s ``ProcessCluster``) and the client suites' launcher
(``clients/testing/cluster.py``). Node ``i`` is one subprocess::

    PROGRAM run --node-id i --listen 127.0.0.1:P_i --api 127.0.0.1:A_i \\
        --peers 1=ADDR_1,...,i=127.0.0.1:P_i,... --data-dir ROOT/node-i [node_args] [extra_args]

where ``ADDR_j`` is node ``j``'s peer port, or, with ``proxied=True``, the port of the proxy
``(i, j)`` in front of it (:mod:`gateway.testing.proxy`), so a test can cut, delay or reset
every flow between two nodes. Clients reach each node's API directly, never through a proxy.

Guarantees:

* **Ports** are picked below the kernel's ephemeral range (``ip_local_port_range``), so no
  outgoing connection can take one between the pick and the node's bind -- unlike binding
  port 0 and closing, whose port the kernel hands to the next ``connect``. This process never
  hands out a port twice. Proxy ports are bound once and held by the proxy.
* **Children die with the parent.** Each node runs under a tiny shim that asks the kernel to
  SIGKILL it when the launching process dies (``PR_SET_PDEATHSIG``, Linux), then execs the
  node (so its pid is the node's: signals reach the node itself). The kernel ties that signal
  to the *thread* that forked, so processes are forked by the main thread or by one
  long-lived spawner thread, never by a short-lived caller thread. :meth:`Launcher.close`
  (also run at exit) stops everything.
* **Logs**: node ``i``'s stdout and stderr go to ``ROOT/logs/node-i.log``, appended across
  restarts after a ``===== start #N`` header line; :meth:`Launcher.log_tails` collects them
  for failure messages.

This module imports neither the node nor the client library, only the generated stubs.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from gateway.v1 import gateway_pb2, gateway_pb2_grpc

from .proxy import ProxyNetwork

__all__ = ["LOOPBACK", "LaunchError", "Launcher", "NodeProcess", "PortAllocator",
           "spawn_tied", "wait_until"]

T = TypeVar("T")

LOOPBACK = "127.0.0.1"

#: Runs before the node: die with the parent (PR_SET_PDEATHSIG; where prctl is missing the
#: caller's own cleanup still applies), give up if the parent is gone already, exec the node.
#: A shim rather than ``preexec_fn``: forking a process that runs gRPC threads and running
#: Python in the child before exec lets gRPC's fork handlers restart its poller there, which
#: then aborts (``epoll_wait error: Bad file descriptor``) once the child closes descriptors.
_SHIM = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"  # PR_SET_PDEATHSIG
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(70)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


class LaunchError(RuntimeError):
    """The processes did not get into the requested state; the message says what and why
    (with the nodes' log tails where they explain it)."""


# ------------------------------------------------------------------------------------ ports


class PortAllocator:
    """Free loopback ports below the ephemeral range, each handed out at most once per
    process (across every allocator) until :meth:`release` gives it back: two nodes never
    get one port (gRPC servers bind with ``SO_REUSEPORT``, so both binds would succeed), and
    a long test suite does not run out of the few thousand ports below the range."""

    _lock = threading.Lock()
    _used: set[int] = set()

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed if seed is not None else os.getpid() ^ time.time_ns())
        low = 32768
        with contextlib.suppress(OSError, ValueError, IndexError):
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
        raise LaunchError(f"no free loopback port found in {self.low}..{self.high}")

    def release(self, ports: Iterable[int]) -> None:
        """Give back ports whose users are gone (their processes reaped)."""
        with self._lock:
            self._used.difference_update(ports)


# ------------------------------------------------------------------------------------ spawning

_spawner_lock = threading.Lock()
# Any: jobs of every result type share the spawner's queue, each with the future of its own
# result (``_on_long_lived_thread`` pairs them).
_spawner: tuple[int, queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]] | None = None


def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
    while True:
        fn, fut = jobs.get()
        try:
            fut.set_result(fn())
        except BaseException as exc:  # handed to the caller, which re-raises it
            fut.set_exception(exc)


def _on_long_lived_thread(fn: Callable[[], T]) -> T:
    """``fn()`` on the main thread or on the spawner thread (a daemon that lives as long as
    the process), so that a parent-death signal armed in a child fires when the process dies,
    not when the calling thread ends."""
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return fn()
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():  # none yet, or forked since
            jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(jobs,), name="gateway-spawner",
                             daemon=True).start()
            _spawner = (os.getpid(), jobs)
        fut: Future[T] = Future()
        _spawner[1].put((fn, fut))
    return fut.result()


def spawn_tied(cmd: Sequence[str], *, log: Path, env: Mapping[str, str] | None = None,
               cwd: Path | str | None = None, header: str = "") -> subprocess.Popen[bytes]:
    """Start ``cmd`` so that the kernel SIGKILLs it when this process dies; its stdin is
    /dev/null, its stdout and stderr are appended to ``log`` after ``header`` (a line)."""
    args = [sys.executable, "-c", _SHIM, str(os.getpid()), *cmd]
    with log.open("ab") as out:
        if header:
            out.write(f"\n{header}\n".encode())
            out.flush()
        return _on_long_lived_thread(lambda: subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None, cwd=cwd))


# ------------------------------------------------------------------------------------ waiting


def wait_until(what: str, probe: Callable[[], T | None], timeout: float,
               interval: float = 0.05, describe: Callable[[], str] | None = None,
               error: type[Exception] = LaunchError) -> T:
    """Call ``probe`` until it returns something other than None/False; raise ``error``
    naming ``what`` (and the last gRPC/OS error, and ``describe()``) after ``timeout``
    seconds. Other exceptions from ``probe`` propagate at once."""
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
            raise error(f"timed out after {timeout:.1f}s waiting for {what}{detail}{extra}")
        time.sleep(interval)


def _short(e: BaseException | None) -> str:
    if isinstance(e, grpc.RpcError):
        code = e.code() if hasattr(e, "code") else None
        details = e.details() if hasattr(e, "details") else ""
        return f"{code}: {details}"
    return repr(e)


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


class Launcher:
    """``size`` ``gateway run`` processes under ``root`` (see the module docstring).

    ``node_args`` are appended to every node's command line; ``env`` is merged into this
    process's environment for the nodes; ``program`` is what runs ``run ...``; ``cwd`` is the
    nodes' working directory (default ``root``). ``api_ca`` (PEM) and ``api_token`` are how
    this launcher reaches a node's API that speaks TLS and wants a bearer token. Errors are
    raised as :attr:`error` (a subclass may choose its own). Call :meth:`start`; always
    :meth:`close` (the context manager and an exit hook do).
    """

    error: type[Exception] = LaunchError

    def __init__(self, root: Path | str, size: int, *, node_args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, proxied: bool = True,
                 start_timeout: float = 20.0,
                 program: Sequence[str] = (sys.executable, "-m", "gateway.cli"),
                 cwd: Path | str | None = None, api_ca: bytes | None = None,
                 api_token: str | None = None) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one node")
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
        self.cwd = Path(cwd) if cwd is not None else self.root
        self.start_timeout = start_timeout
        self.ports = PortAllocator()
        self.net: ProxyNetwork | None = ProxyNetwork(seed=size) if proxied else None
        self.nodes: dict[int, NodeProcess] = {}
        self._creds = grpc.ssl_channel_credentials(api_ca) if api_ca is not None else None
        self._metadata = (("authorization", f"Bearer {api_token}"),) if api_token else ()
        self._channels: dict[int, grpc.Channel] = {}
        self._closed = False
        for i in range(1, size + 1):
            self._define(i)
        for i in self.nodes:
            self.nodes[i].peers = self._peers_of(i, self.nodes)
        atexit.register(self.close)

    # ------------------------------------------------------------------ layout

    def _define(self, i: int) -> NodeProcess:
        node = NodeProcess(id=i, peer_port=self.ports.take(), api_port=self.ports.take(),
                           data_dir=self.root / f"node-{i}",
                           log_path=self.root / "logs" / f"node-{i}.log", peers={})
        self.nodes[i] = node
        return node

    def _peers_of(self, i: int, members: Iterable[int]) -> dict[int, str]:
        """The --peers map node ``i`` is started with: itself directly, the others through
        the proxies ``(i, j)`` (created on demand) or directly when not proxied."""
        out: dict[int, str] = {}
        for j in sorted(members):
            target = self.nodes[j]
            if j != i and self.net is not None:
                out[j] = f"{LOOPBACK}:{self.net.add_link(i, j, target.peer_port)}"
            else:
                out[j] = target.peer_address
        return out

    def command(self, i: int) -> list[str]:
        """The full ``run`` command line of node ``i`` (without the shim)."""
        n = self.nodes[i]
        peers = ",".join(f"{j}={addr}" for j, addr in sorted(n.peers.items()))
        return [*self.program, "run", "--node-id", str(i), "--listen", n.peer_address,
                "--api", n.api_address, "--peers", peers, "--data-dir", str(n.data_dir),
                *self.node_args, *n.extra_args]

    # ------------------------------------------------------------------ processes

    def start(self, wait_leader: bool = True) -> Launcher:
        """Start every defined node that is not running; wait for their APIs (and for a
        leader they agree on)."""
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
            raise self.error(f"node {i} is already running "
                             f"(pid {n.proc.pid if n.proc else 0})")
        n.data_dir.mkdir(parents=True, exist_ok=True)
        n.starts += 1
        cmd = self.command(i)
        n.proc = spawn_tied(cmd, log=n.log_path, env={**self.env, **n.env}, cwd=self.cwd,
                            header=f"===== start #{n.starts} of node {i}: {' '.join(cmd)}")
        n.paused = False
        self._drop_channel(i)

    def wait_api(self, i: int, timeout: float | None = None) -> None:
        """Wait until node ``i`` answers Status; fails at once, with its log tail, if its
        process exits."""
        n = self.nodes[i]

        def probe() -> bool:
            if n.proc is not None and n.proc.poll() is not None:
                raise self.error(f"node {i} exited with code {n.proc.returncode} during "
                                 f"start\n{self.log_tail(i)}")
            self.status(i, timeout=1.0)
            return True

        wait_until(f"node {i}'s API on {n.api_address}", probe, timeout or self.start_timeout,
                   error=self.error)

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` and reap it."""
        n = self.nodes[i]
        if n.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            n.proc.send_signal(signal.SIGKILL)
        n.proc.wait(10)
        n.paused = False
        self._drop_channel(i)

    def terminate(self, i: int, timeout: float = 10.0) -> int:
        """SIGTERM node ``i`` (a clean shutdown) and wait; returns the exit code."""
        n = self.nodes[i]
        if n.proc is None:
            raise self.error(f"node {i} was never started")
        if n.paused:
            self.resume(i)
        with contextlib.suppress(ProcessLookupError):
            n.proc.send_signal(signal.SIGTERM)
        try:
            code = n.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            n.proc.kill()
            n.proc.wait(10)
            raise self.error(f"node {i} did not exit within {timeout}s of SIGTERM") from None
        self._drop_channel(i)
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
            raise self.error(f"node {i} is not running")
        n.proc.send_signal(signal.SIGSTOP)
        n.paused = True

    def resume(self, i: int) -> None:
        """SIGCONT node ``i``."""
        n = self.nodes[i]
        if n.proc is not None and n.running:
            n.proc.send_signal(signal.SIGCONT)
        n.paused = False

    # ------------------------------------------------------------------ status

    def status(self, i: int, timeout: float = 1.0) -> gateway_pb2.StatusResponse:
        """One Status call to node ``i`` (raises ``grpc.RpcError``)."""
        ch = self._channels.get(i)
        if ch is None:
            api = self.nodes[i].api_address
            ch = (grpc.secure_channel(api, self._creds) if self._creds is not None
                  else grpc.insecure_channel(api))
            self._channels[i] = ch
        stub = gateway_pb2_grpc.GatewayStub(ch)
        response: gateway_pb2.StatusResponse = stub.Status(
            gateway_pb2.StatusRequest(), timeout=timeout, metadata=self._metadata)
        return response

    def _drop_channel(self, i: int) -> None:
        """Forget what reaches node ``i``'s API (its process was replaced or stopped)."""
        ch = self._channels.pop(i, None)
        if ch is not None:
            ch.close()

    def live(self) -> list[int]:
        """Nodes whose process runs and is not paused."""
        return [i for i, n in sorted(self.nodes.items()) if n.running and not n.paused]

    def statuses(self, among: Iterable[int] | None = None,
                 timeout: float = 1.0) -> dict[int, gateway_pb2.StatusResponse | grpc.RpcError]:
        """Status of each node in ``among`` (default: live ones); the ``grpc.RpcError`` for a
        node that did not answer."""
        out: dict[int, gateway_pb2.StatusResponse | grpc.RpcError] = {}
        for i in among if among is not None else self.live():
            try:
                out[i] = self.status(i, timeout=timeout)
            except grpc.RpcError as e:
                out[i] = e
        return out

    def leader(self, among: Iterable[int] | None = None) -> int | None:
        """The leader every node in ``among`` (default: live) agrees on, if any: one of them
        reports role ``leader`` and all others name it with the same term."""
        nodes = list(among) if among is not None else self.live()
        sts = self.statuses(nodes)
        leaders = [(i, s) for i, s in sts.items()
                   if not isinstance(s, Exception) and s.role == "leader"]
        if len(leaders) != 1:
            return None
        lead, lead_status = leaders[0]
        term = lead_status.term
        for s in sts.values():
            if isinstance(s, Exception) or s.leader_id != lead or s.term != term:
                return None
        return lead

    def wait_for_leader(self, among: Iterable[int] | None = None, timeout: float = 20.0) -> int:
        """Wait until the nodes in ``among`` (default: live) agree on one leader; return it."""
        nodes = list(among) if among is not None else None
        return wait_until(f"a leader agreed by nodes {nodes or self.live()}",
                          lambda: self.leader(nodes), timeout, interval=0.1,
                          describe=self.describe, error=self.error)

    # ------------------------------------------------------------------ reports

    def describe(self) -> str:
        """Status of every node (and the proxy faults), for failure messages."""
        lines = []
        for i, n in sorted(self.nodes.items()):
            state = "paused" if n.paused else ("running" if n.running else "down")
            if n.running and not n.paused:
                try:
                    s = self.status(i, timeout=0.5)
                    state += (f" role={s.role} term={s.term} leader={s.leader_id} "
                              f"commit={s.commit_index} applied={s.applied_index} "
                              f"first={s.first_index} last={s.last_index} "
                              f"members={[m.node_id for m in s.members]}")
                except grpc.RpcError as e:
                    state += f" status failed: {_short(e)}"
            lines.append(f"node {i}: {state}")
        if self.net is not None:
            lines.append(self.net.describe())
        return "\n".join(lines)

    def log_text(self, i: int) -> str:
        """Everything node ``i`` printed so far (empty when nothing)."""
        n = self.nodes.get(i)
        try:
            return n.log_path.read_text(errors="replace") if n is not None else ""
        except OSError:
            return ""

    def log_tail(self, i: int, lines: int = 40) -> str:
        n = self.nodes.get(i)
        if n is None or not n.log_path.exists():
            return f"--- node {i}: no log"
        text = self.log_text(i).splitlines()
        return f"--- node {i} log ({n.log_path}), last {lines} lines:\n" + "\n".join(
            text[-lines:])

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(self.log_tail(i, lines) for i in sorted(self.nodes))

    # ------------------------------------------------------------------ shutdown

    def close(self, term_timeout: float | None = None) -> None:
        """Stop every node process and close the proxies (idempotent): SIGKILL, or, with
        ``term_timeout``, SIGTERM (a clean shutdown) and SIGKILL after that many seconds."""
        if self._closed:
            return
        self._closed = True
        for i in list(self._channels):
            self._drop_channel(i)
        sig = signal.SIGKILL if term_timeout is None else signal.SIGTERM
        for n in self.nodes.values():
            if n.proc is not None and n.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    if n.paused:
                        n.proc.send_signal(signal.SIGCONT)
                    n.proc.send_signal(sig)
        for n in self.nodes.values():
            if n.proc is None:
                continue
            try:
                n.proc.wait(term_timeout if term_timeout is not None else 10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    n.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    n.proc.wait(10)
        self.ports.release(p for n in self.nodes.values()
                           if n.proc is None or n.proc.returncode is not None
                           for p in (n.peer_port, n.api_port))
        if self.net is not None:
            self.net.close()
        atexit.unregister(self.close)

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
