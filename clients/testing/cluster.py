#!/usr/bin/env python3
"""A local Gateway cluster for the client test suites (Go, Java, TypeScript, cross-language).

    python clients/testing/cluster.py [--nodes 3] [--secure] [--dir DIR] [--keep]

starts ``--nodes`` ``gateway run`` processes on loopback with free ports in a temporary
directory (or ``DIR``), waits until they agree on a leader and prints ONE line of JSON::

    {"dir": "...", "leader": 2, "ca": null, "tokens": {},
     "nodes": [{"id": 1, "api": "127.0.0.1:21011", "peer": "127.0.0.1:21012", "pid": 4242,
                "log": ".../logs/node-1.log"}, ...]}

With ``--secure`` the API speaks TLS (a throw-away CA; ``ca`` is the path of its PEM) and
needs bearer tokens: ``tokens`` maps ``admin`` (read, write, admin), ``writer`` (read, write)
and ``reader`` (read) to their secrets.

It then reads commands on stdin, one per line, and answers each with one line of JSON
(``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``):

    leader        wait (up to 20 s) until the running nodes agree on a leader: {"leader": ID}
    kill ID       SIGKILL node ID and reap it
    restart ID    start node ID again on its ports and data directory, wait for its API
    status        the start-up JSON again, with current pids (0 = not running)
    stop          stop everything and exit (as does the end of stdin)

Cleanup: the nodes are SIGKILLed when the launcher stops, when its stdin closes (the test
process died: its end of the pipe closed) and, through ``PR_SET_PDEATHSIG`` on Linux, when
the launcher itself dies; the directory is removed unless ``--keep`` or ``--dir`` was given.
Start-up failures exit 1 with one line on stderr followed by the nodes' log tails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402

LOOPBACK = "127.0.0.1"
TOKENS = {"admin": ["read", "write", "admin"], "writer": ["read", "write"], "reader": ["read"]}


class LauncherError(Exception):
    """The cluster did not get into the requested state; the message says what."""


@dataclass
class Node:
    id: int
    peer: str
    api: str
    data_dir: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def free_ports(count: int) -> list[int]:
    """Loopback ports nobody listens on, below the ephemeral range (so that no outgoing
    connection takes one between the pick and the node's bind)."""
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    lo, hi = (20000, low - 1) if low > 21000 else (10000, low - 1)
    rng = random.Random(os.getpid() ^ time.time_ns())
    ports: list[int] = []
    for _ in range(2000):
        port = rng.randint(lo, hi)
        if port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    raise LauncherError("no free loopback ports found")


#: Runs before a node: die with the launcher (PR_SET_PDEATHSIG, Linux; elsewhere the end of
#: the launcher's stdin still stops the nodes), then exec the node. A shim rather than
#: ``preexec_fn``: forking this process, which runs gRPC threads, and running Python in the
#: child before exec lets gRPC's fork handlers restart its poller there, which then aborts
#: (``epoll_wait error: Bad file descriptor``) once the child closes its descriptors.
_SHIM = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(70)\n"  # the launcher is gone already
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


class Cluster:
    """N ``gateway run`` processes; see the module docstring."""

    def __init__(self, root: Path, size: int, secure: bool) -> None:
        self.root = root
        (root / "logs").mkdir(parents=True, exist_ok=True)
        ports = free_ports(2 * size)
        self.nodes = {i: Node(i, f"{LOOPBACK}:{ports[2 * i - 2]}",
                              f"{LOOPBACK}:{ports[2 * i - 1]}", root / f"node-{i}",
                              root / "logs" / f"node-{i}.log") for i in range(1, size + 1)}
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.ca: str | None = None
        self.tokens: dict[str, str] = {}
        if secure:
            self._secure()
        creds = (grpc.ssl_channel_credentials(Path(self.ca).read_bytes()) if self.ca else None)
        self._creds = creds
        self._metadata = ((("authorization", f"Bearer {self.tokens['admin']}"),)
                          if self.tokens else ())
        self._channels: dict[int, grpc.Channel] = {}

    def _secure(self) -> None:
        from gateway.node.security import make_test_ca

        tls = self.root / "tls"
        tls.mkdir()
        make_test_ca(str(tls), ("localhost", LOOPBACK), ("node",))
        self.ca = str(tls / "ca.pem")
        self.tokens = {name: f"{name}-{os.urandom(12).hex()}" for name in TOKENS}
        lines = []
        for name, perms in TOKENS.items():
            quoted = ", ".join(f'"{p}"' for p in perms)
            lines += ["[[token]]", f'name = "{name}"', f'token = "{self.tokens[name]}"',
                      f"permissions = [{quoted}]", ""]
        tokens_file = self.root / "tokens.toml"
        tokens_file.write_text("\n".join(lines))
        self.env.update(GATEWAY_TLS_API_CERT=str(tls / "node.pem"),
                        GATEWAY_TLS_API_KEY=str(tls / "node.key"),
                        GATEWAY_TOKENS_FILE=str(tokens_file))

    # -- processes --------------------------------------------------------------------------

    def spawn(self, i: int) -> None:
        n = self.nodes[i]
        if n.running:
            raise LauncherError(f"node {i} is already running (pid {n.proc.pid})")  # type: ignore[union-attr]
        peers = ",".join(f"{j}={m.peer}" for j, m in sorted(self.nodes.items()))
        cmd = [sys.executable, "-m", "gateway.cli", "run", "--node-id", str(i),
               "--listen", n.peer, "--api", n.api, "--peers", peers,
               "--data-dir", str(n.data_dir), "--appliers", "", "--no-fsync", "--tick-ms", "30"]
        with n.log.open("ab") as log:
            log.write(f"\n===== {' '.join(cmd)}\n".encode())
            log.flush()
            n.proc = subprocess.Popen([sys.executable, "-c", _SHIM, str(os.getpid()), *cmd],
                                      stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, env=self.env, cwd=self.root)
        self._drop_channel(i)

    def kill(self, i: int) -> None:
        n = self.nodes[i]
        if n.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                n.proc.send_signal(signal.SIGKILL)
            n.proc.wait(10)
        self._drop_channel(i)

    def close(self) -> None:
        for i in self.nodes:
            with contextlib.suppress(Exception):
                self.kill(i)

    # -- status -----------------------------------------------------------------------------

    def _channel(self, i: int) -> grpc.Channel:
        ch = self._channels.get(i)
        if ch is None:
            api = self.nodes[i].api
            ch = (grpc.secure_channel(api, self._creds) if self._creds is not None
                  else grpc.insecure_channel(api))
            self._channels[i] = ch
        return ch

    def _drop_channel(self, i: int) -> None:
        ch = self._channels.pop(i, None)
        if ch is not None:
            ch.close()

    def status(self, i: int) -> Any:
        stub = gateway_pb2_grpc.GatewayStub(self._channel(i))
        return stub.Status(gateway_pb2.StatusRequest(), timeout=1.0, metadata=self._metadata)

    def wait_api(self, i: int, timeout: float = 30.0) -> None:
        n = self.nodes[i]
        deadline = time.monotonic() + timeout
        while True:
            if not n.running:
                code = n.proc.returncode if n.proc is not None else None
                raise LauncherError(f"node {i} exited with code {code} during start")
            try:
                self.status(i)
                return
            except grpc.RpcError as exc:
                if time.monotonic() > deadline:
                    raise LauncherError(f"node {i}'s API on {n.api} did not answer within "
                                        f"{timeout:.0f} s: {exc.code()}") from None
            time.sleep(0.1)

    def agreed_leader(self) -> int | None:
        """The leader every running node names with the same term, if any."""
        sts = {}
        for i, n in self.nodes.items():
            if n.running:
                try:
                    sts[i] = self.status(i)
                except grpc.RpcError:
                    return None
        leaders = [i for i, s in sts.items() if s.role == "leader"]
        if len(leaders) != 1:
            return None
        lead = leaders[0]
        same = all(s.leader_id == lead and s.term == sts[lead].term for s in sts.values())
        return lead if same else None

    def wait_leader(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            lead = self.agreed_leader()
            if lead is not None:
                return lead
            if time.monotonic() > deadline:
                raise LauncherError(f"the running nodes agreed on no leader within {timeout} s")
            time.sleep(0.1)

    def describe(self, leader: int | None) -> dict[str, Any]:
        return {"dir": str(self.root), "leader": leader, "ca": self.ca, "tokens": self.tokens,
                "nodes": [{"id": n.id, "api": n.api, "peer": n.peer,
                           "pid": n.proc.pid if n.running else 0,  # type: ignore[union-attr]
                           "log": str(n.log)} for n in self.nodes.values()]}

    def log_tail(self, i: int, lines: int = 30) -> str:
        n = self.nodes[i]
        text = n.log.read_text(errors="replace").splitlines() if n.log.exists() else []
        return "\n".join([f"--- node {n.id} ({n.log}), last {lines} lines:", *text[-lines:]])

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(self.log_tail(i, lines) for i in self.nodes)


def _answer(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def _command(cluster: Cluster, line: str) -> bool:
    """Run one command line; False when the launcher should stop."""
    words = line.split()
    if not words:
        return True
    cmd, args = words[0], words[1:]
    try:
        if cmd == "stop":
            _answer({"ok": True})
            return False
        if cmd == "leader" and not args:
            _answer({"ok": True, "leader": cluster.wait_leader()})
        elif cmd in ("kill", "restart") and len(args) == 1 and args[0].isdigit():
            i = int(args[0])
            if i not in cluster.nodes:
                raise LauncherError(f"{cmd}: no node {i}")
            if cmd == "kill":
                cluster.kill(i)
                _answer({"ok": True, "killed": i})
            else:
                cluster.kill(i)
                cluster.spawn(i)
                try:
                    cluster.wait_api(i)
                except LauncherError as exc:
                    raise LauncherError(f"{exc}\n{cluster.log_tail(i)}") from None
                _answer({"ok": True, "restarted": i,
                         "pid": cluster.nodes[i].proc.pid})  # type: ignore[union-attr]
        elif cmd == "status" and not args:
            _answer({"ok": True, **cluster.describe(cluster.agreed_leader())})
        else:
            raise LauncherError(f"unknown command {line.strip()!r} (leader, kill ID, "
                                f"restart ID, status, stop)")
    except LauncherError as exc:
        _answer({"ok": False, "error": str(exc)})
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3, help="cluster size (default 3)")
    parser.add_argument("--secure", action="store_true", help="TLS and bearer tokens on the API")
    parser.add_argument("--dir", help="data directory (kept); default: a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ns = parser.parse_args(argv)
    if ns.nodes < 1:
        parser.error("--nodes: at least 1")
    root = Path(ns.dir) if ns.dir else Path(tempfile.mkdtemp(prefix="gateway-cluster-"))
    keep = ns.keep or bool(ns.dir)
    cluster: Cluster | None = None

    def on_signal(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        root.mkdir(parents=True, exist_ok=True)
        cluster = Cluster(root, ns.nodes, ns.secure)
        try:
            for i in cluster.nodes:
                cluster.spawn(i)
            for i in cluster.nodes:
                cluster.wait_api(i)
            leader = cluster.wait_leader()
        except LauncherError as exc:
            print(f"cluster: {exc}\n{cluster.log_tails()}", file=sys.stderr)
            return 1
        _answer(cluster.describe(leader))
        for line in sys.stdin:
            if not _command(cluster, line):
                break
        return 0
    finally:
        if cluster is not None:
            cluster.close()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
