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
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from gateway.client import GatewayClient

from .launcher import Launcher
from .local import node_args
from .proxy import ProxyNetwork

__all__ = ["LocalGatewayCluster"]


class LocalGatewayCluster:
    """See the module docstring. Nodes are numbered from 1; they run in the caller's working
    directory, on ports and under the process guarantees of
    :class:`~gateway.testing.launcher.Launcher`."""

    def __init__(self, size: int = 3, *, plugins: Sequence[str] = (),
                 options: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
                 start_timeout: float = 60.0) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one node")
        self.size = size
        self.plugins, self.options, self.env = tuple(plugins), dict(options or {}), dict(env or {})
        self.start_timeout = start_timeout
        self._dir: str | None = None
        self._nodes: Launcher | None = None

    def start(self) -> LocalGatewayCluster:
        try:
            self._dir = tempfile.mkdtemp(prefix="gateway-cluster-")
            self._nodes = Launcher(self._dir, self.size,
                                   node_args=node_args(self.plugins, self.options),
                                   env=self.env, proxied=True, start_timeout=self.start_timeout,
                                   cwd=os.getcwd())
            self._nodes.start(wait_leader=False)
            self.leader(self.start_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _launched(self) -> Launcher:
        if self._nodes is None:
            raise RuntimeError("the cluster is not started")
        return self._nodes

    def _net(self) -> ProxyNetwork:
        net = self._launched().net
        assert net is not None  # proxied=True
        return net

    def stop(self) -> None:
        """SIGTERM every node (SIGKILL after 20 s), close the proxies, remove the directory."""
        if self._nodes is not None:
            self._nodes.close(term_timeout=20)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> LocalGatewayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def api(self, n: int) -> str:
        return self._launched().nodes[n].api_address

    def apis(self) -> list[str]:
        """The APIs of the nodes whose process runs."""
        return [node.api_address for node in self._launched().nodes.values() if node.running]

    # Any: ``GatewayClient``'s keyword options, passed through as it takes them
    def client(self, **kw: Any) -> GatewayClient:
        return GatewayClient(self.apis(), **kw)

    def leader(self, timeout: float = 30.0) -> int:
        """The running node that reports itself leader (waits up to ``timeout``)."""
        nodes = self._launched()
        deadline = time.monotonic() + timeout
        while True:
            for n, node in nodes.nodes.items():
                if not node.running:
                    continue
                try:
                    if nodes.status(n, timeout=2).role == "leader":
                        return n
                except grpc.RpcError:
                    continue
            if time.monotonic() > deadline:
                raise RuntimeError(f"no leader within {timeout}s")
            time.sleep(0.2)

    def logs(self, n: int) -> str:
        return self._nodes.log_text(n) if self._nodes is not None and self._dir else ""

    def kill(self, n: int) -> None:
        self._launched().kill(n)

    def restart(self, n: int) -> None:
        self._launched().restart(n)

    def partition(self, n: int) -> None:
        self._net().isolate(n)

    def heal(self) -> None:
        self._net().heal()
