"""``RaftDriver``: the asyncio shell around ``RawNode`` (etcd's ``node.go`` for this project).

One task owns the ``RawNode``; nothing else calls it. Every input -- peer messages, ticks,
writes, read-index requests, membership changes -- is queued and fed in between Ready cycles::

    loop:
        feed inputs: ticks due, peer messages, pending writes (one propose_batch: the leader's
                     ``Sequencer`` stamps GTID, epoch and commit timestamp, in log order)
        while has_ready:
            rd = ready()
            persist rd (hard state, snapshot, entries; one fsync if must_sync) in the I/O
                thread -- the event loop keeps accepting requests meanwhile, and they all go
                into the next Ready: group commit
            send rd.messages
            apply rd.committed_entries to the store (one atomic batch per run), resolve the
                waiting writes, serve read states, wake subscribers and appliers
            advance(rd)
        snapshots: start one every ``snapshot_entries`` applied entries once the log grew by
            ``snapshot_log_percent`` % of the newest one's size (or when asked); it
            runs on its own thread while this loop goes on (``SnapshotTaker``); when one has
            ended, compact the log

Writes wait for their entry to be applied; an entry applied at their index with another term
means another leader overwrote it (``ProposalLostError``, safe to retry with the same
idempotency key).

GTIDs, epochs, commit timestamps, the schemas of pending proposals and their take-back when
a proposal is refused are the leader's bookkeeping, kept by the pure ``sequencer.Sequencer``
(its docstring states the rules); this loop reads the log back into one when this node
becomes leader, passes it the time, and proposes what it decides: the ``EpochMarker`` sealing
an epoch with transactions when it ends, the one a leader stopping gracefully leaves open
(``seal_for_stop``), and the one an earlier leader left open (``epoch_seal``).

Size: still ~1,200 lines because the Ready loop and everything that must run on its one
task sit together: proposals and their waiters (``submit_write``, ``_propose_writes``,
``_resolve``), read-index rounds, membership changes and their replay after a restart, epoch
sealing and the apply of committed runs. The sequencer already left (``sequencer``); next to
split off are the read-index rounds (``read_index``/``_run_read_rounds``: a small
``read_rounds`` module fed by the loop) and the membership replay and conf-change apply
(``_replay_conf_changes``, ``_apply_conf_change``, ``propose_conf_change``), each a value-in,
decision-out helper like the sequencer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from gateway.core import messages
from gateway.node.base.errors import (
    NodeError,
    NodeStoppedError,
    NotLeaderError,
    ProposalLostError,
    ReadTimeoutError,
)
from gateway.node.base.validation import InvalidRequest, TableSchema
from gateway.node.loop.commit_linger import DEFAULT_DELAY as DEFAULT_LINGER
from gateway.node.loop.commit_linger import CommitLinger
from gateway.node.loop.epoch_seal import unsealed_epoch
from gateway.node.loop.sequencer import Seal, Sequencer
from gateway.node.loop.snapshot_taker import SnapshotTaker
from gateway.node.loop.unit_entries import build_entries
from gateway.node.loop.write_proposal import WriteProposal
from gateway.node.state import keys
from gateway.node.state.conditions import check_conditions, conditions_field
from gateway.node.state.gtid_use import consumed
from gateway.node.state.state_machine import Applied, StoreStateMachine
from gateway.node.state.wire import WireChecker, encode_transaction_wire, frame_statements
from gateway.node.storage.snapshot_files import ArchiveReader
from gateway.node.storage.storage import RaftLogStorage
from gateway.node.storage.storage_errors import client_error
from gateway.raft import (
    NO_LIMIT,
    ConfChange,
    ConfChangeError,
    ConfChangeType,
    Config,
    Entry,
    EntryType,
    Message,
    ProposalDroppedError,
    RaftError,
    RawNode,
    ReadOnlyOption,
    Ready,
    Role,
    StepPeerNotFoundError,
)
from gateway.replication import (
    ReplicationState,
    SealedEpoch,
    join_segments,
)
from gateway.v1 import epoch_pb2, gateway_pb2, replication_pb2

__all__ = ["DriverOptions", "RaftCounters", "RaftDriver"]

_SCHEMA_TAG = bytes([messages.TypeTag.SCHEMA_EVENT])

_T = TypeVar("_T")

log = logging.getLogger("gateway.node.loop.driver")

#: Bytes of log entries read at a time when replaying configuration changes at start-up.
_REPLAY_CHUNK_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class DriverOptions:
    """Timing and identity of a driver (see ``NodeConfig`` for the user-facing names)."""

    node_id: int
    cluster_id: int
    tick_s: float = 0.05
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    epoch_s: float = 0.1
    snapshot_entries: int = 20000
    max_batch: int = 4096
    snapshot_log_percent: int = 100
    commit_linger_s: float = DEFAULT_LINGER


@dataclass(slots=True)
class RaftCounters:
    """Monotonic counts of the driver's work (exported as Prometheus counters): how many Ready
    cycles ran, how many of them were fsynced, entries persisted, committed entries applied,
    messages sent and received, writes proposed. Ratios of these show the batching the
    cluster achieves (entries per fsync, per message)."""

    readies: int = 0
    synced_readies: int = 0
    entries_persisted: int = 0
    entries_applied: int = 0
    messages_sent: int = 0
    messages_received: int = 0
    writes_proposed: int = 0


@dataclass(slots=True)
class _Waiter:
    term: int
    # Any: the futures of writes, replicated epochs, entries, membership changes and the stop
    # seal (``_resolve`` sets the result each expects: its WriteResult, the bytes of one, the
    # log index); Future is invariant, so no one type holds them all.
    future: asyncio.Future[Any]
    idem: str = ""
    wire: bool = False  # resolve with the serialized WriteResult when the entry has it


@dataclass(slots=True)
class _PendingUnit:
    channel: str
    source_id: int
    sealed: SealedEpoch
    future: asyncio.Future[gateway_pb2.WriteResult | None]


class RaftDriver:
    """Owns a ``RawNode`` over ``storage`` and applies to ``sm``; see the module docstring.

    ``send(messages)`` hands outgoing messages to the transport (must not block);
    ``on_membership(node_id, context, removed)`` is called when a configuration change naming
    a node is applied; ``on_applied(index)`` (also settable later, as the attribute) after
    every applied batch, on the event loop -- it must return at once.

    Restart: the core starts from the newest snapshot's configuration with ``applied =
    max(snapshot index, min(store's durable applied index, commit))`` and re-delivers only the
    committed entries after ``applied``. The configuration changes in ``(snapshot index,
    applied]`` are therefore replayed here from the log (see :meth:`_replay_conf_changes`).
    """

    def __init__(self, opts: DriverOptions, storage: RaftLogStorage, sm: StoreStateMachine,
                 send: Callable[[list[Message]], None],
                 on_membership: Callable[[int, dict[str, str], bool], None] | None = None,
                 on_applied: Callable[[int], None] | None = None) -> None:
        self.opts = opts
        self.storage = storage
        self.sm = sm
        self._send = send
        # Through ``_send`` as it is at each call (tests replace it to drop messages).
        self.commit_linger = CommitLinger(lambda msgs: self._send(msgs), opts.commit_linger_s)
        self._on_membership = on_membership
        self.on_applied = on_applied
        hs, _ = storage.initial_state()
        self._durable_term_vote = (hs.term, hs.vote)
        snap_index = storage.snapshots.metadata.index
        applied = max(snap_index, min(sm.durable_applied_index, hs.commit))
        self.raw = RawNode(Config(
            id=opts.node_id, storage=storage, election_tick=opts.election_ticks,
            heartbeat_tick=opts.heartbeat_ticks, applied=applied, check_quorum=True,
            pre_vote=True, read_only_option=ReadOnlyOption.SAFE, boot_lease_guard=True,
            max_size_per_msg=1 << 20, max_inflight_msgs=256,
            max_snapshot_chunk=1 << 20, snapshot_chunk_window=4,
            snapshot_spool=storage.snapshots.spool))
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"raft-io-{opts.node_id}")
        self._wake = asyncio.Event()
        self._inbox: list[Message] = []
        self._writes: list[WriteProposal] = []  # each with its future set
        self._units: list[_PendingUnit] = []
        self._entries: list[tuple[bytes, asyncio.Future[int]]] = []
        self._control: list[Callable[[RawNode], None]] = []
        self._reads: dict[bytes, asyncio.Future[int]] = {}
        self._read_waits: list[tuple[int, asyncio.Future[int]]] = []
        # Linearizable reads waiting for the next read-index round (each with its timeout),
        # and the task running the rounds while any wait.
        self._read_queue: list[tuple[asyncio.Future[int], float]] = []
        self._read_task: asyncio.Task[None] | None = None
        self._waiting: dict[int, _Waiter] = {}
        self._inflight_idem: dict[str, asyncio.Future[gateway_pb2.WriteResult | bytes]] = {}
        self._read_ctx = itertools.count(1)
        # Read contexts are unique across the cluster and across restarts: the leader keys
        # pending read-index requests by context and ignores a duplicate, so two nodes (or two
        # incarnations of one) must never send the same context.
        self._read_prefix = opts.node_id.to_bytes(8, "big") + os.urandom(8)
        #: The leader's bookkeeping of this term (None: not leading, or not yet fed).
        self._leader: Sequencer | None = None
        self._ticks_due = 0
        self._stopped = False
        # Stopping (``seal_for_stop``): no new writes, replicated epochs or entries; the
        # future resolves once the marker sealing the open epoch is applied.
        self._closing = False
        # (resolves with False, True, or the applied marker's log index: ``seal_for_stop``)
        self._seal_waiter: asyncio.Future[int] | None = None
        self.removed = False
        self.applied_changed = asyncio.Condition()
        self.compact_floor: Callable[[], int] = lambda: 1 << 62
        #: Called in the Raft loop after a Ready that changed this node's role or known leader
        #: (``RawNode`` soft state), once the Ready is applied; must not block.
        self.on_role_change: Callable[[], None] | None = None
        #: Why the Raft loop or ticker ended on its own (a bug, a disk that failed under
        #: the log): the node can no longer make progress and must stop. ``on_failure`` is
        #: called once with it (in the event loop); until the owner stops, every write,
        #: entry and read fails with ``NodeStoppedError`` instead of waiting forever.
        self.failure: BaseException | None = None
        self.on_failure: Callable[[BaseException], None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.snapshots = SnapshotTaker(opts.node_id, storage, sm, self._io,
                                       every=opts.snapshot_entries, wake=self._wake.set,
                                       compact_floor=lambda: self.compact_floor(),
                                       log_percent=opts.snapshot_log_percent)
        #: The leader's validation of writes from their serialized statements (shared with the
        #: API, which validates ``WriteBatch`` requests before submitting them).
        self.checker = WireChecker()
        self.counters = RaftCounters()
        #: Membership notifications of the replayed changes, delivered by ``start``.
        self._replayed: list[tuple[int, dict[str, str], bool]] = []
        self._replay_conf_changes(snap_index, applied)
        if self.raw.raft.removed and not self.removed:
            # The newest snapshot's configuration already lacks this node (its removal is
            # inside the snapshot), so nothing replays it: report it like a replayed removal,
            # and the owner stops this node as it does live.
            self.removed = True
            self._replayed.append((opts.node_id, {}, True))

    # -- observation ----------------------------------------------------------------------------

    @property
    def leader_id(self) -> int:
        return self.raw.raft.lead

    @property
    def is_leader(self) -> bool:
        return self.raw.raft.role == Role.LEADER

    @property
    def applied_index(self) -> int:
        return self.sm.applied_index

    @property
    def last_snapshot_index(self) -> int:
        """Index of this node's newest snapshot (taken or installed)."""
        return self.snapshots.last_index

    def epoch(self) -> int:
        """The epoch a write proposed now would get (0 when not leader)."""
        st = self._leader
        if st is None:
            return 0
        return st.epoch_at(time.monotonic())

    # -- inputs (event-loop thread) ---------------------------------------------------------------

    def step(self, msgs: list[Message]) -> None:
        """Queue peer messages for the core."""
        self._inbox.extend(msgs)
        self.counters.messages_received += len(msgs)
        self._wake.set()

    def control(self, fn: Callable[[RawNode], None]) -> None:
        """Run ``fn(raw_node)`` in the driver task between Ready cycles."""
        self._control.append(fn)
        self._wake.set()

    def propose_entry(self, data: bytes) -> None:
        """Propose one entry with payload ``data`` if this node leads when the loop next runs
        (fire and forget: nobody waits for it; dropped if this node does not lead or a
        leadership transfer is in progress). Event-loop thread only."""

        def go(raw: RawNode) -> None:
            if raw.raft.role == Role.LEADER:
                with contextlib.suppress(ProposalDroppedError):
                    raw.propose(data)

        self.control(go)

    def known_schemas(self) -> dict[str, TableSchema]:
        """The tables' schemas as the next proposal sees them: the store's plus those this
        leader's proposals not yet applied create (a new mapping; the caller may keep it)."""
        st = self._leader
        if st is not None:
            return st.known_schemas(self.sm.schemas)
        return dict(self.sm.schemas)

    def submit_write(self, proposal: WriteProposal
                     ) -> asyncio.Future[gateway_pb2.WriteResult | bytes]:
        """Queue write ``proposal`` (its fields say what the caller already did:
        ``WriteProposal``); the future resolves once it is committed and applied (raising
        ``InvalidRequest``, ``NotLeaderError``, ``ProposalLostError``, ``NodeStoppedError``,
        ``PreconditionFailed``), with the serialized ``WriteResult`` when ``proposal.wire``
        and the applied entry has those bytes. A retry of an applied write's idempotency key
        resolves at once with the first one's result marked ``duplicate``; one of a write
        still in flight resolves as that one does."""
        fut: asyncio.Future[gateway_pb2.WriteResult | bytes] = \
            asyncio.get_running_loop().create_future()
        if self._refused_now(fut):
            return fut
        idempotency_key = proposal.idempotency_key
        if idempotency_key:
            done = None if proposal.unrecorded else \
                self.sm.idempotent_result(idempotency_key, time.time_ns())
            if done is not None:
                refused = self.sm.refusal_at(done.log_index)
                if refused is not None:  # a retry of a refused conditional write
                    fut.set_exception(refused)
                    return fut
                done.duplicate = True
                fut.set_result(done)
                return fut
            other = self._inflight_idem.get(idempotency_key)
            if other is not None:
                return _duplicate_of(other)
            self._inflight_idem[idempotency_key] = fut
        if proposal.future is not None:  # queued before: this submission is another write
            proposal = proposal.copy()
        proposal.future = fut
        if not proposal.start_ns:
            proposal.start_ns = time.time_ns()
        self._writes.append(proposal)
        self._wake.set()
        return fut

    def _refused_now(self, fut: asyncio.Future[_T]) -> bool:
        """Fail ``fut`` at once when this node cannot propose (stopping, not the leader)."""
        if self._stopped or self._closing:
            fut.set_exception(NodeStoppedError("the node is stopping"))
        elif not self.is_leader:
            fut.set_exception(NotLeaderError(self.leader_id))
        else:
            return False
        return True

    def submit_unit(self, channel: str, source_id: int, sealed: SealedEpoch
                    ) -> asyncio.Future[gateway_pb2.WriteResult | None]:
        """Queue sealed epoch ``sealed`` of cluster ``source_id`` read by channel ``channel``.
        When proposing, the leader builds the entry (or segments) from it against its view of
        the replication state (``gateway.replication.build_unit``: what this cluster does not
        hold yet, the apply-status rows, the position) and stamps this cluster's epoch. The
        future resolves with the applied entry's result, ``None`` when this cluster already
        held the epoch (nothing proposed), or raises like ``submit_write`` (``InvalidRequest``
        when the state machine refused the entry)."""
        fut: asyncio.Future[gateway_pb2.WriteResult | None] = \
            asyncio.get_running_loop().create_future()
        if not self._refused_now(fut):
            self._units.append(_PendingUnit(channel, source_id, sealed, fut))
            self._wake.set()
        return fut

    def submit_entry(self, data: bytes) -> asyncio.Future[int]:
        """Propose one entry with payload ``data`` (e.g. a channel command); the future
        resolves with its log index once applied (``NotLeaderError``, ``ProposalLostError``,
        ``NodeStoppedError`` otherwise)."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if not self._refused_now(fut):
            self._entries.append((data, fut))
            self._wake.set()
        return fut

    def replication_view(self) -> ReplicationState:
        """The replication state as the next proposal sees it (a copy)."""
        st = self._leader
        if st is not None and st.view is not None:
            return st.view.copy()
        return self.sm.replication.copy()

    def replication_changed(self) -> None:
        """The replicated state changed by another entry than a replicated epoch (a seed's
        end, ``seed_apply``): the leader's view is rebuilt from the store before the next
        proposal."""
        if self._leader is not None:
            self._leader.view = None

    async def read_index(self, lease: bool, timeout: float) -> int:
        """A linearizable read point: returns once this node applied up to the index the
        leader confirmed. Raises ``ReadTimeoutError`` or ``NotLeaderError``.

        Linearizable reads share read-index rounds (etcd's server does the same): the reads
        that arrive while a round is in flight wait for the next one, which starts when that
        round ends and serves all of them with one quorum round trip. A read never joins a
        round that began before it arrived, so its read point is still confirmed after the
        read began. Lease reads (no round trip while the lease holds) go one by one."""
        if self.leader_id == 0:
            raise NotLeaderError(0)
        if lease:
            return await self._read_round(True, timeout)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._read_queue.append((fut, timeout))
        if self._read_task is None or self._read_task.done():
            self._read_task = asyncio.get_running_loop().create_task(
                self._run_read_rounds(), name="read-index-rounds")
        try:
            # A timeout cancels this read's own future only (the rounds skip a done one):
            # no shield and no wait_for task around it.
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError:
            raise ReadTimeoutError(f"no read index confirmed within {timeout:.1f}s") from None

    async def _run_read_rounds(self) -> None:
        """Serve queued linearizable reads, one read-index round per batch (waiting as long
        as the most patient read of the batch), until none wait."""
        try:
            while self._read_queue and not self._stopped:
                batch, self._read_queue = self._read_queue, []
                try:
                    index = await self._read_round(False, max(t for _, t in batch))
                except Exception as exc:  # timeout, not leader, stopping: the batch's answer
                    for f, _ in batch:
                        if not f.done():
                            f.set_exception(exc)
                            f.exception()  # a waiter that timed out first will not read it
                    continue
                for f, _ in batch:
                    if not f.done():
                        f.set_result(index)
        finally:
            if self._stopped:
                for f, _ in self._read_queue:
                    if not f.done():
                        f.set_exception(NodeStoppedError("the node is stopping"))
                        f.exception()

    async def _read_round(self, lease: bool, timeout: float) -> int:
        """One read-index request of this node; the confirmed index once applied here."""
        loop = asyncio.get_running_loop()
        ctx = self._read_prefix + next(self._read_ctx).to_bytes(8, "big")
        fut: asyncio.Future[int] = loop.create_future()
        self._reads[ctx] = fut
        self.control(lambda raw: raw.read_index(ctx, lease))
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise ReadTimeoutError(f"no read index confirmed within {timeout:.1f}s") from None
        finally:
            self._reads.pop(ctx, None)

    async def propose_conf_change(self, cc: ConfChange) -> int:
        """Propose a membership change; returns its log index once applied. Raises
        ``InvalidRequest`` (field ``node_id``) for a change that cannot apply."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()

        def go(raw: RawNode) -> None:
            if raw.raft.role != Role.LEADER:
                fut.set_exception(NotLeaderError(raw.raft.lead))
                return
            try:
                # A change that cannot apply (the last voter removed) would stop every
                # replica at its index: refuse it here, against the configuration it will
                # apply to (the previous change is applied: pending_conf_index).
                if raw.raft.pending_conf_index <= raw.raft.raft_log.applied:
                    raw.raft.check_conf_change(cc)
            except ConfChangeError as exc:
                fut.set_exception(InvalidRequest("node_id", f"membership change refused: "
                                                 f"{exc}"))
                return
            try:
                raw.propose_conf_change(cc)
            except ProposalDroppedError as exc:
                fut.set_exception(NotLeaderError(raw.raft.lead, f"change refused: {exc}"))
                return
            index = raw.raft.raft_log.last_index()
            if raw.raft.raft_log.term(index) != raw.raft.term or raw.raft.pending_conf_index \
                    != index:
                fut.set_exception(NotLeaderError(raw.raft.lead, "another membership change is "
                                                 "in progress; retry"))
                return
            self._waiting[index] = _Waiter(raw.raft.term, fut)

        self.control(go)
        await fut
        return int(fut.result())

    # -- the loop ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Deliver the membership notifications of the changes replayed at construction (the
        owner has wired ``on_membership``'s targets up by now: the transport, and a stop on
        this node's own removal), then start the loop."""
        replayed, self._replayed = self._replayed, []
        if self._on_membership is not None:
            for node_id, ctx, removed in replayed:
                self._on_membership(node_id, ctx, removed)
        self._tasks = [asyncio.create_task(self._run(), name="raft-ready"),
                       asyncio.create_task(self._ticker(), name="raft-tick")]
        for t in self._tasks:
            t.add_done_callback(self._task_ended)

    def _task_ended(self, task: asyncio.Task[None]) -> None:
        """The watchdog of the loop tasks: one that ended by an exception stops the driver
        (see ``failure``); a stop or a removal ends them quietly."""
        if task.cancelled() or task.exception() is None or self.failure is not None:
            return
        exc = task.exception()
        assert exc is not None
        storage = client_error(exc, self.sm.data_dir, self.opts.node_id)
        if storage is not None:
            # A disk that failed under the log or the store (a failed fsync is never retried:
            # docs/node.md, "Disk full and fsync failure"): one line, no traceback; a restart
            # recovers from what is durable.
            log.critical("this node stops: %s", storage)
        else:
            log.critical("the Raft %s task failed; this node stops: %s: %s", task.get_name(),
                         type(exc).__name__, exc, exc_info=exc)
        self.failure = exc
        self._stopped = True
        for t in self._tasks:
            t.cancel()
        self._fail_all(storage if storage is not None else
                       NodeStoppedError(f"the node failed ({type(exc).__name__}: {exc})"))
        if self.on_failure is not None:
            self.on_failure(exc)

    async def seal_for_stop(self, timeout: float) -> bool:
        """Before a graceful stop: take no more writes, replicated epochs or entries
        (``NodeStoppedError``); on a leader, once what was queued is proposed, propose the
        ``EpochMarker`` sealing the epoch it leaves open and wait up to ``timeout`` seconds for
        it to be applied. True: nothing was left open, or the marker is applied; False: not
        the leader, or the marker did not make it in time (the next leader seals the epoch,
        ``epoch_seal``). Without it a channel reading this cluster would hold the epoch's
        transactions back until this cluster writes again -- a single-node source taken down
        for good, never."""
        self._closing = True
        if self._stopped or not self.is_leader:
            return False
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._seal_waiter = fut
        self._wake.set()
        try:
            result = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except (TimeoutError, NodeError, InvalidRequest):
            return False
        return result is not False

    async def stop(self) -> None:
        """Stop the loop, fail everything waiting, close nothing else (the owner closes the
        storage and the store). A snapshot in progress is abandoned at its next step and
        waited for (it may still be recorded whole; never in part)."""
        self._stopped = True
        self._wake.set()
        self.commit_linger.drop()
        for t in self._tasks:
            t.cancel()
        # A task that failed already told the watchdog (``failure``): not raised again here.
        await asyncio.gather(*self._tasks, return_exceptions=True)
        err = NodeStoppedError("the node is stopping")
        await self.snapshots.close(err)
        self._fail_all(err)
        self._io.shutdown(wait=True)

    def _fail_all(self, err: BaseException) -> None:
        """Fail every write, entry, replicated epoch and read waiting on this driver."""
        for w in self._writes:
            assert w.future is not None  # set when queued
            _fail(w.future, err)
        for u in self._units:
            _fail(u.future, err)
        for _, f in self._entries:
            _fail(f, err)
        for waiter in self._waiting.values():
            _fail(waiter.future, err)
        for f in self._reads.values():
            _fail(f, err)
        for f, _ in self._read_queue:
            _fail(f, err)
        for _, f in self._read_waits:
            _fail(f, err)
        self._writes.clear()
        self._units.clear()
        self._entries.clear()
        self._waiting.clear()

    async def _ticker(self) -> None:
        """Ticks Raft every ``tick_s``; on a leader also wakes the loop as each epoch ends, so
        the epoch is sealed then rather than up to a tick later (channel lag)."""
        tick = self.opts.tick_s
        last = time.monotonic()
        while not self._stopped:
            delay = last + tick - time.monotonic()
            st = self._leader
            if st is not None and self.is_leader:
                delay = min(delay, st.to_epoch_end(time.monotonic()) + 0.0005)
            await asyncio.sleep(max(delay, 0.0))
            now = time.monotonic()
            n = int((now - last) / tick)
            if n:
                last += n * tick
                self._ticks_due += n  # a paused process delivers every missed tick
            self._wake.set()

    async def _run(self) -> None:
        raw = self.raw
        loop = asyncio.get_running_loop()
        while not self._stopped:
            await self._wake.wait()
            self._wake.clear()
            try:
                self._feed(raw)
                while raw.has_ready() and not self._stopped:
                    rd = raw.ready()
                    if not rd.snapshot.is_empty():
                        # Installing replaces the snapshot files and then the store: no
                        # snapshot of ours may be exporting or recording meanwhile.
                        await self.snapshots.abort()
                    c = self.counters
                    c.readies += 1
                    c.entries_persisted += len(rd.entries)
                    c.entries_applied += len(rd.committed_entries)
                    c.messages_sent += len(rd.messages)
                    early = bool(rd.messages) and self._may_send_before_persisting(rd)
                    if early:
                        self._send_messages(rd)
                    if rd.must_sync or rd.entries or not rd.snapshot.is_empty():
                        c.synced_readies += 1
                        if self._save_inline(rd):
                            self.storage.save_ready(rd)
                        else:
                            await loop.run_in_executor(self._io, self.storage.save_ready, rd)
                    elif rd.hard_state is not None:
                        # Only the commit index moved: nothing to fsync, no thread hop.
                        self.storage.save_ready(rd)
                    if rd.hard_state is not None:
                        self._durable_term_vote = (rd.hard_state.term, rd.hard_state.vote)
                    if rd.messages and not early:
                        self._send_messages(rd)
                    await self._apply(rd)
                    raw.advance(rd)
                    if rd.soft_state is not None:
                        self._on_soft_state(rd)
                    self._feed(raw)
                if not self._stopped:
                    await self.snapshots.step(self.sm.applied_index)
            except RaftError:
                self._stopped = True
                raise  # the watchdog (_task_ended) reports it and stops the node
            if self.removed:
                log.warning("this node was removed from the cluster; its Raft loop stops")
                self._stopped = True

    def _send_messages(self, rd: Ready) -> None:
        """Send ``rd``'s messages: a leader's through its ``CommitLinger`` (commit-only
        appends to caught-up followers wait a moment for the next append to carry them,
        unless ``rd`` commits a membership change), unless ``commit_linger_s`` is 0."""
        raft = self.raw.raft
        if raft.role == Role.LEADER and self.opts.commit_linger_s > 0:
            self.commit_linger.send(rd.messages, raft, rd.committed_entries)
        else:
            self._send(rd.messages)

    def _save_inline(self, rd: Ready) -> bool:
        """Whether ``rd`` is persisted on the event loop's thread rather than the I/O thread:
        when ``rd`` installs no snapshot, on a node that does not lead, and on a leader while
        at most one proposal waits to be applied (a lone writer's).

        The Raft loop waits for the write either way; the I/O thread only lets the rest of
        the event loop run meanwhile. A leader with calls to serve needs that (its loop
        accepts and answers the API's calls during its fsyncs); a follower's loop mostly runs
        this Raft loop, so the hand-over to the thread and back (a queue, two thread
        wake-ups, a future chain) cost more than it bought: measured in the 64-client unary
        cell, a follower's CPU per write fell by ~20-30 % without it (docs/benchmarks.md,
        Change 11). The same holds for a leader serving one writer at a time: its appends
        left before the write (``_may_send_before_persisting``) and nothing else waits for
        its loop, whose hand-over had put ~0.2 ms of CPU and two thread wake-ups on the
        write's path (one-client p50 -5 to -11 %, docs/benchmarks.md, Change 23). The price:
        the node's other API calls and peer reads wait for the fsync (typically 0.3-1.5 ms
        here) instead of running beside it -- on a leader, only while one write at most is
        in flight. Everything else the I/O thread runs (compaction, a snapshot's restore) is
        awaited by this same loop, so writes stay serialized with it."""
        if not rd.snapshot.is_empty():
            return False
        return self.raw.raft.role != Role.LEADER or len(self._waiting) <= 1

    def _may_send_before_persisting(self, rd: Ready) -> bool:
        """Whether ``rd.messages`` may leave before ``rd`` is persisted (Raft thesis 10.2.1:
        the leader writes its log in parallel with replicating it).

        Only a leader's messages, only when the durable term and vote already equal ``rd``'s
        (a message never depends on a term or vote not yet on disk) and ``rd`` installs no
        snapshot. Sending a leader's new entries early is safe because the leader's own
        acknowledgement of them can only count towards a commit index together with a
        follower's reply, and replies are stepped in a later ``_feed`` -- after this Ready's
        persistence has finished (the loop awaits it before advancing). So no commit index
        covering an entry is computed, sent or applied before the leader's copy is durable.
        """
        if self.raw.raft.role != Role.LEADER or not rd.snapshot.is_empty():
            return False
        hs = rd.hard_state
        return hs is None or (hs.term, hs.vote) == self._durable_term_vote

    def _feed(self, raw: RawNode) -> None:
        n, self._ticks_due = self._ticks_due, 0
        for _ in range(n):
            raw.tick()
        if self._inbox:
            inbox, self._inbox = self._inbox, []
            for m in inbox:
                try:  # noqa: SIM105 (hot loop: no context manager per message)
                    raw.step(m)
                except (ProposalDroppedError, StepPeerNotFoundError):
                    pass
        if self._control:
            ctl, self._control = self._control, []
            for fn in ctl:
                try:
                    fn(raw)
                except ProposalDroppedError as exc:
                    log.info("dropped: %s", exc)
        if self.is_leader:
            self._maybe_seal_epoch(raw)
            if self._units or self._entries:
                self._propose_units(raw)
            if self._writes:
                self._propose_writes(raw)
            if self._seal_waiter is not None and not (self._writes or self._units
                                                      or self._entries):
                self._seal_open_epoch(raw)
        else:
            if self._seal_waiter is not None:
                _done(self._seal_waiter, False)
                self._seal_waiter = None
            if self._writes:
                writes, self._writes = self._writes, []
                for w in writes:
                    assert w.future is not None  # set when queued
                    self._drop_idem(w.idempotency_key, w.future)
                    _fail(w.future, NotLeaderError(raw.raft.lead))
            if self._units or self._entries:
                units, entries = self._units, self._entries
                self._units, self._entries = [], []
                for u in units:
                    _fail(u.future, NotLeaderError(raw.raft.lead))
                for _, f in entries:
                    _fail(f, NotLeaderError(raw.raft.lead))

    # -- proposing ------------------------------------------------------------------------------

    def _leader_state(self, raw: RawNode) -> Sequencer:
        """This term's sequencer; at a leader change, a new one from the log read back: the
        trans ids and commit times consumed by the applied entries (the store's counters)
        and by those not yet applied (``gtid_use``: the same answer the start-up check reads
        the log with), and the epoch an earlier leader left unsealed (``epoch_seal``)."""
        r = raw.raft
        st = self._leader
        if st is not None and st.term == r.term:
            st.epoch_s = self.opts.epoch_s  # the options may be replaced (tests shorten epochs)
            return st
        pending: list[tuple[int, int]] = []
        lo, hi = self.sm.applied_index + 1, r.raft_log.last_index() + 1
        if lo < hi:
            lo = max(lo, r.raft_log.first_index())
            pending = [consumed(e.data) for e in r.raft_log.slice(lo, hi, NO_LIMIT)
                       if e.type == EntryType.NORMAL]
        st = Sequencer.take_over(r.term, time.monotonic(), self.opts.epoch_s,
                                 self.sm.last_trans_id, self.sm.last_commit_ts, pending,
                                 unsealed_epoch(r.raft_log, r.term))
        self._leader = st
        return st

    def _view(self, raw: RawNode, st: Sequencer) -> ReplicationState:
        """The leader's replication view: the store's state plus the replicated epochs in
        the log after the applied index (applied as the state machine will)."""
        if st.view is not None:
            return st.view
        view = self.sm.replication.copy()
        lo, hi = self.sm.applied_index + 1, raw.raft.raft_log.last_index() + 1
        staged: dict[str, list[replication_pb2.ReplicatedEpoch]] = {}
        if lo < hi:
            lo = max(lo, raw.raft.raft_log.first_index())
            for e in raw.raft.raft_log.slice(lo, hi, NO_LIMIT):
                if e.type != EntryType.NORMAL or not e.data or \
                        e.data[0] != messages.TypeTag.REPLICATED_EPOCH:
                    continue
                seg = replication_pb2.ReplicatedEpoch.FromString(e.data[1:])
                parts = [] if seg.segment_id <= 1 else staged.get(seg.channel, [])
                parts.append(seg)
                staged[seg.channel] = parts
                if not seg.end_segment:
                    continue
                unit = join_segments(staged.pop(seg.channel))
                if view.refusal(unit) is None:
                    view.apply(unit)
        st.view = view
        return view

    def _propose_units(self, raw: RawNode) -> None:
        st = self._leader_state(raw)
        units, self._units = self._units, []
        entries, self._entries = self._entries, []
        term = raw.raft.term
        for data, fut in entries:
            try:
                raw.propose(data)
            except ProposalDroppedError:
                _fail(fut, NotLeaderError(raw.raft.lead, "refused: leadership transfer in "
                                          "progress or no leader"))
                continue
            self._waiting[raw.raft.raft_log.last_index()] = _Waiter(term, fut)
            if data[:1] == _SCHEMA_TAG:  # a schema event is a record of the open epoch: the
                st.unit_proposed(True)   # epoch gets a marker, so channels send it on
        if not units:
            return
        view = self._view(raw, st)
        for u in units:
            before = view.copy()
            built = build_entries(view, u.channel, u.source_id, u.sealed, st.open_epoch)
            if built is None:
                if not u.future.done():
                    u.future.set_result(None)
                continue
            has_txns = built.has_txns
            reserved = st.mark()
            if self.sm.conflict_rules and has_txns:
                # the GTID of the transaction applying it may derive (conflicts found)
                last = built.last
                last.derived_trans_id, last.derived_commit_ts = \
                    st.reserve_derived(time.time_ns())
            try:
                raw.propose_batch(built.payloads())
            except ProposalDroppedError:
                st.take_back(reserved)
                st.view = view = before
                _fail(u.future, NotLeaderError(raw.raft.lead, "refused: leadership transfer "
                                               "in progress or no leader"))
                continue
            st.unit_proposed(has_txns)
            self._waiting[raw.raft.raft_log.last_index()] = _Waiter(term, u.future)

    def _maybe_seal_epoch(self, raw: RawNode) -> None:
        st = self._leader_state(raw)
        inherited = st.inherited_seal()
        if inherited is not None:
            # an earlier leader's last epoch: without its marker, a channel reading this
            # cluster would hold those transactions back until this leader writes something
            if not self._propose_marker(raw, inherited):
                return  # the next cycle tries again (or, after the transfer, the next leader)
            log.info("sealed epoch %d, left open by an earlier leader", inherited.epoch)
            st.inherited_sealed()
        now = time.monotonic()
        if not st.epoch_ended(now):
            return
        if not self._close_open_epoch(raw, st):
            # what this cycle still proposes joins the epoch
            return
        st.open_at(now)

    def _close_open_epoch(self, raw: RawNode, st: Sequencer) -> bool:
        """Propose the marker of ``st``'s open epoch if it has transactions. False when the
        proposal was refused (a leadership transfer): the epoch stays open and the next cycle
        tries again -- if the transfer is abandoned and this leader writes nothing more, no
        later record would seal it."""
        seal = st.open_seal()
        if seal is not None:
            if not self._propose_marker(raw, seal):
                return False
            st.sealed()
        return True

    def _seal_open_epoch(self, raw: RawNode) -> None:
        """``seal_for_stop``'s marker, proposed once nothing else is queued (a record
        proposed after its epoch's marker would be dropped by readers as already held)."""
        st = self._leader_state(raw)
        fut, self._seal_waiter = self._seal_waiter, None
        assert fut is not None
        if st.open_seal() is None:
            _done(fut, True)  # sealed already (or nothing written this term)
        elif self._close_open_epoch(raw, st):
            self._waiting[raw.raft.raft_log.last_index()] = _Waiter(raw.raft.term, fut)
        else:
            self._seal_waiter = fut

    def _propose_marker(self, raw: RawNode, seal: Seal) -> bool:
        """Propose the ``EpochMarker`` of ``seal``; False when the proposal is refused (a
        leadership transfer in progress)."""
        marker = epoch_pb2.EpochMarker(server_id=self.opts.cluster_id, epoch=seal.epoch,
                                       sealed_at_ns=time.time_ns(),
                                       last_trans_id=seal.last_trans_id)
        try:
            raw.propose(messages.pack(marker))
        except ProposalDroppedError:
            return False
        return True

    def _propose_writes(self, raw: RawNode) -> None:
        st = self._leader_state(raw)
        writes, self._writes = self._writes[: self.opts.max_batch], self._writes[
            self.opts.max_batch :]
        if self._writes:
            self._wake.set()
        accepted: list[WriteProposal] = []
        raws: list[bytes] = []  # their statements' bytes
        schemas = self.sm.schemas
        if st.schemas:
            schemas = st.known_schemas(schemas)
        checker = self.checker
        reserved = st.mark()
        for w in writes:  # validated (where the API did not) and framed, in order
            created = w.created
            conditions = w.conditions
            stmts_raw = w.raw
            if stmts_raw is None:
                stmts_raw = frame_statements(w.statements)
            if created is None or conditions is not None:
                try:
                    if conditions is not None:
                        check_conditions(conditions, schemas)
                    if created is None:
                        created = checker.check(stmts_raw, w.statements, schemas, admin=w.admin)
                except InvalidRequest as exc:
                    assert w.future is not None  # set when queued
                    self._drop_idem(w.idempotency_key, w.future)
                    _fail(w.future, exc)
                    continue
            for name, schema in created:
                if schemas is self.sm.schemas:
                    schemas = dict(schemas)
                schemas[name] = schema
                st.shadow(name, schema)
            accepted.append(w)
            raws.append(stmts_raw)
        if not accepted:
            return
        # The accepted writes are stamped together (consecutive trans ids and commit
        # timestamps, one epoch): one call of the sequencer per batch, not one per write.
        stamp = st.stamp_batch(len(accepted), time.time_ns())
        trans, epoch, ts = stamp.trans_id, stamp.epoch, stamp.commit_ts
        cluster = self.opts.cluster_id
        datas: list[bytes] = []
        for w, stmts_raw in zip(accepted, raws, strict=True):
            data = encode_transaction_wire(cluster, trans, epoch, cluster, min(w.start_ns, ts),
                                           ts, stmts_raw, w.idempotency_key)
            if w.conditions is not None:  # field 11, after the entry's last field (10)
                data += conditions_field(w.conditions)
            datas.append(data)
            trans += 1
            ts += 1
        self.counters.writes_proposed += len(datas)
        try:
            raw.propose_batch(datas)
        except ProposalDroppedError:
            for w in accepted:
                assert w.future is not None
                self._drop_idem(w.idempotency_key, w.future)
                _fail(w.future, NotLeaderError(raw.raft.lead, "write refused: leadership "
                                               "transfer in progress or no leader"))
            # nothing was proposed: take back the reservations and the shadowed schemas
            # (not the whole sequencer: a new one would count this term's epochs from 1)
            st.take_back(reserved)
            return
        last = raw.raft.raft_log.last_index()
        term = raw.raft.term
        first = last - len(datas) + 1
        for i, w in enumerate(accepted):
            assert w.future is not None
            self._waiting[first + i] = _Waiter(term, w.future, w.idempotency_key, w.wire)

    def _drop_idem(self, key: str, fut: asyncio.Future[gateway_pb2.WriteResult | bytes]
                   ) -> None:
        if key and self._inflight_idem.get(key) is fut:
            del self._inflight_idem[key]

    # -- applying -------------------------------------------------------------------------------

    async def _apply(self, rd: Ready) -> None:
        raw = self.raw
        if not rd.snapshot.is_empty():
            loop = asyncio.get_running_loop()
            # (a received image: bytes, or the ``ArchiveReader`` of the storage's spool)
            image = cast("bytes | ArchiveReader", rd.snapshot.data)
            await loop.run_in_executor(self._io, self.sm.restore, image)
            self.sm.mark_applied(rd.snapshot.metadata.index)
            self.snapshots.installed(rd.snapshot.metadata)
            self._leader = None
            log.info("installed snapshot at index %d", rd.snapshot.metadata.index)
        ents = rd.committed_entries
        if ents:
            run: list[Entry] = []
            for e in ents:
                if e.type == EntryType.CONF_CHANGE:
                    self._apply_run(run)
                    run = []
                    self._apply_conf_change(raw, e)
                else:
                    run.append(e)
            self._apply_run(run)
        for rs in rd.read_states:
            fut = self._reads.pop(rs.request_ctx, None)
            if fut is not None and not fut.done():
                self._read_waits.append((rs.index, fut))
        if self._read_waits:
            applied = self.sm.applied_index
            keep = []
            for index, fut in self._read_waits:
                if index <= applied:
                    if not fut.done():
                        fut.set_result(index)
                else:
                    keep.append((index, fut))
            self._read_waits = keep
        if ents or not rd.snapshot.is_empty():
            async with self.applied_changed:
                self.applied_changed.notify_all()
            if self.on_applied is not None:
                self.on_applied(self.sm.applied_index)

    def _apply_run(self, run: list[Entry]) -> None:
        if not run:
            return
        outcomes = {a.index: a for a in self.sm.apply(run)}
        if not self._waiting:
            return
        for e in run:
            waiter = self._waiting.pop(e.index, None)
            if waiter is None:
                continue
            self._resolve(waiter, e, outcomes.get(e.index))

    def _resolve(self, waiter: _Waiter, e: Entry, outcome: Applied | None) -> None:
        fut = waiter.future
        if outcome is not None and outcome.error is not None and self._leader is not None \
                and e.data[:1] == bytes([messages.TypeTag.REPLICATED_EPOCH]):
            self._leader.view = None  # the view assumed it would apply: rebuild it
        if waiter.idem and self._inflight_idem.get(waiter.idem) is fut:
            del self._inflight_idem[waiter.idem]
        if fut.done():
            return
        if e.term != waiter.term:
            fut.set_exception(ProposalLostError(
                f"entry {e.index} was replaced by another leader's (term {e.term}); retry"))
        elif outcome is None:
            fut.set_result(e.index)
        elif outcome.error is not None:
            fut.set_exception(outcome.error)
        elif waiter.wire and outcome.wire is not None:
            fut.set_result(outcome.wire)
        else:
            fut.set_result(outcome.result)

    def _replay_conf_changes(self, snap_index: int, applied: int) -> None:
        """Re-apply the configuration changes in ``(snap_index, applied]`` at start-up, in log
        order, through the live path (:meth:`_apply_conf_change`): the core's
        ``apply_conf_change`` (joint configurations entered and left as logged; a node that
        replays its own removal is ``removed``), the configuration history of the snapshot
        taker (which asks for the snapshot the change forced, perhaps never recorded), and
        the membership notifications, held for :meth:`start`. Not the store write: the store
        holds every entry up to ``applied`` already.

        Why not the etcd way (``applied = snapshot index`` and the store skipping what it
        has): the store already holds every effect of these entries except the configuration,
        which lives in the core, the history and the transport; re-delivering them would send
        every entry through the apply path (row writes, idempotency records, write results)
        only to skip it. Here the cost is reading the entries since the newest snapshot once
        (in bounded chunks), about ``snapshot_entries`` of them; nothing is applied twice.

        The entries are in the log: it is only compacted below a snapshot's index (to
        ``snapshot index - snapshot_entries / 2`` at most) or reset to start right after an
        installed snapshot, so its first index is at most ``snap_index + 1``; a log starting
        later cannot be replayed and the node refuses to start.

        Auto-leave of a joint configuration needs nothing here: the core is a follower now;
        a leader proposes leaving once it has applied its first entry (``maybe_auto_leave``).
        """
        if applied <= snap_index:
            return
        first = self.storage.first_index()
        if first > snap_index + 1:
            raise RuntimeError(
                f"{self.storage.directory}: the log starts at index {first} but the newest "
                f"snapshot is at {snap_index}: the configuration changes in between cannot be "
                f"replayed (the log was compacted past the newest snapshot)")
        lo, n = snap_index + 1, 0
        while lo <= applied:
            ents = self.storage.entries(lo, applied + 1, _REPLAY_CHUNK_BYTES)
            for e in ents:
                if e.type == EntryType.CONF_CHANGE:
                    self._apply_conf_change(self.raw, e, replay=True)
                    n += 1
            lo = ents[-1].index + 1
        if n:
            log.info("replayed %d configuration change(s) in (%d, %d]: %s", n, snap_index,
                     applied, self.raw.raft.trk.config.describe())

    def _apply_conf_change(self, raw: RawNode, e: Entry, *, replay: bool = False) -> None:
        cc = ConfChange.decode(e.data)
        conf = raw.apply_conf_change(cc)
        # Before the store write at e.index: a snapshot exported at e.index or later must find
        # this configuration. A node added now refuses older snapshots: ask for a new one.
        self.snapshots.conf_applied(e.index, conf)
        try:
            ctx = json.loads(cc.context or b"{}")
        except ValueError:
            ctx = {}
        peers: list[tuple[bytes, bytes | None, int, int, int]] = []
        for ch in cc.changes:
            removed = ch.type == ConfChangeType.REMOVE_NODE
            peers.append((keys.meta_key(f"peer:{ch.node_id}"),
                          None if removed else json.dumps(ctx).encode(), 0, 0, 0))
            if replay:
                self._replayed.append((ch.node_id, ctx, removed))
            elif self._on_membership is not None:
                self._on_membership(ch.node_id, ctx, removed)
            if removed and ch.node_id == self.opts.node_id:
                self.removed = True
        if replay:
            return
        self.sm.store.write_batch(peers, log_index=e.index)
        waiter = self._waiting.pop(e.index, None)
        if waiter is not None:
            self._resolve(waiter, e, None)

    def _on_soft_state(self, rd: Ready) -> None:
        ss = rd.soft_state
        assert ss is not None
        log.info("role %s, leader %d, term %d", ss.role.name.lower(), ss.lead,
                 self.raw.raft.term)
        if ss.role != Role.LEADER:
            self._leader = None
            self.commit_linger.drop()
        if ss.removed:
            self.removed = True
        if self.on_role_change is not None:
            self.on_role_change()

    # -- snapshots ------------------------------------------------------------------------------

    async def snapshot_now(self) -> int:
        """Make sure a snapshot covers every entry applied so far; returns its index, which
        is at least the applied index of the call. Answered by the newest snapshot if it
        already covers them, by the snapshot in progress if its export covers them (it joins
        it), else by a new one started as soon as the one in progress ends
        (``SnapshotTaker``). Raises ``NodeStoppedError`` if the node stops first."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self._stopped:
            raise NodeStoppedError("the node is stopping")
        self.snapshots.request(self.sm.applied_index, fut)
        self._wake.set()
        return await fut


def _fail(fut: asyncio.Future[_T], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


def _done(fut: asyncio.Future[_T], result: _T) -> None:
    if not fut.done():
        fut.set_result(result)


def _duplicate_of(other: asyncio.Future[gateway_pb2.WriteResult | bytes]
                  ) -> asyncio.Future[gateway_pb2.WriteResult | bytes]:
    """A future resolving like ``other`` but marked as a duplicate (with the message, never
    its bytes)."""
    fut: asyncio.Future[gateway_pb2.WriteResult | bytes] = \
        asyncio.get_running_loop().create_future()

    def copy(src: asyncio.Future[gateway_pb2.WriteResult | bytes]) -> None:
        if fut.done():
            return
        if src.cancelled():
            fut.cancel()
        elif (exc := src.exception()) is not None:
            fut.set_exception(exc)
        else:
            got = src.result()
            if isinstance(got, bytes):  # the first write's caller asked for the bytes
                res = gateway_pb2.WriteResult.FromString(got)
            else:
                res = gateway_pb2.WriteResult()
                res.CopyFrom(got)
            res.duplicate = True
            fut.set_result(res)

    other.add_done_callback(copy)
    return fut

