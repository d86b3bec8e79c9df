"""One simulated run: a Raft cluster driving a KV store under injected faults.

Everything is derived from the seed through :class:`~gateway.raft.rng.SplitMix64`, so a run is
reproducible bit for bit. Time advances in sub-steps; the simulator's clock (faults, clients)
ticks every ``SUBSTEPS`` sub-steps, and every node has its own clock: it ticks when its
accumulator, advanced by the node's ``rate`` per sub-step, crosses ``TICK_UNITS``. Without the
``skew`` fault every rate is nominal and every node ticks together with the simulator; with it,
rates drift within the bound the lease contract allows (``nemesis.MAX_DRIFT_PCT``) and clocks
start out of phase. A run has three phases: the faulty phase (``steps`` ticks), a recovery
phase (faults off, partitions healed, crashed nodes restarted, until the cluster converges) and
the final checks (convergence, acknowledged writes, linearizability of the client history).

Besides independent random faults, a schedule generator starts targeted scenarios
(``nemesis.py``: stale-leader reads, Figure 8) whose windows random faults almost never hit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import Config
from ..errors import ProposalDroppedError, RaftError, StepPeerNotFoundError
from ..linearizability import CheckResult, Operation, check_history
from ..quorum import VoteResult, joint_vote_result
from ..rawnode import RawNode
from ..rng import SplitMix64
from ..storage import MemoryStorage
from ..types import (
    NONE,
    ConfChange,
    EntryType,
    Message,
    MessageType,
    Ready,
    Role,
)
from .disk import SimDisk
from .invariants import InvariantChecker, InvariantViolation
from .kv import CAS, GET, PUT, KVStore, encode_op
from .nemesis import (
    MAX_DRIFT_PCT,
    NOMINAL_RATE,
    Nemesis,
    Pin,
    Scenario,
    SimNode,
    raw_of,
)
from .network import Network, NetworkFaults

ALL_FAULTS = (
    "drop",
    "delay",
    "dup",
    "reorder",
    "partition",
    "crash",
    "torn",
    "churn",
    "snapshot",
    "transfer",
    "pause",
    "skew",
    "oneway",
    "stale",
    "figure8",
    "laggard",
    "lostack",
)

SUBSTEPS = 4
#: A node ticks each time its clock accumulates this many rate units (nominal rate per
#: sub-step: ``NOMINAL_RATE``, so a nominal node ticks every ``SUBSTEPS`` sub-steps).
TICK_UNITS = NOMINAL_RATE * SUBSTEPS
#: Ticks (of its own clock) within which a leader must step down once a quorum of its voters
#: is in a higher term: check-quorum runs every election timeout, and term-T responses sent
#: before the quorum moved on are delivered within ``(delay_max + spike_max) / SUBSTEPS``.
STALE_LEADER_TICKS = 3 * 10 + 6
ELECTION_TICK = 10
HEARTBEAT_TICK = 2
OP_TIMEOUT_TICKS = 12
KEYS = ("a", "b")
READ_MODES = ("log", "read_index", "lease")


@dataclass(slots=True)
class SimConfig:
    seed: int
    nodes: int = 3
    steps: int = 300
    faults: frozenset[str] = frozenset(ALL_FAULTS)
    clients: int = 4
    recovery_ticks: int = 400


@dataclass(slots=True)
class SimResult:
    seed: int
    ok: bool
    error: str = ""
    ops: int = 0
    acked_writes: int = 0
    elections: int = 0
    snapshots_sent: int = 0
    scenarios: dict[str, int] = field(default_factory=dict)
    history: list[Operation] = field(default_factory=list)
    linearizability: CheckResult | None = None


@dataclass(slots=True)
class _Op:
    client: int
    seq: int
    kind: str
    key: str
    value: str | None
    expected: str | None
    mode: str
    call: int
    deadline: int
    node: int


class _Node:
    __slots__ = (
        "alive",
        "clock",
        "disk",
        "down_until",
        "id",
        "incarnation",
        "kv",
        "owed",
        "paused_until",
        "pending_ops",
        "pending_reads",
        "rate",
        "raw",
        "ready_reads",
        "removed",
        "stale_since",
        "storage",
    )

    def __init__(self, node_id: int, disk: SimDisk) -> None:
        self.id = node_id
        self.disk = disk
        self.alive = False
        self.removed = False
        self.down_until = 0
        self.paused_until = 0
        self.owed = 0  # ticks its clock produced while the process was paused
        self.rate = NOMINAL_RATE
        self.clock = 0
        self.stale_since: tuple[int, int] | None = None  # (incarnation, own tick)
        self.incarnation = 0
        self.raw: RawNode | None = None
        self.storage = MemoryStorage()
        self.kv = KVStore()
        self.pending_ops: dict[tuple[int, int], _Op] = {}
        self.pending_reads: dict[bytes, _Op] = {}
        self.ready_reads: list[tuple[int, _Op]] = []


class Simulation:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.rng = SplitMix64(cfg.seed * 0x9E3779B1 + cfg.nodes)
        f = cfg.faults
        self.net = Network(
            self.rng.fork(),
            NetworkFaults(
                drop_max=0.15 if "drop" in f else 0.0,
                duplicate=0.03 if "dup" in f else 0.0,
                delay_min=1,
                delay_max=SUBSTEPS * 2 if "delay" in f else 1,
                reorder_spike=0.03 if "reorder" in f else 0.0,
            ),
        )
        self.checker = InvariantChecker()
        self.now = 0
        self.event = 0
        self.ticks = 0
        self.nodes: dict[int, _Node] = {}
        self.next_id = cfg.nodes + 1
        self.history: list[Operation] = []
        self.client_op: dict[int, _Op | None] = {c: None for c in range(1, cfg.clients + 1)}
        self.client_seq: dict[int, int] = dict.fromkeys(self.client_op, 0)
        self.client_node: dict[int, int] = {}
        self.faults_on = True
        self.pins: dict[int, Pin] = {}
        self.scenario: Scenario | None = None
        self.elections = 0
        self.snapshots_sent = 0
        self.acked_writes = 0
        voters = tuple(range(1, cfg.nodes + 1))
        initial = KVStore().snapshot()
        for i in voters:
            st = MemoryStorage.bootstrap(voters, initial)
            disk = SimDisk(st.hard_state(), st.snapshot(), [])
            node = _Node(i, disk)
            self.nodes[i] = node
            self._start(node)
        self.nemesis = Nemesis(self)

    # -- node lifecycle ---------------------------------------------------------------------

    def _start(self, node: _Node) -> None:
        node.storage = node.disk.recover()
        snap = node.storage.snapshot()
        node.kv = KVStore.restore(snap.data[:]) if not snap.is_empty() else KVStore()
        node.raw = RawNode(
            Config(
                id=node.id,
                storage=node.storage,
                election_tick=ELECTION_TICK,
                heartbeat_tick=HEARTBEAT_TICK,
                applied=snap.metadata.index,
                max_size_per_msg=512,
                max_inflight_msgs=4,
                check_quorum=True,
                pre_vote=True,
                skip_used_terms=True,
                boot_lease_guard=True,
                max_snapshot_chunk=96,
                snapshot_chunk_window=2,
                rng=self.rng.fork(),
            )
        )
        node.alive = True
        node.incarnation += 1
        node.owed = 0
        node.paused_until = 0
        node.stale_since = None
        # A restarted process's clock starts at an arbitrary phase when clocks are skewed.
        node.clock = self.rng.randrange(0, TICK_UNITS) if "skew" in self.cfg.faults else 0
        node.pending_ops.clear()
        node.pending_reads.clear()
        node.ready_reads.clear()

    def _crash(self, node: _Node, downtime: int | None = None) -> None:
        node.disk.crash(self.rng, tear="torn" in self.cfg.faults)
        node.alive = False
        node.raw = None
        node.down_until = self.ticks + (
            self.rng.randrange(5, 40) if downtime is None else downtime
        )

    def crash(self, node: SimNode, downtime: int | None = None) -> None:
        """Crash ``node`` (one of ``nodes``) now (unsynced writes are lost as in any crash); it
        restarts after ``downtime`` ticks (random when None)."""
        assert isinstance(node, _Node), "crash() takes one of this simulation's nodes"
        self._crash(node, downtime)

    def leader(self) -> _Node | None:
        """The live leader with the highest term (None if no node believes it leads)."""
        return self._leader()

    def reset_rates(self) -> None:
        """Give every node a fresh clock rate: nominal, or drifting within the lease contract
        (``MAX_DRIFT_PCT``) with the ``skew`` fault."""
        for n in self.nodes.values():
            n.rate = self._draw_rate()

    def live(self) -> list[_Node]:
        """The nodes whose process is running."""
        return self._live()

    def add_node(self) -> _Node:
        """Start a new, empty node with the next free id (not yet a member: propose it)."""
        node = _Node(self.next_id, SimDisk())
        self.next_id += 1
        self.nodes[node.id] = node
        self._start(node)
        return node

    def draw_rate(self) -> int:
        """A clock rate for one node: nominal, or within ``MAX_DRIFT_PCT`` with ``skew``."""
        return self._draw_rate()

    def _draw_rate(self) -> int:
        if "skew" not in self.cfg.faults:
            return NOMINAL_RATE
        return NOMINAL_RATE + self.rng.randrange(-MAX_DRIFT_PCT, MAX_DRIFT_PCT + 1)

    # -- driving ----------------------------------------------------------------------------

    def _live(self) -> list[_Node]:
        return [n for n in self.nodes.values() if n.alive]

    def _leader(self) -> _Node | None:
        best, best_term = None, -1
        for n in self._live():
            assert n.raw is not None  # a live node runs its RawNode
            r = n.raw.raft
            if r.role == Role.LEADER and r.term > best_term:
                best, best_term = n, r.term
        return best

    def _process_ready(self, node: _Node) -> None:
        raw = node.raw
        assert raw is not None
        if not raw.has_ready():
            return
        rd = raw.ready()
        r = raw.raft
        chk = self.checker
        if rd.soft_state is not None and rd.soft_state.role == Role.LEADER:
            self.elections += 1
            chk.on_leader(node.id, r.term, r.raft_log)
        if rd.entries:
            chk.on_append(node.id, rd.entries, r.raft_log)
        if rd.hard_state is not None:
            chk.on_commit(node.id, node.incarnation, rd.hard_state.commit)
        st = node.storage
        st.persist(rd)
        node.disk.write(rd.hard_state, rd.snapshot, rd.entries)
        crashes = self.faults_on and "crash" in self.cfg.faults and self.scenario is None
        if rd.must_sync:
            if crashes and self.rng.chance(0.002):
                self._crash(node)  # crashed between write and fsync: nothing below happens
                return
            node.disk.sync()
        acked = False
        for m in rd.messages:
            if m.chunk is not None:
                self.snapshots_sent += 1
            if not m.reject and m.type in (MessageType.VOTE_RESP, MessageType.APP_RESP):
                acked = True
            self.net.send(m, self.now)
        if self.scenario is not None:
            self.scenario.on_ready(node, rd)
            if not node.alive:
                return  # the scenario crashed it right after sending
        if acked and crashes and self.rng.chance(0.01) and self._may_crash(node):
            # Crashed right after acknowledging (a vote or entries): whatever the
            # acknowledgement promised must already be durable. Restarts quickly.
            self._crash(node, downtime=self.rng.randrange(0, 3))
            return
        self._apply(node, rd)
        raw.advance(rd)
        self._maybe_snapshot(node, rd)
        if r.removed:
            node.removed = True
            node.alive = False
            node.raw = None

    def _apply(self, node: _Node, rd: Ready) -> None:
        raw = node.raw
        assert raw is not None
        if not rd.snapshot.is_empty():
            node.kv = KVStore.restore(rd.snapshot.data[:])
        for e in rd.committed_entries:
            self.checker.on_apply(node.id, e)
            if e.type == EntryType.CONF_CHANGE:
                raw.apply_conf_change(ConfChange.decode(e.data))
                continue
            res = node.kv.apply(e.data)
            if res is None:
                continue
            client, seq, result = res
            op = node.pending_ops.pop((client, seq), None)
            if op is not None:
                if op.kind != GET:
                    self.checker.on_ack(client, seq, e.index)
                self._complete(op, result if op.kind != PUT else None)
        for rs in rd.read_states:
            op = node.pending_reads.pop(rs.request_ctx, None)
            if op is not None:
                node.ready_reads.append((rs.index, op))
        if node.ready_reads:
            applied = raw.raft.raft_log.applied
            if rd.committed_entries:
                applied = max(applied, rd.committed_entries[-1].index)
            keep = []
            for index, op in node.ready_reads:
                if index <= applied:
                    self._complete(op, node.kv.get(op.key))
                else:
                    keep.append((index, op))
            node.ready_reads = keep

    def _maybe_snapshot(self, node: _Node, rd: Ready) -> None:
        raw = node.raw
        assert raw is not None
        applied = raw.raft.raft_log.applied
        st = node.storage
        snap_index = st.snapshot().metadata.index
        conf_changed = any(e.type == EntryType.CONF_CHANGE for e in rd.committed_entries)
        every = 25 if "snapshot" in self.cfg.faults else 10**9
        if applied <= snap_index or (applied - snap_index < every and not conf_changed):
            return
        if applied > st.last_index():
            return
        snap = st.create_snapshot(applied, raw.raft.trk.config.conf_state(), node.kv.snapshot())
        st.compact(applied)
        node.disk.save_snapshot(snap)

    def _tick(self) -> None:
        self.ticks += 1
        for node in list(self.nodes.values()):
            if node.alive and node.paused_until:
                if self.ticks < node.paused_until:
                    continue
                # Resumed (a process pause, e.g. GC): the driver first delivers the ticks
                # that elapsed meanwhile, as a real driver reading a monotonic clock does.
                for _ in range(node.owed):
                    raw_of(node).tick()
                node.owed = 0
                node.paused_until = 0
            elif not node.alive and not node.removed and node.down_until <= self.ticks:
                self._start(node)
        self._check_stale_leaders()
        if self.faults_on:
            self.nemesis.tick()
        elif self.scenario is not None:
            self.scenario.finish()
            self.scenario = None
        self._clients()

    def _tick_clocks(self) -> None:
        """Advance every node's own clock by one sub-step; deliver the ticks it produces (a
        paused process owes them until it resumes)."""
        for node in self.nodes.values():
            if not node.alive:
                continue
            node.clock += node.rate
            while node.clock >= TICK_UNITS:
                node.clock -= TICK_UNITS
                if node.paused_until:
                    node.owed += 1
                else:
                    raw_of(node).tick()

    def _check_stale_leaders(self) -> None:
        """Check-quorum's promise: a leader steps down within ``STALE_LEADER_TICKS`` of its
        own ticks once the voters still in its term (or a lower one) can no longer form a
        quorum of its configuration. (Terms only rise through votes and leaders; with the
        live-lock fix a failed candidate may return to a lower term, which resets the
        count.)"""
        for node in self.nodes.values():
            raw = node.raw
            if raw is None or not node.alive or raw.raft.role != Role.LEADER:
                node.stale_since = None
                continue
            r = raw.raft
            cfg = r.trk.config
            votes = {v: self._term_of(v) <= r.term for v in cfg.all_voters()}
            if joint_vote_result(cfg.voters, cfg.voters_outgoing, votes) != VoteResult.LOST:
                node.stale_since = None
                continue
            since = node.stale_since
            if since is None or since[0] != node.incarnation:
                node.stale_since = (node.incarnation, r.ticks)
            elif r.ticks - since[1] > STALE_LEADER_TICKS:
                raise InvariantViolation(
                    f"stale leader: node {node.id} still leads term {r.term} "
                    f"{r.ticks - since[1]} of its ticks after a quorum of its voters moved "
                    f"to a higher term (terms {sorted((v, self._term_of(v)) for v in votes)})"
                )

    def _term_of(self, node_id: int) -> int:
        n = self.nodes.get(node_id)
        if n is None:
            return 0
        if n.raw is not None and n.alive:
            return n.raw.raft.term
        return n.disk.hard_state.term

    def _may_crash(self, node: _Node) -> bool:
        members = [n for n in self.nodes.values() if not n.removed]
        down = sum(1 for n in members if not n.alive)
        return node.alive and down < (len(members) - 1) // 2

    def _substep(self) -> None:
        self.now += 1
        self._tick_clocks()
        if self.now % SUBSTEPS == 0:
            self._tick()
        for m in self.net.due(self.now):
            node = self.nodes.get(m.to)
            if node is None or not node.alive or node.paused_until:
                continue
            try:
                raw_of(node).step(m)
            except (ProposalDroppedError, StepPeerNotFoundError):
                continue  # a forwarded proposal refused, or a response from a removed node
        for node in list(self.nodes.values()):
            if node.alive and not node.paused_until:
                self._process_ready(node)

    # -- clients ----------------------------------------------------------------------------

    def _complete(self, op: _Op, output: object) -> None:
        if self.client_op.get(op.client) is not op:
            return  # already timed out: stays in the history with an unknown outcome
        self.event += 1
        self.history.append(
            Operation(op.client, op.kind, op.key, op.call, self.event, op.value, op.expected,
                      output)
        )
        if op.kind != GET:
            self.acked_writes += 1
        self.client_op[op.client] = None

    def _clients(self) -> None:
        rng = self.rng
        for c, op in self.client_op.items():
            if op is not None:
                if self.ticks >= op.deadline:
                    if op.kind != GET:
                        self.history.append(
                            Operation(c, op.kind, op.key, op.call, None, op.value,
                                      op.expected, None)
                        )
                    self.client_op[c] = None
                continue
            if not self.faults_on or not rng.chance(0.8):
                continue
            self._issue(c)

    def _issue(self, c: int) -> None:
        rng = self.rng
        live = [n for n in self._live() if n.raw is not None]
        if not live:
            return
        seq = self.client_seq[c] + 1
        key = rng.choice(KEYS)
        roll = rng.random()
        value = expected = None
        mode = "log"
        timeout = OP_TIMEOUT_TICKS
        pin = self.pins.get(c)
        if pin is not None:
            roll = 0.5 if pin.role == "read" else 0.0
            key = pin.key or key
        if roll < 0.4:
            kind, value = PUT, f"{c}.{seq}"
            if pin is not None and pin.pad:
                value += "." + "x" * pin.pad
        elif roll < 0.8:
            kind, mode = GET, rng.choice(pin.modes if pin is not None else READ_MODES)
        else:
            kind, value = CAS, f"{c}.{seq}"
            prev = self.client_seq[c] - rng.randrange(1, 4)
            expected = None if prev <= 0 or rng.chance(0.2) else f"{rng.randrange(1, 4)}.{prev}"
        if pin is not None:
            # A scenario holds this client on one node (e.g. a deposed leader).
            node = self.nodes.get(pin.node)
            if node is None or not node.alive or node.raw is None or node.paused_until:
                return
            if pin.avoid_lead != NONE and node.raw.raft.lead in (NONE, pin.avoid_lead):
                return
            timeout = pin.timeout
        else:
            # Clients stay with one gateway node for a while (as connected clients do); the
            # node may be any live node, including one that wrongly believes it leads.
            node = self.nodes.get(self.client_node.get(c, 0))
            if node is not None and node.paused_until:
                return  # its node is frozen: the request would wait in the socket
            live = [n for n in live if not n.paused_until]
            if not live:
                return
            if node is None or node not in live or rng.chance(0.2):
                leaders = [n for n in live if raw_of(n).raft.role == Role.LEADER]
                node = rng.choice(leaders if leaders and rng.chance(0.3) else live)
                self.client_node[c] = node.id
        self.client_seq[c] = seq
        self.event += 1
        op = _Op(c, seq, kind, key, value, expected, mode, self.event,
                 self.ticks + timeout, node.id)
        self.client_op[c] = op
        raw = node.raw
        assert raw is not None
        try:
            if kind == GET and mode != "log":
                ctx = f"{c}:{seq}".encode()
                node.pending_reads[ctx] = op
                raw.read_index(ctx, lease=mode == "lease")
            else:
                node.pending_ops[(c, seq)] = op
                raw.propose(encode_op(c, seq, kind, key, value, expected))
        except ProposalDroppedError:
            # Refused locally: certainly not in any log, so it never takes effect.
            node.pending_ops.pop((c, seq), None)
            self.client_op[c] = None

    # -- run --------------------------------------------------------------------------------

    def run(self) -> SimResult:
        res = SimResult(self.cfg.seed, True)
        try:
            for _ in range(self.cfg.steps * SUBSTEPS):
                self._substep()
            self._recover()
            self._final_checks()
            lin = check_history(self.history)
            res.linearizability = lin
            if lin.ok is not True:
                detail = "; ".join(o.describe() for o in lin.stuck)
                res.ok = False
                res.error = f"linearizability (key {lin.key}): {lin.detail}: {detail}"
        except InvariantViolation as exc:
            res.ok = False
            res.error = f"invariant violated at tick {self.ticks}: {exc}"
        except RaftError as exc:
            res.ok = False
            res.error = f"raft error at tick {self.ticks}: {type(exc).__name__}: {exc}"
        res.ops = len(self.history)
        res.acked_writes = self.acked_writes
        res.elections = self.elections
        res.snapshots_sent = self.snapshots_sent
        res.scenarios = dict(self.nemesis.scenarios_run)
        res.history = self.history
        return res

    def _recover(self) -> None:
        """Faults off: heal, restart crashed nodes, and run until the members converge."""
        self.faults_on = False
        self.net.heal()
        self.net.faults = NetworkFaults()
        for node in self.nodes.values():
            if not node.alive and not node.removed:
                node.down_until = 0
        for _ in range(self.cfg.recovery_ticks):
            for _ in range(SUBSTEPS):
                self._substep()
            if self._converged():
                return
        lead = self._leader()
        state = {
            n.id: (n.raw.raft.role.name, n.raw.raft.term, n.raw.raft.raft_log.applied)
            for n in self._live()
            if n.raw is not None
        }
        raise InvariantViolation(
            f"liveness: no convergence {self.cfg.recovery_ticks} ticks after healing "
            f"(leader {lead.id if lead else None}, nodes {state})"
        )

    def _members(self, lead: _Node) -> list[_Node]:
        cfg = raw_of(lead).raft.trk.config
        ids = cfg.all_voters() | cfg.learners | cfg.learners_next
        return [self.nodes[i] for i in sorted(ids) if i in self.nodes]

    def _converged(self) -> bool:
        if any(op is not None for op in self.client_op.values()):
            return False
        lead = self._leader()
        if lead is None:
            return False
        r = raw_of(lead).raft
        if not r.committed_entry_in_current_term() or r.trk.config.joint():
            return False
        commit = r.raft_log.committed
        for n in self._members(lead):
            if not n.alive or n.raw is None or n.raw.raft.raft_log.applied != commit:
                return False
        return True

    def _final_checks(self) -> None:
        lead = self._leader()
        assert lead is not None
        members = self._members(lead)
        ref = lead.kv
        for n in members:
            if n.kv.data != ref.data or n.kv.sessions != ref.sessions:
                raise InvariantViolation(
                    f"state machine safety: node {n.id} state differs from leader {lead.id}"
                )
        for (client, seq), index in self.checker.acked.items():
            last = ref.sessions.get(client)
            if last is None or last[0] < seq:
                raise InvariantViolation(
                    f"acknowledged write lost: client {client} op {seq} (index {index})"
                )


def run_seed(cfg: SimConfig) -> SimResult:
    """Run one seed; never raises for protocol failures (they are reported in the result)."""
    return Simulation(cfg).run()


__all__ = ["ALL_FAULTS", "Message", "SimConfig", "SimResult", "Simulation", "run_seed"]
