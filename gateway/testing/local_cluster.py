"""``LocalGatewayCluster``: an n-node gateway cluster of local ``gateway run`` processes.

The Docker-free twin of ``GatewayCluster`` (same methods): every node reaches every other
through a loopback proxy (``gateway.testing.proxy``), so ``partition(n)`` cuts node ``n`` off
from its peers in both directions and ``heal()`` restores them. Unlike a container taken off
its network, a partitioned local node's API stays reachable by the test. ``kill(n)`` is
SIGKILL; ``restart(n)`` starts the same node on its data directory again. ``stop()`` stops
every process and removes the temporary directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.client import GatewayClient, GatewayError

from .local import _free_port
from .proxy import ProxyNetwork

__all__ = ["LocalGatewayCluster"]


class LocalGatewayCluster:
    """See the module docstring. Nodes are numbered from 1."""

    def __init__(self, size: int = 3, *, plugins: Sequence[str] = (),
                 options: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
                 start_timeout: float = 60.0) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one node")
        self.size = size
        self.plugins, self.options, self.env = tuple(plugins), dict(options or {}), dict(env or {})
        self.start_timeout = start_timeout
        self._dir: str | None = None
        self._net: ProxyNetwork | None = None
        self._peer: dict[int, int] = {}
        self._api: dict[int, str] = {}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self) -> LocalGatewayCluster:
        try:
            self._dir = tempfile.mkdtemp(prefix="gateway-cluster-")
            self._net = ProxyNetwork()
            nodes = range(1, self.size + 1)
            self._peer = {n: _free_port() for n in nodes}
            self._api = {n: f"127.0.0.1:{_free_port()}" for n in nodes}
            for n in nodes:
                self._spawn(n)
            for n in nodes:
                self._wait_serving(n)
            self.leader(self.start_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _peers_of(self, n: int) -> str:
        assert self._net is not None
        out = []
        for m in range(1, self.size + 1):
            port = self._peer[m] if m == n else self._net.add_link(n, m, self._peer[m])
            out.append(f"{m}=127.0.0.1:{port}")
        return ",".join(out)

    def _spawn(self, n: int) -> None:
        assert self._dir is not None
        cmd = [sys.executable, "-m", "gateway.cli", "run", "--node-id", str(n),
               "--listen", f"127.0.0.1:{self._peer[n]}", "--api", self._api[n],
               "--peers", self._peers_of(n), "--data-dir", os.path.join(self._dir, f"node-{n}"),
               "--no-fsync"]
        if self.plugins:
            cmd += ["--plugins", ",".join(self.plugins)]
        for key, value in self.options.items():
            cmd += ["-o", f"{key}={value}"]
        log = open(os.path.join(self._dir, f"node-{n}.log"), "ab")  # noqa: SIM115
        self._procs[n] = subprocess.Popen(cmd, stdout=log, stderr=log,
                                          env={**os.environ, **self.env})
        log.close()

    def _wait_serving(self, n: int) -> None:
        deadline = time.monotonic() + self.start_timeout
        with GatewayClient(self._api[n], timeout=5) as c:
            while True:
                if self._procs[n].poll() is not None:
                    raise RuntimeError(f"node {n} exited with {self._procs[n].returncode}: "
                                       f"{self.logs(n)[-2000:]}")
                try:
                    c.status(timeout=1)
                    return
                except GatewayError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {n} did not serve: {self.logs(n)[-2000:]}")
                time.sleep(0.1)

    def stop(self) -> None:
        for p in self._procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self._procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs.clear()
        if self._net is not None:
            self._net.close()
            self._net = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> LocalGatewayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def api(self, n: int) -> str:
        return self._api[n]

    def apis(self) -> list[str]:
        """The APIs of the nodes whose process runs."""
        return [self._api[n] for n, p in self._procs.items() if p.poll() is None]

    def client(self, **kw: Any) -> GatewayClient:
        return GatewayClient(self.apis(), **kw)

    def leader(self, timeout: float = 30.0) -> int:
        """The running node that reports itself leader (waits up to ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            for n, p in self._procs.items():
                if p.poll() is not None:
                    continue
                try:
                    with GatewayClient(self._api[n], timeout=2) as c:
                        if c.status(timeout=2).role == "leader":
                            return n
                except GatewayError:
                    continue
            if time.monotonic() > deadline:
                raise RuntimeError(f"no leader within {timeout}s")
            time.sleep(0.2)

    def logs(self, n: int) -> str:
        if self._dir is None:
            return ""
        try:
            with open(os.path.join(self._dir, f"node-{n}.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def kill(self, n: int) -> None:
        self._procs[n].kill()
        self._procs[n].wait()

    def restart(self, n: int) -> None:
        self._spawn(n)
        self._wait_serving(n)

    def partition(self, n: int) -> None:
        assert self._net is not None
        self._net.isolate(n)

    def heal(self) -> None:
        assert self._net is not None
        self._net.heal()
