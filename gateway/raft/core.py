"""The Raft protocol state machine.

``Raft`` consumes messages (``step``) and ticks (``tick``) and produces messages to send
(``msgs``) and log changes (through ``raft_log``); ``RawNode`` packages those into ``Ready``.
Behaviour per role is a swapped step function (``_step_leader``, ``_step_candidate``,
``_step_follower``); every role transition goes through a ``become_*`` method.

Nothing here performs I/O or reads a clock, and the only randomness is ``Config.rng``: the same
state and the same inputs always produce the same outputs.
"""

from __future__ import annotations

from collections.abc import Callable

from . import roles
from .confchange import enter_joint, leave_joint, restore, simple
from .config import Config
from .errors import (
    CompactedError,
    ConfChangeError,
    CorruptStateError,
    ProposalDroppedError,
    SnapshotTemporarilyUnavailableError,
    UnavailableError,
)
from .log import RaftLog
from .quorum import VoteResult, joint_vote_result
from .read_only import ReadOnly
from .rng import RandomSource
from .snapshot_transfer import SnapshotReceiver, SnapshotSender
from .tracker import Progress, ProgressState, ProgressTracker, TrackerConfig
from .types import (
    NONE,
    ConfChange,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ReadOnlyOption,
    ReadState,
    Role,
    Snapshot,
    SoftState,
    entries_size,
)

#: Context of a MsgVote/MsgPreVote sent because of a leadership transfer: voters grant it even
#: while they believe in a live leader.
CAMPAIGN_TRANSFER = b"CampaignTransfer"

#: Bound on the remembered terms of the live-lock fix (oldest are dropped first).
_MAX_USED_TERMS = 256

MT = MessageType


class Raft:
    """One node's protocol state. Not thread-safe; drive it from one place."""

    def __init__(self, c: Config) -> None:
        c.validate()
        assert c.rng is not None
        self.id = c.id
        self.rng: RandomSource = c.rng
        self.raft_log = RaftLog(c.storage, c.max_committed_size_per_ready)
        hs, cs = c.storage.initial_state()
        self.max_msg_size = c.max_size_per_msg
        self.max_uncommitted_size = c.max_uncommitted_entries_size
        self.trk = ProgressTracker(c.max_inflight_msgs, c.max_inflight_bytes)
        self.election_timeout = c.election_tick
        self.heartbeat_timeout = c.heartbeat_tick
        self.check_quorum = c.check_quorum
        self.pre_vote = c.pre_vote
        self.read_only_option = c.read_only_option
        self.disable_proposal_forwarding = c.disable_proposal_forwarding
        self.skip_used_terms = c.skip_used_terms
        self.term = 0
        self.vote = NONE
        self.lead = NONE
        self.role = Role.FOLLOWER
        self.is_learner = False
        self.removed = False
        #: Set while a leader whose removal it applied still tells the new configuration
        #: that the removal is committed (``_leaving``): the commit index that removed it.
        self.leaving_index = 0
        #: While leaving: per voter, the tick of the first heartbeat that carried a commit
        #: index at or past ``leaving_index``.
        self.leave_told_at: dict[int, int] = {}
        self.msgs: list[Message] = []
        self.read_states: list[ReadState] = []
        self.lead_transferee = NONE
        self.pending_conf_index = 0
        self.uncommitted_size = 0
        self.read_only = ReadOnly()
        self.pending_read_index_messages: list[Message] = []
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = c.election_tick
        self.ticks = 0
        self.lease_revoked = False
        self.boot_guard = (
            c.read_only_option == ReadOnlyOption.LEASE_BASED
            if c.boot_lease_guard is None
            else c.boot_lease_guard
        )
        # live-lock fix: terms seen in other candidates' (pre-)vote requests and in our own
        # abandoned campaigns, and the (term, vote) an election started from.
        self.used_terms: set[int] = set()
        self.election_start: tuple[int, int] | None = None
        self.prospective_term = 0
        self.snap_sender = SnapshotSender(c.max_snapshot_chunk, c.snapshot_chunk_window)
        self.snap_receiver = SnapshotReceiver(c.snapshot_spool)
        self._step: Callable[[Message], None] = self._step_follower
        self._tick: Callable[[], None] = self._tick_election

        cfg, prs = restore(cs, self.raft_log.last_index(), self.trk.new_inflights)
        self._switch_to_config(cfg, prs)
        if not hs.is_empty():
            self._load_state(hs)
        if c.applied > 0:
            self.raft_log.applied_to(c.applied)
        self.become_follower(self.term, NONE)

    # -- state accessors --------------------------------------------------------------------

    def soft_state(self) -> SoftState:
        return SoftState(self.lead, self.role, self.removed)

    def hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.raft_log.committed)

    def _load_state(self, hs: HardState) -> None:
        log = self.raft_log
        if hs.commit < log.committed or hs.commit > log.last_index():
            raise CorruptStateError(
                f"hard state commit {hs.commit} out of range [{log.committed}, {log.last_index()}]"
            )
        log.committed = hs.commit
        self.term = hs.term
        self.vote = hs.vote

    def promotable(self) -> bool:
        """Whether this node may campaign: it is a voter and not removed, and it has no
        snapshot waiting to be persisted."""
        return (
            not self.removed
            and self.id in self.trk.progress
            and not self.trk.progress[self.id].is_learner
            and not self.raft_log.has_pending_snapshot()
        )

    # -- sending ----------------------------------------------------------------------------

    def send(self, m: Message) -> None:
        m.from_ = self.id
        if m.type in (MT.VOTE, MT.VOTE_RESP, MT.PRE_VOTE, MT.PRE_VOTE_RESP):
            if m.term == 0:
                raise CorruptStateError(f"term should be set for {m.type.name}")
        elif m.type not in (MT.PROP, MT.READ_INDEX):
            m.term = self.term
        self.msgs.append(m)

    def _send_append(self, to: int) -> None:
        self._maybe_send_append(to, True)

    def _maybe_send_append(self, to: int, send_if_empty: bool) -> bool:
        """Send the entries ``to`` needs next (or a snapshot); returns whether a message was
        sent. With ``send_if_empty`` false, an append without entries is not sent."""
        pr = self.trk.progress[to]
        if pr.is_paused():
            return False
        log = self.raft_log
        prev_index = pr.next - 1
        try:
            prev_term = log.term(prev_index)
            ents = log.entries(pr.next, self.max_msg_size)
        except CompactedError:
            return self._send_snapshot(to)
        if not ents and not send_if_empty:
            return False
        size = entries_size(ents) if ents else 0
        self.send(
            Message(
                MT.APP,
                to=to,
                index=prev_index,
                log_term=prev_term,
                entries=ents,
                commit=log.committed,
            )
        )
        pr.sent_entries(len(ents), size)
        return True

    def _send_snapshot(self, to: int) -> bool:
        pr = self.trk.progress[to]
        if not pr.recent_active:
            return False
        try:
            snap = self.raft_log.snapshot()
        except SnapshotTemporarilyUnavailableError:
            return False
        if snap.is_empty():
            raise CorruptStateError("need a non-empty snapshot to catch up a follower")
        pr.become_snapshot(snap.metadata.index)
        self.snap_sender.start(to, snap)
        self._send_snapshot_chunks(to)
        return True

    def _send_snapshot_chunks(self, to: int) -> None:
        for chunk in self.snap_sender.next_chunks(to):
            self.send(Message(MT.SNAP, to=to, chunk=chunk))

    def _send_heartbeat(self, to: int, ctx: bytes) -> None:
        # Never tell a follower a commit index beyond what it is known to have.
        commit = min(self.trk.progress[to].match, self.raft_log.committed)
        if self.leaving_index and commit >= self.leaving_index:
            self.leave_told_at.setdefault(to, self.ticks)
        self.send(Message(MT.HEARTBEAT, to=to, commit=commit, context=ctx, lease=self.ticks))

    def check_left(self) -> None:
        """A leaving leader (``leaving_index``): once a quorum of the configuration has
        acknowledged a heartbeat that told it the commit index of the removal, stop
        participating -- they apply the configuration without us and can elect a leader.
        Stopping at once instead leaves a follower that holds the removal uncommitted
        unable to win any election: its applied configuration still needs our vote."""
        told = self.leave_told_at
        votes = {i: i in told and pr.lease_tick >= told[i]
                 for i, pr in self.trk.progress.items() if not pr.is_learner}
        if joint_vote_result(self.trk.config.voters, self.trk.config.voters_outgoing,
                             votes) == VoteResult.WON:
            self.removed = True
            self.leaving_index = 0
            self.become_follower(self.term, NONE)

    def bcast_append(self) -> None:
        for to in self.trk.ids:
            if to != self.id:
                self._send_append(to)

    def bcast_heartbeat(self, ctx: bytes | None = None) -> None:
        if ctx is None:
            ctx = self.read_only.last_pending_request_ctx()
        for to in self.trk.ids:
            if to != self.id:
                self._send_heartbeat(to, ctx)

    # -- commit, append, reset --------------------------------------------------------------

    def maybe_commit(self) -> bool:
        return self.raft_log.maybe_commit(self.trk.committed(), self.term)

    def reset(self, term: int) -> None:
        if self.term != term:
            self.term = term
            self.vote = NONE
        self.lead = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self._reset_randomized_election_timeout()
        self.abort_leader_transfer()
        self.trk.reset_votes()
        last = self.raft_log.last_index()
        for node, pr in self.trk.progress.items():
            pr.match = last if node == self.id else 0
            pr.next = last + 1
            pr.state = ProgressState.PROBE
            pr.pending_snapshot = 0
            pr.msg_app_flow_paused = False
            pr.recent_active = False
            pr.lease_tick = -(1 << 62)
            pr.inflights.reset()
        self.snap_sender.reset()
        self.pending_conf_index = 0
        self.uncommitted_size = 0
        self.lease_revoked = False
        self.read_only.reset()
        if term > 0 and self.used_terms:
            self.used_terms = {t for t in self.used_terms if t > term}

    def append_entry(self, es: list[Entry]) -> bool:
        """Leader path: stamp ``es`` with our term and the next indexes and append them.
        Returns False if the uncommitted-size limit drops them."""
        log = self.raft_log
        li = log.last_index()
        term = self.term
        for i, e in enumerate(es, 1):
            e.term = term
            e.index = li + i
        if not self._increase_uncommitted_size(es):
            return False
        li = log.append(es)
        pr = self.trk.progress[self.id]
        pr.maybe_update(li)
        self.maybe_commit()
        return True

    def _increase_uncommitted_size(self, es: list[Entry]) -> bool:
        if not self.max_uncommitted_size:
            return True
        s = entries_size(es)
        if self.uncommitted_size > 0 and s > 0 and self.uncommitted_size + s > (
            self.max_uncommitted_size
        ):
            return False
        self.uncommitted_size += s
        return True

    def reduce_uncommitted_size(self, size: int) -> None:
        self.uncommitted_size = max(0, self.uncommitted_size - size)

    def _reset_randomized_election_timeout(self) -> None:
        self.randomized_election_timeout = self.election_timeout + self.rng.randrange(
            0, self.election_timeout
        )

    def past_election_timeout(self) -> bool:
        return self.election_elapsed >= self.randomized_election_timeout

    # -- ticking ----------------------------------------------------------------------------

    def tick(self) -> None:
        """Advance the logical clock by one tick."""
        self.ticks += 1
        if not self.removed:
            self._tick()

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        if self.boot_guard and self.election_elapsed >= self.election_timeout:
            self.boot_guard = False
        if self.promotable() and self.past_election_timeout():
            self.election_elapsed = 0
            self.step(Message(MT.HUP, from_=self.id))

    def _tick_heartbeat(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.election_timeout:
            self.election_elapsed = 0
            if self.check_quorum:
                self.step(Message(MT.CHECK_QUORUM, from_=self.id))
            if self.role == Role.LEADER and self.lead_transferee != NONE:
                self.abort_leader_transfer()
        if self.role != Role.LEADER:
            return
        if self.heartbeat_elapsed >= self.heartbeat_timeout:
            self.heartbeat_elapsed = 0
            self.step(Message(MT.BEAT, from_=self.id))

    # -- role transitions -------------------------------------------------------------------

    def become_follower(self, term: int, lead: int) -> None:
        self._step = self._step_follower
        self.reset(term)
        self._tick = self._tick_election
        self.lead = lead
        self.role = Role.FOLLOWER
        self.election_start = None

    def become_candidate(self) -> None:
        if self.role == Role.LEADER:
            raise CorruptStateError("invalid transition [leader -> candidate]")
        if self.skip_used_terms:
            if self.role == Role.CANDIDATE and self.election_start is not None:
                # The previous election failed: go back to where it started (its term stays
                # remembered as used, so it is never reused).
                self.term, self.vote = self.election_start
            elif self.role != Role.PRE_CANDIDATE:
                self.election_start = (self.term, self.vote)
            # A prospective term is only valid above the current term: a pre-vote campaign
            # that ended by following a leader leaves a stale one behind.
            new_term = (self.prospective_term if self.prospective_term > self.term
                        else self._next_unused_term())
        else:
            new_term = self.term + 1
        self.prospective_term = 0
        self._step = self._step_candidate
        self.reset(new_term)
        if self.skip_used_terms:
            self.used_terms.add(new_term)  # never campaign in this term again
        self._tick = self._tick_election
        self.vote = self.id
        self.role = Role.CANDIDATE

    def become_pre_candidate(self) -> None:
        if self.role == Role.LEADER:
            raise CorruptStateError("invalid transition [leader -> pre-candidate]")
        # A pre-candidate keeps its term and vote; only its step function and votes change.
        if self.skip_used_terms:
            if self.role == Role.CANDIDATE and self.election_start is not None:
                self.term, self.vote = self.election_start
            self.election_start = (self.term, self.vote)
            self.prospective_term = self._next_unused_term()
        else:
            self.prospective_term = self.term + 1
        self._step = self._step_candidate
        self.trk.reset_votes()
        self._tick = self._tick_election
        self.lead = NONE
        self.role = Role.PRE_CANDIDATE

    def become_leader(self) -> None:
        if self.role == Role.FOLLOWER:
            raise CorruptStateError("invalid transition [follower -> leader]")
        self._step = self._step_leader
        self.reset(self.term)
        self._tick = self._tick_heartbeat
        self.lead = self.id
        self.role = Role.LEADER
        self.election_start = None
        self.used_terms.clear()
        pr = self.trk.progress[self.id]
        pr.become_replicate()
        pr.recent_active = True
        # Conservatively treat any unapplied entry as a pending conf change.
        self.pending_conf_index = self.raft_log.last_index()
        if not self.append_entry([Entry(data=b"")]):
            raise CorruptStateError("empty entry was dropped")

    def _next_unused_term(self) -> int:
        t = self.term + 1
        while t in self.used_terms:
            t += 1
        return t

    def _remember_used_term(self, term: int) -> None:
        if term <= self.term:
            return
        self.used_terms.add(term)
        if len(self.used_terms) > _MAX_USED_TERMS:
            self.used_terms.discard(min(self.used_terms))

    def _abandon_election(self) -> None:
        """The election was lost. With the live-lock fix the node returns to the term and vote
        it started from (it never voted for anybody else in the abandoned term, and it will
        never campaign in it again); otherwise it stays in the election's term."""
        if self.skip_used_terms and self.election_start is not None:
            term, vote = self.election_start
            self.become_follower(term, NONE)
            self.vote = vote
        else:
            self.become_follower(self.term, NONE)

    # -- elections --------------------------------------------------------------------------

    def hup(self, transfer: bool) -> None:
        if self.role == Role.LEADER:
            return
        if not self.promotable():
            return
        if self._has_unapplied_conf_change():
            return
        self.campaign(transfer, pre=self.pre_vote and not transfer)

    def _has_unapplied_conf_change(self) -> bool:
        log = self.raft_log
        lo = max(log.applied + 1, log.first_index())
        if lo > log.committed:
            return False
        ents = log.slice(lo, log.committed + 1, 1 << 62)
        return any(e.type == EntryType.CONF_CHANGE for e in ents)

    def campaign(self, transfer: bool, pre: bool) -> None:
        if not self.promotable():
            return
        if pre:
            self.become_pre_candidate()
            vote_type = MT.PRE_VOTE
            term = self.prospective_term
        else:
            self.become_candidate()
            vote_type = MT.VOTE
            term = self.term
        resp_type = MT.PRE_VOTE_RESP if pre else MT.VOTE_RESP
        if self._poll(self.id, resp_type, True) == VoteResult.WON:
            # Single-node configuration: won at once.
            if pre:
                self.campaign(transfer, pre=False)
            else:
                self.become_leader()
            return
        ctx = CAMPAIGN_TRANSFER if transfer else b""
        last = self.raft_log.last_index()
        last_term = self.raft_log.last_term()
        for to in self.trk.voter_ids():
            if to == self.id:
                continue
            self.send(
                Message(vote_type, to=to, term=term, index=last, log_term=last_term, context=ctx)
            )

    def _poll(self, node: int, t: MessageType, granted: bool) -> VoteResult:
        self.trk.record_vote(node, granted)
        return self.trk.tally_votes()[2]

    def _in_lease(self) -> bool:
        return (
            self.check_quorum
            and (self.lead != NONE or self.boot_guard)
            and self.election_elapsed < self.election_timeout
        )

    # -- stepping ---------------------------------------------------------------------------

    def step(self, m: Message) -> None:
        """Process one message (local or from a peer). May raise ``ProposalDroppedError``
        for proposals and storage errors that make the node inoperable."""
        if self.removed:
            if m.type == MT.PROP:
                raise ProposalDroppedError("node was removed from the cluster")
            return
        if m.term == 0:
            pass
        elif m.term > self.term:
            if not self._step_higher_term(m):
                return
        elif m.term < self.term:
            self._step_lower_term(m)
            return

        t = m.type
        if t == MT.HUP:
            self.hup(transfer=False)
        elif t in (MT.VOTE, MT.PRE_VOTE):
            self._step_vote_request(m)
        else:
            self._step(m)

    def _step_higher_term(self, m: Message) -> bool:
        """Handle a message from a higher term; returns whether processing continues."""
        t = m.type
        if t in (MT.VOTE, MT.PRE_VOTE):
            force = m.context == CAMPAIGN_TRANSFER
            if not force and self._in_lease():
                # We heard from a leader within the minimum election timeout: ignore the
                # request (this is what keeps a partitioned node from disrupting the cluster).
                return False
            if self.skip_used_terms:
                self._remember_used_term(m.term)
                if t == MT.VOTE and not self.raft_log.is_up_to_date(m.index, m.log_term):
                    # Refuse without adopting the term: a stale candidate must not reset our
                    # election timer and term (live-lock fix).
                    self.send(Message(MT.VOTE_RESP, to=m.from_, term=m.term, reject=True))
                    return False
        if t == MT.PRE_VOTE:
            return True  # a pre-vote never changes our term
        if t == MT.PRE_VOTE_RESP and not m.reject:
            # A granted pre-vote carries the future term; we adopt it once we win.
            return True
        if self.skip_used_terms and t == MT.VOTE_RESP and m.term in self.used_terms:
            return False  # an answer about one of our abandoned elections
        if t in (MT.APP, MT.HEARTBEAT, MT.SNAP):
            self.become_follower(m.term, m.from_)
        else:
            self.become_follower(m.term, NONE)
        return True

    def _step_lower_term(self, m: Message) -> None:
        t = m.type
        if (self.check_quorum or self.pre_vote) and t in (MT.HEARTBEAT, MT.APP):
            # A stale leader (e.g. after a partition healed): tell it our term so it steps
            # down; with check-quorum/pre-vote we never raised our term by ourselves.
            self.send(Message(MT.APP_RESP, to=m.from_))
        elif t == MT.PRE_VOTE:
            self.send(Message(MT.PRE_VOTE_RESP, to=m.from_, term=self.term, reject=True))
        # everything else from a lower term is ignored

    def _step_vote_request(self, m: Message) -> None:
        can_vote = (
            self.vote == m.from_
            or (self.vote == NONE and self.lead == NONE)
            or (m.type == MT.PRE_VOTE and m.term > self.term)
        )
        resp = MT.VOTE_RESP if m.type == MT.VOTE else MT.PRE_VOTE_RESP
        if can_vote and self.raft_log.is_up_to_date(m.index, m.log_term):
            # Respond in the candidate's term: for a pre-vote our own term may be lower.
            self.send(Message(resp, to=m.from_, term=m.term))
            if m.type == MT.VOTE:
                self.election_elapsed = 0
                self.vote = m.from_
        else:
            self.send(Message(resp, to=m.from_, term=self.term, reject=True))

    # The role-specific step functions live in roles.py to keep this module small.
    _handle_append_entries = roles._handle_append_entries
    _handle_heartbeat = roles._handle_heartbeat
    _handle_snapshot_chunk = roles._handle_snapshot_chunk
    _step_candidate = roles._step_candidate
    _step_follower = roles._step_follower
    _step_leader = roles._step_leader

    # -- leadership transfer ----------------------------------------------------------------

    def abort_leader_transfer(self) -> None:
        self.lead_transferee = NONE

    def send_timeout_now(self, to: int) -> None:
        # Voters will grant the transferee's forced campaign despite our lease: stop serving
        # lease reads for the rest of this term.
        self.lease_revoked = True
        self.send(Message(MT.TIMEOUT_NOW, to=to))

    # -- reads ------------------------------------------------------------------------------

    def committed_entry_in_current_term(self) -> bool:
        return self.raft_log.term_or_zero(self.raft_log.committed) == self.term

    def lease_valid(self) -> bool:
        """Whether a quorum acknowledged a heartbeat recent enough that no other leader can
        have been elected since (followers ignore votes for ``election_timeout`` ticks after
        hearing from us; two ticks of margin cover tick-phase differences).

        Contract: bounded clock drift. The lease runs on this node's ticks and the followers'
        vote refusal on theirs, so it is safe only while tick rates differ by less than the
        margin plus a successor's election and commit latency can absorb (see docs/raft.md,
        "Lease reads and clocks"; the simulator checks +-5 %)."""
        if self.lease_revoked or not self.check_quorum:
            return False
        self.trk.progress[self.id].lease_tick = self.ticks
        return self.trk.quorum_acked_since(self.ticks - self.election_timeout + 2)

    def response_to_read_index_req(self, req: Message, read_index: int) -> Message | None:
        """Answer ``req`` locally (as a ReadState) or build the response to send back."""
        if req.from_ in (NONE, self.id):
            self.read_states.append(ReadState(read_index, req.context))
            return None
        return Message(MT.READ_INDEX_RESP, to=req.from_, index=read_index, context=req.context)

    def send_read_index_response(self, m: Message) -> None:
        if (
            m.lease or self.read_only_option == ReadOnlyOption.LEASE_BASED
        ) and self.lease_valid():
            resp = self.response_to_read_index_req(m, self.raft_log.committed)
            if resp is not None:
                self.send(resp)
            return
        self.read_only.add_request(self.raft_log.committed, m)
        self.read_only.recv_ack(self.id, m.context)
        self.bcast_heartbeat(m.context)

    def release_pending_read_index_messages(self) -> None:
        if not self.pending_read_index_messages or not self.committed_entry_in_current_term():
            return
        msgs, self.pending_read_index_messages = self.pending_read_index_messages, []
        for m in msgs:
            self.send_read_index_response(m)

    # -- snapshots and configuration --------------------------------------------------------

    def restore(self, s: Snapshot) -> bool:
        """Install snapshot ``s`` (follower path). Returns False if it is not newer than our
        commit index or does not include us."""
        meta = s.metadata
        if meta.index <= self.raft_log.committed:
            return False
        if self.role != Role.FOLLOWER:
            # Defensive: only followers receive snapshots.
            self.become_follower(self.term + 1, NONE)
            return False
        if self.id not in meta.conf_state.members():
            return False
        if self.raft_log.match_term(meta.index, meta.term):
            # We already have the entries: just fast-forward the commit index.
            self.raft_log.commit_to(meta.index)
            return False
        self.raft_log.restore(s)
        cfg, prs = restore(meta.conf_state, self.raft_log.last_index(), self.trk.new_inflights)
        self._switch_to_config(cfg, prs)
        return True

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        """Apply a committed configuration change; returns the resulting ``ConfState``."""
        return self._switch_to_config(*self._changed_config(cc))

    def check_conf_change(self, cc: ConfChange) -> None:
        """Raise ``ConfChangeError`` if applying ``cc`` to the current configuration would
        fail (e.g. it removes the last voter); changes nothing. A leader proposes a change
        only after the previous one was applied (``pending_conf_index``), so checking just
        before proposing gives the verdict its apply will reach: an entry that fails to
        apply would stop every replica at that index."""
        self._changed_config(cc)

    def _changed_config(self, cc: ConfChange) -> tuple[TrackerConfig, dict[int, Progress]]:
        cfg, prs = self.trk.config, self.trk.progress
        last = self.raft_log.last_index()
        nf = self.trk.new_inflights
        if cc.leave_joint():
            return leave_joint(cfg, prs)
        use_joint, auto_leave = cc.enter_joint()
        if use_joint:
            return enter_joint(cfg, prs, auto_leave, cc.changes, last, nf)
        return simple(cfg, prs, cc.changes, last, nf)

    def _switch_to_config(self, cfg: TrackerConfig, prs: dict[int, Progress]) -> ConfState:
        self.trk.set(cfg, prs)
        cs = cfg.conf_state()
        pr = prs.get(self.id)
        self.is_learner = pr is not None and pr.is_learner
        members = cfg.all_voters() | cfg.learners | cfg.learners_next
        if members and self.id not in members and self.raft_log.committed > 0:
            # A configuration without us was applied: stop participating (seed: "a node
            # shuts down itself once it is no longer in the new cluster") -- a leader only
            # once the new configuration knows the removal is committed (``check_left``)
            if self.role == Role.LEADER and cs.voters:
                self.leaving_index = self.raft_log.committed
                self.leave_told_at = {}
                self.bcast_heartbeat()
                return cs
            self.removed = True
            if self.role == Role.LEADER:
                self.become_follower(self.term, NONE)
            self.lead = NONE
            return cs
        if self.role != Role.LEADER or not cs.voters:
            return cs
        if self.maybe_commit():
            self.bcast_append()
        else:
            for to in self.trk.ids:
                if to != self.id:
                    self._maybe_send_append(to, False)
        if self.lead_transferee != NONE and self.lead_transferee not in cfg.all_voters():
            self.abort_leader_transfer()
        return cs

    def maybe_auto_leave(self) -> None:
        """Leader: once the joint configuration with ``auto_leave`` is applied, propose leaving
        it (an empty ``ConfChange``)."""
        if (
            self.role == Role.LEADER
            and self.trk.config.auto_leave
            and self.raft_log.applied >= self.pending_conf_index
        ):
            ent = Entry(type=EntryType.CONF_CHANGE, data=ConfChange().encode())
            if self.append_entry([ent]):
                self.pending_conf_index = self.raft_log.last_index()
                self.bcast_append()

    def check_proposal_conf_change(self, e: Entry) -> str | None:
        """Why a conf-change proposal must be refused, or None if it may go ahead."""
        try:
            cc = ConfChange.decode(e.data)
        except ValueError as exc:
            raise ConfChangeError(str(exc)) from exc
        joint = self.trk.config.joint()
        if self.pending_conf_index > self.raft_log.applied:
            return "possible unapplied conf change"
        if joint and not cc.leave_joint():
            return "must transition out of joint config first"
        if not joint and cc.leave_joint():
            return "not in joint state; refusing empty conf change"
        return None


__all__ = ["CAMPAIGN_TRANSFER", "Raft", "UnavailableError"]
