"""``NodeAppliers``: the appliers a node runs -- node-scoped ones always, cluster-scoped ones
only while it leads -- and their positions.

Every applier has a scope (``gateway.appliers.contract``: the factory's ``scope``, or the node
configuration's ``[appliers.NAME] scope``):

- ``node`` (the embedded SQLite applier): every node applies the committed log into its own
  local target; its position is a file under ``DATA/appliers`` (``PositionStore``), as for
  ``gateway apply``.
- ``cluster`` (RabbitMQ, Cassandra, third-party plugins by default): one shared external
  target, applied once per cluster by the leader. When this node becomes leader (a Raft soft
  state change, reported by the driver's ``on_role_change``) a supervisor task waits until
  the node applied its log up to the first entry of its term -- everything committed before
  it, including the previous leader's last replicated position -- then starts a dispatcher
  (its own thread) from the larger of the replicated position and this node's position file;
  it stops the dispatcher (position saved, in an executor thread so the event loop never
  waits) when the node loses leadership or stops.

While it runs, a cluster-scoped dispatcher's saved positions are proposed into the Raft log
as tagged ``gateway.v1.ApplierPosition`` entries (``StoreStateMachine`` records them under
``m applier:<name>`` on every replica): at most one per ``propose_interval`` and only when
the applied-GTID set changed since the last one (or the watermark moved ``propose_entries``
entries, so a log of skipped entries does not hold the position back), so an idle cluster
writes none and the position entries do not feed themselves.

At-least-once bound: a new leader replays the transactions after the position it starts
from that are not in its applied set; they may have been applied already by the previous
leader after its last replicated position -- at most about ``propose_interval`` of the old
leader's work plus the batches it had in flight. A partitioned old leader keeps applying
until it steps down (check-quorum, one election timeout), so for that long two nodes may
write the shared store; appliers stay idempotent (every operation carries its GTID and log
index) and stores that order writes by them (Cassandra's ``USING TIMESTAMP``) stay correct.

The log-compaction floor is the smallest position of all: the position file for node-scoped
appliers, the replicated position for cluster-scoped ones on every node (a follower must keep
what the next leader's applier still needs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.appliers.contract import SCOPE_CLUSTER, SCOPE_NODE, Applier, ApplyError
from gateway.appliers.deadletter import DeadLetterError
from gateway.appliers.dispatcher import (
    DeadLetterHook,
    Dispatcher,
    DispatcherConfig,
    probe_commit_ns,
)
from gateway.appliers.durable import reconcile
from gateway.appliers.metrics import ApplierMetrics
from gateway.appliers.position import (
    ApplierPosition,
    BackfillProgress,
    PositionStore,
    PositionStoreError,
    position_message,
    position_of,
)
from gateway.appliers.schema_delivery import SchemaHook
from gateway.appliers.source import EntriesCompactedError, StoreInstalledError
from gateway.core import messages
from gateway.node.appliers.applier_rebuild import can_rebuild, rebuild_from_store
from gateway.node.appliers.backfill import needs_backfill, run_backfill
from gateway.node.appliers.dead_letters import dead_letter_action, list_dead_letters
from gateway.node.appliers.feed import CommittedLogSource
from gateway.node.state.consistency import (
    InconsistentStateError,
    check_applier_position,
    check_position_file,
    check_target_trans_id,
    last_logged_trans_id,
)
from gateway.v1 import applier_pb2, gateway_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver

__all__ = ["HostedApplier", "NodeAppliers"]

log = logging.getLogger("gateway.node.appliers.applier_host")

_FLOOR_NONE = 1 << 62
#: Errors of ``NodeAppliers._run``'s start-up checks: the applier is not started.
_REFUSALS = (InconsistentStateError, PositionStoreError, DeadLetterError, ApplyError)


@dataclass(eq=False)
class HostedApplier:
    """One configured applier of this node and, while one runs, its dispatcher thread."""

    name: str
    scope: str
    applier: Applier
    config: DispatcherConfig
    positions: PositionStore
    metrics: ApplierMetrics
    dispatcher: Dispatcher | None = None
    thread: threading.Thread | None = None
    error: BaseException | None = None
    #: cluster scope: the term this node runs it for (0: not running), and where it started
    term: int = 0
    started_from: ApplierPosition | None = None
    #: cluster scope: the last position proposed into the log in this run, and when
    proposed: ApplierPosition | None = None
    proposed_at: float = 0.0
    runs: int = 0
    #: the dead letters already on disk were added to ``metrics`` (once per process)
    letters_counted: bool = False
    #: a backfill from the store in progress or done (``backfill``), as last saved
    backfill: BackfillProgress | None = None
    #: rows per chunk of its backfill (None: ``NodeAppliers.backfill_chunk_rows``)
    chunk_rows: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def replicated_position(msg: applier_pb2.ApplierPosition | None) -> ApplierPosition:
    """The ``ApplierPosition`` of a recorded position message (position 0 when none)."""
    if msg is None:
        return ApplierPosition()
    try:
        return position_of(msg)
    except ValueError:
        return ApplierPosition(msg.log_index)


class NodeAppliers:
    """The appliers of one node; see the module docstring. Event-loop methods unless noted."""

    def __init__(self, driver: RaftDriver, state_dir: str, *,
                 publish_metrics: Callable[[str, Mapping[str, float]], None] | None = None,
                 on_dead_letter: DeadLetterHook | None = None,
                 propose_interval: float = 1.0, propose_entries: int = 1000,
                 backfill_chunk_rows: int | None = None,
                 on_schema_event: SchemaHook | None = None) -> None:
        self._driver = driver
        self._state_dir = state_dir
        self._publish = publish_metrics
        self._on_dead_letter = on_dead_letter
        self._on_schema_event = on_schema_event
        self.propose_interval = propose_interval
        self.propose_entries = propose_entries
        self.backfill_chunk_rows = backfill_chunk_rows
        self._source = CommittedLogSource(driver)
        self.appliers: list[HostedApplier] = []
        self._wake = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    def add(self, name: str, applier: Applier, scope: str, config: DispatcherConfig, *,
            backfill_chunk_rows: int | None = None) -> None:
        """Host ``applier`` (built by its factory) with ``scope``; before :meth:`start`.
        ``backfill_chunk_rows``: rows per chunk of its backfill (``backfill``; None: the
        node's default)."""
        self.appliers.append(HostedApplier(
            name, scope, applier, config, PositionStore(self._state_dir, applier.name),
            ApplierMetrics(applier.name), chunk_rows=backfill_chunk_rows))

    async def dead_letters(self, req: gateway_pb2.DeadLettersRequest
                           ) -> gateway_pb2.DeadLettersResponse:
        """This node's dead letters (``dead_letters``)."""
        return await list_dead_letters(self._state_dir, self.appliers, req)

    async def dead_letter_action(self, req: gateway_pb2.DeadLetterActionRequest
                                 ) -> gateway_pb2.DeadLetterActionResponse:
        """Replay or discard dead letters of one applier of this node (``dead_letters``)."""
        return await dead_letter_action(self._state_dir, self.appliers, req)

    @property
    def cluster_scoped(self) -> list[HostedApplier]:
        return [a for a in self.appliers if a.scope == SCOPE_CLUSTER]

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the node-scoped dispatchers and the supervisor of the cluster-scoped ones.
        Raises ``InconsistentStateError`` (one line) if a node-scoped applier may not start
        (its position does not fit the log or its target, see ``_run``); the caller stops."""
        self._loop = asyncio.get_running_loop()
        self._driver.on_applied = self._applied
        for a in self.appliers:
            if a.scope == SCOPE_NODE:
                self._run(a, self._dispatcher(a, None))
                if isinstance(a.error, _REFUSALS):
                    raise InconsistentStateError(str(a.error))
        if self.cluster_scoped:
            self._driver.on_role_change = self._wake.set
            self._supervisor = asyncio.create_task(self._supervise(), name="cluster-appliers")
            self._wake.set()

    def _applied(self, _index: int) -> None:
        """After every applied batch (the driver's hook, on the loop): the running
        dispatchers read the new entries ~2 ms later rather than at their next poll (an idle
        applier; a busy one reads when its ``linger`` ends, see ``DispatcherConfig``)."""
        for a in self.appliers:
            if a.dispatcher is not None:
                a.dispatcher.notify()

    async def stop(self) -> None:
        """Stop every dispatcher (positions saved), then close the appliers."""
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        for a in self.appliers:
            if a.dispatcher is not None:
                a.dispatcher.stop()
        for a in self.appliers:
            if a.thread is not None:
                await asyncio.to_thread(a.thread.join)
            a.applier.close()

    def _dispatcher(self, a: HostedApplier, term: int | None) -> Dispatcher:
        hook = None if term is None else (lambda pos: self._position_saved(a, term, pos))
        return Dispatcher(a.applier, self._source, self._state_dir, config=a.config,
                          publish_metrics=self._publish, on_dead_letter=self._on_dead_letter,
                          on_position_saved=hook, metrics=a.metrics,
                          on_schema_event=self._on_schema_event)

    def _run(self, a: HostedApplier, d: Dispatcher) -> None:
        # Each applier checks its saved position against the log before it starts: a position
        # past the log's end (lost entries) or a damaged position file falling back below the
        # log's start would make it skip entries it never applied (``check_position_file``).
        # Then the position is the one its target durably holds, when the target can tell
        # (``gateway.appliers.durable``): a target that lost commits the file claims (a lost
        # or cut SQLite WAL, a wiped database) gets the entries after it again -- from the
        # log, or rebuilt from the store when the log no longer holds them.
        try:
            claimed = check_position_file(a.positions, self._driver.storage)
            target = str(getattr(a.applier, "path", a.name))
            position = reconcile(a.applier, a.positions, claimed, target)
            # A new applier (or one whose backfill is not done) is backfilled from the store
            # (``backfill``); a target that lost what its position file claims is not new: it
            # gets the entries again from the log, or is rebuilt (``applier_rebuild``).
            new = needs_backfill(claimed) and needs_backfill(position)
            check_applier_position(a.name, target, position.log_index,
                                   last_index=self._driver.storage.last_index(),
                                   wal_dir=self._driver.storage.wal.directory)
            last_applied = getattr(a.applier, "last_applied_trans_id", None)
            if callable(last_applied):
                drv = self._driver
                server_id = drv.opts.cluster_id
                check_target_trans_id(
                    a.name, str(getattr(a.applier, "path", a.name)), server_id,
                    last_applied(server_id),
                    last_logged_trans_id(drv.storage, drv.sm.last_trans_id, server_id),
                    drv.storage.wal.directory)
            found = d.dead_letters.recover_tail()
            if found is not None:
                log.warning("applier %s: dead-letter log: %s", a.name, found)
            if not a.letters_counted:  # status counts the letters on disk, not this run's
                a.metrics.add(dead_letters=d.dead_letters.count())
                a.letters_counted = True
        except _REFUSALS as exc:
            a.error = exc
            log.error("applier %s not started: %s", a.name, exc)
            return

        a.backfill = position.backfill
        term = a.term if a.scope == SCOPE_CLUSTER else None

        def backfill(d: Dispatcher = d, position: ApplierPosition = position) -> bool:
            """A new applier's backfill (``backfill``), or one after a seed ended; False:
            stop here (stopped, or failed: the error is in status, the progress saved for the
            next start)."""
            def progress(p: BackfillProgress) -> None:
                a.backfill = p
            saved = None if term is None else (lambda pos: self._position_saved(a, term, pos))
            try:
                done = run_backfill(a.applier, d, a.positions, self._driver.sm.store, position,
                                    chunk_rows=a.chunk_rows or self.backfill_chunk_rows,
                                    on_progress=progress,
                                    on_saved=saved)
            except Exception as exc:
                if self._stopping:
                    return False
                a.error = exc
                log.error("applier %s stopped during its backfill (resumed at the next "
                          "start): %s", a.name, exc)
                return False
            return done is not None and not self._stopping

        def rebuild(dispatcher: Dispatcher, from_index: int, first_index: int,
                    why: str = "") -> Dispatcher | None:
            """Rebuild the target from the store as of ``from_index - 1`` and return the
            dispatcher that follows the log after it; None: stop here (the node stops -- the
            rebuild is redone at the next start --, the rebuild failed -- the error is in
            status --, or this node no longer leads the term the applier ran in)."""
            try:
                rebuild_from_store(a.applier, a.positions, self._driver.sm.store,
                                   position=from_index - 1, first_index=first_index,
                                   apply=dispatcher.apply_outside_log, why=why)
            except Exception as exc:
                if self._stopping:
                    return None
                a.error = exc
                log.error("applier %s stopped: %s", a.name, exc)
                return None
            if self._stopping or (term is not None and self._leading_term() != term):
                return None
            a.dispatcher = self._dispatcher(a, term)
            return a.dispatcher

        def body() -> None:
            dispatcher = d
            if new and not backfill():
                return
            while True:
                try:
                    dispatcher.run(follow=True)
                    return
                except StoreInstalledError as seeded:
                    # A seed or a resync ended here: its rows are in the store, not in the
                    # log. Rebuild a target the applier owns (exact: the rows the resync
                    # deleted go too), else backfill it from the store (docs/replication.md,
                    # "Appliers on the seeded cluster"); then follow the log after that.
                    if not can_rebuild(a.applier):
                        dispatcher = self._dispatcher(a, term)
                        a.dispatcher = dispatcher
                        log.info("applier %s: a seed ended at log index %d: backfilling it "
                                 "from the store", a.name, seeded.from_index)
                        if not backfill(dispatcher, ApplierPosition(seeded.from_index - 1)):
                            return
                        continue
                    rebuilt = rebuild(dispatcher, seeded.from_index, seeded.first_index,
                                      f"a seed ended at log index {seeded.from_index}")
                    if rebuilt is None:
                        return
                    dispatcher = rebuilt
                except EntriesCompactedError as gap:
                    # The log starts after the applier's position: rebuild its target from
                    # the store (or stop with the gap in its status), never skip entries.
                    rebuilt = rebuild(dispatcher, gap.from_index, gap.first_index)
                    if rebuilt is None:
                        return
                    dispatcher = rebuilt
                except Exception as exc:  # reported in status and logs
                    a.error = exc
                    log.error("applier %s stopped: %s", a.name, exc)
                    return

        a.dispatcher, a.error = d, None
        a.thread = threading.Thread(target=body, name=f"applier-{a.name}", daemon=True)
        a.runs += 1
        a.thread.start()

    # -- cluster scope: run on the leader only ---------------------------------------------------

    def _leading_term(self) -> int:
        """This node's term if it leads (and is not stopping or removed), else 0."""
        drv = self._driver
        if self._stopping or drv.removed or not drv.is_leader:
            return 0
        return drv.raw.raft.term

    async def _supervise(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cluster-scoped appliers: cannot follow a leadership change")

    async def _reconcile(self) -> None:
        term = self._leading_term()
        for a in self.cluster_scoped:
            if a.term and a.term != term:
                await self._halt(a)
        if not term:
            return
        pending = [a for a in self.cluster_scoped if a.term != term]
        if not pending:
            return
        # Start only once everything committed before this term is applied here: the first
        # entry of the term is at most the last index now, and committing it commits all
        # before it -- among them the last position the previous leader replicated.
        drv = self._driver
        target = drv.raw.raft.raft_log.last_index()
        while drv.sm.applied_index < target:
            if self._leading_term() != term:
                return  # the role change woke us again
            async with drv.applied_changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(drv.applied_changed.wait_for(
                        lambda: drv.sm.applied_index >= target or drv.removed), 0.1)
        for a in pending:
            if self._leading_term() != term:
                return
            await self._begin(a, term)

    async def _begin(self, a: HostedApplier, term: int) -> None:
        replicated = replicated_position(self._driver.sm.applier_positions.get(a.name))
        local = await asyncio.to_thread(a.positions.load)
        start = local
        if replicated.log_index > local.log_index or (
                replicated.log_index == local.log_index
                and len(replicated.applied) > len(local.applied)):
            start = replicated
            await asyncio.to_thread(a.positions.save, replicated)
        if self._leading_term() != term:
            return
        # A position before this node's log start (it installed a snapshot) is handled by the
        # dispatcher thread: the target is rebuilt from the store, or the applier stops with
        # the gap in its status (``applier_rebuild``).
        a.term, a.started_from = term, start
        a.proposed, a.proposed_at = start, 0.0
        self._run(a, self._dispatcher(a, term))
        log.info("applier %s (cluster scope) started on the leader, term %d, from log index "
                 "%d", a.name, term, start.log_index)

    async def _halt(self, a: HostedApplier) -> None:
        d, t = a.dispatcher, a.thread
        a.term = 0
        if d is not None:
            d.stop()
        if t is not None:
            await asyncio.to_thread(t.join)
        log.info("applier %s (cluster scope) stopped: this node no longer leads", a.name)

    def _position_saved(self, a: HostedApplier, term: int, pos: ApplierPosition) -> None:
        """Dispatcher thread: propose ``pos`` into the log if it moved enough and the last
        proposal is old enough (module docstring)."""
        now = time.monotonic()
        with a.lock:
            last = a.proposed
            if last is not None:
                if pos.log_index < last.log_index:
                    return
                moved = pos.applied != last.applied or pos.backfill != last.backfill or \
                    pos.log_index - last.log_index >= self.propose_entries
                if not moved or now - a.proposed_at < self.propose_interval:
                    return
            a.proposed, a.proposed_at = pos, now
        data = messages.pack(position_message(a.name, pos, time.time_ns()))
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: the node is gone
            loop.call_soon_threadsafe(self._propose, term, data)

    def _propose(self, term: int, data: bytes) -> None:
        if self._driver.is_leader and self._driver.raw.raft.term == term:
            self._driver.propose_entry(data)

    # -- observation ----------------------------------------------------------------------------

    def replicated(self, name: str) -> ApplierPosition:
        """The position of cluster-scoped applier ``name`` recorded in this node's store."""
        return replicated_position(self._driver.sm.applier_positions.get(name))

    def floor(self) -> int:
        """The log index below which no applier of this node (or, for cluster-scoped ones,
        of the next leader) needs entries (any thread)."""
        floor = _FLOOR_NONE
        positions = self._driver.sm.applier_positions
        for a in self.appliers:
            if a.scope == SCOPE_CLUSTER:
                msg = positions.get(a.name)
                floor = min(floor, msg.log_index if msg is not None else 0)
            else:
                floor = min(floor, a.positions.load().log_index)
        return floor

    @staticmethod
    def _error(a: HostedApplier, running: bool) -> str:
        """Status's one line: why the applier stopped here, or -- while it runs -- that its
        store is unavailable and it retries (the endpoint and the error)."""
        if running:
            down = a.metrics.unavailable_error()
            return f"store unavailable, retrying: {down}" if down else ""
        return "" if a.error is None else " ".join(str(a.error).split())

    def _lag_seconds(self, position: int) -> float:
        """Age of the oldest transaction of this node's log after ``position`` (by its
        commit time; 0 when none is found near it, or the log no longer holds it)."""
        try:
            oldest = probe_commit_ns(self._source, position + 1)
        except EntriesCompactedError:  # the log no longer holds it: no figure
            return 0.0
        return max(0.0, time.time() - oldest / 1e9) if oldest else 0.0

    def status(self) -> list[gateway_pb2.ApplierStatus]:
        out = []
        applied = self._driver.sm.applied_index
        for a in self.appliers:
            m = a.metrics.snapshot()
            running = a.running
            msg = self._driver.sm.applier_positions.get(a.name)
            replicated = msg.log_index if msg is not None else 0
            if running or (a.scope == SCOPE_NODE and a.dispatcher is not None):
                position = int(m.get("watermark", 0))
                lag_entries, lag_s = int(m.get("lag_entries", 0)), m.get("lag_seconds", 0.0)
            else:
                position = replicated
                lag_entries, lag_s = max(0, applied - replicated), 0.0
            if lag_entries and not running:  # stopped or elsewhere: grows from the log
                lag_s = self._lag_seconds(position)
            st = gateway_pb2.ApplierStatus(
                name=a.name, position=position, lag_entries=lag_entries, lag_seconds=lag_s,
                dead_letters=int(m.get("dead_letters", 0)), scope=a.scope, running=running,
                replicated_position=replicated, error=self._error(a, running))
            b = a.backfill
            if b is None and msg is not None and msg.HasField("backfill"):
                b = replicated_position(msg).backfill  # cluster scope, run elsewhere
            if b is not None:
                st.backfill_state = "done" if b.done else "running"
                st.backfill_index, st.backfill_rows = b.snapshot_index, b.rows
                st.backfill_resumes, st.backfill_last_key = b.resumes, b.last_key.hex()
            out.append(st)
        return out

