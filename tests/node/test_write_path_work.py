"""The leader's per-write work stays per request where it can (issue 53, "Check"): what a
StreamWrite request's writes share is looked at once for the request, not once per write.
Counted calls, never timings."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import grpc
import pytest

from gateway.node import GatewayNode
from gateway.node.loop.sequencer import Sequencer, Stamp
from gateway.v1 import gateway_pb2, statement_pb2, value_pb2

from .conftest import node_configs

FT = value_pb2.FieldType
V = value_pb2.Value


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayNode]:
    cfg = node_configs(tmp_path_factory.mktemp("work"), 1)[0]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    node = GatewayNode(cfg)

    async def start() -> None:
        await node.start()
        while not node.driver.is_leader:
            await asyncio.sleep(0.02)

    asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield node
    finally:
        asyncio.run_coroutine_threadsafe(node.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def _write(key: int) -> gateway_pb2.WriteRequest:
    return gateway_pb2.WriteRequest(statements=[statement_pb2.Statement(
        insert=statement_pb2.InsertStatement(
            table=statement_pb2.TableMetadata(schema_name="t", table_name="work"),
            key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
            fields=[statement_pb2.FieldMetadata(name="v", type=FT.FIELD_TYPE_VARCHAR)],
            records=[statement_pb2.InsertRecord(key_values=[V(int_value=key)],
                                                after_values=[V(string_value="x")])]))])


def _stream(node: GatewayNode, req: gateway_pb2.StreamWriteRequest
            ) -> list[gateway_pb2.StreamWriteAck]:
    with grpc.insecure_channel(node.config.api) as ch:
        call = ch.stream_stream("/gateway.v1.Gateway/StreamWrite",
                                request_serializer=gateway_pb2.StreamWriteRequest.SerializeToString,
                                response_deserializer=gateway_pb2.StreamWriteResponse.FromString)
        return [a for resp in call(iter([req]), timeout=20) for a in resp.acks]


def test_a_stream_write_request_asks_the_space_alarm_once_not_per_write(single):
    space = single.space
    asked = 0
    refusal = space.refusal

    def counted():  # type: ignore[no-untyped-def]
        nonlocal asked
        asked += 1
        return refusal()

    space.refusal = counted  # type: ignore[method-assign]
    try:
        acks = _stream(single, gateway_pb2.StreamWriteRequest(
            seq=1, writes=[_write(k) for k in range(20)]))
    finally:
        del space.refusal  # type: ignore[method-assign]
    assert [a.seq for a in acks] == list(range(1, 21))
    assert all(a.code == 0 for a in acks), [a.error for a in acks if a.code]
    assert asked == 1


def test_a_stamp_is_a_named_stamp_of_the_sequencer_counters():
    seq = Sequencer.take_over(3, 0.0, 1.0, applied_trans_id=9, applied_commit_ts=100)
    seq.open_at(0.0)
    first, second = seq.stamp(50), seq.stamp(50)
    assert type(first) is Stamp
    assert first == Stamp(trans_id=10, epoch=seq.open_epoch, commit_ts=101)
    assert (second.trans_id, second.commit_ts) == (11, 102)
