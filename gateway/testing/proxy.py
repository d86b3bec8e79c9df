"""A fault-injecting TCP proxy network for loopback clusters (``LocalGatewayCluster``'s
partitions; the project's own cluster tests use it too).

Every ordered pair of peers gets one :class:`LinkProxy`: node ``a`` reaches node ``b`` through the
proxy ``(a, b)``, which listens on a private loopback port and forwards to ``b``'s real peer port.
A TCP connection carries bytes both ways, so the bytes *from* ``a`` *to* ``b`` travel on two
proxies: upstream on ``(a, b)`` (requests ``a`` sends on its own connections) and downstream on
``(b, a)`` (responses ``a`` sends on connections ``b`` opened). :class:`ProxyNetwork` speaks in
flows (``a -> b``) and sets both halves, so a one-way partition really is one-way.

Faults, per direction of a proxy:

* **delay** (+ jitter): every chunk is delivered ``delay`` seconds after it was read, in order;
* **blackhole**: connections are accepted and bytes are read and discarded, nothing is forwarded
  and nothing is closed — to both ends the link looks alive but silent (a partition). A
  connection accepted while its upstream direction is blackholed is not even connected to the
  target (the SYN "did not arrive").

And per proxy:

* **drop**: close every current connection (a reset), once;
* **refuse**: while set, new connections are accepted and closed at once (a dead link).

**heal** clears every fault; connections that lost bytes to a blackhole are closed at that moment
(their byte stream has a hole, which no protocol above TCP can survive), so peers reconnect.

Bounds: the proxies listen on ``127.0.0.1`` only and forward only to ``127.0.0.1``; each proxy
holds at most ``max_connections`` connections and each direction buffers at most
``max_buffered_chunks`` reads (reading pauses beyond that: TCP back-pressure, never unbounded
memory). The network runs its own asyncio loop in a daemon thread, so it works beside synchronous
tests and subprocesses; every public method is thread-safe and :meth:`ProxyNetwork.close` (also
run at exit) closes every socket.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

LOOPBACK = "127.0.0.1"
ANY = 0  # source id of a shared ingress proxy: every node dials it to reach its destination
CHUNK = 64 * 1024

T = TypeVar("T")


class ProxyError(RuntimeError):
    """A proxy could not be created or was used after it was closed."""


@dataclass(slots=True)
class DirectionFaults:
    """Faults of one byte direction of a proxy. ``blackhole`` discards, ``delay``/``jitter`` are
    seconds added to every chunk (jitter is uniform in ``[0, jitter]``, order is kept)."""

    blackhole: bool = False
    delay: float = 0.0
    jitter: float = 0.0

    def __str__(self) -> str:
        parts = ["blackhole"] if self.blackhole else []
        if self.delay or self.jitter:
            parts.append(f"delay={self.delay:g}+{self.jitter:g}s")
        return ",".join(parts) or "ok"

    def clear(self) -> None:
        self.blackhole = False
        self.delay = 0.0
        self.jitter = 0.0


@dataclass(slots=True)
class DirectionStats:
    """Byte counters of one direction, summed over every connection a proxy has carried."""

    forwarded: int = 0
    discarded: int = 0


@dataclass(slots=True)
class _Conn:
    """One proxied connection: the accepted client side and, once connected, the target side."""

    id: int
    client_writer: asyncio.StreamWriter
    target_writer: asyncio.StreamWriter | None = None
    tainted: bool = False  # some byte went into a blackhole: the stream has a hole
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    closed: bool = False


class LinkProxy:
    """Forwards connections accepted on ``127.0.0.1:port`` to ``127.0.0.1:target_port``.

    Runs on the loop of its :class:`ProxyNetwork`; only that loop may call its coroutine methods.
    ``up`` is the direction from the connecting side to the target, ``down`` the reverse.
    """

    def __init__(
        self,
        name: str,
        target_port: int,
        *,
        target_host: str = LOOPBACK,
        max_connections: int = 64,
        max_buffered_chunks: int = 64,
        rng: random.Random | None = None,
    ) -> None:
        if target_host != LOOPBACK:
            raise ProxyError(f"proxy {name}: target {target_host} is not {LOOPBACK}")
        self.name = name
        self.target_port = target_port
        self.max_connections = max_connections
        self.max_buffered_chunks = max_buffered_chunks
        self.up = DirectionFaults()
        self.down = DirectionFaults()
        self.up_stats = DirectionStats()
        self.down_stats = DirectionStats()
        self.refusing = False
        self.accepted = 0
        self.rejected = 0
        self.port = 0
        self._rng = rng or random.Random(0)
        self._server: asyncio.base_events.Server | None = None
        self._conns: dict[int, _Conn] = {}
        self._ids = itertools.count(1)

    # ---------------------------------------------------------------- lifecycle

    async def start(self, port: int = 0) -> int:
        """Listen on ``127.0.0.1:port`` (0 picks a free port, held from then on); returns it."""
        self._server = await asyncio.start_server(self._accept, LOOPBACK, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        """Stop listening and close every connection."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None
        await self.drop()

    @property
    def connections(self) -> int:
        """Number of connections currently open through this proxy."""
        return len(self._conns)

    # ---------------------------------------------------------------- faults

    async def drop(self) -> int:
        """Close every current connection (both ends see a reset/EOF); returns how many."""
        conns = list(self._conns.values())
        for c in conns:
            self._close_conn(c)
        return len(conns)

    async def heal(self) -> None:
        """Clear every fault; close connections whose byte stream lost data to a blackhole."""
        self.up.clear()
        self.down.clear()
        self.refusing = False
        for c in list(self._conns.values()):
            if c.tainted or c.target_writer is None:
                self._close_conn(c)

    async def unblock(self, direction: DirectionFaults) -> None:
        """Stop blackholing ``direction`` (one of ``up``/``down``) and close tainted
        connections, keeping delays and the other direction as they are."""
        direction.blackhole = False
        if self.up.blackhole or self.down.blackhole:
            return
        for c in list(self._conns.values()):
            if c.tainted or c.target_writer is None:
                self._close_conn(c)

    # ---------------------------------------------------------------- forwarding

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing or len(self._conns) >= self.max_connections:
            self.rejected += 1
            writer.transport.abort()
            return
        self.accepted += 1
        conn = _Conn(next(self._ids), writer)
        self._conns[conn.id] = conn
        target_reader: asyncio.StreamReader | None = None
        if not self.up.blackhole:
            try:
                target_reader, conn.target_writer = await asyncio.wait_for(
                    asyncio.open_connection(LOOPBACK, self.target_port), 5
                )
            except (TimeoutError, OSError):
                self._close_conn(conn)  # the target is down: so is the link
                return
        if conn.closed:
            if conn.target_writer is not None:
                conn.target_writer.transport.abort()
            return
        conn.tasks.append(asyncio.ensure_future(self._pump(conn, reader, True)))
        if target_reader is not None:
            conn.tasks.append(asyncio.ensure_future(self._pump(conn, target_reader, False)))

    async def _pump(self, conn: _Conn, reader: asyncio.StreamReader, upward: bool) -> None:
        """Read one direction of ``conn`` and hand chunks to a delayed, ordered sender."""
        faults = self.up if upward else self.down
        stats = self.up_stats if upward else self.down_stats
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(
            self.max_buffered_chunks
        )
        sender = asyncio.ensure_future(self._send(conn, queue, upward, stats))
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if faults.blackhole or (upward and conn.target_writer is None):
                    conn.tainted = True
                    stats.discarded += len(data)
                    continue
                lag = faults.delay + (self._rng.uniform(0, faults.jitter) if faults.jitter else 0)
                await queue.put((time.monotonic() + lag, data))
        except (OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            sender.cancel()
            raise
        await queue.put(None)
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await sender
        self._close_conn(conn)

    async def _send(
        self,
        conn: _Conn,
        queue: asyncio.Queue[tuple[float, bytes] | None],
        upward: bool,
        stats: DirectionStats,
    ) -> None:
        faults = self.up if upward else self.down
        while True:
            item = await queue.get()
            if item is None:
                return
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if faults.blackhole:  # blackholed while in flight: the chunk is lost too
                conn.tainted = True
                stats.discarded += len(data)
                continue
            writer = conn.target_writer if upward else conn.client_writer
            if writer is None or conn.closed:
                return
            writer.write(data)
            stats.forwarded += len(data)
            try:
                await writer.drain()
            except (OSError, ConnectionError):
                self._close_conn(conn)
                return

    def _close_conn(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._conns.pop(conn.id, None)
        for w in (conn.client_writer, conn.target_writer):
            if w is not None:
                w.transport.abort()
        current = asyncio.current_task()
        for t in conn.tasks:
            if t is not current:
                t.cancel()


class ProxyNetwork:
    """The proxies of one cluster, keyed by ``(source, destination)`` node ids, on a private
    event loop thread. All methods may be called from any thread."""

    def __init__(
        self,
        *,
        max_connections: int = 64,
        max_buffered_chunks: int = 64,
        seed: int = 0,
    ) -> None:
        self.max_connections = max_connections
        self.max_buffered_chunks = max_buffered_chunks
        self._rng = random.Random(seed)
        self._links: dict[tuple[int, int], LinkProxy] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="proxy-network", daemon=True)
        self._closed = False
        self._thread.start()
        atexit.register(self.close)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _call(self, fn: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
        if self._closed:
            raise ProxyError("proxy network is closed")

        async def run() -> T:
            return await fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    # ---------------------------------------------------------------- topology

    def add_link(self, src: int, dst: int, target_port: int, port: int = 0) -> int:
        """Create the proxy that ``src`` uses to reach ``dst`` (listening at ``dst``'s
        ``target_port``); returns the proxy's own port. Replaces an existing ``(src, dst)``
        proxy's target (keeping its port) when called again."""
        old = self._links.get((src, dst))
        if old is not None:
            old.target_port = target_port
            return old.port
        link = LinkProxy(
            f"{src}->{dst}",
            target_port,
            max_connections=self.max_connections,
            max_buffered_chunks=self.max_buffered_chunks,
            rng=random.Random(self._rng.random()),
        )
        self._call(lambda: link.start(port))
        self._links[(src, dst)] = link
        return link.port

    def remove_node(self, node: int) -> None:
        """Close and forget every proxy to or from ``node``."""
        for key in [k for k in self._links if node in k]:
            link = self._links.pop(key)
            self._call(link.close)

    def link(self, src: int, dst: int) -> LinkProxy:
        """The proxy ``src`` dials to reach ``dst``."""
        return self._links[(src, dst)]

    def port(self, src: int, dst: int) -> int:
        """The loopback port ``src`` must dial to reach ``dst``."""
        return self._links[(src, dst)].port

    @property
    def nodes(self) -> set[int]:
        """Every node id that appears in some link."""
        return {n for k in self._links for n in k if n != ANY}

    def _halves(self, src: int, dst: int) -> list[DirectionFaults]:
        """The two direction settings that carry bytes from ``src`` to ``dst``."""
        out = []
        if (src, dst) in self._links:
            out.append(self._links[(src, dst)].up)
        elif (ANY, dst) in self._links:  # a shared ingress carries every source's bytes
            out.append(self._links[(ANY, dst)].up)
        if (dst, src) in self._links:
            out.append(self._links[(dst, src)].down)
        elif (ANY, src) in self._links:
            out.append(self._links[(ANY, src)].down)
        return out

    # ---------------------------------------------------------------- faults by flow

    def block(self, src: int, dst: int) -> None:
        """One-way partition: bytes from ``src`` to ``dst`` vanish (connections stay open)."""

        async def run() -> None:
            for half in self._halves(src, dst):
                half.blackhole = True

        self._call(run)

    def unblock(self, src: int, dst: int) -> None:
        """Undo :meth:`block` for ``src -> dst``; connections that lost bytes are closed once
        neither of their directions is blackholed."""

        async def run() -> None:
            for key in ((src, dst), (dst, src)):
                link = self._links.get(key)
                if link is None:
                    continue
                await link.unblock(link.up if key == (src, dst) else link.down)

        self._call(run)

    def partition(self, *groups: Iterable[int]) -> None:
        """Cut every flow between different groups (both ways). Nodes not named in any group
        form one more group together."""
        sets = [set(g) for g in groups]
        named = set().union(*sets) if sets else set()
        rest = self.nodes - named
        if rest:
            sets.append(rest)
        side = {n: i for i, s in enumerate(sets) for n in s}
        for a, b in list(self._links):
            if a == ANY:
                for c in self.nodes - {b}:
                    if side.get(c) != side.get(b):
                        self.block(c, b)
                        self.block(b, c)
            elif side.get(a) != side.get(b):
                self.block(a, b)
                self.block(b, a)

    def isolate(self, node: int) -> None:
        """Cut ``node`` off from every other node, both ways."""
        self.partition({node})

    def bridge(self, left: Iterable[int], bridge: int, right: Iterable[int]) -> None:
        """Two sides that only ``bridge`` can talk to: every flow between ``left`` and
        ``right`` is cut, ``bridge`` reaches both (the Jepsen "bridge" partition)."""
        left_set, right_set = set(left), set(right)
        if bridge in left_set or bridge in right_set:
            raise ProxyError(f"bridge node {bridge} must be on neither side")
        for a in left_set:
            for b in right_set:
                self.block(a, b)
                self.block(b, a)

    def delay(self, src: int, dst: int, seconds: float, jitter: float = 0.0) -> None:
        """Delay every chunk from ``src`` to ``dst`` by ``seconds`` (+ uniform jitter)."""

        async def run() -> None:
            for half in self._halves(src, dst):
                half.delay = seconds
                half.jitter = jitter

        self._call(run)

    def drop(self, src: int, dst: int) -> int:
        """Close every connection between ``src`` and ``dst`` (either dialing); returns how
        many were closed."""

        async def run() -> int:
            n = 0
            for key in ((src, dst), (dst, src)):
                if key in self._links:
                    n += await self._links[key].drop()
            return n

        return self._call(run)

    def refuse(self, src: int, dst: int, on: bool = True) -> None:
        """While on, connections between ``src`` and ``dst`` are closed as soon as accepted
        (existing ones are dropped too)."""

        async def run() -> None:
            for key in ((src, dst), (dst, src)):
                link = self._links.get(key)
                if link is not None:
                    link.refusing = on
                    if on:
                        await link.drop()

        self._call(run)

    def heal(self) -> None:
        """Clear every fault on every link."""

        async def run() -> None:
            for link in self._links.values():
                await link.heal()

        self._call(run)

    def stats(self) -> dict[tuple[int, int], tuple[DirectionStats, DirectionStats]]:
        """``(up, down)`` byte counters per link (copies)."""

        async def run() -> dict[tuple[int, int], tuple[DirectionStats, DirectionStats]]:
            return {
                k: (
                    DirectionStats(v.up_stats.forwarded, v.up_stats.discarded),
                    DirectionStats(v.down_stats.forwarded, v.down_stats.discarded),
                )
                for k, v in self._links.items()
            }

        return self._call(run)

    def describe(self) -> str:
        """One line per link with its faults, for failure reports."""
        lines = []
        for (a, b), link in sorted(self._links.items()):
            lines.append(
                f"{a}->{b} :{link.port}->:{link.target_port} conns={link.connections} "
                f"up={link.up} down={link.down} refusing={link.refusing} "
                f"fwd={link.up_stats.forwarded}/{link.down_stats.forwarded} "
                f"lost={link.up_stats.discarded}/{link.down_stats.discarded}"
            )
        return "\n".join(lines)

    # ---------------------------------------------------------------- shutdown

    def close(self) -> None:
        """Close every proxy and stop the loop thread (idempotent)."""
        if self._closed:
            return

        async def run() -> None:
            for link in self._links.values():
                await link.close()
            self._links.clear()

        with contextlib.suppress(Exception):
            self._call(run, timeout=10)
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
        atexit.unregister(self.close)

    def __enter__(self) -> ProxyNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
