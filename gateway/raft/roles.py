"""Role-specific step functions of :class:`gateway.raft.core.Raft`.

These are methods of ``Raft`` (bound in its class body); they live here so that each module
keeps one job: ``core.py`` holds state, transitions and elections, this module holds what a
leader, a candidate and a follower do with a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import CorruptStateError, ProposalDroppedError
from .quorum import VoteResult, joint_vote_result
from .tracker import Progress, ProgressState
from .types import (
    NONE,
    Entry,
    EntryType,
    Message,
    MessageType,
    ReadState,
    Role,
    Snapshot,
)

if TYPE_CHECKING:
    from .core import Raft

MT = MessageType


def _step_leader(self: Raft, m: Message) -> None:
    t = m.type
    if t == MT.BEAT:
        self.bcast_heartbeat()
        return
    if t == MT.CHECK_QUORUM:
        # a leaving leader keeps telling the others until they know (``check_left``)
        if not self.trk.quorum_active() and not self.leaving_index:
            self.become_follower(self.term, NONE)
        for node, peer in self.trk.progress.items():
            if node != self.id:
                peer.recent_active = False
        return
    if t == MT.PROP:
        if self.leaving_index:
            raise ProposalDroppedError("this leader is leaving the cluster (removed)")
        _leader_propose(self, m)
        return
    if t == MT.READ_INDEX:
        if self.leaving_index:
            return  # not in the configuration: no reads; the next leader serves them
        if self.trk.is_singleton():
            resp = self.response_to_read_index_req(m, self.raft_log.committed)
            if resp is not None:
                self.send(resp)
            return
        if not self.committed_entry_in_current_term():
            # Thesis §6.4: the commit index is only known to be current once an entry of
            # this term is committed.
            self.pending_read_index_messages.append(m)
            return
        self.send_read_index_response(m)
        return

    pr = self.trk.progress.get(m.from_)
    if pr is None:
        return
    if t == MT.APP_RESP:
        _leader_app_resp(self, m, pr)
    elif t == MT.HEARTBEAT_RESP:
        pr.recent_active = True
        pr.msg_app_flow_paused = False
        if m.lease > pr.lease_tick:
            pr.lease_tick = m.lease
        if self.leaving_index:
            self.check_left()
            if self.removed:
                return
        if pr.state == ProgressState.SNAPSHOT:
            if self.snap_sender.complete(m.from_):
                # The follower holds the whole snapshot but its answer was lost: probe after
                # the snapshot; the reply (accept or reject) gets replication going again.
                self.snap_sender.stop(m.from_)
                pr.become_probe()
                self._send_append(m.from_)
            else:
                for chunk in self.snap_sender.retransmit(m.from_):
                    self.send(Message(MT.SNAP, to=m.from_, chunk=chunk))
        elif pr.match < self.raft_log.last_index():
            if pr.state == ProgressState.REPLICATE and pr.inflights.full():
                # Appends may have been lost: free one slot so that a probe goes out and
                # either gets acknowledged or exposes the gap.
                pr.inflights.free_first_one()
                pr.msg_app_flow_paused = False
            self._send_append(m.from_)
        if not m.context:
            return
        acks = self.read_only.recv_ack(m.from_, m.context)
        if acks is None:
            return
        cfg = self.trk.config
        votes = dict.fromkeys(acks, True)
        if joint_vote_result(cfg.voters, cfg.voters_outgoing, votes) != VoteResult.WON:
            return
        for rs in self.read_only.advance(m.context):
            resp = self.response_to_read_index_req(rs.req, rs.index)
            if resp is not None:
                self.send(resp)
    elif t == MT.SNAP_ACK:
        if pr.state != ProgressState.SNAPSHOT:
            return
        if m.reject:
            # The follower cannot use this snapshot (e.g. it predates the follower's
            # addition): probe again after the next heartbeat, which fetches a newer one.
            self.snap_sender.stop(m.from_)
            pr.pending_snapshot = 0
            pr.become_probe()
            pr.msg_app_flow_paused = True
            return
        self.snap_sender.ack(m.from_, m.index, m.commit)
        self._send_snapshot_chunks(m.from_)
    elif t == MT.SNAP_STATUS:
        if pr.state != ProgressState.SNAPSHOT:
            return
        if m.reject:
            pr.pending_snapshot = 0
        self.snap_sender.stop(m.from_)
        pr.become_probe()
        pr.msg_app_flow_paused = True
    elif t == MT.UNREACHABLE:
        if pr.state == ProgressState.REPLICATE:
            pr.become_probe()
    elif t == MT.TRANSFER_LEADER:
        _leader_transfer(self, m, pr)


def _leader_propose(self: Raft, m: Message) -> None:
    if not m.entries:
        raise CorruptStateError("stepped empty MsgProp")
    if self.id not in self.trk.progress:
        raise ProposalDroppedError("leader is not in the configuration")
    if self.lead_transferee != NONE:
        raise ProposalDroppedError(f"leadership is being transferred to {self.lead_transferee}")
    ents = m.entries
    if m.from_ not in (NONE, self.id):
        # Forwarded proposal: never stamp entries another node (or a duplicate) might hold.
        ents = [Entry(type=e.type, data=e.data) for e in ents]
    last = self.raft_log.last_index()
    for i, e in enumerate(ents):
        if e.type != EntryType.CONF_CHANGE:
            continue
        if self.check_proposal_conf_change(e) is not None:
            ents[i] = Entry(type=EntryType.NORMAL)
        else:
            self.pending_conf_index = last + i + 1
    if not self.append_entry(ents):
        raise ProposalDroppedError("uncommitted entries size limit reached")
    self.bcast_append()


def _leader_app_resp(self: Raft, m: Message, pr: Progress) -> None:
    pr.recent_active = True
    log = self.raft_log
    if m.reject:
        next_probe = m.reject_hint
        if m.log_term > 0:
            # Fast backtracking: skip every entry of ours whose term exceeds the follower's
            # term at the hint (they cannot match).
            next_probe, _ = log.find_conflict_by_term(m.reject_hint, m.log_term)
        if pr.maybe_decr_to(m.index, next_probe):
            if pr.state == ProgressState.REPLICATE:
                pr.become_probe()
            self._send_append(m.from_)
        return
    old_paused = pr.is_paused()
    if not (pr.maybe_update(m.index) or (pr.match == m.index and pr.state == ProgressState.PROBE)):
        return
    if pr.state == ProgressState.PROBE:
        pr.become_replicate()
    elif pr.state == ProgressState.SNAPSHOT:
        if pr.match + 1 >= log.first_index():
            self.snap_sender.stop(m.from_)
            pr.become_probe()
            pr.become_replicate()
        elif pr.match >= pr.pending_snapshot:
            self.snap_sender.stop(m.from_)
            pr.become_probe()
    else:
        pr.inflights.free_le(m.index)
    if self.maybe_commit():
        self.release_pending_read_index_messages()
        self.bcast_append()
    elif old_paused:
        self._send_append(m.from_)
    while self._maybe_send_append(m.from_, False):
        pass
    if m.from_ == self.lead_transferee and pr.match == log.last_index():
        self.send_timeout_now(m.from_)


def _leader_transfer(self: Raft, m: Message, pr: Progress) -> None:
    if pr.is_learner:
        return
    transferee = m.from_
    if self.lead_transferee != NONE:
        if self.lead_transferee == transferee:
            return
        self.abort_leader_transfer()
    if transferee == self.id:
        return
    # The transfer must finish within one election timeout or it is aborted.
    self.election_elapsed = 0
    self.lead_transferee = transferee
    if pr.match == self.raft_log.last_index():
        self.send_timeout_now(transferee)
    else:
        self._send_append(transferee)


def _step_candidate(self: Raft, m: Message) -> None:
    t = m.type
    my_resp = MT.PRE_VOTE_RESP if self.role == Role.PRE_CANDIDATE else MT.VOTE_RESP
    if t == MT.PROP:
        raise ProposalDroppedError("no leader: election in progress")
    if t == MT.APP:
        self.become_follower(m.term, m.from_)
        self._handle_append_entries(m)
    elif t == MT.HEARTBEAT:
        self.become_follower(m.term, m.from_)
        self._handle_heartbeat(m)
    elif t == MT.SNAP:
        self.become_follower(m.term, m.from_)
        self._handle_snapshot_chunk(m)
    elif t == my_resp:
        result = self._poll(m.from_, t, not m.reject)
        if result == VoteResult.WON:
            if self.role == Role.PRE_CANDIDATE:
                self.campaign(transfer=False, pre=False)
            else:
                self.become_leader()
                self.bcast_append()
        elif result == VoteResult.LOST:
            self._abandon_election()


def _step_follower(self: Raft, m: Message) -> None:
    t = m.type
    if t == MT.PROP:
        if self.lead == NONE:
            raise ProposalDroppedError("no leader")
        if self.disable_proposal_forwarding:
            raise ProposalDroppedError("proposal forwarding disabled")
        m.to = self.lead
        self.send(m)
    elif t in (MT.APP, MT.HEARTBEAT, MT.SNAP):
        self.election_elapsed = 0
        self.boot_guard = False
        self.lead = m.from_
        if t == MT.APP:
            self._handle_append_entries(m)
        elif t == MT.HEARTBEAT:
            self._handle_heartbeat(m)
        else:
            self._handle_snapshot_chunk(m)
    elif t == MT.TRANSFER_LEADER:
        if self.lead == NONE:
            return
        m.to = self.lead
        self.send(m)
    elif t == MT.TIMEOUT_NOW:
        self.hup(transfer=True)
    elif t == MT.READ_INDEX:
        if self.lead == NONE:
            return
        m.to = self.lead
        self.send(m)
    elif t == MT.READ_INDEX_RESP:
        self.read_states.append(ReadState(m.index, m.context))


def _handle_append_entries(self: Raft, m: Message) -> None:
    log = self.raft_log
    if m.index < log.committed:
        self.send(Message(MT.APP_RESP, to=m.from_, index=log.committed))
        return
    last_new, ok = log.maybe_append(m.index, m.log_term, m.commit, m.entries)
    if ok:
        self.send(Message(MT.APP_RESP, to=m.from_, index=last_new))
        return
    # Tell the leader the largest index <= its probe whose term is <= the probe's term: the
    # leader can then skip whole terms instead of one entry per round trip.
    hint = min(m.index, log.last_index())
    hint, hint_term = log.find_conflict_by_term(hint, m.log_term)
    self.send(
        Message(
            MT.APP_RESP,
            to=m.from_,
            index=m.index,
            reject=True,
            reject_hint=hint,
            log_term=hint_term,
        )
    )


def _handle_heartbeat(self: Raft, m: Message) -> None:
    self.raft_log.commit_to(min(m.commit, self.raft_log.last_index()))
    self.send(Message(MT.HEARTBEAT_RESP, to=m.from_, context=m.context, lease=m.lease))


def _handle_snapshot_chunk(self: Raft, m: Message) -> None:
    chunk = m.chunk
    if chunk is None:
        if m.snapshot is not None:
            _handle_snapshot(self, m.from_, m.snapshot)
        return
    held, snap = self.snap_receiver.receive(chunk)
    self.send(Message(MT.SNAP_ACK, to=m.from_, index=chunk.metadata.index, commit=held))
    if snap is not None:
        _handle_snapshot(self, m.from_, snap)


def _handle_snapshot(self: Raft, frm: int, snap: Snapshot) -> None:
    log = self.raft_log
    if self.restore(snap):
        self.send(Message(MT.APP_RESP, to=frm, index=log.last_index()))
        return
    self.send(Message(MT.APP_RESP, to=frm, index=log.committed))
    if snap.metadata.index > log.committed:
        self.send(Message(MT.SNAP_ACK, to=frm, index=snap.metadata.index, reject=True))
