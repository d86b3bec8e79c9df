"""The peer port: Raft batches on the framed TCP stream, gRPC relayed on the same port, the
fallback to gRPC for a peer that does not answer the preface, damaged frames, mutual TLS."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import tempfile

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.client import AsyncGatewayClient, GatewayClient, row_insert
from gateway.core.frame import encode_frame
from gateway.node.api.security import (
    make_test_ca,
    peer_channel_credentials,
    peer_server_credentials,
    peer_ssl_contexts,
)
from gateway.node.peers.peer_stream import BATCH_TAG, PREFACE, PeerListener
from gateway.node.peers.transport import (
    CHANNEL_OPTIONS,
    PeerServicer,
    PeerTransport,
    cut_batch,
    to_proto,
)
from gateway.node.server import PEER_SOCKET_DIR, GatewayNode, NodeStartError
from gateway.raft import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    SnapshotChunk,
    SnapshotMetadata,
)
from gateway.v1 import peer_pb2, peer_pb2_grpc

from .conftest import free_ports, leader_of, node_configs, run, running
from .test_security import _tls


def _app(index: int, size: int = 10, to: int = 2) -> Message:
    return Message(MessageType.APP, to=to, from_=1, term=3, log_term=3, index=index,
                   entries=[Entry(3, index + 1, EntryType.NORMAL, os.urandom(size))],
                   commit=index)


class _Side:
    """One end of a peer link: a listener on a free port relaying to a gRPC ``Peer`` server
    on a Unix socket, as a node runs it, collecting what is delivered."""

    def __init__(self, tmp: str, node_id: int, tls: tuple | None = None,
                 grpc_only: bool = False) -> None:
        self.node_id, self.tmp, self.tls, self.grpc_only = node_id, tmp, tls, grpc_only
        self.got: list[Message] = []
        self.reports: list[tuple[str, int]] = []
        self.port = free_ports(1)[0]
        self.address = f"127.0.0.1:{self.port}"

    async def start(self, creds: tuple | None = None) -> None:
        self.transport = PeerTransport(
            self.node_id, f"api-{self.node_id}", self.address,
            creds[1] if creds else None,
            lambda kind, peer: self.reports.append((kind, peer)),
            self.tls[1] if self.tls else None)

        async def forward(method: str, request: bytes, context: object) -> bytes:
            return b"forwarded:" + method.encode() + request

        self.server = grpc.aio.server(options=CHANNEL_OPTIONS)
        peer_pb2_grpc.add_PeerServicer_to_server(
            PeerServicer(self.got.extend, self.transport, forward), self.server)
        if self.grpc_only:  # an older node: gRPC owns the peer port
            if creds:
                self.server.add_secure_port(self.address, creds[0])
            else:
                self.server.add_insecure_port(self.address)
            self.listener = None
        else:
            sock = os.path.join(self.tmp, f"grpc-{self.node_id}.sock")
            self.server.add_insecure_port(f"unix:{sock}")
            self.listener = PeerListener(self.transport.received, sock,
                                         self.tls[0] if self.tls else None)
            await self.listener.start("127.0.0.1", self.port)
        await self.server.start()

    async def stop(self) -> None:
        await self.transport.close()
        if self.listener is not None:
            await self.listener.close()
        await self.server.stop(0)


async def _until(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def _scrape(node, prefix: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from prometheus_client import CollectorRegistry, generate_latest

    from gateway.node.api.metrics import NodeCollector

    reg = CollectorRegistry()
    reg.register(NodeCollector(node))
    out = {}
    for line in generate_latest(reg).decode().splitlines():
        if line.startswith(prefix):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@contextlib.asynccontextmanager
async def _linked(tmp: str):  # type: ignore[no-untyped-def]
    """Nodes 1 and 2 started, 1 streaming to 2; both stopped at the end."""
    a, b = _Side(tmp, 1), _Side(tmp, 2)
    await a.start()
    await b.start()
    try:
        a.transport.set_peer(2, b.address)
        yield a, b
    finally:
        await a.stop()
        await b.stop()


def _same(a: Message, b: Message) -> bool:
    return to_proto(a) == to_proto(b)


def test_batches_travel_on_the_framed_stream_in_order(tmp_path):
    async def go() -> None:
        async with _linked(str(tmp_path)) as (a, b):
            sent = [_app(i, size=1 + (i * 37) % 5000) for i in range(2000)]
            for i in range(0, len(sent), 7):  # many batches, some of several messages
                a.transport.send(sent[i:i + 7])
                if i % 70 == 0:
                    await asyncio.sleep(0)
            await _until(lambda: len(b.got) == len(sent))
            assert all(_same(x, y) for x, y in zip(sent, b.got, strict=True))
            assert a.transport.stream_kind(2) == "framed"
            assert b.listener.count("raft") == 1 and b.listener.count("relay") == 0
            # the batches named the sender: b learned a's API and peer address
            assert b.transport.api_of[1] == "api-1"
            assert b.transport.address_of[1] == a.address
            assert not a.reports

    run(go())


def test_an_idle_stream_is_written_in_the_send_call_and_a_busy_one_keeps_the_order(tmp_path):
    """With the framed stream up and nothing queued, ``send`` writes the batch itself (no
    sender-task step before it leaves); while the socket's buffer is above its high-water
    mark, or with a snapshot chunk among the messages, messages queue behind what is queued
    and still arrive in the order sent."""

    async def go() -> None:
        async with _linked(str(tmp_path)) as (a, b):
            a.transport.send([_app(0)])
            await _until(lambda: len(b.got) == 1)
            written = a.transport.batches_sent
            a.transport.send([_app(1), _app(2)])
            assert a.transport.batches_sent == written + 1  # before any task ran
            proto = a.transport._peers[2].stream[1]
            proto.pause_writing()  # as the event loop does above the high-water mark
            a.transport.send([_app(3)])
            assert a.transport.batches_sent == written + 1  # queued for the sender task
            await _until(lambda: a.transport.batches_sent == written + 2)  # it waits to drain
            a.transport.send([_app(4)])
            a.transport.send([_app(5)])
            proto.resume_writing()
            await _until(lambda: len(b.got) == 6)
            assert a.transport.batches_sent == written + 3  # 4 and 5 taken together
            chunk = SnapshotChunk(SnapshotMetadata(ConfState((1,)), 1, 1), 0, 3, b"abc")
            a.transport.send([Message(MessageType.SNAP, to=2, from_=1, index=9, chunk=chunk),
                              _app(6)])
            assert a.transport.batches_sent == written + 3  # a chunk goes by the sender task
            await _until(lambda: len(b.got) == 8)
            assert [m.index for m in b.got] == [0, 1, 2, 3, 4, 5, 9, 6]
            assert not a.reports

    run(go())


def test_grpc_clients_are_relayed_on_the_same_port(tmp_path):
    async def go() -> None:
        b = _Side(str(tmp_path), 2)
        await b.start()
        try:
            async with grpc.aio.insecure_channel(b.address) as ch:
                stub = peer_pb2_grpc.PeerStub(ch)
                r = await stub.Forward(peer_pb2.ForwardRequest(method="Write",
                                                               request=b"x" * 200_000))
                assert r.response == b"forwarded:Write" + b"x" * 200_000
                msg = _app(5)
                batch = peer_pb2.MessageBatch(messages=[to_proto(msg)])
                setattr(batch, "from", 1)
                call = stub.Send()
                await call.write(batch)
                await call.done_writing()
                await call
            assert len(b.got) == 1 and _same(b.got[0], msg)
            assert b.listener.count("raft") == 0
        finally:
            await b.stop()

    run(go())


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "mutual-tls"])
def test_a_peer_that_speaks_only_grpc_gets_the_grpc_stream(tmp_path, caplog, ca, tls):
    caplog.set_level(logging.INFO, "gateway.node.peers.transport")
    cfg = node_configs(tmp_path, 1, tls=_tls(ca[0]) if tls else None)[0]
    creds = (peer_server_credentials(cfg), peer_channel_credentials(cfg)) if tls else None
    contexts = peer_ssl_contexts(cfg) if tls else None

    async def go() -> None:
        a = _Side(str(tmp_path), 1, tls=contexts)
        old = _Side(str(tmp_path), 2, tls=contexts, grpc_only=True)
        await a.start(creds)
        await old.start(creds)
        try:
            a.transport.set_peer(2, old.address)
            sent = [_app(i) for i in range(50)]
            a.transport.send(sent)
            await _until(lambda: len(old.got) == len(sent))
            assert all(_same(x, y) for x, y in zip(sent, old.got, strict=True))
            assert a.transport.stream_kind(2) == "grpc"
        finally:
            await a.stop()
            await old.stop()

    run(go())
    assert any("does not speak the framed stream" in r.getMessage() for r in caplog.records)


def test_a_peer_port_closing_unanswered_is_a_broken_link_not_an_old_peer(tmp_path):
    """A proxy in front of a dead peer accepts and closes: retried on the framed stream,
    reported unreachable, never taken for an older version."""

    async def go() -> None:
        closed = 0

        def accept(reader, writer):  # type: ignore[no-untyped-def]
            nonlocal closed
            closed += 1
            writer.close()

        proxy = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = proxy.sockets[0].getsockname()[1]
        a = _Side(str(tmp_path), 1)
        await a.start()
        try:
            a.transport.set_peer(2, f"127.0.0.1:{port}")
            a.transport.send([_app(1)])
            await _until(lambda: closed >= 4 and ("unreachable", 2) in a.reports)
            assert a.transport._peers[2].grpc_until == 0.0 and a.transport.stream_kind(2) == ""
        finally:
            await a.stop()
            proxy.close()

    run(go())


def test_a_damaged_frame_closes_the_stream_and_the_sender_reconnects(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "gateway.node.peers.transport")

    async def go() -> None:
        b = _Side(str(tmp_path), 2)
        await b.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
            batch = peer_pb2.MessageBatch(messages=[to_proto(_app(1))])
            setattr(batch, "from", 1)
            good = encode_frame(BATCH_TAG, batch.SerializeToString())
            bad = bytearray(good)
            bad[len(bad) // 2] ^= 0x40
            writer.write(PREFACE + good + bytes(bad) + good)
            assert await reader.readexactly(len(PREFACE)) == PREFACE
            assert await reader.read() == b""  # closed by the listener
            writer.close()
            assert len(b.got) == 1  # the frame before the damage, nothing after it
            # a tag this version does not know, and garbage that parses as no batch
            for frame in (encode_frame(7, b"xx"), encode_frame(BATCH_TAG, b"\xff\xff\xff")):
                reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
                writer.write(PREFACE + frame)
                await reader.readexactly(len(PREFACE))
                assert await reader.read() == b""
                writer.close()
            assert len(b.got) == 1
            # a message type this version does not know: refused, nothing of that batch taken
            batch = peer_pb2.MessageBatch(messages=[to_proto(_app(2)), to_proto(_app(3))])
            batch.messages[1].type = 99
            setattr(batch, "from", 1)
            reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
            writer.write(PREFACE + encode_frame(BATCH_TAG, batch.SerializeToString()))
            await reader.readexactly(len(PREFACE))
            assert await reader.read() == b""
            writer.close()
            assert len(b.got) == 1
            # a real sender whose stream is cut keeps delivering on a new connection
            a = _Side(str(tmp_path), 1)
            await a.start()
            try:
                a.transport.set_peer(2, b.address)
                a.transport.send([_app(10)])
                await _until(lambda: len(b.got) == 2)
                for conn in list(b.listener.connections):
                    conn.transport.abort()
                await _until(lambda: ("unreachable", 2) in a.reports)
                a.transport.send([_app(11)])
                await _until(lambda: len(b.got) >= 3)
                assert b.got[-1].index == 11
            finally:
                await a.stop()
        finally:
            await b.stop()

    run(go())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("damaged frame" in w and "127.0.0.1:" in w for w in warnings) == 3
    assert sum("cannot take a batch" in w and "127.0.0.1:" in w for w in warnings) == 1


def test_frames_cut_anywhere_are_delivered_once_and_a_bad_batch_after_good_ones_closes(
        tmp_path):
    """Batches are decoded from the receive buffer itself: frames arriving a few bytes at a
    time are each delivered once, in order; good batches ahead of an undecodable one in the
    same read are delivered, then the connection is closed."""

    def frame(index: int) -> bytes:
        batch = peer_pb2.MessageBatch(messages=[to_proto(_app(index))])
        setattr(batch, "from", 1)
        return encode_frame(BATCH_TAG, batch.SerializeToString())

    async def go() -> None:
        b = _Side(str(tmp_path), 2)
        await b.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
            writer.write(PREFACE)
            assert await reader.readexactly(len(PREFACE)) == PREFACE
            stream = b"".join(frame(i) for i in range(1, 6))
            for cut in range(0, len(stream), 7):
                writer.write(stream[cut:cut + 7])
                await writer.drain()
                await asyncio.sleep(0)
            await _until(lambda: len(b.got) == 5)
            assert [m.index for m in b.got] == [1, 2, 3, 4, 5]
            writer.write(frame(6) + frame(7) + encode_frame(BATCH_TAG, b"\xff\xff\xff")
                         + frame(8))
            assert await reader.read() == b""  # closed by the listener
            writer.close()
            assert [m.index for m in b.got] == [1, 2, 3, 4, 5, 6, 7]
        finally:
            await b.stop()

    run(go())


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    base = tmp_path_factory.mktemp("peer-ca")
    return make_test_ca(str(base / "a")), make_test_ca(str(base / "b"))


def test_mutual_tls_framed_and_relayed_and_strangers_refused(tmp_path, ca):
    mine, other = ca
    cfg = node_configs(tmp_path, 1, tls=_tls(mine))[0]
    stranger_cfg = node_configs(tmp_path / "s", 1, tls=_tls(other))[0]

    async def go() -> None:
        creds = (peer_server_credentials(cfg), peer_channel_credentials(cfg))
        a = _Side(str(tmp_path), 1, tls=peer_ssl_contexts(cfg))
        b = _Side(str(tmp_path), 2, tls=peer_ssl_contexts(cfg))
        await a.start(creds)
        await b.start(creds)
        stranger = _Side(str(tmp_path), 3, tls=peer_ssl_contexts(stranger_cfg))
        await stranger.start((peer_server_credentials(stranger_cfg),
                              peer_channel_credentials(stranger_cfg)))
        try:
            a.transport.set_peer(2, b.address)
            a.transport.send([_app(i) for i in range(20)])
            await _until(lambda: len(b.got) == 20)
            assert a.transport.stream_kind(2) == "framed"
            async with grpc.aio.secure_channel(b.address, creds[1]) as ch:  # ALPN h2
                r = await peer_pb2_grpc.PeerStub(ch).Forward(
                    peer_pb2.ForwardRequest(method="Read", request=b"q"))
                assert r.response == b"forwarded:Readq"
            # a node of another CA is refused both ways, and delivers nothing
            stranger.transport.set_peer(2, b.address)
            stranger.transport.send([_app(99)])
            a.transport.set_peer(3, stranger.address)
            a.transport.send([_app(98, to=3)])
            await _until(lambda: ("unreachable", 2) in stranger.reports
                         and ("unreachable", 3) in a.reports)
            assert len(b.got) == 20 and not stranger.got
            # plaintext to a TLS peer port: refused, nothing delivered
            reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
            writer.write(PREFACE + encode_frame(BATCH_TAG, b""))
            assert await reader.read() == b""
            writer.close()
            assert len(b.got) == 20
        finally:
            for s in (a, b, stranger):
                await s.stop()

    run(go(), 60)


def test_a_cluster_replicates_on_framed_streams(tmp_path):
    cfgs = node_configs(tmp_path, 3)

    async def go() -> None:
        async with running(*cfgs) as nodes:
            leader = await leader_of(nodes)
            async with AsyncGatewayClient(leader.config.api) as c:
                for i in range(20):
                    await c.write([row_insert("t.f", {"id": i}, {"v": "x"})])
            for n in nodes:
                others = [m.config.node_id for m in nodes if m is not n]
                assert all(n.transport.stream_kind(o) == "framed" for o in others)
                assert n.peer_listener is not None and n.peer_listener.count("raft") == 2
                up = _scrape(n, "gateway_peer_stream_up")
                assert up == {f'gateway_peer_stream_up{{kind="{k}",peer="{o}"}}':
                              float(k == "framed") for o in others for k in ("framed", "grpc")}
            # a follower forwards to the leader through the relay on the peer port: a write,
            # and an admin call whose response type differs from its request's
            follower = next(n for n in nodes if n is not leader)
            async with AsyncGatewayClient(follower.config.api) as c:
                r = await c.write([row_insert("t.f", {"id": 20}, {"v": "y"})])
                assert r.gtid.trans_id == 21
            await asyncio.to_thread(
                lambda: GatewayClient(follower.config.api, timeout=20).set_conflict_role("PRIMARY"))
            assert leader.peer_listener.count("relay") >= 1
            await asyncio.sleep(0.5)
            assert all(n.sm.last_trans_id == 21 for n in nodes)
            assert {n.status().conflict_role for n in nodes} == {"PRIMARY"}
            dirs.extend(n._peer_dir for n in nodes)
            assert all(os.path.exists(os.path.join(d, "grpc.sock")) for d in dirs)

    dirs: list[str] = []
    run(go(), 60)
    assert dirs and not any(os.path.exists(d) for d in dirs)  # removed when the nodes stopped


def test_the_peer_socket_lives_in_the_data_directory_and_a_crash_leftover_is_replaced(
        tmp_path, monkeypatch):
    """The gRPC peer server's socket sits in ``<data dir>/peer-socket`` (0700), so a killed
    node leaves nothing in TMPDIR; what a crash left there (a stale socket, even a file in
    the directory's place) is replaced at the next start. A data directory too deep for a
    socket address uses a private directory in TMPDIR. Both are removed at stop, and a
    node whose relayed gRPC works answers through either."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    short = node_configs(tmp_path, 1)[0]
    stale = os.path.join(short.data_dir, PEER_SOCKET_DIR)
    os.makedirs(stale)
    with open(os.path.join(stale, "grpc.sock"), "wb") as f:  # left by a killed node
        f.write(b"stale")
    deep = node_configs(tmp_path / ("d" * 120), 1)[0]

    async def go() -> None:
        for cfg, in_data_dir in ((short, True), (deep, False)):
            async with running(cfg) as (node,):
                where = node._peer_dir
                assert (os.path.dirname(where) == os.path.abspath(cfg.data_dir)) is in_data_dir
                assert (os.path.dirname(where) == str(tmpdir)) is not in_data_dir
                assert os.stat(where).st_mode & 0o777 == 0o700
                sock = os.path.join(where, "grpc.sock")
                assert stat.S_ISSOCK(os.stat(sock).st_mode)
                async with grpc.aio.insecure_channel(f"unix:{sock}") as ch:
                    await asyncio.wait_for(ch.channel_ready(), 10)
            assert not os.path.exists(where)
        with open(stale, "wb") as f:  # a file where the directory goes
            f.write(b"x")
        async with running(short) as (node,):
            assert node._peer_dir == os.path.abspath(stale) and os.path.isdir(stale)
        assert not os.listdir(tmpdir)

    run(go(), 60)


def test_a_data_directory_that_refuses_the_socket_falls_back_to_tmpdir(tmp_path, monkeypatch):
    """A file system that holds no sockets (some network and shared-folder mounts): the bind
    in the data directory fails, the node binds in a private TMPDIR directory instead, and
    the relayed gRPC answers there; nothing is left in either place after stop."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    cfg = node_configs(tmp_path, 1)[0]
    own = os.path.join(os.path.abspath(cfg.data_dir), PEER_SOCKET_DIR)
    real_bind = GatewayNode._bind
    refused: list[str] = []

    def bind(server, address, creds, key):  # type: ignore[no-untyped-def]
        if address.startswith(f"unix:{own}"):
            refused.append(address)
            raise NodeStartError(f"{key}: cannot listen on {address}: Operation not supported")
        return real_bind(server, address, creds, key)

    monkeypatch.setattr(GatewayNode, "_bind", staticmethod(bind))

    async def go() -> None:
        async with running(cfg) as (node,):
            where = node._peer_dir
            assert refused and os.path.dirname(where) == str(tmpdir)
            assert not os.path.exists(own)
            async with grpc.aio.insecure_channel(f"unix:{where}/grpc.sock") as ch:
                await asyncio.wait_for(ch.channel_ready(), 10)
        assert not os.path.exists(where) and not os.listdir(tmpdir)

    run(go(), 60)


def test_a_queue_larger_than_a_frame_is_sent_in_several(tmp_path):
    """A follower catching up: 70 appends of 1 MiB queued at once (more than the listener's
    64 MiB frame limit) all arrive, in order, in several frames."""

    async def go() -> None:
        async with _linked(str(tmp_path)) as (a, b):
            sent = [_app(i, size=1 << 20) for i in range(70)]
            a.transport.send(sent)
            await _until(lambda: len(b.got) == len(sent), 60)
            assert all(_same(x, y) for x, y in zip(sent, b.got, strict=True))
            assert a.transport.batches_sent >= 5 and not a.reports

    run(go(), 120)


_SIZES = st.lists(st.tuples(st.lists(st.integers(0, 3000), max_size=4), st.integers(0, 3000)),
                  max_size=30)


@settings(max_examples=200, deadline=None)
@given(_SIZES, st.integers(1, 8000))
def test_cut_batch_keeps_order_and_bounds_each_run(shapes, limit):
    msgs = [Message(MessageType.APP, to=2, from_=1, index=i,
                    entries=[Entry(1, i, EntryType.NORMAL, b"x" * n) for n in ents])
            if not chunk else
            Message(MessageType.SNAP, to=2, from_=1, index=i,
                    chunk=SnapshotChunk(SnapshotMetadata(ConfState((1,)), 1, 1), 0, chunk,
                                        b"y" * chunk))
            for i, (ents, chunk) in enumerate(shapes)]

    def size(m: Message) -> int:
        return 64 + sum(len(e.data) + 16 for e in m.entries) + \
            (len(m.chunk.data) if m.chunk else 0)

    runs = cut_batch(msgs, limit)
    assert [m for r in runs for m in r] == msgs
    assert all(r for r in runs)
    for i, r in enumerate(runs):
        total = sum(size(m) for m in r)
        assert total <= limit or len(r) == 1
        if i + 1 < len(runs):  # greedy: the next message did not fit
            assert total + size(runs[i + 1][0]) > limit


def test_listening_on_every_address_takes_both_families_on_one_port():
    """``listen = "[::]:PORT"`` (or an empty host) binds one dual-stack socket, as gRPC did:
    IPv4 and IPv6 peers reach the same port; ``0.0.0.0`` stays IPv4."""

    async def reaches(host: str, port: int) -> bool:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            return False
        writer.close()
        return True

    async def go() -> None:
        has_v6 = await _has_ipv6()
        for host, want_v6 in (("[::]", has_v6), ("", has_v6), ("0.0.0.0", False)):
            listener = PeerListener(lambda batch: None, "/nonexistent", None)
            port = await listener.start(host, 0)
            try:
                assert await reaches("127.0.0.1", port), host
                assert await reaches("::1", port) == want_v6, host
            finally:
                await listener.close()

    run(go())


async def _has_ipv6() -> bool:
    try:
        server = await asyncio.start_server(lambda r, w: w.close(), "::1", 0)
    except OSError:
        return False
    server.close()
    return True


def test_the_servers_accept_the_keepalive_pings_of_the_peer_channels():
    """The peer channels ping an idle connection every ``keepalive_time_ms``; a server (peer
    or API, both built from ``CHANNEL_OPTIONS``) that allows fewer pings without data answers
    the third with GOAWAY ``too_many_pings`` and drops the calls on that connection (seen in
    the nodes' logs ~30 s after a follower last forwarded a write)."""
    opts = dict(CHANNEL_OPTIONS)
    assert opts["grpc.keepalive_permit_without_calls"] == 1
    assert opts["grpc.http2.min_ping_interval_without_data_ms"] < opts["grpc.keepalive_time_ms"]
