"""Replication channels: this cluster as a replica of other clusters (docs/replication.md).

A channel definition (``gateway.v1.ChannelDefinition``) is replicated state: the leader
proposes it (``[[channels]]`` in the configuration, ``gateway channel add``) and every node
applies it. Like a cluster-scoped applier, a channel runs only on the leader:
``NodeChannels`` starts one ``ChannelRunner`` per defined, unpaused channel when this node
leads and stops them when it does not.

A runner's session with the source:

1. connect to one of the source's API addresses (the next one after a failure), with TLS and
   a read token when the definition has them, and check the source's cluster id (``Status``):
   learn it on first contact (proposed into the definition, so it is pinned from then on),
   refuse a source answering with another id, or with this cluster's own;
2. open a channel protocol session (``ChannelSource.Stream``, docs/replication.md "Channel
   protocol"): a hello with this cluster's id, the channel's name and
   ``after_epoch = (source, held)``, ``ignore_origins = [this cluster]``, where ``held`` is
   the newest epoch of the source this cluster holds whole (its apply-status table, as the
   leader's next proposal sees it -- so a new leader, a reconnect or a failover to another
   source resumes exactly where the log says); the source answers with a welcome, then
   streams Subscribe's events (``log_records``) and its progress; each time an epoch applies
   here, ``held`` is acknowledged upstream (``ChannelAck``: the source's slot for this
   channel keeps its log from there). A source that does not serve the protocol (an older
   node: UNIMPLEMENTED) is read with ``Subscribe`` as before;
3. assemble the stream into sealed source epochs (``EpochAssembler``) and hand each one to
   the driver (``submit_unit``), which builds the entry against its view of the replication
   state and proposes it; up to ``WINDOW`` epochs are in flight.

Any error (unreachable source, wrong cluster id, a position the source compacted, a refused
entry, a lost leadership) ends the session; the runner records it (``last_error``, state
``error``, or ``behind`` when the source no longer holds the channel's position) and starts
a new session after a backoff (0.2 s doubling to 5 s). Nothing of an
epoch is applied unless all of it is, and the position commits with the data, so a session
ending anywhere neither loses nor repeats an origin transaction. A channel whose seed state
asks for a seed installs it first (``seed_reader``; the commands: ``seed_admin``).

Size: ~680 lines because the runner and the channels' admin and status sit together; next
to split off are the admin commands (``NodeChannels.add``/``action``/``status``) into a
``channel_admin`` module beside ``seed_admin``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc

from gateway.conflict.resolve import COUNTERS
from gateway.core import messages
from gateway.node.base.config import CHANNEL_NAME, address_problem
from gateway.node.base.errors import NodeError
from gateway.node.base.validation import InvalidRequest
from gateway.node.replication import seed_admin
from gateway.node.replication.channel_lag import SourceWatch, merge_leader_channels, poll_paused
from gateway.node.replication.channel_reader import ChannelReader, ChannelSession, ReaderError
from gateway.node.replication.channel_roles import CHECK_S, check_roles
from gateway.node.replication.channel_source import BEHIND
from gateway.node.replication.channel_sources import shared_source_note, shared_source_warning
from gateway.node.replication.down_wire import TxnEvent
from gateway.node.replication.seed_reader import SeedError, SeedReader, seed_line
from gateway.node.state.epoch_guards import quarantine_prefix, read_quarantined
from gateway.replication import EpochAssembler, SealedEpoch, SourceRecord
from gateway.replication.epochs import EpochOrderError
from gateway.v1 import channel_pb2, gateway_pb2, gateway_pb2_grpc, replication_pb2

if TYPE_CHECKING:
    from gateway.node.loop.driver import RaftDriver
    from gateway.node.replication.slots import SlotKeeper

__all__ = ["ChannelRunner", "NodeChannels", "check_definition"]

log = logging.getLogger("gateway.node.replication.channels")

#: Sealed source epochs proposed and not yet applied, per channel.
WINDOW = 16
_BACKOFF_MIN, _BACKOFF_MAX = 0.2, 5.0
#: How long ``channel add`` waits for each source address to answer before adding anyway.
_PROBE_S = 2.0


def check_definition(d: replication_pb2.ChannelDefinition, cluster_id: int) -> None:
    """Raise ``InvalidRequest`` naming the field when ``d`` cannot be a channel of cluster
    ``cluster_id``."""
    if not CHANNEL_NAME.fullmatch(d.name):
        raise InvalidRequest("name", f"{d.name!r} is not a channel name ([A-Za-z0-9_.-], 1 to "
                             f"64 characters)")
    if not d.sources:
        raise InvalidRequest("sources", "give at least one HOST:PORT of the source cluster")
    for addr in d.sources:
        problem = address_problem(addr)
        if problem is not None:
            raise InvalidRequest("sources", f"{addr!r}: {problem}")
    if d.source_id == cluster_id:
        raise InvalidRequest("source_id", f"cluster {cluster_id} cannot replicate from itself")
    if d.ca_pem and "BEGIN CERTIFICATE" not in d.ca_pem:
        raise InvalidRequest("ca_pem", "not a PEM certificate")


class ChannelError(Exception):
    """A session with the source ended; ``str()`` is one line for the channel's status."""


@dataclass(slots=True)
class ChannelState:
    """What the leader's runner of one channel reports (``ChannelStatus``)."""

    state: str = "connecting"
    connected: str = ""
    last_error: str = ""
    epochs_applied: int = 0
    transactions_applied: int = 0
    source_epoch_seen: int = 0
    warning: str = ""  # the roles of the two ends do not fit (channel_roles), or ""
    protocol_version: int = 0  # of the session (0: Subscribe, a source without the protocol)
    source_progress: channel_pb2.SourceProgress | None = None  # the newest the source sent
    #: what the channel heard of its source (``channel_lag``): outlives the runner
    watch: SourceWatch = field(default_factory=SourceWatch)


class ChannelRunner:
    """Runs channel ``definition`` on the leader until cancelled; see the module docstring."""

    def __init__(self, driver: RaftDriver, definition: replication_pb2.ChannelDefinition,
                 watch: SourceWatch | None = None) -> None:
        self.driver = driver
        self.definition = definition
        self.state = ChannelState(watch=watch or SourceWatch())
        self._next_source = 0
        self._pending: deque[tuple[SealedEpoch,
                                   asyncio.Future[gateway_pb2.WriteResult | None]]] = deque()
        self._assembler: EpochAssembler | None = None
        self._reader: ChannelReader | None = None  # the session's stream
        self._stopped_by: str = ""  # why the role watch ended the session
        self._txns_base = driver.sm.channel_txns.get(definition.name, 0)
        self.seed: SeedReader | None = None  # while the channel's seed state asks for one

    @property
    def name(self) -> str:
        return self.definition.name

    async def run(self) -> None:
        backoff = _BACKOFF_MIN
        while True:
            started = time.monotonic()
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except (ChannelError, ReaderError, NodeError, InvalidRequest, EpochOrderError,
                    SeedError) as exc:
                self._failed(str(exc))
            except grpc.aio.AioRpcError as exc:
                self._failed(f"{self.state.connected or 'source'}: "
                             f"{exc.code().name}: {exc.details()}")
            except Exception as exc:  # a bug must not kill the runner: report and retry
                log.exception("channel %s: unexpected error", self.name)
                self._failed(f"{type(exc).__name__}: {exc}")
            finally:
                for _, fut in self._pending:
                    fut.cancel()
                self._pending.clear()
            if time.monotonic() - started > 10:
                backoff = _BACKOFF_MIN
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX)

    def _failed(self, message: str) -> None:
        if message != self.state.last_error:
            log.warning("channel %s: %s", self.name, message)
        # a source that no longer holds this channel's position: only a resync helps
        self.state.state = "behind" if BEHIND in message else "error"
        self.state.last_error = message

    def _channel(self, target: str) -> grpc.aio.Channel:
        d = self.definition
        opts = [("grpc.max_receive_message_length", 64 << 20)]
        if d.ca_pem:
            creds = grpc.ssl_channel_credentials(d.ca_pem.encode())
            return grpc.aio.secure_channel(target, creds, options=opts)
        return grpc.aio.insecure_channel(target, options=opts)

    async def _session(self) -> None:
        d = self.definition
        drv = self.driver
        me = drv.opts.cluster_id
        target = d.sources[self._next_source % len(d.sources)]
        self._next_source += 1
        if not self.state.last_error:  # a retry keeps reporting the failure it retries
            self.state.state = "connecting"
        self.state.connected = target
        md = (("authorization", f"Bearer {d.token}"),) if d.token else None
        async with self._channel(target) as ch:
            stub = gateway_pb2_grpc.GatewayStub(ch)
            st = await stub.Status(gateway_pb2.StatusRequest(), metadata=md, timeout=5.0)
            if st.cluster_id == me:
                raise ChannelError(f"{target} is a node of this cluster ({me}), not a source")
            if d.source_id and st.cluster_id != d.source_id:
                raise ChannelError(f"{target} answers as cluster {st.cluster_id}, but the "
                                   f"channel's source is cluster {d.source_id}")
            source = st.cluster_id
            self._check_roles(target, st)
            if not d.source_id:
                learned = replication_pb2.ChannelDefinition()
                learned.CopyFrom(d)
                learned.source_id = source
                await drv.submit_entry(messages.pack(
                    replication_pb2.ChannelCommand(definition=learned)))
                self.definition = d = learned
            other = next((n for n in drv.sm.seeds if n != self.name), None)
            if other is not None:  # its rows would race the snapshot being installed
                raise ChannelError(f"waiting for the seed of channel {other} to end")
            if self.name in drv.sm.seeds:  # seed_reader: a snapshot first
                if self.seed is None:
                    self.seed = SeedReader(drv, self.name, source)
                self.state.state = "seeding"
                await self.seed.run(ch, md, len(d.sources))
            view = drv.replication_view()
            held = view.held(source)
            assembler = self._assembler = EpochAssembler(held)
            self._stopped_by = ""
            watch = asyncio.create_task(self._watch_roles(stub, md, target))
            try:
                reader = self._reader = ChannelReader(
                    ChannelSession(me, self.name, source, held, target,
                                   dict(view.watermarks)), self.state)
                async for ev in reader.events(ch, stub, md):
                    for sealed in assembler.add(_record(ev)):
                        await self._submit(source, sealed)
                    self._reap()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # the runner is being stopped
                self._reap()  # _settled cancelled the stream: an epoch failed; raises it
            finally:
                watch.cancel()
                reader.close()
                self._reader = None
                self._assembler = None
            if self._stopped_by:
                raise ChannelError(self._stopped_by)
            raise ChannelError(f"{target}: the change stream ended")

    def _check_roles(self, target: str, st: gateway_pb2.StatusResponse) -> None:
        """Raise ``ChannelError`` when this cluster and the source (its ``Status``) are both
        PRIMARY for epoch-function tables; keep the warning of a pair without a PRIMARY
        (``channel_roles``)."""
        sm = self.driver.sm
        got = check_roles(self.driver.opts.cluster_id, sm.conflict_role,
                          ((r.pattern, r.function) for r in sm.conflict_rules.values()),
                          sm.conflict_functions, target, st)
        self.state.warning = got.warning or ""
        if got.problem is not None:
            raise ChannelError(got.problem)

    async def _watch_roles(self, stub: gateway_pb2_grpc.GatewayStub,
                           md: tuple[tuple[str, str], ...] | None, target: str) -> None:
        """While the session runs, ask the source for its role again every ``CHECK_S``
        seconds (either end's role may change) and end the session when the roles clash."""
        while True:
            await asyncio.sleep(CHECK_S)
            try:
                st = await stub.Status(gateway_pb2.StatusRequest(), metadata=md, timeout=5.0)
                self._check_roles(target, st)
            except ChannelError as exc:
                self._stopped_by = str(exc)
                if self._reader is not None:
                    self._reader.close()
                return
            except grpc.aio.AioRpcError:
                continue  # the stream reports a lost source itself
            except Exception:  # a bug must not end the session silently: log, keep on
                log.exception("channel %s: role check failed", self.name)

    async def _submit(self, source: int, sealed: SealedEpoch) -> None:
        self.state.source_epoch_seen = max(self.state.source_epoch_seen, sealed.epoch)
        self.state.watch.sealed(sealed.epoch, sealed.sealed_at_ns)
        if not sealed.items:
            return
        while len(self._pending) >= WINDOW:
            await self._wait_oldest()
        fut = self.driver.submit_unit(self.name, source, sealed)
        fut.add_done_callback(self._settled)
        self._pending.append((sealed, fut))

    def _settled(self, fut: asyncio.Future[gateway_pb2.WriteResult | None]) -> None:
        """An epoch's outcome, as soon as it is known: applied ones are counted now (the
        status is current), and a failed one (e.g. refused here) ends the session now, not
        at the source's next event -- an idle source may send none for long."""
        if fut.cancelled():
            return
        if fut.exception() is not None:
            if self._reader is not None:
                self._reader.close()
            return
        self._reap(stop_at_failure=True)

    async def _wait_oldest(self) -> None:
        fut = self._pending[0][1]
        await asyncio.shield(fut)
        self._reap()

    def _reap(self, stop_at_failure: bool = False) -> None:
        """Take the results of applied epochs off the window; raise on a refused one (or,
        with ``stop_at_failure``, leave it at the front for the session to raise)."""
        while self._pending and self._pending[0][1].done():
            fut = self._pending[0][1]
            if stop_at_failure and (fut.cancelled() or fut.exception() is not None):
                return
            sealed, fut = self._pending.popleft()
            res = fut.result()  # raises what the driver raised
            if res is not None:
                if self._reader is not None:
                    self._reader.ack(self.driver.sm.replication.held(self._reader.s.source),
                                     sealed)
                self.state.last_error = ""
                self.state.epochs_applied += 1
                # what the entries applied (the state machine counts them), not what was
                # read: held transactions, quarantined or rejected ones are not counted
                self.state.transactions_applied = (
                    self.driver.sm.channel_txns.get(self.name, 0) - self._txns_base)

    def status(self) -> ChannelState:
        return self.state

    def applied(self, held: int) -> int:
        """The source epoch this cluster is caught up to, given it holds up to ``held``:
        also the sealed epochs read that carried nothing for it (only its own transactions,
        filtered at the source), once nothing before them waits."""
        if self.state.state != "running" or self._pending:
            return held
        return max(held, self.state.source_epoch_seen)


def _record(ev: gateway_pb2.ChangeEvent | TxnEvent) -> SourceRecord:
    if isinstance(ev, TxnEvent):  # read as its item from the stream's bytes (``down_wire``)
        plain = not ev.item.transaction.conditions  # then its bytes are the item's
        return SourceRecord(ev.log_index, ev.epoch, item=_unconditioned(ev.item),
                            raw=ev.raw if plain else None)
    if ev.HasField("epoch_marker"):
        return SourceRecord(ev.log_index, ev.epoch, marker_epoch=ev.epoch_marker.epoch,
                            sealed_at_ns=ev.epoch_marker.sealed_at_ns)
    if ev.HasField("transaction"):
        item = _unconditioned(replication_pb2.ReplicatedItem(transaction=ev.transaction))
    elif ev.HasField("schema_event"):
        item = replication_pb2.ReplicatedItem(schema_event=ev.schema_event)
    else:
        item = replication_pb2.ReplicatedItem(apply_status=ev.apply_status)
    return SourceRecord(ev.log_index, ev.epoch, item=item)


def _unconditioned(item: replication_pb2.ReplicatedItem) -> replication_pb2.ReplicatedItem:
    """``item`` without its transaction's conditions. They were decided where the write was
    made (it was applied there, or it would not be in the feed); this cluster never evaluates
    them again: conflicts between clusters are the conflict rules' job (docs/node.md)."""
    if item.transaction.conditions:
        item.transaction.ClearField("conditions")
    return item


class NodeChannels:
    """The channels of one node: runners on the leader, status everywhere."""

    def __init__(self, driver: RaftDriver,
                 configured: tuple[replication_pb2.ChannelDefinition, ...] = ()) -> None:
        self.driver = driver
        self._configured = configured
        self._runners: dict[str, tuple[replication_pb2.ChannelDefinition, ChannelRunner,
                                       asyncio.Task[None]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._config_proposed_term = -1
        #: What each channel heard of its source (``channel_lag``), kept across its runners
        #: and pauses while this node leads.
        self._watch: dict[str, SourceWatch] = {}
        #: Paused channels asking their source how far it is (``poll_paused``).
        self._polls: dict[str, asyncio.Task[None]] = {}
        #: Run once per term on the leader before anything else (the configuration file's
        #: conflict rules: no epoch is applied without them); a ``NodeError`` from it keeps
        #: the runners stopped until it succeeds.
        self.prepare: Callable[[], Awaitable[None]] | None = None
        #: The slots of other clusters' channels reading this log (``drop-slot``; set by
        #: the node).
        self.slots: SlotKeeper | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="channels")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._stop_all()

    async def _stop_all(self) -> None:
        for name in list(self._runners):
            await self._stop(name)
        self._reconcile_polls({})

    def _reconcile_polls(self, paused: dict[str, replication_pb2.ChannelDefinition]) -> None:
        """Poll the sources of the ``paused`` channels; stop polling any other."""
        for name in list(self._polls):
            if name not in paused or self._polls[name].done():
                self._polls.pop(name).cancel()
        for name, d in paused.items():
            if name not in self._polls and d.sources:
                opener = ChannelRunner(self.driver, d)._channel
                self._polls[name] = asyncio.create_task(
                    poll_paused(self._watch.setdefault(name, SourceWatch()), d, opener),
                    name=f"channel-poll-{name}")

    async def _stop(self, name: str) -> None:
        _, _, task = self._runners.pop(name)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def _loop(self) -> None:
        while True:
            try:
                await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("channels: reconcile failed")
            await asyncio.sleep(0.1)

    async def _reconcile(self) -> None:
        drv = self.driver
        if not drv.is_leader or drv.removed:
            await self._stop_all()
            return
        term = drv.raw.raft.term
        if self._config_proposed_term != term:
            if self.prepare is not None:
                try:
                    await self.prepare()
                except NodeError as exc:
                    log.warning("channels: not started: %s", exc)
                    await self._stop_all()
                    return
            self._config_proposed_term = term
            if self._configured:
                await self._propose_configured()
        want = {n: d for n, d in self.driver.sm.channels.items() if not d.paused}
        for name in list(self._runners):
            d, runner, _ = self._runners[name]
            now = want.get(name)
            if now is None or not _same_source(now, runner.definition):
                await self._stop(name)
        self._reconcile_polls({n: d for n, d in self.driver.sm.channels.items() if d.paused})
        for name in [n for n in self._watch if n not in self.driver.sm.channels]:
            del self._watch[name]  # removed: a channel added again starts knowing nothing
        for name, watch in self._watch.items():
            d = self.driver.sm.channels[name]
            watch.prune(self.driver.sm.replication.held(d.source_id) if d.source_id else 0)
        for name, d in want.items():
            if name not in self._runners:
                watch = self._watch.setdefault(name, SourceWatch())
                runner = ChannelRunner(self.driver, d, watch)
                task = asyncio.create_task(runner.run(), name=f"channel-{name}")
                self._runners[name] = (d, runner, task)

    async def _propose_configured(self) -> None:
        """Propose the ``[[channels]]`` of the configuration file that the replicated state
        lacks or holds differently (the file wins for the channels it names; a source id the
        cluster learned is kept when the file gives none)."""
        current = self.driver.sm.channels
        for d in self._configured:
            have = current.get(d.name)
            want = replication_pb2.ChannelDefinition()
            want.CopyFrom(d)
            if have is not None:
                if not want.source_id:
                    want.source_id = have.source_id
                want.paused = have.paused
                if have == want:
                    continue
            try:
                await self.driver.submit_entry(messages.pack(
                    replication_pb2.ChannelCommand(definition=want)))
            except NodeError as exc:
                log.warning("channels: cannot record channel %s from the configuration: %s",
                            d.name, exc)
                self._config_proposed_term = -1
                return

    # -- admin ----------------------------------------------------------------------------------

    async def add(self, d: replication_pb2.ChannelDefinition, replace: bool,
                  seed: bool = False, merge: bool = False) -> gateway_pb2.AdminResponse:
        """Add channel ``d``; with ``seed``, seeded from a snapshot of the source first
        (``seed_admin``: refused on a cluster holding rows unless ``merge``)."""
        check_definition(d, self.driver.opts.cluster_id)
        if merge and not seed:
            raise InvalidRequest("merge", "--merge goes with --seed")
        have = self.driver.sm.channels.get(d.name)
        if have is not None and not replace:
            raise InvalidRequest("name", f"channel {d.name!r} exists (replace it with "
                                 f"--replace, or remove it first)")
        for other in self.driver.sm.channels.values():
            if other.name != d.name and d.source_id and other.source_id == d.source_id:
                raise InvalidRequest("source_id", f"channel {other.name!r} already replicates "
                                     f"from cluster {d.source_id}")
        if seed:
            seed_admin.check_seedable(self.driver, d.name, merge)
        note = await self._probe(d)
        if seed:  # before the definition: its runner finds the seed state when it starts
            await seed_admin.request_seed(self.driver, d.name, d.source_id, merge)
            await self._stop_all()  # the other channels wait for the seed (they restart)
        index = await self.driver.submit_entry(messages.pack(
            replication_pb2.ChannelCommand(definition=d)))
        if seed:
            return seed_admin.seed_response(d.name, note, index)
        return gateway_pb2.AdminResponse(message=f"channel {d.name} added{note}",
                                         log_index=index)

    async def _probe(self, d: replication_pb2.ChannelDefinition) -> str:
        """Ask the source's addresses for their cluster id before the channel is added:
        raise ``InvalidRequest`` when one answers as this cluster; return what the answer to
        ``channel add`` adds to "channel NAME added": why the channel cannot run yet (no
        address answered, or one answers as another cluster than the definition's
        ``source_id``), "" when the first that answers is the source."""
        me = self.driver.opts.cluster_id
        md = (("authorization", f"Bearer {d.token}"),) if d.token else None
        runner = ChannelRunner(self.driver, d)
        problems = []
        for addr in d.sources:
            try:
                async with runner._channel(addr) as ch:
                    st = await gateway_pb2_grpc.GatewayStub(ch).Status(
                        gateway_pb2.StatusRequest(), metadata=md, timeout=_PROBE_S)
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in (grpc.StatusCode.UNAVAILABLE,
                                      grpc.StatusCode.DEADLINE_EXCEEDED):
                    return (f"; but {addr} answers {exc.code().name}: {exc.details()}: the "
                            f"channel will not run until it is accepted")
                problems.append(f"{addr}: {exc.code().name}")
                continue
            if st.cluster_id == me:
                raise InvalidRequest("sources", f"{addr} is a node of this cluster ({me}): a "
                                     f"cluster cannot replicate from itself")
            if d.source_id and st.cluster_id != d.source_id:  # the runner reports it
                return (f"; but {addr} answers as cluster {st.cluster_id}, not as source_id "
                        f"{d.source_id}: the channel will not run until they agree")
            return shared_source_note(self.driver.sm.channels, d.name, st.cluster_id)
        return (f"; its source is not reachable yet ({'; '.join(problems)}): the channel "
                f"retries until it is (gateway channel status {d.name})")

    async def action(self, name: str, action: str, confirm: bool = False
                     ) -> gateway_pb2.AdminResponse:
        if action == "drop-slot":  # a slot of another cluster's channel reading this log
            if self.slots is None:
                raise InvalidRequest("action", "this node keeps no slots")
            index = await self.driver.submit_entry(self.slots.drop_command(name))
            return gateway_pb2.AdminResponse(
                message=f"slot {name} dropped: the log it held goes at the next compaction "
                        f"(a reader still connected creates it again with its next ack)",
                log_index=index)
        have = self.driver.sm.channels.get(name)
        if have is None:
            known = ", ".join(sorted(self.driver.sm.channels)) or "none"
            raise InvalidRequest("name", f"no channel {name!r} (channels: {known})")
        if action == "quarantine":
            return gateway_pb2.AdminResponse(message=self._quarantine_listing(name))
        if action == "resync":
            text, index = await seed_admin.resync_report(
                self.driver, have, confirm, ChannelRunner(self.driver, have)._channel)
            if index:  # the next runners: this one seeds, the others wait for it
                await self._stop_all()
            return gateway_pb2.AdminResponse(message=text, log_index=index)
        d = replication_pb2.ChannelDefinition()
        d.CopyFrom(have)
        if action == "remove":
            await seed_admin.cancel_seed(self.driver, name)
            cmd = replication_pb2.ChannelCommand(definition=d, remove=True)
        elif action in ("pause", "resume"):
            d.paused = action == "pause"
            cmd = replication_pb2.ChannelCommand(definition=d)
        else:
            raise InvalidRequest("action", f"{action!r} is not remove, pause, resume, "
                                 f"quarantine, resync or drop-slot")
        index = await self.driver.submit_entry(messages.pack(cmd))
        done = {"remove": "removed", "pause": "paused", "resume": "resumed"}[action]
        return gateway_pb2.AdminResponse(message=f"channel {name} {done}", log_index=index)

    def _quarantine_listing(self, name: str) -> str:
        """The transactions channel ``name`` quarantined (``epoch_guards``), one block each:
        GTID, source epoch, cause, then the transaction as JSON."""
        from google.protobuf import json_format

        got = read_quarantined(self.driver.sm.store.scan_prefix(quarantine_prefix(name)))
        if not got:
            return f"channel {name}: no quarantined transactions"
        out = [f"channel {name}: {len(got)} quarantined transaction(s)"]
        for q in got:
            out.append(f"{q.gtid}\tcluster {q.source_id} epoch {q.source_epoch}\t{q.cause}")
            out.append(json.dumps(json_format.MessageToDict(
                q.transaction, preserving_proto_field_name=True), sort_keys=True))
        return "\n".join(out)

    # -- status ---------------------------------------------------------------------------------

    def _conflict_counters(self, name: str, d: replication_pb2.ChannelDefinition
                           ) -> dict[str, int]:
        """MySQL's counters of what channel ``name`` brought in (every one, 0 until counted,
        once the cluster has conflict rules or counted something) and the max replicated
        epoch of its source (the newest epoch of this cluster the source had applied)."""
        sm = self.driver.sm
        got = sm.conflict_counters.get(name, {})
        if not (got or sm.conflict_rules):
            return {}
        out = {**dict.fromkeys(COUNTERS, 0), **got}
        if d.source_id:
            out["max_replicated_epoch"] = sm.replication.max_replicated_epoch(d.source_id)
        return out

    def status(self) -> list[gateway_pb2.ChannelStatus]:
        """Every channel: the replicated fields on any node, the live ones (state, lag from
        the source's progress: ``channel_lag``) on the leader; a follower says "on the
        leader N" (its API asks the leader for them: ``merge_leader_channels``)."""
        sm = self.driver.sm
        leads = self.driver.is_leader and not self.driver.removed
        out = []
        for name in sorted(sm.channels):
            d = sm.channels[name]
            held = sm.replication.held(d.source_id) if d.source_id else 0
            st = gateway_pb2.ChannelStatus(name=name, sources=list(d.sources),
                                           source_id=d.source_id, paused=d.paused,
                                           applied_epoch=held,
                                           replicated_time_ns=sm.replicated_time.get(
                                               d.source_id, 0) if d.source_id else 0,
                                           conflicts=self._conflict_counters(name, d))
            got = self._runners.get(name)
            if leads:
                applied = got[1].applied(held) if got is not None else held
                live = (got is not None and got[1].state.state == "running") or (
                    d.paused and name in self._polls)
                # no insert here: the metrics thread calls this too
                lag = (self._watch.get(name) or SourceWatch()).figures(applied, live)
                st.source_epoch = lag.source_epoch
                st.source_sealed_at_ns = lag.source_sealed_at_ns
                st.last_heard_ns = lag.last_heard_ns
                st.lag_epochs = lag.lag_epochs
                st.lag_seconds = lag.lag_seconds
                st.since_last_heard = lag.since_last_heard
            if d.paused and got is None:
                st.state = "paused"
            elif not leads:
                lead = self.driver.leader_id
                st.state = f"on the leader {lead}" if lead else "on the leader (none now)"
            elif got is None:
                st.state = "stopped"
            else:
                s = got[1].state
                st.state = s.state
                st.connected = s.connected
                st.last_error = s.last_error or (f"warning: {s.warning}" if s.warning else "")
                st.epochs_applied = s.epochs_applied
                st.transactions_applied = s.transactions_applied
                if got[1].seed is not None and name in sm.seeds:
                    st.seed = got[1].seed.progress.line()
            if name in sm.seeds and not st.seed:
                st.seed = seed_line(sm.seeds[name])
            held = st.conflicts.get("quarantined_trans_count", 0)
            if held and not st.last_error:  # replicated state: shown on every node
                st.last_error = (f"warning: {held} transaction(s) quarantined (a schema "
                                 f"clash with this cluster): gateway channel quarantine "
                                 f"{name}")
            if not st.last_error:
                st.last_error = shared_source_warning(sm.channels, name, d.source_id)
            out.append(st)
        return out

    #: A follower's API gives its statuses the leader's live fields (``channel_lag``).
    take_leader = staticmethod(merge_leader_channels)

    def peers(self) -> list[gateway_pb2.PeerStatus]:
        rep = self.driver.sm.replication
        return [gateway_pb2.PeerStatus(cluster_id=p, max_replicated_epoch=
                                       rep.max_replicated_epoch(p), held_epoch=rep.held(p))
                for p in rep.peers()]


def _same_source(a: replication_pb2.ChannelDefinition,
                 b: replication_pb2.ChannelDefinition) -> bool:
    """Whether a runner of ``b`` serves definition ``a`` (a source id the runner learned is
    in both once its proposal applied)."""
    return (list(a.sources) == list(b.sources) and a.token == b.token
            and a.ca_pem == b.ca_pem and a.source_id == b.source_id)
