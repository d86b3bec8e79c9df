"""A cluster of ``gateway run`` processes on loopback, with a fault-injecting proxy on every peer
link: the project's fault harness on top of :class:`gateway.testing.launcher.Launcher`.

The launcher starts the nodes (node ``i`` reaches node ``j`` through the proxy ``(i, j)``, see
:mod:`gateway.testing.proxy`), picks their ports below the ephemeral range, makes them die with
the test process and writes their logs to ``ROOT/logs/node-i.log`` (see its docstring).
:class:`ProcessCluster` adds what the fault tests need: an API handle per node
(:class:`tests.harness.api.NodeApi`), leader and catch-up waits, membership changes and
failure reports. A node added later (``AddNode`` carries one peer address for everyone) is
reached through one shared ingress proxy ``(0, j)``; it dials the others through its own
per-pair proxies.

Clients and the harness reach each node's public API directly (``A_i``), never through a proxy.
:meth:`ProcessCluster.close` (also run at exit) kills everything, so an interrupted run leaves
no orphans.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from gateway.testing import launcher
from gateway.testing.launcher import LOOPBACK, Launcher, NodeProcess, PortAllocator
from gateway.testing.proxy import ANY, ProxyNetwork
from gateway.v1 import gateway_pb2
from tests.harness.api import NodeApi

__all__ = ["LOOPBACK", "ClusterError", "NodeProcess", "PortAllocator", "ProcessCluster",
           "wait_until"]

T = TypeVar("T")


class ClusterError(launcher.LaunchError, AssertionError):
    """The cluster did not reach the expected state in time (an AssertionError, so pytest shows
    it as a test failure with the message)."""


def wait_until(
    what: str,
    probe: Callable[[], T | None],
    timeout: float,
    interval: float = 0.05,
    describe: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something other than None/False; raise
    :class:`ClusterError` naming ``what`` after ``timeout`` seconds."""
    return launcher.wait_until(what, probe, timeout, interval, describe, error=ClusterError)


class ProcessCluster(Launcher):
    """N ``gateway run`` processes with proxies between them.

    ``node_args`` are appended to every node's command line (timing flags etc.); ``env`` is
    merged into the environment; ``program`` is what runs ``run ...`` (``gateway``'s CLI, or
    the harness's own stand-in :mod:`tests.harness.fakenode`). Call :meth:`start`, then use the
    fault methods; always :meth:`close` (a context manager and an atexit hook do).
    """

    error = ClusterError
    net: ProxyNetwork

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
        self._apis: dict[int, NodeApi] = {}
        super().__init__(root, size, node_args=node_args, env=env, proxied=proxied,
                         start_timeout=start_timeout, program=program)
        if self.net is None:  # faults stay callable (they act on no link)
            self.net = ProxyNetwork(seed=size)

    def start(self, wait_leader: bool = True) -> ProcessCluster:
        """Start every defined node that is not running; wait for their APIs (and a leader)."""
        super().start(wait_leader)
        return self

    def _peers_of(self, i: int, members: Iterable[int]) -> dict[int, str]:
        if not self.proxied:
            return {j: self.nodes[j].peer_address for j in sorted(members)}
        return super()._peers_of(i, members)

    # ------------------------------------------------------------------ API

    def api(self, i: int) -> NodeApi:
        """A cached API handle for node ``i`` (recreated after a kill)."""
        api = self._apis.get(i)
        if api is None:
            api = self._apis[i] = NodeApi(self.nodes[i].api_address)
        return api

    def status(self, i: int, timeout: float = 1.0) -> gateway_pb2.StatusResponse:
        """Status through node ``i``'s :meth:`api` handle (one channel per node)."""
        return self.api(i).status(timeout=timeout)

    def _drop_channel(self, i: int) -> None:
        super()._drop_channel(i)
        api = self._apis.pop(i, None)
        if api is not None:
            api.close()

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
                not isinstance(s, Exception) and s.applied_index >= target
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

    def __enter__(self) -> ProcessCluster:
        return self
