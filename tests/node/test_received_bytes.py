"""Writes keep the bytes they were given (issue 53, item 4): Write, WriteBatch, StreamWrite and
a write a follower forwarded put each statement into the log entry exactly as the client
encoded it -- sliced out of the received request, never parsed and serialized again.

The statement used here encodes its insert's records before the table and field metadata:
valid protobuf (fields may come in any order) that parses to the same message, but that a
serialization of the parsed message would reorder. Finding those bytes in the entry shows they
were not re-encoded; the row read back shows the entry still applies as the message says."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from gateway.client import GatewayClient
from gateway.node import GatewayNode
from gateway.v1 import gateway_pb2, statement_pb2, value_pb2

from .conftest import node_configs

FT = value_pb2.FieldType
V = value_pb2.Value


class _Node:
    def __init__(self, address: str, node: GatewayNode, loop: asyncio.AbstractEventLoop):
        self.address, self.node, self.loop = address, node, loop

    def entry(self, index: int) -> bytes:
        (e,) = self.node.driver.storage.entries(index, index + 1, 1 << 30)
        return e.data


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Node]:
    cfg = node_configs(tmp_path_factory.mktemp("received"), 1)[0]
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
        yield _Node(cfg.api, node, loop)
    finally:
        asyncio.run_coroutine_threadsafe(node.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def _records_first(key: int, name: str) -> tuple[bytes, bytes]:
    """``(statement as sent: records before the header, statement as re-serialized)``."""
    head = statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="t", table_name="kept"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=FT.FIELD_TYPE_INTEGER)],
        fields=[statement_pb2.FieldMetadata(name="name", type=FT.FIELD_TYPE_VARCHAR)])
    recs = statement_pb2.InsertStatement(records=[statement_pb2.InsertRecord(
        key_values=[V(int_value=key)], after_values=[V(string_value=name)])])
    body = recs.SerializeToString() + head.SerializeToString()
    sent = statement_pb2.Statement(insert=statement_pb2.InsertStatement.FromString(body))
    stmt_sent = b"\x0a" + bytes([len(body)]) + body  # Statement.insert is field 1
    assert statement_pb2.Statement.FromString(stmt_sent) == sent
    canonical = sent.SerializeToString()
    assert canonical != stmt_sent
    return stmt_sent, canonical


def _field(key: int, data: bytes) -> bytes:
    assert len(data) < 128
    return bytes([key, len(data)]) + data


def _call(address: str, method: str, request: bytes, streaming: bool = False) -> bytes:
    with grpc.insecure_channel(address) as ch:
        if streaming:
            call = ch.stream_stream(f"/gateway.v1.Gateway/{method}")
            return b"".join(call(iter([request]), timeout=20))
        return ch.unary_unary(f"/gateway.v1.Gateway/{method}")(request, timeout=20)


def _check(single: _Node, log_index: int, stmt_sent: bytes, canonical: bytes, key: int,
           name: str) -> None:
    data = single.entry(log_index)
    assert stmt_sent[1:] in data  # the statement's bytes as sent (retagged as field 6)
    assert canonical[1:] not in data
    with GatewayClient(single.address) as c:
        assert c.get("t.kept", key) == {"id": key, "name": name}


def test_write_logs_the_statements_as_the_client_encoded_them(single):
    sent, canonical = _records_first(1, "unary")
    out = gateway_pb2.WriteResult.FromString(
        _call(single.address, "Write", _field(0x0A, sent)))  # WriteRequest.statements
    _check(single, out.log_index, sent, canonical, 1, "unary")


def test_write_batch_logs_the_statements_as_the_client_encoded_them(single):
    sent, canonical = _records_first(2, "batch")
    req = _field(0x0A, _field(0x0A, sent))  # WriteBatchRequest.writes[0].statements[0]
    out = gateway_pb2.WriteBatchResponse.FromString(_call(single.address, "WriteBatch", req))
    _check(single, out.results[0].log_index, sent, canonical, 2, "batch")


def test_stream_write_logs_the_statements_as_the_client_encoded_them(single):
    sent, canonical = _records_first(3, "stream")
    req = b"\x08\x01" + _field(0x12, _field(0x0A, sent))  # seq 1, writes[0].statements[0]
    out = gateway_pb2.StreamWriteResponse.FromString(
        _call(single.address, "StreamWrite", req, streaming=True))
    assert out.acks[0].code == 0, out.acks[0].error
    _check(single, out.acks[0].result.log_index, sent, canonical, 3, "stream")


def test_a_forwarded_write_logs_the_statements_as_the_client_encoded_them(single):
    sent, canonical = _records_first(4, "forwarded")

    class Context:
        def invocation_metadata(self) -> tuple[Any, ...]:
            return ()

        def time_remaining(self) -> float:
            return 20.0

    got = asyncio.run_coroutine_threadsafe(
        single.node.servicer.forwarded("Write", _field(0x0A, sent), Context()),
        single.loop).result(30)
    out = gateway_pb2.WriteResult.FromString(got)
    _check(single, out.log_index, sent, canonical, 4, "forwarded")
