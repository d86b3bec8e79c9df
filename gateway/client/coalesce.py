"""Call coalescing for the Python clients (``coalesce_reads=N``, ``coalesce_writes=N``).

The reads (``read``, ``get``) a client has waiting at one moment with one consistency go to
the node as one ``Reads.ReadBatch`` of at most N keys, its writes (``write``) as one
``WriteBatch`` of at most N writes -- as the Go client's ``WithReadCoalescing`` and
``WithWriteCoalescing`` do (clients/go/coalesce.go). A node spends most of a one-row call's
CPU on the call itself; a batch pays that once for all its rows.

Contract, for every coalesced call:

- its semantics are the lone call's: ``ReadBatch`` answers every key with ``Read``'s
  semantics and permission, and a linearizable batch takes its read point after every read in
  it began and answers before any returns; every write stays its own transaction with its own
  idempotency key (so the batch's retries apply none twice) and its own conditions (a refused
  write raises the :class:`PreconditionFailed` a lone write raises); a write that returned
  before another began went in an earlier batch;
- it ends at its own ``timeout`` (DEADLINE_EXCEEDED), and one whose caller gave up is not sent;
- a batch the node refuses whole (:data:`WHOLE_BATCH_REFUSALS`: a bad key or write, a denied
  table, a request or response over the node's limits, a node without the batch method) is
  sent again one call per read or write, so each caller gets its own answer or error.

:class:`AsyncLanes` (asyncio: a task per lane drains it) and :class:`ThreadLanes` (threads:
``MAX_SENDING`` worker threads per lane) hold the waiting calls; the clients give them a
``send(key, batch)`` that answers every call of the batch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import grpc

from gateway.client.errors import GatewayError

__all__ = ["MAX_SENDING", "WHOLE_BATCH_REFUSALS", "AsyncLanes", "ThreadLanes", "Waiting",
           "check_batch_size", "settle", "settle_async"]

#: batch calls one lane has out at once; the calls arriving meanwhile leave in the next one
MAX_SENDING = 2

#: the codes a node refuses a whole batch with for one of its calls (or for being a batch)
WHOLE_BATCH_REFUSALS = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNIMPLEMENTED})


def check_batch_size(name: str, n: int) -> int:
    """``n`` when it is 0 (off) or a batch size the node takes (1..10000); else ValueError."""
    if not 0 <= n <= 10000:
        raise ValueError(f"{name}: a batch size of 1 to 10000 (0: off), not {n}")
    return n


def _late(timeout: float) -> GatewayError:
    return GatewayError(grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"no answer within the call's timeout of {timeout:g} s")


class Waiting:
    """One call waiting on a lane: ``req`` (what the client sends for it) and, once answered,
    ``result`` or ``error``. ``abandoned``: its caller gave up (it is not sent)."""

    __slots__ = ("_done", "_future", "abandoned", "error", "req", "result")

    def __init__(self, req: Any, future: asyncio.Future[None] | None = None) -> None:
        self.req = req
        self.result: Any = None
        self.error: BaseException | None = None
        self.abandoned = False
        self._future = future
        self._done = threading.Event() if future is None else None

    def answer(self, result: Any = None, error: BaseException | None = None) -> None:
        """Set the call's outcome (once; later answers are ignored)."""
        if self.result is not None or self.error is not None:
            return
        self.result, self.error = result, error
        if self._future is not None:
            if not self._future.done():
                self._future.set_result(None)
        elif self._done is not None:
            self._done.set()

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


def _answered_with(batch: list[Waiting], err: GatewayError) -> bool:
    """Answer every call of ``batch`` with ``err``, unless the node refused the batch whole
    (:data:`WHOLE_BATCH_REFUSALS`: then each call is to be sent alone); whether it did."""
    if err.code in WHOLE_BATCH_REFUSALS:
        return False
    for w in batch:
        w.answer(error=err)
    return True


def settle(batch: list[Waiting], err: GatewayError, one: Callable[[Any], Any]) -> None:
    """Answer a batch the node did not answer call by call: with ``err``, or, when the node
    refused it whole (:data:`WHOLE_BATCH_REFUSALS`), each call sent alone with ``one(req)``."""
    if _answered_with(batch, err):
        return
    for w in batch:
        try:
            w.answer(one(w.req))
        except GatewayError as exc:
            w.answer(error=exc)


async def settle_async(batch: list[Waiting], err: GatewayError,
                       one: Callable[[Any], Awaitable[Any]]) -> None:
    """:func:`settle` for an asyncio client: the calls sent alone run concurrently."""
    if _answered_with(batch, err):
        return

    async def alone(w: Waiting) -> None:
        try:
            w.answer(await one(w.req))
        except GatewayError as exc:
            w.answer(error=exc)

    await asyncio.gather(*(alone(w) for w in batch))


class _Lane:
    __slots__ = ("queue", "ready", "sending")

    def __init__(self) -> None:
        self.queue: list[Waiting] = []
        self.sending = 0
        self.ready: threading.Condition | None = None


def _take(lane: _Lane, max_batch: int) -> list[Waiting]:
    batch = lane.queue[:max_batch]
    del lane.queue[:max_batch]
    return [w for w in batch if not w.abandoned]


class AsyncLanes:
    """The waiting calls of an asyncio client, by lane key; ``send(key, batch)`` answers
    every call of ``batch``."""

    def __init__(self, max_batch: int,
                 send: Callable[[Hashable, list[Waiting]], Awaitable[None]]) -> None:
        self.max_batch = max_batch
        self._send = send
        self._lanes: dict[Hashable, _Lane] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, key: Hashable, req: Any, timeout: float) -> Any:
        """Queue ``req`` on lane ``key`` and wait for its outcome (at most ``timeout`` s)."""
        loop = asyncio.get_running_loop()
        w = Waiting(req, loop.create_future())
        lane = self._lanes.setdefault(key, _Lane())
        lane.queue.append(w)
        if lane.sending < MAX_SENDING:
            lane.sending += 1
            task = loop.create_task(self._drain(key, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        assert w._future is not None
        try:
            await asyncio.wait_for(asyncio.shield(w._future), timeout)
        except TimeoutError:
            w.abandoned = True
            raise _late(timeout) from None
        except asyncio.CancelledError:
            w.abandoned = True
            raise
        return w.outcome()

    async def _drain(self, key: Hashable, lane: _Lane) -> None:
        try:
            while lane.queue:
                batch = _take(lane, self.max_batch)
                if not batch:
                    continue
                try:
                    await self._send(key, batch)
                except Exception as exc:  # answer every caller, whatever went wrong
                    for w in batch:
                        w.answer(error=exc)
        finally:
            lane.sending -= 1


class ThreadLanes:
    """The waiting calls of a threaded client, by lane key: ``MAX_SENDING`` daemon worker
    threads per lane, started with the lane, take batches and have ``send(key, batch)``
    answer every call of each; ``close()`` ends them."""

    def __init__(self, max_batch: int, send: Callable[[Hashable, list[Waiting]], None]) -> None:
        self.max_batch = max_batch
        self._send = send
        self._lanes: dict[Hashable, _Lane] = {}
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, key: Hashable, req: Any, timeout: float) -> Any:
        """Queue ``req`` on lane ``key`` and wait for its outcome (at most ``timeout`` s)."""
        w = Waiting(req)
        with self._lock:
            if self._closed:
                raise GatewayError(grpc.StatusCode.CANCELLED, "the client is closed")
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane()
                lane.ready = threading.Condition(self._lock)
                for n in range(MAX_SENDING):
                    threading.Thread(target=self._work, args=(key, lane), daemon=True,
                                     name=f"gateway-coalesce-{n}").start()
            lane.queue.append(w)
            assert lane.ready is not None
            lane.ready.notify()
        assert w._done is not None
        if not w._done.wait(timeout):
            w.abandoned = True
            raise _late(timeout)
        return w.outcome()

    def _work(self, key: Hashable, lane: _Lane) -> None:
        assert lane.ready is not None
        while True:
            with self._lock:
                while not lane.queue and not self._closed:
                    lane.ready.wait()
                if self._closed:
                    batch, lane.queue = lane.queue, []
                    for w in batch:
                        w.answer(error=GatewayError(grpc.StatusCode.CANCELLED,
                                                    "the client is closed"))
                    return
                batch = _take(lane, self.max_batch)
            if not batch:
                continue
            try:
                self._send(key, batch)
            except Exception as exc:  # answer every caller, whatever went wrong
                for w in batch:
                    w.answer(error=exc)

    def close(self) -> None:
        """End the worker threads; calls still waiting fail CANCELLED."""
        with self._lock:
            self._closed = True
            for lane in self._lanes.values():
                assert lane.ready is not None
                lane.ready.notify_all()
