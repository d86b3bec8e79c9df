"""Several gateway clusters as real processes on loopback, replicating to each other through
fault proxies on the channel links (the peer links of each cluster have their own proxies, from
:class:`~tests.harness.cluster.ProcessCluster`).

Every cluster ``c`` (ids 1..n) is one :class:`ProcessCluster` under ``ROOT/c<c>``, its nodes run
``gateway run --cluster-id c --config ROOT/c<c>.toml`` in the default configuration -- the
embedded SQLite applier on every node (``GATEWAY_PLUGINS=sqlite``), fsync on. The file holds
the cluster's conflict role, its rules, and one ``[[channels]]`` table per source cluster; a
channel's sources are not the source nodes' API addresses but proxies in front of them:

    replica c's channel from s  -->  proxy (1000*c, 1000*s + j)  -->  API of node j of s

one per (replica cluster, source node), in one :class:`ProxyNetwork` (``chan_net``), so a test
can cut one cluster off from the others (:meth:`MultiCluster.partition`) while each cluster's
own Raft links and the clients' API connections stay up. Topologies: ``pair`` (1 <-> 2) and
``ring`` (1 -> 2 -> ... -> n -> 1, each cluster reading from the previous one).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gateway.client import GatewayClient, GatewayError
from gateway.testing.proxy import ProxyNetwork
from gateway.v1 import gateway_pb2
from tests.harness.cluster import LOOPBACK, ClusterError, ProcessCluster, wait_until
from tests.harness.fingerprints import counted_exceptions_of

#: Node settings: short Raft timings, epochs every 100 ms (in the file), fsync on (the crash
#: faults need it), the SQLite applier only (the default configuration; other installed
#: plugins must not change runs).
NODE_ENV = {
    "GATEWAY_TICK_MS": "30",
    "GATEWAY_ELECTION_TICKS": "10",
    "GATEWAY_HEARTBEAT_TICKS": "1",
    "GATEWAY_FSYNC": "true",
    "GATEWAY_LOG_LEVEL": "info",
    "GATEWAY_LOG_FORMAT": "text",
    "GATEWAY_PLUGINS": "sqlite",
}

#: The checkout these tests belong to: its ``gateway`` runs in the nodes (an installed copy
#: elsewhere must not).

#: Readiness waits (not assertions on speed: the machine is shared and slow at times).
START_TIMEOUT = 90.0
LEADER_TIMEOUT = 60.0


@dataclass(frozen=True)
class Topology:
    """Which clusters exist (their sizes, cluster ids 1..n), who reads from whom, roles and
    conflict rules. ``kind`` is ``pair`` or ``ring``."""

    kind: str
    sizes: tuple[int, ...]
    roles: dict[int, str] = field(default_factory=dict)  # cid -> PRIMARY/SECONDARY/...
    rules: tuple[tuple[str, str], ...] = ()  # (table pattern, function)
    #: set the roles through the API once the clusters are up instead of in the file (a
    #: role the file names is imposed again at every start: a role flip needs this)
    roles_by_api: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("pair", "ring"):
            raise ValueError(f"topology kind {self.kind!r}: must be pair or ring")
        if self.kind == "pair" and len(self.sizes) != 2:
            raise ValueError(f"a pair has 2 clusters, not {len(self.sizes)}")
        if self.kind == "ring" and len(self.sizes) < 3:
            raise ValueError(f"a ring has 3 or more clusters, not {len(self.sizes)}")

    @property
    def cids(self) -> list[int]:
        return list(range(1, len(self.sizes) + 1))

    def edges(self) -> list[tuple[int, int]]:
        """``(replica, source)`` of every channel."""
        if self.kind == "pair":
            return [(1, 2), (2, 1)]
        n = len(self.sizes)
        return [(c, n if c == 1 else c - 1) for c in self.cids]

    @property
    def primary(self) -> int | None:
        found = [c for c, r in self.roles.items() if r == "PRIMARY"]
        return found[0] if len(found) == 1 else None

    def __str__(self) -> str:
        roles = ",".join(f"{c}:{r}" for c, r in sorted(self.roles.items()))
        return f"{self.kind} of sizes {list(self.sizes)} roles [{roles}]"


def channel_name(source: int) -> str:
    return f"from{source}"


def _replica_tag(cid: int) -> int:
    return 1000 * cid


def _node_tag(cid: int, node: int) -> int:
    return 1000 * cid + node


class MultiCluster:
    """The clusters of a :class:`Topology`, their channel proxies and helpers to reach them.
    Always :meth:`close` (a context manager does; every process dies with the test process
    anyway)."""

    def __init__(self, root: Path, topology: Topology, *, seed: int = 0,
                 env: dict[str, str] | None = None) -> None:
        self.root = Path(root)
        self.topology = topology
        self.chan_net = ProxyNetwork(seed=seed)
        self.clusters: dict[int, ProcessCluster] = {}
        self.env = {**NODE_ENV, **(env or {})}
        for cid, size in zip(topology.cids, topology.sizes, strict=True):
            self.clusters[cid] = ProcessCluster(
                self.root / f"c{cid}", size, env=self.env,
                start_timeout=START_TIMEOUT, program=node_program())
        #: the PRIMARY now, and the log index of its log from which it has been
        #: (:meth:`flip_roles` changes both)
        self.primary = topology.primary
        self.primary_since = 0
        self._roles_set = False
        self.sources: dict[tuple[int, int], list[str]] = {}
        #: per cluster, the exception rows its removed channels counted (remove_channel)
        self.retired_exceptions: dict[int, int] = {}
        for replica, source in topology.edges():
            self.sources[(replica, source)] = [
                f"{LOOPBACK}:"
                f"{self.chan_net.add_link(_replica_tag(replica), _node_tag(source, j), n.api_port)}"
                for j, n in sorted(self.clusters[source].nodes.items())]
        for cid, cl in self.clusters.items():
            cl.node_args += ["--cluster-id", str(cid), "--config", str(self._write_config(cid))]

    # ------------------------------------------------------------------ layout

    def _write_config(self, cid: int, file_sources: list[int] | None = None) -> Path:
        """Cluster ``cid``'s file: its role, one ``[[channels]]`` per source (the topology's,
        or ``file_sources``: channels added at run time are left out of the file, which would
        impose them again at every start), the rules."""
        lines = ["epoch_ms = 100"]
        role = self.topology.roles.get(cid)
        if role and not self.topology.roles_by_api:
            lines.append(f'conflict_role = "{role}"')
        if file_sources is None:
            file_sources = [s for r, s in self.topology.edges() if r == cid]
        for source in file_sources:
            srcs = ", ".join(f'"{s}"' for s in self.sources[(cid, source)])
            lines += ["[[channels]]", f'name = "{channel_name(source)}"', f"sources = [{srcs}]",
                      f"source_id = {source}"]
        for pattern, function in self.topology.rules:
            lines += ["[[conflicts]]", f'table = "{pattern}"', f'function = "{function}"']
        path = self.root / f"c{cid}.toml"
        self.root.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return path

    def apis(self, cid: int) -> list[str]:
        return [n.api_address for _, n in sorted(self.clusters[cid].nodes.items())]

    def client(self, cid: int, timeout: float = 30.0) -> GatewayClient:
        """A client of every node of cluster ``cid`` (it follows the leader)."""
        return GatewayClient(self.apis(cid), timeout=timeout, attempt_timeout=5.0)

    def nodes(self) -> Iterator[tuple[int, int]]:
        """Every ``(cluster, node)``."""
        for cid, cl in sorted(self.clusters.items()):
            for i in sorted(cl.nodes):
                yield cid, i

    # ------------------------------------------------------------------ processes

    def start(self) -> MultiCluster:
        """Start every node of every cluster, then wait for every cluster's leader."""
        for cl in self.clusters.values():
            for i, n in cl.nodes.items():
                if not n.running:
                    cl.spawn(i)
        for cl in self.clusters.values():
            for i in cl.nodes:
                cl.wait_api(i, START_TIMEOUT)
        for cid in self.clusters:
            self.leader(cid)
        if self.topology.roles_by_api and not self._roles_set:
            for cid, role in sorted(self.topology.roles.items()):
                self.admin(cid, "set_conflict_role", role)
            self._roles_set = True
        return self

    def flip_roles(self, new_primary: int) -> None:
        """Make ``new_primary`` the PRIMARY and the old one a SECONDARY (the old one steps
        down first: never two PRIMARY clusters at once). Needs ``roles_by_api``."""
        if not self.topology.roles_by_api:
            raise ValueError("a role flip needs roles_by_api (the file would impose its roles "
                             "again at the next start)")
        if self.primary is not None:
            self.admin(self.primary, "set_conflict_role", "SECONDARY")
        self.admin(new_primary, "set_conflict_role", "PRIMARY")
        st = self.status(new_primary)
        self.primary = new_primary
        self.primary_since = st.applied_index if st is not None else 0

    def leader(self, cid: int, timeout: float = LEADER_TIMEOUT) -> int:
        """The leader every live node of cluster ``cid`` agrees on (waits for one)."""
        cl = self.clusters[cid]
        if len(cl.nodes) == 1:
            (only,) = cl.nodes
            cl.wait_api(only, timeout)
            return wait_until(f"cluster {cid}'s single node leading",
                              lambda: only if cl.leader([only]) == only else None, timeout, 0.1)
        return cl.wait_for_majority_leader(timeout)

    def check_running(self) -> None:
        """Raise :class:`ClusterError` naming every node whose process has exited (between
        faults every node runs: one that exited died on its own or was killed from outside),
        with its exit code and log tail."""
        dead = [(cid, i, self.clusters[cid].nodes[i].proc) for cid, i in self.nodes()]
        dead = [(cid, i, p) for cid, i, p in dead if p is not None and p.poll() is not None]
        if dead:
            raise ClusterError("nodes exited: " + ", ".join(
                f"cluster {cid} node {i} (exit code {p.returncode})" for cid, i, p in dead)
                + "\n" + "\n".join(self.clusters[cid].log_tail(i, 15) for cid, i, _ in dead))

    def stop_all(self) -> dict[tuple[int, int], int]:
        """SIGTERM every node (clean shutdown); returns each node's exit code."""
        codes: dict[tuple[int, int], int] = {}
        for cid, i in self.nodes():
            cl = self.clusters[cid]
            if cl.nodes[i].running:
                codes[(cid, i)] = cl.terminate(i, timeout=60.0)
        return codes

    def start_all(self) -> None:
        """Start every node that is down and wait until every cluster has a leader."""
        self.start()

    # ------------------------------------------------------------------ growing
    # A deployment that grows at run time (a pair into a ring of 3): a cluster started empty
    # with no channel in its file, channels added and re-pointed through the API. The files
    # then name no channel (a file's channel is imposed again at every start); the
    # replicated state keeps them across restarts.

    def add_cluster(self, cid: int, size: int, role: str | None = None) -> ProcessCluster:
        """Start a new empty cluster ``cid`` of ``size`` nodes (``role``: its conflict role)
        and wait for its leader. It is not in :attr:`topology` until :meth:`set_topology`."""
        if cid in self.clusters:
            raise ValueError(f"cluster {cid} exists already")
        cl = self.clusters[cid] = ProcessCluster(
            self.root / f"c{cid}", size, env=self.env,
            start_timeout=START_TIMEOUT, program=node_program())
        roles = dict(self.topology.roles)
        if role is not None:
            roles[cid] = role
        self.topology = Topology(self.topology.kind, self.topology.sizes, roles,
                                 self.topology.rules, self.topology.roles_by_api)
        cl.node_args += ["--cluster-id", str(cid), "--config",
                         str(self._write_config(cid, file_sources=[]))]
        for i in cl.nodes:
            cl.spawn(i)
        for i in cl.nodes:
            cl.wait_api(i, START_TIMEOUT)
        self.leader(cid)
        return cl

    def link(self, replica: int, source: int) -> list[str]:
        """Channel proxies from cluster ``replica`` to every node of ``source`` (made once);
        the addresses a channel of ``replica`` reading ``source`` is given."""
        if (replica, source) not in self.sources:
            self.sources[(replica, source)] = [
                f"{LOOPBACK}:"
                f"{self.chan_net.add_link(_replica_tag(replica), _node_tag(source, j), n.api_port)}"
                for j, n in sorted(self.clusters[source].nodes.items())]
        return self.sources[(replica, source)]

    def add_channel(self, replica: int, source: int, *, seed: bool = False) -> str:
        """``gateway channel add from<source> --from <proxies> --source-id <source>
        [--seed]`` on cluster ``replica`` (through its client); returns the answer."""
        sources = self.link(replica, source)
        with self.client(replica, timeout=60) as c:
            return c.add_channel(channel_name(source), sources, source_id=source, seed=seed,
                                 timeout=60).message

    def remove_channel(self, replica: int, source: int) -> None:
        """``gateway channel pause`` then ``remove from<source>`` on cluster ``replica``. The
        status shows no counters of a removed channel while the exception rows it recorded
        stay: what the channel counted once paused (stable for 2 s: nothing in flight) is
        kept in :attr:`retired_exceptions` for the checks. Its proxies stay (no channel reads
        through them)."""
        name = channel_name(source)
        self.admin(replica, "channel_action", name, "pause")

        def counted() -> int:
            st = self.status(replica)
            assert st is not None, f"cluster {replica} answers no Status"
            return sum(counted_exceptions_of(ch) for ch in st.channels if ch.name == name)

        seen: list[tuple[float, int]] = []

        def stable() -> int | None:
            now, got = time.monotonic(), counted()
            if not seen or seen[-1][1] != got:
                seen.append((now, got))
            return got if now - seen[-1][0] >= 2.0 else None

        got = wait_until(f"cluster {replica}'s paused channel {name} settling", stable, 60, 0.2)
        self.admin(replica, "channel_action", name, "remove")
        self.retired_exceptions[replica] = self.retired_exceptions.get(replica, 0) + got
        self.sources.pop((replica, source), None)

    def set_topology(self, topology: Topology) -> None:
        """The deployment is now ``topology`` (its clusters all running, its channels added
        through the API): every cluster's file is written again naming no channel."""
        if sorted(topology.cids) != sorted(self.clusters):
            raise ValueError(f"topology {topology} does not name clusters "
                             f"{sorted(self.clusters)}")
        self.topology = topology
        for cid in self.clusters:
            self._write_config(cid, file_sources=[])

    # ------------------------------------------------------------------ channel faults

    def _links_of(self, cid: int) -> list[tuple[int, int]]:
        return [(a, b) for (a, b) in self._all_links() if a // 1000 == cid or b // 1000 == cid]

    def _all_links(self) -> list[tuple[int, int]]:
        return [(_replica_tag(r), _node_tag(s, j)) for (r, s) in self.sources
                for j in sorted(self.clusters[s].nodes)]

    def partition(self, cid: int) -> None:
        """Cut cluster ``cid`` off from every other cluster (both ways, every channel link to
        and from it silent); its own Raft links and its clients' connections stay up."""
        for a, b in self._links_of(cid):
            self.chan_net.block(a, b)
            self.chan_net.block(b, a)

    def heal(self) -> None:
        """Clear every fault on every channel link (and on every cluster's peer links)."""
        self.chan_net.heal()
        for cl in self.clusters.values():
            cl.net.heal()

    def channel_source_node(self, replica: int, source: int) -> int | None:
        """The node of cluster ``source`` that cluster ``replica``'s channel reads from now
        (from the channel's ``connected`` proxy address), if known."""
        st = self.status(replica)
        if st is None:
            return None
        for ch in st.channels:
            if ch.name == channel_name(source) and ch.connected:
                port = int(ch.connected.rsplit(":", 1)[1])
                for j in self.clusters[source].nodes:
                    with contextlib.suppress(KeyError):
                        if self.chan_net.port(_replica_tag(replica), _node_tag(source, j)) == port:
                            return j
        return None

    # ------------------------------------------------------------------ status

    def status(self, cid: int, node: int | None = None) -> gateway_pb2.StatusResponse | None:
        """Status of ``node`` of cluster ``cid`` (default: its leader if one answers, else any
        live node); None when no node answers."""
        cl = self.clusters[cid]
        order = [node] if node is not None else [cl.leader() or 0, *cl.live()]
        for i in order:
            if i not in cl.nodes or not cl.nodes[i].running or cl.nodes[i].paused:
                continue
            try:
                return cl.api(i).status(timeout=3.0)
            except Exception:  # a node may be down or starting: try the next
                continue
        return None

    def admin(self, cid: int, fn_name: str, *args: object, timeout: float = 60.0) -> None:
        """Call ``GatewayClient.<fn_name>(*args)`` on cluster ``cid`` (retried while the
        cluster elects a leader)."""
        def call() -> bool:
            with self.client(cid, timeout=timeout) as c:
                getattr(c, fn_name)(*args)
            return True

        try:
            wait_until(f"cluster {cid}: {fn_name}{args}", call, timeout, 0.5)
        except ClusterError:
            raise
        except GatewayError as e:  # pragma: no cover - surfaced as a failure with the cause
            raise ClusterError(f"cluster {cid}: {fn_name}{args} failed: {e}") from None

    # ------------------------------------------------------------------ reports

    def describe(self) -> str:
        """Every node's state and every channel's status and conflict counters, the proxies'
        faults: for failure messages."""
        lines = [f"topology: {self.topology}"]
        for cid, cl in sorted(self.clusters.items()):
            lines.append(f"=== cluster {cid}")
            lines.append(cl.describe())
            st = self.status(cid)
            if st is None:
                lines.append("  (no node answers Status)")
                continue
            lines.append(f"  role={st.conflict_role} epoch={st.epoch} last_trans_id="
                         f"{st.last_trans_id}")
            for ch in st.channels:
                counters = " ".join(f"{k}={v}" for k, v in sorted(ch.conflicts.items()) if v)
                lines.append(f"  channel {ch.name}: {ch.state} connected={ch.connected} "
                             f"applied_epoch={ch.applied_epoch} lag={ch.lag_epochs} "
                             f"err={ch.last_error!r} {counters}")
            for p in st.peers:
                lines.append(f"  peer {p.cluster_id}: max_replicated_epoch="
                             f"{p.max_replicated_epoch} held={p.held_epoch}")
            for a in st.appliers:
                lines.append(f"  applier {a.name}: position={a.position} lag={a.lag_entries} "
                             f"dead_letters={a.dead_letters} error={a.error!r}")
        lines.append("=== channel proxies")
        lines.append(self.chan_net.describe())
        return "\n".join(lines)

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(f"=== cluster {cid}\n{cl.log_tails(lines)}"
                         for cid, cl in sorted(self.clusters.items()))

    # ------------------------------------------------------------------ shutdown

    def close(self) -> None:
        for cl in self.clusters.values():
            cl.close()
        self.chan_net.close()

    def __enter__(self) -> MultiCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def node_program() -> list[str]:
    """What runs ``run ...`` in every node: ``GATEWAY_TEST_NODE_PROGRAM`` (shell words, as for
    tests/cluster: e.g. a development build) or this checkout's ``gateway`` CLI."""
    text = os.environ.get("GATEWAY_TEST_NODE_PROGRAM", "").strip()
    return shlex.split(text) if text else [sys.executable, "-m", "gateway.cli"]


def node_db(cl: ProcessCluster, i: int) -> Path:
    """Node ``i``'s SQLite applier database (the default path under its data directory)."""
    return cl.nodes[i].data_dir / "sqlite" / "gateway.db"


def env_int(name: str, default: int) -> int:
    """An integer from the environment (for seeds and soak counts), with a clear error."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: not an integer") from None
