"""The channel protocol's handshake and stream (ChannelSource.Stream), against one node."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import grpc

from gateway.client import AsyncGatewayClient, row_insert
from gateway.v1 import channel_pb2, channel_pb2_grpc, gateway_pb2, gateway_pb2_grpc

from .conftest import leader_of, node_configs, run, running


def _hello(version: int = 1, **kw) -> channel_pb2.ChannelUp:
    h = channel_pb2.ChannelHello(protocol_version=version, reader_cluster_id=2,
                                 channel="fromA", **kw)
    return channel_pb2.ChannelUp(hello=h)


async def _open(api: str, *ups: channel_pb2.ChannelUp, want: int = 1, md=None,
                until=None) -> list[channel_pb2.ChannelDown]:
    """Send ``ups`` (the call stays open) and return the first ``want`` answers (or those
    up to the first for which ``until`` holds)."""
    async with grpc.aio.insecure_channel(api) as ch:
        gate = asyncio.Event()

        async def up():
            for u in ups:
                yield u
            await gate.wait()

        call = channel_pb2_grpc.ChannelSourceStub(ch).Stream(up(), metadata=md)
        out = []
        try:
            async for down in call:
                out.append(down)
                if (until(down) if until is not None else len(out) == want):
                    break
        finally:
            gate.set()
            call.cancel()
        return out


@dataclass(frozen=True)
class _Refused:
    """The status a refused stream ended with, as the source sent it."""

    status: grpc.StatusCode
    text: str

    def code(self) -> grpc.StatusCode:
        return self.status

    def details(self) -> str:
        return self.text


async def _refusal(api: str, *ups: channel_pb2.ChannelUp, md=None) -> _Refused:
    """Send ``ups`` on a stream and return how the source ended it (it must refuse).

    The messages are written one by one rather than from a request iterator: a source that
    refuses at the call's start (authentication) may end it while a message is on its way,
    and a request iterator's failed send then ends the call on the client's side with
    INTERNAL ("Failed execute_batch") in place of the status the source sent."""
    async with grpc.aio.insecure_channel(api) as ch:
        call = channel_pb2_grpc.ChannelSourceStub(ch).Stream(metadata=md)
        for u in ups:
            try:
                await call.write(u)
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                break  # the source ended the call first: its status is read below
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            await call.done_writing()
        with contextlib.suppress(grpc.aio.AioRpcError):
            while await call.read() != grpc.aio.EOF:
                pass
        code = await call.code()
        if code == grpc.StatusCode.OK:
            raise AssertionError("the source did not refuse")
        return _Refused(code, await call.details())


def test_a_reader_speaking_version_2_is_welcomed_with_version_1_and_shared_features(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]

    async def go():
        async with running(a) as (na,):
            await leader_of([na])
            got = await _open(a.api, _hello(2, features=["progress", "slot", "telepathy"]))
            w = got[0].welcome
            assert got[0].WhichOneof("msg") == "welcome"
            assert w.protocol_version == 1
            assert list(w.features) == ["progress", "slot"]
            assert w.source_cluster_id == 1
            assert w.retained_first_index == na.driver.storage.first_index()

    run(go(), 60)


def test_a_hello_with_version_0_or_no_hello_first_is_refused_with_a_clear_message(tmp_path):
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]

    async def go():
        async with running(a) as (na,):
            await leader_of([na])
            exc = await _refusal(a.api, _hello(0))
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert exc.details().startswith("hello.protocol_version: version 0 is not one")
            ack = channel_pb2.ChannelUp(ack=channel_pb2.ChannelAck(acked_epoch=5))
            exc = await _refusal(a.api, ack)
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "must be a hello (ChannelUp.hello), not an ack message" in exc.details()
            exc = await _refusal(a.api)
            assert "must be a hello (ChannelUp.hello), not nothing" in exc.details()
            exc = await _refusal(a.api, channel_pb2.ChannelUp(hello=channel_pb2.ChannelHello(
                protocol_version=1, reader_cluster_id=1, channel="x")))
            assert "cannot replicate from itself" in exc.details()

    run(go(), 60)


def test_the_stream_carries_subscribes_events_and_progress_while_idle(tmp_path):
    """After the welcome: the events Subscribe sends for the same position (log records
    included), and SourceProgress messages with the newest sealed epoch even when nothing
    else arrives."""
    a = node_configs(tmp_path / "a", 1, cluster_id=1)[0]

    async def go():
        async with running(a) as (na,):
            await leader_of([na])
            async with AsyncGatewayClient(a.api) as c:
                for i in range(3):
                    await c.write([row_insert("shop.items", {"id": i}, {"v": "x"})])
            await asyncio.sleep(0.5)  # let the epoch seal
            sealed = na.sm.newest_sealed[0]
            assert sealed
            last = na.sm.applied_index
            seen = []

            def caught_up(d):  # a progress after the event of the last entry
                if d.WhichOneof("msg") == "event":
                    seen.append(d.event.log_index)
                return d.WhichOneof("msg") == "progress" and seen and seen[-1] >= last - 2

            got = await _open(a.api, _hello(after_epoch=gateway_pb2.EpochPosition(
                server_id=1, epoch=0)), until=caught_up)
            events = [d.event for d in got if d.WhichOneof("msg") == "event"]
            progress = [d.progress for d in got if d.WhichOneof("msg") == "progress"]
            assert progress and progress[-1].epoch >= sealed and progress[-1].sealed_at_ns
            assert progress[-1].log_index >= events[-1].log_index
            async with grpc.aio.insecure_channel(a.api) as ch:
                sub = gateway_pb2_grpc.GatewayStub(ch).Subscribe(gateway_pb2.SubscribeRequest(
                    after_epoch=gateway_pb2.EpochPosition(server_id=1, epoch=0),
                    log_records=True))
                want = []
                async for ev in sub:
                    want.append(ev)
                    if len(want) == len(events):
                        break
                sub.cancel()
            assert events == want
            assert any(e.HasField("epoch_marker") for e in events)
            # idle: progress keeps coming with no event between
            idle = await _open(a.api, _hello(after_epoch=gateway_pb2.EpochPosition(
                server_id=1, epoch=sealed)), want=4)
            assert [d.WhichOneof("msg") for d in idle] == ["welcome"] + ["progress"] * 3

    run(go(), 90)


def test_the_stream_needs_the_read_permission_as_subscribe(tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[token]]\nname = "w"\ntoken = "w"\npermissions = ["write"]\n'
                      '[[token]]\nname = "r"\ntoken = "r"\npermissions = ["read"]\n')
    a = node_configs(tmp_path / "a", 1, cluster_id=1, tokens_file=str(tokens))[0]

    async def go():
        async with running(a) as (na,):
            await leader_of([na])
            exc = await _refusal(a.api, _hello())
            assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
            exc = await _refusal(a.api, _hello(), md=(("authorization", "Bearer w"),))
            assert exc.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "lacks the read permission for ChannelSource.Stream" in exc.details()
            got = await _open(a.api, _hello(), md=(("authorization", "Bearer r"),))
            assert got[0].welcome.protocol_version == 1

    run(go(), 60)


def test_a_follower_without_the_position_sends_the_reader_to_the_leader_not_to_resync():
    """Only the cluster's slot decides "behind": a follower whose log starts later (it
    installed a snapshot) while the slot holds the position on the leader answers
    UNAVAILABLE naming the leader; without a slot, the same position is behind the log."""
    from types import SimpleNamespace

    import pytest

    from gateway.node.base.errors import NotLeaderError, PreconditionFailed
    from gateway.node.base.validation import InvalidRequest
    from gateway.node.replication.channel_source import ChannelSource
    from gateway.v1 import replication_pb2

    async def compacted(_req):
        raise InvalidRequest("after_epoch", "epoch 5 of cluster 1 is before the log's start "
                             "(compacted; the log starts at index 90)")

    slot = replication_pb2.ChannelSlot(reader_cluster_id=2, channel="fromA", log_index=40)
    sm = SimpleNamespace(slots={(2, "fromA"): slot})
    drv = SimpleNamespace(opts=SimpleNamespace(cluster_id=1, node_id=3), sm=sm,
                          is_leader=False, leader_id=1)
    source = ChannelSource(drv, SimpleNamespace(note=lambda *a: None), compacted)
    hello = _hello(after_epoch=gateway_pb2.EpochPosition(server_id=1, epoch=5))
    with pytest.raises(NotLeaderError, match="slot 2/fromA keeps it on the leader"):
        asyncio.run(source.open(hello))
    sm.slots = {}
    with pytest.raises(PreconditionFailed, match="behind the source's log: resync "
                       r"\(gateway channel resync fromA, on cluster 2\)"):
        asyncio.run(source.open(hello))
