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
from gateway.node.loop.write_proposal import WriteProposal
from gateway.node.state.wire import frame_statements
from gateway.v1 import gateway_pb2, statement_pb2, transaction_pb2, value_pb2

from .conftest import node_configs

FT = value_pb2.FieldType
V = value_pb2.Value


_LOOPS: dict[int, asyncio.AbstractEventLoop] = {}  # each node's loop, by id


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
    _LOOPS[id(node)] = loop
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


def _spied(node: GatewayNode) -> list[WriteProposal]:
    """The proposals the API hands the driver from now on (recorded, then submitted)."""
    drv = node.driver
    submit = drv.submit_write
    got: list[WriteProposal] = []

    def spy(p: WriteProposal):  # type: ignore[no-untyped-def]
        got.append(p)
        return submit(p)

    drv.submit_write = spy  # type: ignore[method-assign]
    return got


def _conditional(key: int, idem: str) -> gateway_pb2.WriteRequest:
    w = _write(key)
    w.idempotency_key = idem
    w.conditions.append(transaction_pb2.Condition(table="t.work", key=[V(int_value=key)],
                                                  absent=True))
    return w


def _assert_fields(p: WriteProposal, w: gateway_pb2.WriteRequest, *, created: bool,
                   unrecorded: bool, admin: bool) -> None:
    """Every field of ``p`` holds what the API knows of write ``w``: the hot sites pass the
    fields by position, so one out of ``FIELDS``' order lands in another's name."""
    assert list(p.statements) == list(w.statements)
    assert p.idempotency_key == w.idempotency_key
    assert type(p.start_ns) is int and p.start_ns > 10 ** 18
    assert (type(p.created) is list) if created else p.created is None
    assert p.raw == frame_statements(w.statements)
    assert p.wire is True
    assert p.unrecorded is unrecorded
    assert p.admin is admin
    if w.conditions:
        assert p.conditions is not None and list(p.conditions) == list(w.conditions)
    else:
        assert p.conditions is None


def test_write_batch_hands_the_driver_each_writes_fields_under_their_names(single):
    got = _spied(single)
    try:
        ws = [_conditional(1001, "wp-batch"), _write(1002)]
        with grpc.insecure_channel(single.config.api) as ch:
            resp = ch.unary_unary(
                "/gateway.v1.Gateway/WriteBatch",
                request_serializer=gateway_pb2.WriteBatchRequest.SerializeToString,
                response_deserializer=gateway_pb2.WriteBatchResponse.FromString)(
                gateway_pb2.WriteBatchRequest(writes=ws), timeout=20)
    finally:
        del single.driver.submit_write
    assert len(resp.results) == 2 and not resp.errors
    assert len(got) == 2
    _assert_fields(got[0], ws[0], created=True, unrecorded=True, admin=False)
    _assert_fields(got[1], ws[1], created=True, unrecorded=False, admin=False)


def test_stream_write_hands_the_driver_each_writes_fields_under_their_names(single):
    got = _spied(single)
    try:
        ws = [_conditional(2001, "wp-stream"), _write(2002)]
        acks = _stream(single, gateway_pb2.StreamWriteRequest(seq=1, writes=ws))
    finally:
        del single.driver.submit_write
    assert [a.code for a in acks] == [0, 0], [a.error for a in acks]
    assert len(got) == 2
    _assert_fields(got[0], ws[0], created=False, unrecorded=True, admin=True)
    _assert_fields(got[1], ws[1], created=False, unrecorded=False, admin=True)


def test_a_proposal_submitted_twice_is_queued_as_two_writes(single):
    async def twice() -> list[object]:
        p = WriteProposal([_write(3001).statements[0]], "", 0)
        return list(await asyncio.gather(single.driver.submit_write(p),
                                         single.driver.submit_write(p)))

    results = asyncio.run_coroutine_threadsafe(twice(), _LOOPS[id(single)]).result(20)
    assert len(results) == 2 and results[0] != results[1]
