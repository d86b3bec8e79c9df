"""The simulator's nemesis: random faults and targeted fault schedules ("scenarios").

:class:`Nemesis` owns every fault the simulation injects: independent random ones (clock
skew, partitions, crashes, pauses, leadership transfers, membership churn) and, now and then,
a scenario. It sees the simulation only through :class:`SimCluster` (so this module does not
import ``cluster``).

Random faults alone almost never line up the few-tick windows in which classic Raft bugs show
(a deposed leader serving a read after the new leader acknowledged a write; a leader
committing an old-term entry by counting replicas, Figure 8 of the Raft paper). A scenario is
a small state machine that drives the network, the clients and the node clocks through such a
pattern, reacting to what the cluster does (a leader being elected, a commit index moving), the
way a Jepsen nemesis reacts to events. Every choice it makes comes from the simulation's seeded
generator, so a run stays reproducible bit for bit.

A scenario never asserts anything itself: the invariants and the linearizability check do. On
the correct core every scenario must pass; each is aimed at a class of bugs:

* :class:`StaleLeader` -- isolate the leader together with clients that keep reading from it
  (ReadIndex and lease reads, short timeouts) while the majority elects a new leader and
  writes. The isolation starts right after the leader's check-quorum, so the deposed leader
  believes in itself for as long as check-quorum allows. With ``bridge`` the old leader is then
  reconnected to everyone but the new leader (it hears only from followers that moved to a
  newer term: it must step down). With clock skew on, the old leader's clock runs at the slow
  edge and everyone else's at the fast edge of the drift the lease contract allows.
* :class:`Laggard` -- a follower that missed committed entries campaigns every tick once the
  leader is gone: only the log up-to-date check stops it.
* :class:`LostAck` -- followers crash right after acknowledging an append, restart at once,
  and the leader is cut off: acknowledged entries must have been durable.
* :class:`Figure8` -- leader ``L`` appends a long uncommitted tail in term ``T`` while isolated;
  the majority elects ``L2`` (term ``T'``), which is cut off at once, before anyone receives its
  first entry; ``L`` is reconnected with just enough nodes to win again (term ``T''``) and
  re-replicates its tail in batches; as soon as ``L`` advances its commit index it is cut off,
  and ``L2`` may win with the remaining nodes. Counting replicas of term-``T`` entries commits
  an entry that ``L2`` then overwrites.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import ProposalDroppedError
from ..rawnode import RawNode
from ..rng import SplitMix64
from ..types import (
    NONE,
    ConfChange,
    ConfChangeSingle,
    ConfChangeType,
    MessageType,
    Ready,
    Role,
)
from .network import Network

#: Nominal tick rate of a node clock, in rate units per sub-step (see ``SimCluster``).
NOMINAL_RATE = 100
#: Largest drift of a node clock from the nominal rate, in percent. The lease contract
#: (``Raft.lease_valid``) tolerates clocks whose rates differ by a factor of up to about
#: 1.15; +-5 % (factor 1.105) stays inside it. See docs/raft.md ("Lease reads and clocks").
MAX_DRIFT_PCT = 5


class SimNode(Protocol):
    """What the nemesis reads and changes of one simulated node."""

    id: int
    alive: bool
    removed: bool
    paused_until: int
    rate: int
    raw: RawNode | None


class SimSettings(Protocol):
    """What the nemesis reads of the simulation's configuration (``cluster.SimConfig``)."""

    @property
    def nodes(self) -> int: ...

    @property
    def faults(self) -> frozenset[str]: ...


class SimCluster(Protocol):
    """What the nemesis may see and do of the simulation (``cluster.Simulation``). The
    collections are read-only views here (the nemesis never adds to them directly), which
    lets the simulation keep its own node type behind ``SimNode``."""

    rng: SplitMix64
    net: Network
    ticks: int
    next_id: int
    pins: dict[int, Pin]
    scenario: Scenario | None

    @property
    def cfg(self) -> SimSettings: ...

    @property
    def nodes(self) -> Mapping[int, SimNode]: ...

    @property
    def client_op(self) -> Mapping[int, object]: ...

    def leader(self) -> SimNode | None: ...

    def live(self) -> Sequence[SimNode]: ...

    def crash(self, node: SimNode, downtime: int | None = None) -> None:
        """Crash ``node``, one of ``nodes``' values."""

    def add_node(self) -> SimNode: ...

    def draw_rate(self) -> int: ...

    def reset_rates(self) -> None: ...


def raw_of(node: SimNode) -> RawNode:
    """The running ``RawNode`` of ``node`` (a live one: crashed and removed nodes have none)."""
    assert node.raw is not None, f"node {node.id} is not running"
    return node.raw


@dataclass(slots=True)
class Pin:
    """A client bound to one node for the duration of a scenario.

    ``role`` is ``"read"`` (gets in ``modes``) or ``"write"`` (puts, on ``key`` if set, with
    values padded by ``pad`` bytes: large entries spread a log tail over several appends).
    ``timeout`` is the client's op timeout in ticks. With ``avoid_lead`` set, a writer only
    issues when its node knows a leader other than ``avoid_lead`` (a request forwarded to an
    unreachable leader would only hang until it times out)."""

    node: int
    role: str
    timeout: int
    modes: tuple[str, ...] = ("read_index", "lease")
    key: str | None = None
    avoid_lead: int = NONE
    pad: int = 0


class Scenario:
    """Base class. ``on_tick`` runs once per simulator tick (before the clients act),
    ``on_ready`` after a node sent the messages of a ``Ready``; both may change the network,
    the client pins and the node clocks. ``done`` ends the scenario (the simulator then calls
    ``finish``, which heals the network, unpins the clients and resets the clocks)."""

    name = "scenario"

    def __init__(self, sim: SimCluster, rng: SplitMix64) -> None:
        self.sim = sim
        self.rng = rng
        self.done = False
        self.started = 0
        # Partitions without random message loss: the pattern's timing stays sharp.
        sim.net.lossless = True
        self.arm_until = sim.ticks + 30

    def on_tick(self) -> None:
        raise NotImplementedError

    def on_ready(self, node: SimNode, rd: Ready) -> None:
        """Called for every Ready processed while the scenario runs."""

    def finish(self) -> None:
        sim = self.sim
        sim.net.heal()
        sim.net.lossless = False
        sim.pins.clear()
        sim.reset_rates()
        self.done = True

    # -- helpers ----------------------------------------------------------------------------

    def _members(self) -> list[int]:
        return sorted(n.id for n in self.sim.nodes.values() if not n.removed)

    def _stable_leader(self) -> SimNode | None:
        """The leader, if it committed an entry of its term and is not transferring."""
        lead = self.sim.leader()
        if lead is None or lead.raw is None:
            return None
        r = lead.raw.raft
        if not r.committed_entry_in_current_term() or r.lead_transferee != NONE:
            return None
        if r.trk.config.joint() or lead.paused_until:
            return None
        # Every voter up and caught up: the majority can elect a successor at once.
        for v in r.trk.config.voters:
            n = self.sim.nodes.get(v)
            if n is None or not n.alive or n.paused_until:
                return None
            if v != lead.id and r.trk.progress[v].match < r.raft_log.committed:
                return None
        return lead

    def _hasten(self, exclude: set[int]) -> None:
        """Make one follower outside ``exclude`` whose election timer reached the minimum
        election timeout campaign now (``RawNode.campaign``), as if its randomized timeout
        had drawn the minimum: the new leader appears as early as the protocol allows."""
        ready = []
        for n in self.sim.nodes.values():
            if n.id in exclude or n.raw is None or not n.alive or n.paused_until:
                continue
            r = n.raw.raft
            if r.role == Role.FOLLOWER and r.election_elapsed >= r.election_timeout:
                ready.append(n)
        if ready:
            raw_of(self.rng.choice(ready)).campaign()

    def _isolate(self, ids: set[int]) -> None:
        """Cut ``ids`` off from every other node (both directions), keeping other blocks."""
        members = {n for n in self.sim.nodes}
        for a in ids:
            for b in members - ids:
                self.sim.net.blocked.add((a, b))
                self.sim.net.blocked.add((b, a))


class StaleLeader(Scenario):
    """Readers stay with a deposed leader while the majority moves on (see module doc).

    ``variant``: ``"plain"`` (isolation), ``"bridge"`` (then reconnected to all but the new
    leader) or ``"slow"`` (the old leader's clock runs at a fraction of the nominal rate, far
    outside the lease contract, so its readers use ReadIndex only: ReadIndex must be safe
    whatever the clocks do)."""

    name = "stale-leader"

    def __init__(self, sim: SimCluster, rng: SplitMix64, variant: str) -> None:
        super().__init__(sim, rng)
        self.variant = variant
        self.bridge = variant == "bridge"
        self.old = NONE
        self.old_term = 0
        self.bridged = False

    def on_tick(self) -> None:
        sim = self.sim
        if self.old == NONE:
            lead = self._stable_leader()
            # Start right after the leader's check-quorum: it will keep believing in itself
            # for almost two election timeouts.
            if lead is not None and raw_of(lead).raft.election_elapsed <= 1:
                self._begin(lead)
            elif sim.ticks >= self.arm_until:
                self.done = True
            return
        elapsed = sim.ticks - self.started
        self._hasten({self.old})
        if self.bridge and not self.bridged:
            new = sim.leader()
            if new is not None and new.id != self.old and raw_of(new).raft.term > self.old_term:
                # Reconnect the old leader with everybody except the new leader.
                sim.net.heal()
                sim.net.blocked.update({(self.old, new.id), (new.id, self.old)})
                self.bridged = True
        if elapsed >= (40 if self.variant == "plain" else 60):
            self.done = True

    def _begin(self, lead: SimNode) -> None:
        sim, rng = self.sim, self.rng
        self.old = lead.id
        self.old_term = raw_of(lead).raft.term
        self.started = sim.ticks
        members = self._members()
        self._isolate({lead.id})
        others = [m for m in members if m != lead.id]
        clients = sorted(sim.client_op)
        rng.shuffle(clients)
        readers = max(1, len(clients) // 2)  # the others write on the majority side
        for i, c in enumerate(clients):
            if i < readers:
                # Readers alternate ReadIndex and lease reads (ReadIndex only with an
                # out-of-contract clock).
                lease = self.variant != "slow" and i % 2 == 1
                modes = ("lease",) if lease else ("read_index",)
                sim.pins[c] = Pin(lead.id, "read", timeout=3, modes=modes)
            elif others:
                sim.pins[c] = Pin(rng.choice(others), "write", timeout=8, avoid_lead=lead.id)
        if self.variant == "slow":
            lead.rate = NOMINAL_RATE * rng.randrange(30, 60) // 100
        elif "skew" in sim.cfg.faults:
            for n in sim.nodes.values():
                n.rate = NOMINAL_RATE + (-1 if n.id == lead.id else 1) * MAX_DRIFT_PCT


class Figure8(Scenario):
    """Raft paper, Figure 8, driven against whoever leads (see module doc)."""

    name = "figure8"

    def __init__(self, sim: SimCluster, rng: SplitMix64) -> None:
        super().__init__(sim, rng)
        self.phase = "arm"
        self.old = NONE
        self.second = NONE
        self.term_again = 0
        self.commit_again = 0
        self.phase_until = 0

    def on_tick(self) -> None:
        sim = self.sim
        if self.phase == "arm":
            lead = self._stable_leader()
            if lead is not None:
                self._begin(lead)
            elif sim.ticks >= self.arm_until:
                self.done = True
            return
        if self.phase in ("tail", "expose"):
            self._hasten({self.old})  # the majority elects L2 as early as possible
        elif self.phase == "reelect":
            self._hasten(set(sim.nodes) - {self.old})  # and L wins its group back
        if sim.ticks >= self.phase_until:
            self.done = True  # exposed, or the pattern did not materialize: heal

    def _begin(self, lead: SimNode) -> None:
        sim, rng = self.sim, self.rng
        self.old = lead.id
        self.started = sim.ticks
        self.phase = "tail"
        self.phase_until = sim.ticks + 40
        self._isolate({lead.id})
        clients = sorted(sim.client_op)
        rng.shuffle(clients)
        for c in clients[: max(1, len(clients) - 1)]:
            # Short timeouts: the leader appends a long uncommitted tail of term T.
            sim.pins[c] = Pin(lead.id, "write", timeout=1, key="z", pad=200)

    def on_ready(self, node: SimNode, rd: Ready) -> None:
        sim = self.sim
        raw = node.raw
        if raw is None or self.phase in ("arm", "expose"):
            return
        became_leader = rd.soft_state is not None and rd.soft_state.role == Role.LEADER
        if self.phase == "tail" and became_leader and node.id != self.old:
            # L2 won term T': cut it off before its first append reaches anybody, and let L
            # talk to just enough nodes to win again (they cannot elect one of their own: L
            # refuses them its vote, its log being longer in the same last term).
            self.second = node.id
            sim.pins.clear()
            voters = sorted(raw.raft.trk.config.voters)
            quorum = len(voters) // 2 + 1
            rest = [v for v in voters if v not in (self.old, self.second)]
            self.rng.shuffle(rest)
            group = {self.old, *rest[: quorum - 1]}
            sim.net.heal()
            self._isolate(group)
            self._isolate({self.second})
            self.phase = "reelect"
            self.phase_until = sim.ticks + 40
        elif self.phase == "reelect" and became_leader:
            if node.id != self.old:
                self.done = True  # somebody else won: not this pattern
                return
            self.term_again = raw.raft.term
            self.commit_again = raw.raft.raft_log.committed
            self.phase = "commit"
            self.phase_until = sim.ticks + 30
        elif (
            self.phase == "commit"
            and node.id == self.old
            and rd.hard_state is not None
            and raw.raft.role == Role.LEADER
            and raw.raft.term == self.term_again
            and rd.hard_state.commit > self.commit_again
        ):
            # L just committed (and applied) something: cut it off before the rest of its
            # log reaches its followers, and let L2 talk to everybody else.
            sim.net.heal()
            self._isolate({self.old})
            self.phase = "expose"
            self.phase_until = sim.ticks + 40


class Laggard(Scenario):
    """A follower that missed committed entries campaigns as soon as it can: it is isolated
    while the others commit, reconnected, the leader is cut off, and the laggard calls
    ``campaign()`` every tick. Its log is behind, so no voter may grant it a vote (the log
    up-to-date check, §5.4.1); a leader that wins anyway lacks committed entries."""

    name = "laggard"

    def __init__(self, sim: SimCluster, rng: SplitMix64) -> None:
        super().__init__(sim, rng)
        self.phase = "arm"
        self.lag = NONE
        self.old = NONE
        self.phase_until = 0

    def on_tick(self) -> None:
        sim = self.sim
        if self.phase == "arm":
            lead = self._stable_leader()
            if lead is not None:
                voters = sorted(raw_of(lead).raft.trk.config.voters - {lead.id})
                if voters:
                    self.old, self.lag = lead.id, self.rng.choice(voters)
                    self._isolate({self.lag})
                    self.started = sim.ticks
                    self.phase, self.phase_until = "lag", sim.ticks + 15 + self.rng.randrange(0, 15)
            elif sim.ticks >= self.arm_until:
                self.done = True
            return
        if self.phase == "lag" and sim.ticks >= self.phase_until:
            sim.net.heal()
            self._isolate({self.old})
            self.phase, self.phase_until = "campaign", sim.ticks + 40
        elif self.phase == "campaign":
            node = sim.nodes.get(self.lag)
            raw = node.raw if node is not None and node.alive and not node.paused_until else None
            if raw is not None and raw.raft.role != Role.LEADER:
                raw.campaign()
            if sim.ticks >= self.phase_until:
                self.done = True


class LostAck(Scenario):
    """Acknowledgements must be durable: the leader commits with the help of a minority of
    followers (the rest are cut off); each of those crashes right after sending its first
    append acknowledgement and restarts at once; then the leader is cut off and the followers
    that were away campaign. If an acknowledged entry was not durable, a leader without a
    committed entry can win."""

    name = "lost-ack"

    def __init__(self, sim: SimCluster, rng: SplitMix64) -> None:
        super().__init__(sim, rng)
        self.phase = "arm"
        self.old = NONE
        self.ackers: set[int] = set()
        self.away: set[int] = set()
        self.phase_until = 0

    def on_tick(self) -> None:
        sim = self.sim
        if self.phase == "arm":
            lead = self._stable_leader()
            if lead is not None:
                self._begin(lead)
            elif sim.ticks >= self.arm_until:
                self.done = True
            return
        if self.phase == "ack" and not self.ackers:
            # every acker crashed once after acknowledging: cut the leader off and let the
            # followers that were away elect someone
            sim.pins.clear()
            sim.net.heal()
            self._isolate({self.old})
            self.phase, self.phase_until = "expose", sim.ticks + 40
        if self.phase == "expose":
            self._hasten({self.old})
        if sim.ticks >= self.phase_until:
            self.done = True

    def _begin(self, lead: SimNode) -> None:
        sim, rng = self.sim, self.rng
        voters = sorted(raw_of(lead).raft.trk.config.voters - {lead.id})
        if not voters:
            self.done = True
            return
        rng.shuffle(voters)
        quorum = (len(voters) + 1) // 2 + 1
        self.old = lead.id
        self.ackers = set(voters[: quorum - 1])
        self.away = set(voters[quorum - 1:])
        if self.away:
            self._isolate(self.away)
        for c in sim.client_op:
            sim.pins[c] = Pin(lead.id, "write", timeout=4)
        self.started = sim.ticks
        self.phase, self.phase_until = "ack", sim.ticks + 30

    def on_ready(self, node: SimNode, rd: Ready) -> None:
        if self.phase != "ack" or node.id not in self.ackers:
            return
        if any(m.type == MessageType.APP_RESP and not m.reject and m.to == self.old
               and m.index > 0 for m in rd.messages) and rd.entries:
            self.ackers.discard(node.id)
            self.sim.crash(node, downtime=0)


class Nemesis:
    """The fault schedule of one simulation: call `tick` once per tick while faults are on.
    Every choice comes from the simulation's seeded generator, in a fixed order, so a seed
    replays bit for bit."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.partition_until = 0
        #: How many times each scenario kind started (reported in ``SimResult.scenarios``).
        self.scenarios_run: dict[str, int] = {}

    def tick(self) -> None:
        """One tick of the schedule: drive the running scenario, or maybe start one, or
        draw independent random faults (skew, partitions, crashes, pauses, transfers, churn)."""
        sim = self.sim
        f = sim.cfg.faults
        rng = sim.rng
        members = [n.id for n in sim.nodes.values() if not n.removed]
        if sim.scenario is not None:
            sim.scenario.on_tick()
            if sim.scenario.done:
                sim.scenario.finish()
                sim.scenario = None
            return  # a scenario owns the network, the clients' pins and the clocks
        if self._maybe_start_scenario():
            return
        if "skew" in f and rng.chance(0.01):
            node = sim.nodes[rng.choice(members)]
            node.rate = sim.draw_rate()
        if "partition" in f:
            if self.partition_until and sim.ticks >= self.partition_until:
                sim.net.heal()
                self.partition_until = 0
            elif not self.partition_until and rng.chance(0.03):
                self._partition(members)
        if "crash" in f and rng.chance(0.006):
            live = [n for n in sim.live() if n.id in members]
            down = len(members) - len(live)
            if live and down < (len(members) - 1) // 2:
                sim.crash(rng.choice(live))
        if "pause" in f and rng.chance(0.01):
            lead = sim.leader()
            if lead is not None and not lead.paused_until:
                lead.paused_until = sim.ticks + rng.randrange(8, 22)
        if "transfer" in f and rng.chance(0.006):
            lead = sim.leader()
            if lead is not None:
                voters = raw_of(lead).raft.trk.voter_ids()
                raw_of(lead).transfer_leader(rng.choice(voters))
        if "churn" in f and sim.ticks % 50 == 0:
            self._churn()

    def _maybe_start_scenario(self) -> bool:
        sim = self.sim
        """The schedule generator: now and then (and only while no partition is in force)
        start one of the targeted scenarios that are enabled, chosen by weight."""
        f = sim.cfg.faults
        kinds: list[tuple[str, int]] = []
        if "stale" in f:
            kinds += [("stale", 3), ("stale-bridge", 1), ("stale-slow", 1)]
        if "figure8" in f:
            kinds.append(("figure8", 3))
        if "laggard" in f:
            kinds.append(("laggard", 2))
        if "lostack" in f:
            kinds.append(("lostack", 2))
        if not kinds or not sim.rng.chance(0.04):
            return False
        sim.net.heal()  # the scenario takes the network over
        self.partition_until = 0
        roll = sim.rng.randrange(0, sum(w for _, w in kinds))
        kind = kinds[-1][0]
        for name, w in kinds:
            if roll < w:
                kind = name
                break
            roll -= w
        rng = sim.rng.fork()
        if kind == "figure8":
            sim.scenario = Figure8(sim, rng)
        elif kind == "laggard":
            sim.scenario = Laggard(sim, rng)
        elif kind == "lostack":
            sim.scenario = LostAck(sim, rng)
        else:
            sim.scenario = StaleLeader(sim, rng, variant=kind.partition("-")[2] or "plain")
        self.scenarios_run[kind] = self.scenarios_run.get(kind, 0) + 1
        return True

    def _partition(self, members: list[int]) -> None:
        sim = self.sim
        if len(members) < 2:
            return  # a single member: there is nothing to cut
        rng = sim.rng
        kind = rng.randrange(0, 4) % 3  # leader isolation twice as likely
        lead = sim.leader()
        if "oneway" in sim.cfg.faults and rng.chance(0.3):
            # Asymmetric: some directed links fail while their reverse still works.
            if lead is not None and rng.chance(0.5):
                # the leader's messages are lost but it hears its followers, or the reverse
                others = set(members) - {lead.id}
                if rng.chance(0.5):
                    sim.net.one_way({lead.id}, others)
                else:
                    sim.net.one_way(others, {lead.id})
            else:
                shuffled = list(members)
                rng.shuffle(shuffled)
                cut = rng.randrange(1, len(shuffled)) if len(shuffled) > 1 else 1
                sim.net.one_way(set(shuffled[:cut]), set(shuffled[cut:]))
        elif kind == 0 and lead is not None:
            sim.net.isolate(lead.id, members)
        elif kind == 1 or len(members) < 3:
            shuffled = list(members)
            rng.shuffle(shuffled)
            cut = rng.randrange(1, len(shuffled))
            sim.net.split([set(shuffled[:cut]), set(shuffled[cut:])])
        else:
            shuffled = list(members)
            rng.shuffle(shuffled)
            middle = shuffled[0]
            rest = shuffled[1:]
            cut = rng.randrange(1, len(rest)) if len(rest) > 1 else 1
            sim.net.bridge(set(rest[:cut]), middle, set(rest[cut:]))
        self.partition_until = sim.ticks + rng.randrange(10, 60)

    def _churn(self) -> None:
        sim = self.sim
        lead = sim.leader()
        if lead is None:
            return
        r = raw_of(lead).raft
        cfg = r.trk.config
        if cfg.joint() or r.pending_conf_index > r.raft_log.applied:
            return
        try:
            if cfg.learners:
                learner = min(cfg.learners)
                pr = r.trk.progress[learner]
                if pr.match < r.raft_log.committed:
                    return  # not caught up yet: promote only a fully synced learner
                victim = sim.rng.choice(sorted(cfg.voters))
                cc = ConfChange(
                    (
                        ConfChangeSingle(ConfChangeType.ADD_NODE, learner),
                        ConfChangeSingle(ConfChangeType.REMOVE_NODE, victim),
                    )
                )
                raw_of(lead).propose_conf_change(cc)
            elif sim.next_id <= 3 * sim.cfg.nodes:
                new_id = sim.add_node().id
                cc = ConfChange((ConfChangeSingle(ConfChangeType.ADD_LEARNER_NODE, new_id),))
                raw_of(lead).propose_conf_change(cc)
        except ProposalDroppedError:
            pass
