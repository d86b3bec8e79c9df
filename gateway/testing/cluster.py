"""``GatewayCluster``: an n-node gateway cluster in Docker containers on a private network.

Each node is a container of the gateway image named ``gateway-<id>-<n>`` on its own bridge
network (peers reach each other by name on port 7100); the API of each is published on a
free loopback port of the host. Faults: ``kill(n)`` (SIGKILL), ``restart(n)`` (the same
container: its data volume kept), ``partition(n)`` (disconnected from the network: it reaches
no peer, and ``apis()`` / ``client()`` leave it out) and ``heal()``. ``networks`` names existing
networks every node joins as well -- where the stores its appliers write to run --, which a
partition leaves alone (it cuts a node off from its peers, not from its stores). ``stop()``
removes the containers, their volumes and the network -- also after a failed test (no reaper).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.client import GatewayClient, GatewayError

from ._docker import wait_healthy

__all__ = ["GatewayCluster"]

API_PORT = "7070/tcp"


class GatewayCluster:
    """See the module docstring. Nodes are numbered from 1."""

    def __init__(self, size: int = 3, image: str = "gateway:dev", *,
                 plugins: Sequence[str] = (), options: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, networks: Sequence[str] = (),
                 start_timeout: float = 120.0) -> None:
        import docker

        if size < 1:
            raise ValueError("a cluster has at least one node")
        self.size, self.image = size, image
        self.plugins, self.options, self.env = tuple(plugins), dict(options or {}), dict(env or {})
        self.networks, self.start_timeout = tuple(networks), start_timeout
        self._docker = docker.from_env()
        self._id = uuid.uuid4().hex[:8]
        # Any: docker-py's network and containers (the package has no type information)
        self._net: Any = None
        self._containers: dict[int, Any] = {}
        self._partitioned: set[int] = set()

    def name(self, n: int) -> str:
        return f"gateway-{self._id}-{n}"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> GatewayCluster:
        try:
            self._net = self._docker.networks.create(f"gateway-{self._id}", driver="bridge")
            peers = ",".join(f"{n}={self.name(n)}:7100" for n in range(1, self.size + 1))
            args: list[str] = []
            if self.plugins:
                args += ["--plugins", ",".join(self.plugins)]
            for key, value in self.options.items():
                args += ["-o", f"{key}={value}"]
            for n in range(1, self.size + 1):
                self._containers[n] = self._docker.containers.run(
                    self.image, args, name=self.name(n), hostname=self.name(n), detach=True,
                    network=self._net.name, ports={API_PORT: ("127.0.0.1", None)},
                    environment={"GATEWAY_NODE_ID": str(n), "GATEWAY_PEERS": peers,
                                 # the peer port on every interface of the test
                                 # container, plaintext: said so
                                 "GATEWAY_LISTEN": "0.0.0.0:7100",
                                 "GATEWAY_INSECURE_PEER": "true", **self.env})
                for extra in self.networks:
                    self._docker.networks.get(extra).connect(self._containers[n])
            for n in self._containers:
                self._wait_healthy(n)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Remove every container (with its volumes) and the network."""
        for c in self._containers.values():
            with contextlib.suppress(Exception):  # already gone
                c.remove(force=True, v=True)
        self._containers.clear()
        if self._net is not None:
            with contextlib.suppress(Exception):
                self._net.remove()
            self._net = None

    def __enter__(self) -> GatewayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access ---------------------------------------------------------------------------------

    def api(self, n: int) -> str:
        """``HOST:PORT`` of node ``n``'s API as the test process reaches it."""
        c = self._containers[n]
        c.reload()
        bound = (c.attrs["NetworkSettings"]["Ports"] or {}).get(API_PORT) or []
        if not bound:
            raise RuntimeError(f"node {n} publishes no API port (stopped or partitioned?)")
        return f"127.0.0.1:{bound[0]['HostPort']}"

    def apis(self) -> list[str]:
        """The APIs of the nodes that run and are not partitioned."""
        out = []
        for n in self._containers:
            if n in self._partitioned:
                continue
            try:
                out.append(self.api(n))
            except RuntimeError:
                continue
        return out

    # Any: ``GatewayClient``'s keyword options, passed through as it takes them
    def client(self, **kw: Any) -> GatewayClient:
        """A client of every reachable node (writes to any node reach the leader)."""
        return GatewayClient(self.apis(), **kw)

    def leader(self, timeout: float = 30.0) -> int:
        """The node a reachable majority follows as leader (waits up to ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            for n in self._containers:
                if n in self._partitioned:
                    continue
                try:
                    with GatewayClient(self.api(n), timeout=2) as c:
                        st = c.status(timeout=2)
                except (GatewayError, RuntimeError):
                    continue
                if st.role == "leader":
                    return n
            if time.monotonic() > deadline:
                raise RuntimeError(f"no leader within {timeout}s")
            time.sleep(0.2)

    def logs(self, n: int) -> str:
        out: bytes = self._containers[n].logs()
        return out.decode(errors="replace")

    # -- faults ---------------------------------------------------------------------------------

    def kill(self, n: int) -> None:
        """SIGKILL node ``n``'s container (its data volume is kept for ``restart``)."""
        self._containers[n].kill()

    def restart(self, n: int) -> None:
        """Start node ``n``'s container again and wait until it is healthy."""
        self._containers[n].start()
        self._wait_healthy(n)

    def partition(self, n: int) -> None:
        """Disconnect node ``n`` from the cluster's network."""
        self._net.disconnect(self._containers[n])
        self._partitioned.add(n)

    def heal(self) -> None:
        """Reconnect every partitioned node (under its name, so peers find it again)."""
        for n in sorted(self._partitioned):
            self._net.connect(self._containers[n], aliases=[self.name(n)])
        self._partitioned.clear()

    def _wait_healthy(self, n: int) -> None:
        wait_healthy(self._containers[n], self.start_timeout, f"node {n}")
