"""What a leader knows about each follower (``Progress``), the flow-control window of in-flight
appends (``Inflights``), and the tracker that ties them to the membership configuration.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import IntEnum

from .quorum import (
    VoteResult,
    joint_committed_index,
    joint_vote_result,
)
from .types import ConfState


class ProgressState(IntEnum):
    """``PROBE``: one append at a time until the follower's match index is known.
    ``REPLICATE``: optimistic pipelining, bounded by ``Inflights``.
    ``SNAPSHOT``: a snapshot is being transferred; appends are paused."""

    PROBE = 0
    REPLICATE = 1
    SNAPSHOT = 2


class Inflights:
    """Appends sent but not yet acknowledged, as (last index, payload bytes) in send order.
    Full when ``max_count`` messages or ``max_bytes`` payload bytes are outstanding
    (``max_bytes == 0`` means no byte limit)."""

    __slots__ = ("_q", "bytes", "max_bytes", "max_count")

    def __init__(self, max_count: int, max_bytes: int = 0) -> None:
        self._q: deque[tuple[int, int]] = deque()
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._q)

    def add(self, index: int, size: int) -> None:
        """Record an append whose last entry is ``index``; indexes must be increasing."""
        self._q.append((index, size))
        self.bytes += size

    def free_le(self, index: int) -> None:
        """Forget every append whose last index is <= ``index`` (they were acknowledged)."""
        q = self._q
        while q and q[0][0] <= index:
            self.bytes -= q.popleft()[1]

    def free_first_one(self) -> None:
        """Forget the oldest outstanding append (used when acknowledgements may be lost)."""
        if self._q:
            self.bytes -= self._q.popleft()[1]

    def full(self) -> bool:
        return len(self._q) >= self.max_count or (0 < self.max_bytes <= self.bytes)

    def reset(self) -> None:
        self._q.clear()
        self.bytes = 0


class Progress:
    """The leader's view of one follower: entries up to ``match`` are known to be replicated,
    ``next`` is the next index to send. ``lease_tick`` is the leader tick at which the latest
    heartbeat the follower acknowledged was sent; ``snap_acked`` is how many bytes of the
    snapshot in transfer the follower has confirmed."""

    __slots__ = (
        "inflights",
        "is_learner",
        "lease_tick",
        "match",
        "msg_app_flow_paused",
        "next",
        "pending_snapshot",
        "recent_active",
        "snap_acked",
        "state",
    )

    def __init__(
        self, next_index: int, match: int, inflights: Inflights, is_learner: bool = False
    ) -> None:
        self.match = match
        self.next = next_index
        self.state = ProgressState.PROBE
        self.pending_snapshot = 0
        self.recent_active = False
        self.msg_app_flow_paused = False
        self.inflights = inflights
        self.is_learner = is_learner
        self.lease_tick = -(1 << 62)
        self.snap_acked = 0

    def __repr__(self) -> str:
        s = f"{self.state.name} match={self.match} next={self.next}"
        if self.is_learner:
            s += " learner"
        if self.state == ProgressState.SNAPSHOT:
            s += f" pending_snap={self.pending_snapshot}"
        if len(self.inflights):
            s += f" inflight={len(self.inflights)}"
        return s

    def _reset_state(self, state: ProgressState) -> None:
        self.msg_app_flow_paused = False
        self.pending_snapshot = 0
        self.snap_acked = 0
        self.state = state
        self.inflights.reset()

    def become_probe(self) -> None:
        """Probe from just after ``match`` (or after a snapshot that was just sent)."""
        if self.state == ProgressState.SNAPSHOT:
            pending = self.pending_snapshot
            self._reset_state(ProgressState.PROBE)
            self.next = max(self.match + 1, pending + 1)
        else:
            self._reset_state(ProgressState.PROBE)
            self.next = self.match + 1

    def become_replicate(self) -> None:
        self._reset_state(ProgressState.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset_state(ProgressState.SNAPSHOT)
        self.pending_snapshot = snapshot_index

    def sent_entries(self, count: int, size: int) -> None:
        """Account for an append of ``count`` entries (``size`` bytes) starting at ``next``."""
        if self.state == ProgressState.REPLICATE:
            if count:
                self.next += count
                self.inflights.add(self.next - 1, size)
            self.msg_app_flow_paused = self.inflights.full()
        elif self.state == ProgressState.PROBE and count:
            self.msg_app_flow_paused = True

    def maybe_update(self, n: int) -> bool:
        """The follower acknowledged up to ``n``; returns whether ``match`` advanced."""
        if self.match < n:
            self.match = n
            self.msg_app_flow_paused = False
            if self.next <= n:
                self.next = n + 1
            return True
        if self.next <= n:
            self.next = n + 1
        return False

    def maybe_decr_to(self, rejected: int, match_hint: int) -> bool:
        """The follower rejected an append after index ``rejected`` and hinted that its log
        matches ours at most up to ``match_hint``. Returns False for stale rejections."""
        if self.state == ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        self.msg_app_flow_paused = False
        return True

    def is_paused(self) -> bool:
        if self.state == ProgressState.SNAPSHOT:
            return True
        return self.msg_app_flow_paused


@dataclass(slots=True)
class TrackerConfig:
    """A membership configuration. ``voters_outgoing`` is non-empty only while joint."""

    voters: frozenset[int] = frozenset()
    voters_outgoing: frozenset[int] = frozenset()
    learners: frozenset[int] = frozenset()
    learners_next: frozenset[int] = frozenset()
    auto_leave: bool = False

    def joint(self) -> bool:
        return bool(self.voters_outgoing)

    def all_voters(self) -> frozenset[int]:
        return self.voters | self.voters_outgoing

    def conf_state(self) -> ConfState:
        return ConfState(
            voters=tuple(sorted(self.voters)),
            learners=tuple(sorted(self.learners)),
            voters_outgoing=tuple(sorted(self.voters_outgoing)),
            learners_next=tuple(sorted(self.learners_next)),
            auto_leave=self.auto_leave,
        )

    def describe(self) -> str:
        s = "voters=(" + " ".join(map(str, sorted(self.voters))) + ")"
        if self.voters_outgoing:
            s += "&&(" + " ".join(map(str, sorted(self.voters_outgoing))) + ")"
        if self.learners:
            s += " learners=(" + " ".join(map(str, sorted(self.learners))) + ")"
        if self.learners_next:
            s += " learners_next=(" + " ".join(map(str, sorted(self.learners_next))) + ")"
        if self.auto_leave:
            s += " autoleave"
        return s


@dataclass(slots=True)
class ProgressTracker:
    """Configuration, per-node progress and the votes of the current election."""

    max_inflight: int
    max_inflight_bytes: int = 0
    config: TrackerConfig = field(default_factory=TrackerConfig)
    progress: dict[int, Progress] = field(default_factory=dict)
    votes: dict[int, bool] = field(default_factory=dict)
    ids: list[int] = field(default_factory=list)

    def set(self, config: TrackerConfig, progress: dict[int, Progress]) -> None:
        self.config = config
        self.progress = progress
        self.ids = sorted(progress)

    def new_inflights(self) -> Inflights:
        return Inflights(self.max_inflight, self.max_inflight_bytes)

    def committed(self) -> int:
        """Largest index replicated on a quorum of the (possibly joint) configuration."""
        prs = self.progress
        cfg = self.config
        if not cfg.voters_outgoing and len(cfg.voters) == 3:
            a, b, c = (prs[v].match for v in cfg.voters)
            # median of three
            if a > b:
                a, b = b, a
            return b if c >= b else max(a, c)
        acked = {v: prs[v].match for v in (cfg.voters | cfg.voters_outgoing)}
        return joint_committed_index(cfg.voters, cfg.voters_outgoing, acked)

    def is_singleton(self) -> bool:
        return len(self.config.voters) == 1 and not self.config.voters_outgoing

    def quorum_active(self) -> bool:
        votes = {i: pr.recent_active for i, pr in self.progress.items() if not pr.is_learner}
        return (
            joint_vote_result(self.config.voters, self.config.voters_outgoing, votes)
            == VoteResult.WON
        )

    def quorum_acked_since(self, tick: int) -> bool:
        """Whether a quorum acknowledged heartbeats sent at or after leader tick ``tick``."""
        votes = {
            i: pr.lease_tick >= tick for i, pr in self.progress.items() if not pr.is_learner
        }
        return (
            joint_vote_result(self.config.voters, self.config.voters_outgoing, votes)
            == VoteResult.WON
        )

    def voter_ids(self) -> list[int]:
        return sorted(self.config.voters | self.config.voters_outgoing)

    def reset_votes(self) -> None:
        self.votes = {}

    def record_vote(self, node: int, granted: bool) -> None:
        """Record ``node``'s vote; only the first vote of a node counts."""
        self.votes.setdefault(node, granted)

    def tally_votes(self) -> tuple[int, int, VoteResult]:
        granted = rejected = 0
        for node, pr in self.progress.items():
            if pr.is_learner:
                continue
            v = self.votes.get(node)
            if v is None:
                continue
            if v:
                granted += 1
            else:
                rejected += 1
        result = joint_vote_result(self.config.voters, self.config.voters_outgoing, self.votes)
        return granted, rejected, result
