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

Failures: a write the server rejects fails its own future with :class:`GatewayError` (its
``code`` and message); the stream goes on. If the stream itself breaks (node down, deadline,
cancelled), every unacknowledged future fails with the stream's error and later ``send`` calls
raise it. Nothing is retried here: every write carries an idempotency key (``uuid4`` unless
given, readable as ``future.idempotency_key``), so re-sending the failed ones -- on a new stream
or with ``AsyncGatewayClient.write`` -- never applies a write twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable
from typing import Any

import grpc

from gateway.client.errors import GatewayError, error_of
from gateway.v1 import gateway_pb2, statement_pb2

__all__ = ["WriteStream"]


class WriteStream:
    """One open ``StreamWrite`` call; see the module docstring. Use as an async context
    manager (``close`` waits for every ack, then ends the call)."""

    def __init__(self, call: Any, *, window: int = 1024, max_per_request: int = 256) -> None:
        if window < 1 or max_per_request < 1:
            raise ValueError("window and max_per_request must be at least 1")
        self._call = call
        self._window = asyncio.Semaphore(window)
        self._max = max_per_request
        self._queue: list[tuple[int, gateway_pb2.WriteRequest]] = []
        self._pending: dict[int, asyncio.Future[gateway_pb2.WriteResult]] = {}
        self._seq = 0
        self._queued = asyncio.Event()
        self._failed: BaseException | None = None
        self._closing = False
        self._sender = asyncio.create_task(self._send_loop())
        self._receiver = asyncio.create_task(self._receive_loop())

    async def send(self, statements: Iterable[statement_pb2.Statement], *,
                   idempotency_key: str | None = None
                   ) -> asyncio.Future[gateway_pb2.WriteResult]:
        """Queue one write (waiting while the window is full); returns its result's future."""
        if self._failed is not None:
            raise self._failed
        if self._closing:
            raise RuntimeError("the write stream is closing")
        await self._window.acquire()
        if self._failed is not None:
            self._window.release()
            raise self._failed
        key = idempotency_key or uuid.uuid4().hex
        req = gateway_pb2.WriteRequest(statements=list(statements), idempotency_key=key)
        self._seq += 1
        fut: asyncio.Future[gateway_pb2.WriteResult] = (
            asyncio.get_running_loop().create_future())
        fut.idempotency_key = key  # type: ignore[attr-defined]
        self._pending[self._seq] = fut
        self._queue.append((self._seq, req))
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
                    batch = self._queue[: self._max]
                    del self._queue[: self._max]
                    await self._call.write(gateway_pb2.StreamWriteRequest(
                        seq=batch[0][0], writes=[w for _, w in batch]))
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
                    self._window.release()
                    if fut.done():
                        continue
                    if ack.code == 0:
                        fut.set_result(ack.result)
                    else:
                        fut.set_exception(_ack_error(ack.code, ack.error))
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
            self._window.release()
            if not fut.done():
                fut.set_exception(err)
        self._queue.clear()

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


def _ack_error(code: int, details: str) -> GatewayError:
    """The `GatewayError` of a failed ack (its numeric gRPC status code)."""
    status = next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    return GatewayError(status, details)
