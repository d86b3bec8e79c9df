"""A fault schedule drawn from a seed, run against a :class:`MultiCluster` while its workloads
write.

The schedule is a list of :class:`Fault` steps run one after the other: each injects its fault,
holds it ``hold`` seconds, undoes it (restart, resume, heal, SIGCONT), then waits ``gap``
seconds. The same seed and topology give the same schedule (``str`` of each step is its replay
line); which node a step hits is decided when it runs (the leader *then*, the node the channel
reads from *then*) and written to the run's log.

Kinds:

- ``kill-leader``: kill -9 the leader of a cluster, restart it after ``hold``;
- ``kill-channel-node``: kill -9 the node of a source cluster a channel reads from now;
- ``kill-primary-realigning``: pause the channel(s) into the PRIMARY, let the workloads write
  on both sides, hold the primary's own clients, resume, wait until the primary counts a new
  conflict (it is realigning), then kill -9 its leader at once;
- ``pause-channel``: pause a channel of a cluster (``gateway channel pause``), resume it;
- ``partition``: cut one cluster off from every other through the channel proxies, heal;
- ``sigstop``: SIGSTOP a node of a cluster (its leader or another), SIGCONT it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tests.harness.cluster import ClusterError, wait_until
from tests.harness.clusters import MultiCluster, channel_name
from tests.harness.workloads import Workload

KINDS = ("kill-leader", "kill-channel-node", "kill-primary-realigning", "pause-channel",
         "partition", "sigstop")


@dataclass(frozen=True)
class Fault:
    kind: str
    cluster: int
    hold: float
    gap: float
    pick: float  # chooses among candidates (a channel, a non-leader node) when the step runs

    def __str__(self) -> str:
        return (f"{self.kind} cluster={self.cluster} hold={self.hold:.1f}s "
                f"gap={self.gap:.1f}s pick={self.pick:.3f}")


def draw_schedule(seed: int, mc_topology_cids: list[int], primary: int | None,
                  steps: int) -> list[Fault]:
    """``steps`` faults drawn from ``seed``: every kind appears once the schedule is long
    enough (the first ``len(KINDS)`` steps are the kinds in a shuffled order), the rest are
    drawn at random."""
    rng = random.Random(seed)
    kinds = [k for k in KINDS if primary is not None or k != "kill-primary-realigning"]
    order = rng.sample(kinds, len(kinds))
    while len(order) < steps:
        order.append(rng.choice(kinds))
    out = []
    for kind in order[:steps]:
        cid = primary if kind == "kill-primary-realigning" else rng.choice(mc_topology_cids)
        out.append(Fault(kind, int(cid), round(rng.uniform(0.5, 3.0), 1),
                         round(rng.uniform(0.5, 2.0), 1), round(rng.random(), 3)))
    return out


class Runner:
    """Runs a schedule; ``log`` gets one line per action with the time since the start."""

    def __init__(self, mc: MultiCluster, log: list[str],
                 workloads: Sequence[Workload] = ()) -> None:
        self.mc = mc
        self.workloads = list(workloads)
        self.log = log
        self.t0 = time.monotonic()

    def note(self, text: str) -> None:
        self.log.append(f"t+{time.monotonic() - self.t0:6.1f}s {text}")

    def run(self, schedule: list[Fault]) -> None:
        for step in schedule:
            self.note(f"step: {step}")
            getattr(self, "_" + step.kind.replace("-", "_"))(step)
            time.sleep(step.gap)

    # ------------------------------------------------------------------ steps

    def _kill_and_restart(self, cid: int, node: int, hold: float) -> None:
        cl = self.mc.clusters[cid]
        self.note(f"kill -9 cluster {cid} node {node}")
        cl.kill(node)
        time.sleep(hold)
        self.note(f"restart cluster {cid} node {node}")
        cl.restart(node, wait=False)
        cl.wait_api(node, 120.0)  # a node that cannot start fails here, with its log

    def _kill_leader(self, f: Fault) -> None:
        lead = self.mc.leader(f.cluster)
        self._kill_and_restart(f.cluster, lead, f.hold)

    def _kill_channel_node(self, f: Fault) -> None:
        edges = [(r, s) for r, s in self.mc.topology.edges() if r == f.cluster]
        replica, source = edges[int(f.pick * len(edges))]
        node = None
        try:
            node = wait_until(f"cluster {replica}'s channel from {source} connected",
                              lambda: self.mc.channel_source_node(replica, source), 30, 0.2)
        except ClusterError:
            self.note(f"channel {channel_name(source)} of cluster {replica} not connected: "
                      "killing the source's leader instead")
        if node is None:
            node = self.mc.leader(source)
        self.note(f"channel {channel_name(source)} of cluster {replica} reads from node {node}")
        self._kill_and_restart(source, node, f.hold)

    def _kill_primary_realigning(self, f: Fault) -> None:
        primary = self.mc.primary or f.cluster
        into = [s for r, s in self.mc.topology.edges() if r == primary]
        before = self._conflicts(primary)
        for s in into:
            self.note(f"pause channel {channel_name(s)} of cluster {primary}")
            self.mc.admin(primary, "channel_action", channel_name(s), "pause")
        time.sleep(1.0 + f.hold)  # both sides write the hot rows meanwhile
        # the primary's own clients go quiet: the conflict transaction is then the newest
        # thing in its log when it dies (issue 52 item 1 needs nothing more)
        self.note(f"hold the clients of cluster {primary}")
        for w in self.workloads:
            w.hold([primary])
        for s in into:
            self.note(f"resume channel {channel_name(s)} of cluster {primary}")
            self.mc.admin(primary, "channel_action", channel_name(s), "resume")
        try:
            wait_until(f"cluster {primary} counting a new conflict",
                       lambda: self._conflicts(primary) > before, 60, 0.02)
            self.note(f"cluster {primary} realigning (conflicts {before} -> "
                      f"{self._conflicts(primary)})")
        except ClusterError:
            self.note(f"cluster {primary} counted no new conflict in 60 s: killing anyway")
        lead = self.mc.leader(primary)
        self._wait_sinks(primary, lead)
        try:
            self._kill_and_restart(primary, lead, 0.5)
        finally:
            self.note(f"release the clients of cluster {primary}")
            for w in self.workloads:
                w.release([primary])

    def _wait_sinks(self, cid: int, node: int) -> None:
        """Wait (a little) until ``node``'s appliers hold what it applied: the realignment is
        then in its SQLite database too when it dies."""
        st = self.mc.status(cid, node)
        if st is None:
            return
        target = st.applied_index

        def caught_up() -> bool:
            now = self.mc.status(cid, node)
            return now is not None and all(a.position >= target for a in now.appliers)

        try:
            wait_until(f"cluster {cid} node {node}'s appliers at index {target}", caught_up,
                       10, 0.02)
            self.note(f"cluster {cid} node {node}'s appliers hold index {target}")
        except ClusterError:
            self.note(f"cluster {cid} node {node}'s appliers not at index {target} in 10 s")

    def _conflicts(self, cid: int) -> int:
        st = self.mc.status(cid)
        if st is None:
            return -1
        return sum(ch.conflicts.get("refresh_op_count", 0) for ch in st.channels)

    def _pause_channel(self, f: Fault) -> None:
        edges = [(r, s) for r, s in self.mc.topology.edges() if r == f.cluster]
        replica, source = edges[int(f.pick * len(edges))]
        self.note(f"pause channel {channel_name(source)} of cluster {replica}")
        self.mc.admin(replica, "channel_action", channel_name(source), "pause")
        time.sleep(f.hold)
        self.note(f"resume channel {channel_name(source)} of cluster {replica}")
        self.mc.admin(replica, "channel_action", channel_name(source), "resume")

    def _partition(self, f: Fault) -> None:
        self.note(f"partition cluster {f.cluster} from the others (channel proxies)")
        self.mc.partition(f.cluster)
        time.sleep(f.hold)
        self.note("heal the channel proxies")
        self.mc.heal()

    def _sigstop(self, f: Fault) -> None:
        cl = self.mc.clusters[f.cluster]
        nodes = sorted(cl.nodes)
        node = nodes[int(f.pick * len(nodes))]
        self.note(f"SIGSTOP cluster {f.cluster} node {node}")
        cl.pause(node)
        time.sleep(f.hold)
        self.note(f"SIGCONT cluster {f.cluster} node {node}")
        cl.resume(node)


def describe_schedule(schedule: list[Fault]) -> str:
    return "\n".join(f"  {i + 1}. {s}" for i, s in enumerate(schedule))


