"""``RawNode``: the driver-facing API around :class:`~gateway.raft.core.Raft`.

The driver loop is::

    node.tick() / node.step(msg) / node.propose(data) / node.read_index(ctx) ...
    if node.has_ready():
        rd = node.ready()
        persist(rd.snapshot, rd.entries, rd.hard_state); if rd.must_sync: fsync
        send(rd.messages)
        apply(rd.committed_entries); serve(rd.read_states)
        node.advance(rd)

``ready()`` must be followed by ``advance()`` before the next ``ready()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import Config
from .core import Raft
from .errors import StepLocalMessageError, StepPeerNotFoundError
from .tracker import Progress
from .types import (
    EMPTY_SNAPSHOT,
    LOCAL_MESSAGES,
    NONE,
    RESPONSE_MESSAGES,
    ConfChange,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Ready,
    SoftState,
)

MT = MessageType


@dataclass(slots=True, frozen=True)
class Status:
    """A snapshot of a node's state for observers and tests."""

    id: int
    hard_state: HardState
    soft_state: SoftState
    applied: int
    last_index: int
    config: str
    progress: dict[int, str]
    lead_transferee: int


class RawNode:
    """A Raft node without threads or I/O. Every method may raise ``CorruptStateError`` or
    a storage error, after which the node must not be used."""

    __slots__ = ("_prev_hard", "_prev_soft", "raft")

    def __init__(self, config: Config) -> None:
        self.raft = Raft(config)
        self._prev_soft = self.raft.soft_state()
        self._prev_hard = self.raft.hard_state()

    # -- inputs -----------------------------------------------------------------------------

    def tick(self) -> None:
        """Advance the logical clock by one tick (election and heartbeat timeouts)."""
        self.raft.tick()

    def campaign(self) -> None:
        """Start an election now (pre-vote first if enabled)."""
        self.raft.step(Message(MT.HUP))

    def propose(self, data: bytes) -> None:
        """Propose ``data`` for appending to the log. Raises ``ProposalDroppedError`` if the
        proposal is refused locally; acceptance does not guarantee it will be committed."""
        self.raft.step(Message(MT.PROP, from_=self.raft.id, entries=[Entry(data=data)]))

    def propose_batch(self, datas: list[bytes]) -> None:
        """Propose several entries in one message (they are appended together)."""
        if not datas:
            return
        ents = [Entry(data=d) for d in datas]
        self.raft.step(Message(MT.PROP, from_=self.raft.id, entries=ents))

    def propose_conf_change(self, cc: ConfChange) -> None:
        """Propose a membership change; once committed, apply it with
        :meth:`apply_conf_change`."""
        ent = Entry(type=EntryType.CONF_CHANGE, data=cc.encode())
        self.raft.step(Message(MT.PROP, from_=self.raft.id, entries=[ent]))

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        """Apply a committed membership change (call it when applying its entry)."""
        return self.raft.apply_conf_change(cc)

    def step(self, m: Message) -> None:
        """Deliver a message from a peer. Local-only message types are refused, as are
        responses from nodes outside the configuration."""
        if m.type in LOCAL_MESSAGES:
            raise StepLocalMessageError(f"{m.type.name} is local-only")
        if m.type in RESPONSE_MESSAGES and m.from_ not in self.raft.trk.progress:
            raise StepPeerNotFoundError(f"{m.type.name} from unknown peer {m.from_}")
        self.raft.step(m)

    def read_index(self, ctx: bytes, lease: bool = False) -> None:
        """Request a linearizable read point; a ``ReadState`` with ``ctx`` appears in a later
        ``Ready``. ``lease`` asks for a lease-based confirmation (falls back to a heartbeat
        round when the leader holds no lease). Requests are dropped silently when there is no
        leader; the caller retries after a timeout."""
        self.raft.step(Message(MT.READ_INDEX, from_=NONE, context=ctx, lease=int(lease)))

    def transfer_leader(self, transferee: int) -> None:
        """Ask the leader to hand leadership to ``transferee``."""
        self.raft.step(Message(MT.TRANSFER_LEADER, from_=transferee))

    def report_unreachable(self, node: int) -> None:
        """The transport failed to deliver to ``node``: stop pipelining to it."""
        self.raft.step(Message(MT.UNREACHABLE, from_=node))

    def report_snapshot(self, node: int, failed: bool) -> None:
        """Report the outcome of a snapshot transfer done outside the core."""
        self.raft.step(Message(MT.SNAP_STATUS, from_=node, reject=failed))

    # -- outputs ----------------------------------------------------------------------------

    def has_ready(self) -> bool:
        r = self.raft
        if r.msgs or r.read_states:
            return True
        log = r.raft_log
        if log.unstable.entries or log.unstable.snapshot is not None:
            return True
        if log.has_next_committed_ents():
            return True
        if r.soft_state() != self._prev_soft:
            return True
        hs = r.hard_state()
        return not hs.is_empty() and hs != self._prev_hard

    def ready(self) -> Ready:
        """Collect everything that must be persisted, sent and applied (see ``Ready``)."""
        r = self.raft
        log = r.raft_log
        rd = Ready(
            entries=log.unstable_entries(),
            committed_entries=log.next_committed_ents(),
            messages=superseded_appends_dropped(r.msgs),
        )
        r.msgs = []
        soft = r.soft_state()
        if soft != self._prev_soft:
            rd.soft_state = soft
            self._prev_soft = soft
        hs = r.hard_state()
        if hs != self._prev_hard:
            rd.hard_state = hs
        if log.unstable.snapshot is not None:
            rd.snapshot = log.unstable.snapshot
        if r.read_states:
            rd.read_states = r.read_states
            r.read_states = []
        prev = self._prev_hard
        rd.must_sync = bool(
            rd.entries
            or rd.snapshot is not EMPTY_SNAPSHOT
            or (rd.hard_state is not None and (hs.term != prev.term or hs.vote != prev.vote))
        )
        if rd.hard_state is not None:
            self._prev_hard = hs
        if rd.committed_entries:
            log.accept_applying(rd.committed_entries[-1].index)
        return rd

    def advance(self, rd: Ready) -> None:
        """The driver has persisted, sent and applied ``rd``."""
        r = self.raft
        log = r.raft_log
        if rd.entries:
            e = rd.entries[-1]
            log.stable_to(e.index, e.term)
        if rd.snapshot is not EMPTY_SNAPSHOT:
            log.stable_snap_to(rd.snapshot.metadata.index)
            log.applied_to(max(log.applied, rd.snapshot.metadata.index))
        if rd.committed_entries:
            last = rd.committed_entries[-1].index
            if r.max_uncommitted_size:
                r.reduce_uncommitted_size(sum(len(e.data) for e in rd.committed_entries))
            log.applied_to(last)
            r.maybe_auto_leave()

    # -- observation ------------------------------------------------------------------------

    def status(self) -> Status:
        r = self.raft
        prs: dict[int, Progress] = r.trk.progress if r.role.name == "LEADER" else {}
        return Status(
            id=r.id,
            hard_state=r.hard_state(),
            soft_state=r.soft_state(),
            applied=r.raft_log.applied,
            last_index=r.raft_log.last_index(),
            config=r.trk.config.describe(),
            progress={k: repr(v) for k, v in sorted(prs.items())},
            lead_transferee=r.lead_transferee,
        )


def superseded_appends_dropped(msgs: list[Message]) -> list[Message]:
    """``msgs`` without the appends that carry no entries and that a later append of the same
    list to the same peer, in the same term, supersedes: one with entries, a previous index
    at least as high and a commit index at least as high.

    An append without entries only tells a follower the commit index (``min(commit,
    index)`` there); a later append of the same term with entries at or after the same
    position tells it at least as much, so the first one changes nothing the follower ends up
    with -- except a reply the leader would have to step. Such pairs arise on every busy leader
    cycle: stepping the followers' replies advances the commit and broadcasts it, then the
    writes proposed in the same cycle are sent. Empty appends take no room in the in-flight
    window (``Progress.sent_entries``), so dropping them leaves the flow control as it was."""
    if len(msgs) < 2:
        return msgs
    later: dict[int, Message] = {}  # peer -> the next append with entries to it
    keep: list[Message] = []
    dropped = False
    for m in reversed(msgs):
        if m.type == MessageType.APP:
            if m.entries:
                later[m.to] = m
            else:
                nxt = later.get(m.to)
                if (nxt is not None and nxt.term == m.term and nxt.index >= m.index
                        and nxt.commit >= m.commit):
                    dropped = True
                    continue
        keep.append(m)
    if not dropped:
        return msgs
    keep.reverse()
    return keep
