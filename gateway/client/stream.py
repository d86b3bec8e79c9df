"""``WriteStream``: many writes in flight on one ``StreamWrite`` call (asyncio).

::

    async with AsyncGatewayClient("127.0.0.1:7070") as c:
        async with c.stream(window=1024) as s:
            futs = [await s.send([row_insert("shop.items", {"id": i}, {"name": "a"})])
                    for i in range(10_000)]
            results = await asyncio.gather(*futs)        # WriteResult each

``send`` waits while ``window`` writes are unacknowledged, queues the write and returns a
future of its ``WriteResult``. Queued writes leave in as few ``StreamWriteRequest`` messages as
the event loop allows (up to ``max_per_request`` each); the server packs acks the same way, so
a producer pays gRPC's per-message cost per burst, not per write.

A write is a statement list or the bytes of a
:class:`~gateway.client.prepared.PreparedInsert` (``send(ins.encode(key, values))``: about a
tenth of the client CPU per row that message objects cost). The stream encodes its requests itself
(the call takes bytes), so a write's statements are serialized once.

Failures: a write the server rejects fails its own future with :class:`GatewayError` (its
``code`` and message); the stream goes on. If the stream itself breaks (node down, deadline,
cancelled), every unacknowledged future fails with the stream's error and later ``send`` calls
raise it. Nothing is retried here: every write carries an idempotency key unless
``idempotency_key=""`` opts out (the default is the stream's random 128-bit prefix and the
write's sequence number, as unique as a ``uuid4``; readable as ``future.idempotency_key``), so
re-sending the failed ones -- on a new stream or with ``AsyncGatewayClient.write`` -- never
applies a write twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from typing import Any

import grpc

from gateway.client.conditions import serialize_conditions
from gateway.client.errors import GatewayError, PreconditionFailed, error_of
from gateway.client.prepared import Statements, keyed, repeated, serialize_statements, varint
from gateway.v1 import gateway_pb2, transaction_pb2

__all__ = ["WriteStream"]


class WriteStream:
    """One open ``StreamWrite`` call whose requests are serialized bytes (as
    ``AsyncGatewayClient.stream`` opens it); see the module docstring. Use as an async context
    manager (``close`` waits for every ack, then ends the call)."""

    def __init__(self, call: Any, *, window: int = 1024, max_per_request: int = 256) -> None:
        if window < 1 or max_per_request < 1:
            raise ValueError("window and max_per_request must be at least 1")
        self._call = call
        self._window = window
        self._room = asyncio.Event()  # set when acks (or a failure) emptied some of the window
        self._max = max_per_request
        # Serialized WriteRequests: the writes numbered _seq - len(_queue) + 1 ... _seq.
        self._queue: list[bytes] = []
        self._pending: dict[int, asyncio.Future[gateway_pb2.WriteResult]] = {}
        self._seq = 0
        self._key_prefix = uuid.uuid4().hex
        self._queued = asyncio.Event()
        self._failed: BaseException | None = None
        self._closing = False
        self._sender = asyncio.create_task(self._send_loop())
        self._receiver = asyncio.create_task(self._receive_loop())

    async def send(self, statements: Statements, *,
                   idempotency_key: str | None = None,
                   conditions: Sequence[transaction_pb2.Condition] = ()
                   ) -> asyncio.Future[gateway_pb2.WriteResult]:
        """Queue one write (waiting while the window is full); returns its result's future.
        ``statements``: a statement list or a ``PreparedInsert``'s bytes;
        ``idempotency_key``: ``None`` = a fresh one, ``""`` = none; ``conditions``: see
        :mod:`gateway.client.conditions` (a refused write fails its future with
        :class:`~gateway.client.errors.PreconditionFailed`)."""
        if self._failed is not None:
            raise self._failed
        if self._closing:
            raise RuntimeError("the write stream is closing")
        body = serialize_statements(statements)
        while len(self._pending) >= self._window:
            self._room.clear()
            await self._room.wait()
            if self._failed is not None:
                raise self._failed
        self._seq += 1
        key = f"{self._key_prefix}{self._seq:x}" if idempotency_key is None else idempotency_key
        body = keyed(body, key)
        if conditions:
            body += serialize_conditions(conditions)
        fut: asyncio.Future[gateway_pb2.WriteResult] = (
            asyncio.get_running_loop().create_future())
        fut.idempotency_key = key  # type: ignore[attr-defined]
        fut.conditions = conditions  # type: ignore[attr-defined]
        self._pending[self._seq] = fut
        self._queue.append(body)
        self._queued.set()
        return fut

    @property
    def in_flight(self) -> int:
        """Writes sent or queued and not yet acknowledged."""
        return len(self._pending)

    async def _send_loop(self) -> None:
        try:
            while True:
                await self._queued.wait()
                self._queued.clear()
                while self._queue:
                    # Consecutive sequence numbers: one request per run of them.
                    first = self._seq - len(self._queue) + 1
                    batch = self._queue[: self._max]
                    del self._queue[: self._max]
                    await self._call.write(_stream_request(first, batch))
                if self._closing:
                    await self._call.done_writing()
                    return
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the call broke while writing
            self._fail(exc)

    async def _receive_loop(self) -> None:
        try:
            while True:
                resp = await self._call.read()
                if resp is grpc.aio.EOF:
                    break
                for ack in resp.acks:
                    fut = self._pending.pop(ack.seq, None)
                    if fut is None:
                        continue
                    if fut.done():
                        continue
                    if ack.code == 0:
                        fut.set_result(ack.result)
                    else:
                        fut.set_exception(_ack_error(ack.code, ack.error, ack.field,
                                                     fut.conditions))  # type: ignore[attr-defined]
                self._room.set()
            if self._pending:
                self._fail(RuntimeError(f"the stream ended with {len(self._pending)} writes "
                                        "unacknowledged"))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        err = error_of(exc) if isinstance(exc, grpc.RpcError) else exc
        if self._failed is None:
            self._failed = err
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._queue.clear()
        self._room.set()

    async def close(self) -> None:
        """Stop sending, wait for every outstanding ack, end the call."""
        self._closing = True
        self._queued.set()
        with contextlib.suppress(BaseException):
            await self._sender
        with contextlib.suppress(BaseException):
            await self._receiver
        self._call.cancel()

    async def __aenter__(self) -> WriteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self._sender.cancel()
            self._receiver.cancel()
            self._fail(RuntimeError("the write stream was abandoned"))
            self._call.cancel()
            return
        await self.close()


def _stream_request(seq: int, writes: list[bytes]) -> bytes:
    """A serialized ``StreamWriteRequest`` (``seq`` of ``writes[0]``, the serialized writes)."""
    return b"\x08" + varint(seq) + repeated(b"\x12", writes)


def _ack_error(code: int, details: str, field: str = "",
               conditions: Sequence[transaction_pb2.Condition] = ()) -> GatewayError:
    """The `GatewayError` of a failed ack (its numeric gRPC status code; a refused
    conditional write's is a `PreconditionFailed` naming the condition it sent)."""
    status = next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    if status == grpc.StatusCode.FAILED_PRECONDITION:
        return PreconditionFailed(details, field).resolve(conditions)
    return GatewayError(status, details, field)
