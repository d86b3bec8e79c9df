"""``GatewayNode``: one running gateway node -- storage, Raft driver, peer transport, public
API, appliers, health, metrics -- started and stopped as a unit.

Startup order: open the Raft log (bootstrap a new cluster from ``peers`` unless ``join``),
open the store (re-import the newest snapshot if the store is behind it), create the driver
(its core re-delivers the committed entries after the store's durable applied index; the
membership changes between the newest snapshot and that index are replayed from the log
right away), connect peers, serve ``Peer`` on ``listen`` and ``Gateway`` (+ health,
reflection) on ``api``, start the driver (it first delivers the replayed changes'
``_on_membership`` calls: peer addresses, and a stop if this node replayed its own
removal), start the appliers (``NodeAppliers``: node-scoped dispatchers now, cluster-scoped
ones whenever this node leads). ``stop`` reverses it: API first (new calls get
UNAVAILABLE), appliers (positions saved), the Raft loop, transport, then the store is flushed
and the WAL closed, so a restart replays nothing.

Size: ~660 lines because ``GatewayNode`` is the composition root: the start-up order, the
stop order and the reactions that cross rooms (log damage, driver failure, membership,
health) must read in one place. The admin operations live in ``api/admin``, the peer socket's
directory in ``storage/peer_socket_dir``; next to leave: the start-up check of the store and
the appliers' positions against the log (``_check_consistency``, beside
``state/consistency``) and the appliers' construction (``_start_appliers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import ssl
import tempfile
from collections.abc import Mapping
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from gateway import plugins
from gateway.appliers.contract import scope_of
from gateway.appliers.dispatcher import DispatcherConfig
from gateway.appliers.position import PositionStore, PositionStoreError
from gateway.conflict import (
    ConflictConfigError,
    ConflictFunctionsError,
    FunctionSpec,
    RuleSet,
    with_plugins,
)
from gateway.core.fileio import local_fs
from gateway.core.lsm.errors import CorruptionError, LSMError
from gateway.core.wal import WalError
from gateway.node.api import admin
from gateway.node.api.api import GatewayServicer
from gateway.node.api.api_handlers import add_gateway_service, add_reads_service
from gateway.node.api.channel_stream import ChannelSourceServicer, add_channel_source_service
from gateway.node.api.exposure import exposure_warnings, peer_port_mode
from gateway.node.api.grpc_server import aio_server
from gateway.node.api.log_read import LogReadServicer
from gateway.node.api.metrics import serve_metrics
from gateway.node.api.schema_service import SchemaServicer
from gateway.node.api.security import (
    TokenAuthInterceptor,
    Tokens,
    api_server_credentials,
    load_tokens,
    peer_channel_credentials,
    peer_ssl_contexts,
)
from gateway.node.appliers.applier_host import NodeAppliers
from gateway.node.appliers.feed import ChangeFeed
from gateway.node.base.config import (
    ChannelConfig,
    NodeConfig,
    parse_address,
    peer_port_problem,
)
from gateway.node.loop.driver import DriverOptions, RaftDriver
from gateway.node.peers.peer_stream import PeerListener
from gateway.node.peers.transport import CHANNEL_OPTIONS, PeerServicer, PeerTransport
from gateway.node.replication.channel_source import ChannelSource
from gateway.node.replication.channels import NodeChannels
from gateway.node.replication.conflicts import NodeConflicts
from gateway.node.replication.slots import SlotKeeper
from gateway.node.state import keys
from gateway.node.state.alarms import SpaceMonitor, driver_proposer, run_monitor
from gateway.node.state.consistency import (
    RECOVER_HINT,
    InconsistentStateError,
    check_log_covers_state,
    check_position_file,
)
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.storage.peer_socket_dir import (
    PEER_SOCKET_DIR,
    PeerSocketDirError,
    make_peer_dir,
)
from gateway.node.storage.refused_start import paths_under, remove_made, undo_refused_start
from gateway.node.storage.snapshot_files import (
    ArchiveReader,
    SnapshotArchiveError,
    SnapshotMetadataError,
)
from gateway.node.storage.storage import LogDamagedError, RaftLogStorage
from gateway.node.storage.storage_errors import client_error
from gateway.v1 import (
    gateway_pb2,
    log_read_pb2_grpc,
    peer_pb2_grpc,
    replication_pb2,
    schema_pb2_grpc,
)

if TYPE_CHECKING:
    import pluggy

__all__ = ["PEER_SOCKET_DIR", "GatewayNode", "NodeStartError"]

log = logging.getLogger("gateway.node")
#: How long a leader stopping gracefully waits for the marker sealing its open epoch.
_SEAL_TIMEOUT_S = 1.0
#: The dispatcher of the embedded SQLite applier. SQLite has one writer: worker threads only
#: add contention (their batches serialize on SQLite's lock), and reducing a window of
#: transactions as one unit makes one SQLite transaction of up to ``max_batch`` rows instead of
#: one unit per log transaction. The dispatcher flushes a partial window after every read, so
#: a lone write is not held back. Reads of up to 1,024 entries (4 MiB at most, the source's
#: cap): under load each read is one SQLite transaction, and 10 B one-row transactions then
#: cost SQLite fewer bytes and the applier less CPU than reads of 256 (docs/benchmarks.md,
#: "Reads of 1,024 entries").
SQLITE_DISPATCH = DispatcherConfig(poll_interval=0.05, threads=1, window=64, read_batch=1024)


class NodeStartError(Exception):
    """The node cannot start (port in use, data directory locked, ...); one line."""


def _channel_definition(c: ChannelConfig) -> replication_pb2.ChannelDefinition:
    ca = ""
    if c.ca:
        with open(c.ca) as f:
            ca = f.read()
    return replication_pb2.ChannelDefinition(name=c.name, sources=list(c.sources),
                                             source_id=c.source_id, token=c.token, ca_pem=ca)


class GatewayNode:
    """See the module docstring. Use ``await start()`` / ``await stop()`` in one event loop."""

    def __init__(self, config: NodeConfig,
                 plugin_manager: pluggy.PluginManager | None = None) -> None:
        self.config = config
        self._pm = plugin_manager
        self.appliers: NodeAppliers | None = None
        self._servers: list[grpc.aio.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.api_port = 0
        self.peer_port = 0
        self.peer_listener: PeerListener | None = None
        self._peer_dir = ""
        self._peer_ssl: ssl.SSLContext | None = None
        self._stopped = asyncio.Event()
        self._closed = asyncio.Event()
        self._removal_stop: asyncio.Task[None] | None = None
        self._failure_stop: asyncio.Task[None] | None = None
        #: The bearer tokens (``tokens_file``), checked by the API and on forwarded calls;
        #: None: no tokens (every call allowed).
        self.tokens: Tokens | None = None
        #: Why the node stopped itself, when it failed (None: running, or a clean stop).
        self.failure: str | None = None
        self._damage_snapshot: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the node; raises ``NodeStartError`` (or the applier configuration's error)
        naming what failed. A start that fails leaves no half-made data directory: what it
        created in a directory that was missing or empty is removed again, and an existing
        directory is left as it was found (``refused_start``)."""
        cfg = self.config
        existed = os.path.isdir(cfg.data_dir)
        fresh = not existed or not os.listdir(cfg.data_dir)
        found = paths_under(cfg.data_dir) if existed and not fresh else {}
        try:
            await self._start()
        except BaseException:
            # every failure path of _start closed what it had opened before raising
            storage = getattr(self, "storage", None)
            if fresh:
                remove_made(cfg.data_dir, keep_dir=existed)
            elif storage is not None:  # as found: the next start sees the same damage
                undo_refused_start(cfg.data_dir, found, storage)
            raise

    async def _start(self) -> None:
        cfg = self.config
        reason = peer_port_problem(cfg)  # also for a config made without validate()
        if reason is not None:
            raise NodeStartError(reason)
        self._loop = asyncio.get_running_loop()
        os.makedirs(cfg.data_dir, exist_ok=True)
        raft_dir = os.path.join(cfg.data_dir, "raft")
        try:
            self.storage = RaftLogStorage(raft_dir, fsync=cfg.fsync,
                                          cache_bytes=cfg.log_cache_bytes)
        except (WalError, SnapshotMetadataError, SnapshotArchiveError, RuntimeError,
                OSError) as exc:
            # Damage the WAL's recovery may not resolve names its file and byte offset.
            raise NodeStartError(f"cannot open the Raft log: {exc}") from None
        if self.storage.is_empty() and not cfg.join:
            self.storage.bootstrap(tuple(cfg.peer_map()))
            log.info("bootstrapped a new cluster with members %s", sorted(cfg.peer_map()))
        try:
            self.sm = StoreStateMachine(cfg.data_dir, cluster_id=cfg.cluster_id,
                                        verify_tables=True, memtable_bytes=cfg.memtable_bytes,
                                        max_immutable=cfg.max_immutable_memtables,
                                        cache_bytes=cfg.block_cache_bytes)
        except Exception as exc:
            self.storage.close()
            hint = f"; {RECOVER_HINT}" if isinstance(exc, CorruptionError) else ""
            raise NodeStartError(f"{cfg.data_dir}: cannot open the store: {exc}{hint}") \
                from None
        if self.sm.store.manifest_rebuilt:
            log.warning("%s: the store's MANIFEST was missing: started an empty store (the "
                        "tables it named are unreachable without it) and rebuilt it from "
                        "the newest snapshot (index %d) and the Raft log after it",
                        self.sm.path, self.storage.snapshots.metadata.index)
        self.sm.load_functions = self._conflict_functions
        for i, rule in enumerate(cfg.conflicts):  # a plugin's function: load, check it now
            try:
                RuleSet(functions=self.sm.functions(rule.function), checked=False).check(rule)
            except (ConflictConfigError, ConflictFunctionsError) as exc:
                self.sm.close()
                self.storage.close()
                raise NodeStartError(f"conflicts[{i}]: {exc}") from None
        snap = self.storage.snapshots.metadata
        try:
            if snap.index and self.sm.durable_applied_index < snap.index:
                image = self.storage.snapshot().data
                # the snapshot files hand out a reader over them (bytes when bootstrapped)
                assert isinstance(image, bytes | ArchiveReader)
                self.sm.restore(image)
                self.sm.mark_applied(snap.index)
            self._check_consistency()
        except (InconsistentStateError, PositionStoreError, SnapshotArchiveError, LSMError,
                OSError) as exc:
            await self._close_storage()
            raise NodeStartError(str(exc)) from None
        tls = peer_ssl_contexts(cfg)
        self._peer_ssl = tls[0] if tls is not None else None
        self.transport = PeerTransport(cfg.node_id, cfg.api, cfg.listen,
                                       peer_channel_credentials(cfg),
                                       self._report, tls[1] if tls is not None else None)
        try:
            self.driver = RaftDriver(
                DriverOptions(cfg.node_id, cfg.cluster_id, cfg.tick_ms / 1000,
                              cfg.election_ticks, cfg.heartbeat_ticks, cfg.epoch_ms / 1000,
                              cfg.snapshot_entries,
                              snapshot_log_percent=cfg.snapshot_log_percent,
                              commit_linger_s=cfg.commit_linger_ms / 1000),
                self.storage, self.sm, self.transport.send, self._on_membership)
        except RuntimeError as exc:  # e.g. a log that cannot replay its configuration
            await self._close_storage()
            raise NodeStartError(str(exc)) from None
        except LogDamagedError as exc:  # an entry the replay reads no longer verifies
            await self._close_storage()
            raise NodeStartError(f"cannot read the Raft log: {exc}; {RECOVER_HINT}") from None
        self.storage.on_damage = self._on_log_damage
        self.driver.compact_floor = self._log_floor
        #: The NOSPACE alarm's check of this node's log disk (``alarms``), before the API
        #: serves: Status and writes consult it.
        self.space = SpaceMonitor(cfg.node_id, cfg.data_dir, self.storage.wal.directory,
                                  cfg.min_free_bytes, local_fs().free_bytes,
                                  driver_proposer(self.driver.control), lambda: self.sm.alarms)
        self.driver.on_failure = self._on_driver_failure
        peers = dict(cfg.peer_map())
        for k, v in self.sm.store.scan_prefix(keys.meta_key("peer:")):
            ctx = json.loads(v)
            nid = int(k[len(keys.meta_key("peer:")):])
            if ctx.get("peer"):
                peers[nid] = ctx["peer"]
            if ctx.get("api"):
                self.transport.api_of[nid] = ctx["api"]
        for nid, addr in peers.items():
            self.transport.set_peer(nid, addr)
        self.change_feed = ChangeFeed(self.driver)
        #: The slots of other clusters' channels reading this log, and the source side of
        #: the channel protocol (docs/replication.md, "Channel protocol").
        self.slots = SlotKeeper(self.driver, cfg.retention, self.change_feed.resume_index,
                                driver_proposer(self.driver.control))
        self.channel_source = ChannelSource(self.driver, self.slots,
                                            self.change_feed.start_index)
        self.servicer = GatewayServicer(self)
        try:
            await self._serve()
        except Exception:
            await self._close_storage()
            raise
        # From here the node votes and acknowledges appends: what recovery changed stays.
        self.storage.keep_recovery()
        self.driver.start()
        self._tasks.append(asyncio.create_task(self._health_loop(), name="health"))
        self._tasks.append(asyncio.create_task(
            run_monitor(self.space, cfg.space_check_ms / 1000), name="space"))
        self._tasks.append(asyncio.create_task(self.slots.run(), name="slots"))
        self.channels = NodeChannels(self.driver, tuple(_channel_definition(c)
                                                        for c in cfg.channels))
        self.channels.slots = self.slots
        self.channels.start()
        self.conflicts = NodeConflicts(self.driver, cfg.conflict_role, cfg.conflicts)
        self.channels.prepare = self.conflicts.propose_configured
        try:
            self._start_appliers()
        except (InconsistentStateError, PositionStoreError) as exc:
            await self.stop()
            raise NodeStartError(str(exc)) from None
        except BaseException:
            # e.g. ApplierConfigError (the caller prints it in one line): the servers, the
            # driver and the storage started above are stopped before the error leaves.
            await self.stop()
            raise
        if cfg.metrics:
            serve_metrics(self, cfg.metrics)
        log.info("node %d serving: api %s, peers %s, data %s", cfg.node_id, cfg.api,
                 cfg.listen, cfg.data_dir)
        log.info("%s", peer_port_mode(cfg))
        for warning in exposure_warnings(cfg):
            log.warning("SECURITY: %s", warning)

    def _check_consistency(self) -> None:
        """Refuse to start when the store, a replicated applier position or the hard state's
        commit index is ahead of the recovered log (``gateway.node.state.consistency``)."""
        storage = self.storage
        check_log_covers_state(
            storage.wal.directory, last_index=storage.last_index(),
            snapshot_index=storage.snapshots.metadata.index,
            commit_index=storage.initial_state()[0].commit,
            store_applied=self.sm.durable_applied_index,
            replicated_positions={name: pos.log_index
                                  for name, pos in self.sm.applier_positions.items()})
        state_dir = os.path.join(self.config.data_dir, "appliers")
        names = sorted(n[: -len(".position")] for n in os.listdir(state_dir)
                       if n.endswith(".position")) if os.path.isdir(state_dir) else []
        for name in names:  # refused here; the applier that continues from it says so
            check_position_file(PositionStore(state_dir, name), storage, report=False)

    async def _serve(self) -> None:
        cfg = self.config
        # Loaded before either server starts: the peer port's Forward checks them too.
        self.tokens = load_tokens(cfg.tokens_file) if cfg.tokens_file else None
        # One request-size limit: gRPC refuses a larger API request (RESOURCE_EXHAUSTED, the
        # limit in its message) before reading it. Options are merged by key: with a key
        # given twice gRPC keeps the first, which is how the peer channels' 64 MiB once
        # silently replaced this limit.
        opts = {**dict(CHANNEL_OPTIONS),
                "grpc.max_receive_message_length": cfg.max_request_bytes,
                # gRPC binds with SO_REUSEPORT by default: a second node started on the same
                # API address would bind too and the kernel would split the clients between
                # the two. Refuse it instead ("api: cannot listen ... (in use?)").
                "grpc.so_reuseport": 0}
        # The peer port is the framed Raft stream's listener; it relays every other
        # connection to the gRPC peer server on a Unix socket in a private directory.
        peer = aio_server(options=CHANNEL_OPTIONS)
        peer_pb2_grpc.add_PeerServicer_to_server(
            PeerServicer(self.driver.step, self.transport, self.servicer.forwarded), peer)
        self._peer_dir = self._make_peer_dir(in_data_dir=True)
        grpc_path = os.path.join(self._peer_dir, "grpc.sock")
        try:
            try:
                self._bind(peer, f"unix:{grpc_path}", None, "listen")
            except NodeStartError as exc:
                if os.path.dirname(self._peer_dir) != os.path.abspath(cfg.data_dir):
                    raise
                # A file system that holds no sockets (some network and shared-folder
                # mounts): the data directory cannot serve; TMPDIR can.
                log.warning("%s; using %s for the gRPC peer socket", exc,
                            tempfile.gettempdir())
                shutil.rmtree(self._peer_dir, ignore_errors=True)
                self._peer_dir = self._make_peer_dir(in_data_dir=False)
                grpc_path = os.path.join(self._peer_dir, "grpc.sock")
                self._bind(peer, f"unix:{grpc_path}", None, "listen")
            await self._serve_api(peer, opts, grpc_path)
        except BaseException:
            shutil.rmtree(self._peer_dir, ignore_errors=True)
            self._peer_dir = ""
            raise

    def _make_peer_dir(self, *, in_data_dir: bool) -> str:
        """``peer_socket_dir.make_peer_dir`` for this node; ``NodeStartError`` when the
        directory cannot be made."""
        try:
            return make_peer_dir(self.config.data_dir, in_data_dir=in_data_dir)
        except PeerSocketDirError as exc:
            raise NodeStartError(str(exc)) from None

    async def _serve_api(self, peer: grpc.aio.Server, opts: Mapping[str, object],
                         grpc_path: str) -> None:
        cfg = self.config
        interceptors = []
        if self.tokens is not None:
            interceptors.append(TokenAuthInterceptor(self.tokens))
        api = aio_server(options=list(opts.items()), interceptors=interceptors)
        add_gateway_service(self.servicer, api)
        add_reads_service(self.servicer, api)
        add_channel_source_service(ChannelSourceServicer(self.servicer), api)
        schema_pb2_grpc.add_SchemaServicer_to_server(SchemaServicer(self.servicer), api)
        # Byte-range reads of the WAL for Spark executors on other machines (docs/spark.md)
        self.log_read = LogReadServicer(self.storage.wal.directory)
        log_read_pb2_grpc.add_LogReadServicer_to_server(self.log_read, api)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, api)
        reflection.enable_server_reflection(
            (gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].full_name,
             "gateway.v1.Reads", "gateway.v1.ChannelSource", "gateway.v1.Schema",
             "gateway.v1.LogRead", health.SERVICE_NAME,
             reflection.SERVICE_NAME), api)
        self.api_port = self._bind(api, cfg.api, api_server_credentials(cfg), "api")
        listener = PeerListener(self.transport.received, grpc_path, self._peer_ssl)
        host, port = parse_address(cfg.listen, "listen")
        try:
            self.peer_port = await listener.start(host, port)
        except OSError as exc:
            raise NodeStartError(f"listen: cannot listen on {cfg.listen} "
                                 f"({exc.strerror or exc})") from None
        self.peer_listener = listener
        for s in (peer, api):
            await s.start()
            self._servers.append(s)

    @staticmethod
    def _bind(server: grpc.aio.Server, address: str, creds: grpc.ServerCredentials | None,
              key: str) -> int:
        try:
            port = (server.add_secure_port(address, creds) if creds is not None
                    else server.add_insecure_port(address))
        except RuntimeError as exc:
            raise NodeStartError(f"{key}: cannot listen on {address}: {exc}") from None
        if port == 0:
            raise NodeStartError(f"{key}: cannot listen on {address} (in use?)")
        return port

    async def stop(self) -> None:
        """Stop serving and close everything (idempotent: a second call waits for the first
        to finish)."""
        if self._stopped.is_set():
            await self._closed.wait()
            return
        self._stopped.set()
        for t in self._tasks:
            t.cancel()
        api_stopped = None
        if len(self._servers) > 1:
            with contextlib.suppress(Exception):
                await self.health.enter_graceful_shutdown()
            # New calls are refused now; calls in progress get the grace period -- among them
            # the Subscribe streams of other clusters' channels, which carry the marker below.
            api_stopped = asyncio.ensure_future(self._servers[1].stop(grace=1.0))
        if getattr(self, "channels", None) is not None:
            await self.channels.stop()
        if self.driver.is_leader and not await self.driver.seal_for_stop(_SEAL_TIMEOUT_S):
            log.info("node %d stops with its last epoch unsealed: the next leader seals it",
                     self.config.node_id)
        if api_stopped is not None:
            await api_stopped
        if getattr(self, "log_read", None) is not None:
            self.log_read.close()
        if self.appliers is not None:
            await self.appliers.stop()
        await self.driver.stop()
        await self.transport.close()
        if self.peer_listener is not None:
            await self.peer_listener.close()
        if self._servers:
            await self._servers[0].stop(grace=0.5)
        if self._peer_dir:
            shutil.rmtree(self._peer_dir, ignore_errors=True)
        await self._close_storage()
        log.info("node %d stopped", self.config.node_id)
        self._closed.set()

    async def _close_storage(self) -> None:
        sm = getattr(self, "sm", None)
        if sm is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(sm.flush)
            sm.close()
        self.storage.close()

    async def wait_stopped(self) -> None:
        """Return once the node has stopped completely (``stop`` finished, e.g. after it
        applied its own removal)."""
        await self._closed.wait()

    @property
    def removed(self) -> bool:
        """True once this node applied a configuration that no longer contains it."""
        return self._removal_stop is not None

    # -- callbacks ------------------------------------------------------------------------------

    def _on_driver_failure(self, exc: BaseException) -> None:
        """The Raft loop died (``RaftDriver.failure``): the node cannot serve, so it stops
        (as its own task: this runs in the dying task's callback) and ``failure`` says why;
        ``gateway run`` then exits 1 with it, for a supervisor to restart the process,
        which recovers from its log."""
        storage = client_error(exc, self.config.data_dir, self.config.node_id)
        self.failure = str(storage) if storage is not None else \
            f"the Raft loop failed: {type(exc).__name__}: {exc}"
        if self._failure_stop is None:
            self._failure_stop = asyncio.get_running_loop().create_task(
                self.stop(), name="stop-failed")

    def _on_log_damage(self, lo: int) -> None:
        """A read from ``lo`` met a damaged log entry (any thread). A follower that needs it
        is sent the newest snapshot (``LogDamagedError`` is a compacted read for the Raft
        core); when the damage is past that snapshot, take a newer one, so the follower is
        not sent the same snapshot again and again."""
        if lo <= self.storage.snapshots.metadata.index or self._damage_snapshot is not None:
            return
        loop = self._loop

        def take() -> None:
            if self._damage_snapshot is None and not self._stopped.is_set():
                self._damage_snapshot = loop.create_task(self._snapshot_past_damage(),
                                                         name="snapshot-past-damage")
                self._tasks.append(self._damage_snapshot)  # cancelled by stop

        loop.call_soon_threadsafe(take)

    async def _snapshot_past_damage(self) -> None:
        try:
            index = await self.driver.snapshot_now()
            log.warning("took a snapshot at index %d for followers that need entries of the "
                        "damaged Raft log", index)
        except Exception as exc:  # the next damaged read asks again
            log.warning("cannot take a snapshot past the damaged Raft log: %s", exc)
        finally:
            self._damage_snapshot = None

    def _report(self, kind: str, peer: int) -> None:
        if kind == "unreachable":
            self.driver.control(lambda raw: raw.report_unreachable(peer))
        else:
            self.driver.control(lambda raw: raw.report_snapshot(peer, True))

    def _on_membership(self, node_id: int, ctx: dict[str, str], removed: bool) -> None:
        if removed and node_id == self.config.node_id:
            # A removed node stops itself: it is no member, so it can never serve again. The
            # stop runs as its own task (this callback runs inside the driver's loop, which
            # stop() cancels).
            log.warning("node %d was removed from the cluster; stopping", node_id)
            if self._removal_stop is None:
                self._removal_stop = asyncio.get_running_loop().create_task(
                    self.stop(), name="stop-removed")
            return
        if removed:
            # Forget the peer only after an election timeout: the messages of this Ready,
            # queued but maybe not yet sent, carry the commit of the removal, which the
            # removed node needs to learn that it must stop (see docs/node.md).
            asyncio.get_running_loop().call_later(self.election_timeout_s(), self._forget_peer,
                                                  node_id)
            log.info("node %d removed from the cluster", node_id)
            return
        if ctx.get("peer"):
            self.transport.set_peer(node_id, ctx["peer"])
        if ctx.get("api"):
            self.transport.api_of[node_id] = ctx["api"]
        log.info("node %d added (%s)", node_id, ctx.get("peer", "?"))

    def _forget_peer(self, node_id: int) -> None:
        """Drop the transport to ``node_id`` unless it became a member again meanwhile."""
        if self._stopped.is_set() or node_id in self.driver.raw.raft.trk.progress:
            return
        self.transport.remove_peer(node_id)

    async def _health_loop(self) -> None:
        status = health_pb2.HealthCheckResponse
        last = None
        while True:
            ok = self.driver.leader_id != 0 and not self.driver.removed
            state = status.SERVING if ok else status.NOT_SERVING
            if state != last:
                for svc in ("", "gateway.v1.Gateway"):
                    await self.health.set(svc, state)
                last = state
            await asyncio.sleep(0.1)

    # -- appliers -------------------------------------------------------------------------------

    def _plugins(self) -> pluggy.PluginManager:
        """The plugin manager: the one given, else the configured plugins, loaded once (with
        none configured, every installed plugin that loads; a warning for each that does not)."""
        if self._pm is None:
            cfg = self.config
            self._pm = plugins.load_plugins(
                list(cfg.plugins) if cfg.plugins is not None else None)
            for message in plugins.load_failures(self._pm).values():
                log.warning("%s; left out (list it in plugins to require it)", message)
        return self._pm

    def _conflict_functions(self) -> Mapping[str, FunctionSpec]:
        """The built-in conflict functions and the loaded plugins' (loaded when a rule first
        names a function no built-in has); ``ConflictFunctionsError`` names what failed."""
        try:
            return with_plugins(plugins.conflict_functions(self._plugins()))
        except (plugins.PluginError, ConflictConfigError) as exc:
            raise ConflictFunctionsError(f"the plugins' conflict functions: {exc}") from None

    def _start_appliers(self) -> None:
        """Build every configured applier (unknown names and bad options fail the start) and
        start them: node-scoped ones now, cluster-scoped ones whenever this node leads
        (``NodeAppliers``)."""
        cfg = self.config
        if not cfg.appliers:
            return
        pm = self._plugins()
        factories = plugins.applier_factories(pm)
        hosted = NodeAppliers(self.driver, os.path.join(cfg.data_dir, "appliers"),
                              publish_metrics=plugins.publish_metrics(pm),
                              on_dead_letter=plugins.dead_letter_notifier(pm),
                              on_schema_event=plugins.schema_notifier(pm))
        for name in cfg.appliers:
            if name not in factories:
                raise NodeStartError(
                    "appliers: " + plugins.missing_applier(pm, name, list(factories)))
            override, opts = cfg.applier_settings(name)
            scope = scope_of(factories[name], override)
            if name == "sqlite" and "path" not in opts:
                os.makedirs(os.path.join(cfg.data_dir, "sqlite"), exist_ok=True)
                opts["path"] = os.path.join(cfg.data_dir, "sqlite", "gateway.db")
            applier = factories[name].build(opts)
            dcfg = (SQLITE_DISPATCH if name == "sqlite"
                    else DispatcherConfig(poll_interval=0.05))
            hosted.add(name, applier, scope, dcfg,
                       backfill_chunk_rows=cfg.backfill_chunk_rows(name))
        self.appliers = hosted
        hosted.start()

    def _applier_floor(self) -> int:
        return self.appliers.floor() if self.appliers is not None else 1 << 62

    def retention(self) -> tuple[gateway_pb2.LogRetention, list[gateway_pb2.SlotStatus]]:
        """This node's retained log span, what holds it, and the slots (``slots``)."""
        return self.slots.retention_status(
            self._applier_floor(),
            self.storage.snapshots.metadata.index - self.config.snapshot_entries // 2)

    def _log_floor(self) -> int:
        """How far the log may be compacted for its readers: the slowest applier's durable
        position and the slots of other clusters' channels (``slots``)."""
        return min(self._applier_floor(), self.slots.floor())

    def applier_status(self) -> list[gateway_pb2.ApplierStatus]:
        return self.appliers.status() if self.appliers is not None else []

    # -- admin ----------------------------------------------------------------------------------

    def election_timeout_s(self) -> float:
        return self.config.tick_ms * self.config.election_ticks / 1000

    def leader_metadata(self) -> tuple[tuple[str, str], ...]:
        lead = self.driver.leader_id
        if not lead:
            return (("gateway-leader-id", "0"),)
        api = self.config.api if lead == self.config.node_id else self.transport.api_of.get(
            lead, "")
        return (("gateway-leader-id", str(lead)), ("gateway-leader-api", api))

    def status(self) -> gateway_pb2.StatusResponse:
        """``Gateway.Status`` (``api.admin``)."""
        return admin.status(self)

    async def add_node(self, node_id: int, peer: str, api: str, *, learner: bool,
                       timeout: float) -> gateway_pb2.AdminResponse:
        """``Gateway.AddNode`` (``api.admin``)."""
        return await admin.add_node(self, node_id, peer, api, learner=learner, timeout=timeout)

    async def remove_node(self, node_id: int) -> gateway_pb2.AdminResponse:
        """``Gateway.RemoveNode`` (``api.admin``)."""
        return await admin.remove_node(self, node_id)

    async def transfer_leader(self, node_id: int, timeout: float) -> gateway_pb2.AdminResponse:
        """``Gateway.TransferLeader`` (``api.admin``)."""
        return await admin.transfer_leader(self, node_id, timeout)
