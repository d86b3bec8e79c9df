"""Membership changes by joint consensus (Raft thesis §4.3), as pure functions from the current
configuration and progress map to new ones.

A change is applied either *simply* (at most one voter added or removed) or by *entering* a
joint configuration ``C_new && C_old`` in which every decision needs a majority of both, and
later *leaving* it to ``C_new``. Learners receive the log but never vote; a voter demoted to a
learner while joint is parked in ``learners_next`` until the joint configuration is left.
Nothing here mutates its inputs: every function returns fresh copies, so a rejected change
leaves the node untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .errors import ConfChangeError
from .tracker import Inflights, Progress, TrackerConfig
from .types import ConfChangeSingle, ConfChangeType, ConfState

ProgressMap = dict[int, Progress]


class _Draft:
    """Mutable working copy of a configuration during one change."""

    __slots__ = ("auto_leave", "incoming", "learners", "learners_next", "outgoing", "prs")

    def __init__(self, cfg: TrackerConfig, prs: ProgressMap) -> None:
        self.incoming = set(cfg.voters)
        self.outgoing = set(cfg.voters_outgoing)
        self.learners = set(cfg.learners)
        self.learners_next = set(cfg.learners_next)
        self.auto_leave = cfg.auto_leave
        self.prs: ProgressMap = {}
        for node, pr in prs.items():
            # Progress objects are shared between the old and new map except where a change
            # touches them; a touched one is copied first (see _own).
            self.prs[node] = pr

    def freeze(self) -> tuple[TrackerConfig, ProgressMap]:
        cfg = TrackerConfig(
            voters=frozenset(self.incoming),
            voters_outgoing=frozenset(self.outgoing),
            learners=frozenset(self.learners),
            learners_next=frozenset(self.learners_next),
            auto_leave=self.auto_leave,
        )
        _check_invariants(cfg, self.prs)
        return cfg, self.prs


def _own(d: _Draft, node: int) -> Progress:
    """Copy the progress of ``node`` before changing its ``is_learner`` flag."""
    old = d.prs[node]
    pr = Progress(old.next, old.match, old.inflights, old.is_learner)
    pr.state = old.state
    pr.pending_snapshot = old.pending_snapshot
    pr.recent_active = old.recent_active
    pr.msg_app_flow_paused = old.msg_app_flow_paused
    pr.lease_tick = old.lease_tick
    pr.snap_acked = old.snap_acked
    d.prs[node] = pr
    return pr


def _init_progress(
    d: _Draft, node: int, learner: bool, last_index: int, new_inflights: Callable[[], Inflights]
) -> None:
    if learner:
        d.learners.add(node)
    else:
        d.incoming.add(node)
    # Probing starts at the leader's last index; recent_active so that check-quorum does not
    # immediately count a just-added node as inactive.
    pr = Progress(max(last_index, 1), 0, new_inflights(), learner)
    pr.recent_active = True
    d.prs[node] = pr


def _remove(d: _Draft, node: int) -> None:
    if node not in d.prs:
        return
    d.incoming.discard(node)
    d.learners.discard(node)
    d.learners_next.discard(node)
    # A node still in the outgoing half keeps its progress until the joint config is left.
    if node not in d.outgoing:
        del d.prs[node]


def _make_voter(d: _Draft, node: int, last_index: int, nf: Callable[[], Inflights]) -> None:
    if node not in d.prs:
        _init_progress(d, node, False, last_index, nf)
        return
    _own(d, node).is_learner = False
    d.learners.discard(node)
    d.learners_next.discard(node)
    d.incoming.add(node)


def _make_learner(d: _Draft, node: int, last_index: int, nf: Callable[[], Inflights]) -> None:
    pr = d.prs.get(node)
    if pr is None:
        _init_progress(d, node, True, last_index, nf)
        return
    if pr.is_learner:
        return
    _remove(d, node)
    d.prs[node] = pr
    if node in d.outgoing:
        # Still a voter of the outgoing half: becomes a learner when the joint config is left.
        d.learners_next.add(node)
    else:
        _own(d, node).is_learner = True
        d.learners.add(node)


def _apply(
    d: _Draft,
    changes: Iterable[ConfChangeSingle],
    last_index: int,
    nf: Callable[[], Inflights],
) -> None:
    for cc in changes:
        if cc.node_id <= 0:
            continue
        if cc.type == ConfChangeType.ADD_NODE:
            _make_voter(d, cc.node_id, last_index, nf)
        elif cc.type == ConfChangeType.ADD_LEARNER_NODE:
            _make_learner(d, cc.node_id, last_index, nf)
        elif cc.type == ConfChangeType.REMOVE_NODE:
            _remove(d, cc.node_id)
        else:  # pragma: no cover - enum is closed
            raise ConfChangeError(f"unknown change type {cc.type}")
    if not d.incoming:
        raise ConfChangeError("removed all voters")


def _check_invariants(cfg: TrackerConfig, prs: ProgressMap) -> None:
    members = cfg.voters | cfg.voters_outgoing | cfg.learners | cfg.learners_next
    missing = members - prs.keys()
    if missing:
        raise ConfChangeError(f"no progress for {sorted(missing)}")
    extra = prs.keys() - members
    if extra:
        raise ConfChangeError(f"progress for non-members {sorted(extra)}")
    if cfg.learners & cfg.all_voters():
        raise ConfChangeError(f"{sorted(cfg.learners & cfg.all_voters())} voter and learner")
    if cfg.learners_next - cfg.voters_outgoing:
        raise ConfChangeError("learners_next must be outgoing voters")
    if cfg.learners_next & cfg.voters:
        raise ConfChangeError("learners_next must not be incoming voters")
    for node in cfg.learners:
        if not prs[node].is_learner:
            raise ConfChangeError(f"learner {node} not marked as learner")
    for node in cfg.all_voters():
        if prs[node].is_learner:
            raise ConfChangeError(f"voter {node} marked as learner")
    if not cfg.voters_outgoing and cfg.auto_leave:
        raise ConfChangeError("auto_leave set outside a joint configuration")


def simple(
    cfg: TrackerConfig,
    prs: ProgressMap,
    changes: Iterable[ConfChangeSingle],
    last_index: int,
    new_inflights: Callable[[], Inflights],
) -> tuple[TrackerConfig, ProgressMap]:
    """Apply ``changes`` directly; at most one voter may be added or removed."""
    if cfg.joint():
        raise ConfChangeError("can't apply simple config change in joint config")
    d = _Draft(cfg, prs)
    _apply(d, changes, last_index, new_inflights)
    if len(set(cfg.voters) ^ d.incoming) > 1:
        raise ConfChangeError("more than one voter changed without entering joint config")
    return d.freeze()


def enter_joint(
    cfg: TrackerConfig,
    prs: ProgressMap,
    auto_leave: bool,
    changes: Iterable[ConfChangeSingle],
    last_index: int,
    new_inflights: Callable[[], Inflights],
) -> tuple[TrackerConfig, ProgressMap]:
    """Enter ``C_new && C_old``: the current voters become the outgoing half and ``changes``
    are applied to the incoming half."""
    if cfg.joint():
        raise ConfChangeError("config is already joint")
    if not cfg.voters:
        raise ConfChangeError("can't make a zero-voter config joint")
    d = _Draft(cfg, prs)
    d.outgoing = set(cfg.voters)
    _apply(d, changes, last_index, new_inflights)
    d.auto_leave = auto_leave
    return d.freeze()


def leave_joint(cfg: TrackerConfig, prs: ProgressMap) -> tuple[TrackerConfig, ProgressMap]:
    """Leave the joint configuration: the incoming half alone decides from now on."""
    if not cfg.joint():
        raise ConfChangeError("can't leave a non-joint config")
    d = _Draft(cfg, prs)
    for node in d.learners_next:
        d.learners.add(node)
        _own(d, node).is_learner = True
    d.learners_next = set()
    for node in d.outgoing:
        if node not in d.incoming and node not in d.learners:
            del d.prs[node]
    d.outgoing = set()
    d.auto_leave = False
    return d.freeze()


def restore(
    cs: ConfState, last_index: int, new_inflights: Callable[[], Inflights]
) -> tuple[TrackerConfig, ProgressMap]:
    """Build the configuration and a fresh progress map described by a snapshot's
    ``ConfState``."""
    cfg = TrackerConfig(
        voters=frozenset(cs.voters),
        voters_outgoing=frozenset(cs.voters_outgoing),
        learners=frozenset(cs.learners),
        learners_next=frozenset(cs.learners_next),
        auto_leave=cs.auto_leave and bool(cs.voters_outgoing),
    )
    prs: ProgressMap = {}
    for node in sorted(cs.members()):
        pr = Progress(max(last_index, 1), 0, new_inflights(), node in cfg.learners)
        pr.recent_active = True
        prs[node] = pr
    _check_invariants(cfg, prs)
    return cfg, prs
