"""Partition workers: one thread per partition, each applying its operations in order.

``BatchRunner.run(ops)`` is the whole failure policy for a batch: try ``applier.apply``; while
the store is unavailable (``contract.is_unavailable``) retry with backoff for as long as it
lasts, marking the applier's metrics unavailable with the error (never a dead letter: the
batch is not at fault; a full disk is such a condition, shown as ``out of space:
<path>``); on another transient error (``contract.is_transient``) retry with
exponential backoff up to ``RetryPolicy.max_attempts``; if the batch still fails (or failed
permanently) and holds more than one operation, run each operation alone the same way, so one
poison operation cannot take its neighbours down; an operation that fails alone goes to the
dead-letter sink with its error and attempt count. It returns only when every operation is
applied or dead-lettered -- nothing is dropped -- or raises ``Stopped`` when the dispatcher
stops during a backoff (the operations stay unapplied and are replayed after a restart).

``PartitionWorker`` drains a bounded queue of per-unit operation lists (a full queue blocks the
dispatcher: backpressure), groups up to ``max_batch`` queued operations per ``apply`` call and
reports finished operations through a callback.
"""

from __future__ import annotations

import enum
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Final

from gateway.core.rowops import RowOp

from .contract import (
    Applier,
    UnsupportedOperationError,
    is_transient,
    is_unavailable,
    out_of_space,
    unavailable_text,
)
from .metrics import ApplierMetrics
from .progress import Unit

log = logging.getLogger("gateway.appliers")

__all__ = ["STOP", "BatchRunner", "PartitionWorker", "RetryPolicy", "Stopped"]

DeadLetterSink = Callable[[RowOp, BaseException, int], None]


class Stopped(Exception):
    """The dispatcher is stopping; the batch in hand was not (fully) applied."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts per operation and the exponential backoff between them (seconds)."""

    max_attempts: int = 5
    initial_backoff: float = 0.05
    multiplier: float = 2.0
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, not {self.max_attempts}")

    def delay(self, attempt: int) -> float:
        """Pause after failed attempt number ``attempt`` (1-based)."""
        return min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))


class BatchRunner:
    """Applies batches to one applier under a ``RetryPolicy``; see the module docstring."""

    def __init__(self, applier: Applier, policy: RetryPolicy, metrics: ApplierMetrics,
                 dead_letter: DeadLetterSink, stop: threading.Event) -> None:
        self.applier = applier
        self.policy = policy
        self.metrics = metrics
        self.dead_letter = dead_letter
        self.stop = stop
        self._serial = (nullcontext() if applier.capabilities.thread_safe
                        else threading.Lock())
        self._down = False  # the last attempt found the store unavailable

    def run(self, ops: Sequence[RowOp]) -> None:
        caps = self.applier.capabilities
        todo = []
        for op in ops:
            if caps.accepts(op):
                todo.append(op)
            else:
                self._bury(op, UnsupportedOperationError(
                    f"applier {self.applier.name!r} does not accept {op.kind.name} "
                    f"operations"), 0)
        if todo:
            self._run(todo)

    def _run(self, ops: Sequence[RowOp]) -> None:
        error, attempts = self._attempt(ops)
        if error is None:
            return
        if len(ops) > 1:
            for op in ops:
                self._run([op])
            return
        self._bury(ops[0], error, attempts)

    def _attempt(self, ops: Sequence[RowOp]) -> tuple[BaseException | None, int]:
        attempt = down = 0  # attempts that count towards max_attempts; unavailable ones
        while True:
            if self.stop.is_set():
                raise Stopped
            try:
                with self._serial:
                    self.applier.apply(ops)
            except Exception as exc:
                if isinstance(exc, UnsupportedOperationError) or not is_transient(exc):
                    return exc, attempt + 1
                if is_unavailable(exc):  # not the batch's fault: wait for the store, the
                    self._unavailable(exc)  # backoff growing to its cap
                    down += 1
                    delay = self.policy.delay(down)
                else:
                    attempt += 1
                    if attempt >= self.policy.max_attempts:
                        return exc, attempt
                    delay = self.policy.delay(attempt)
                self.metrics.add(retries=1)
                if self.stop.wait(delay):
                    raise Stopped from None
                continue
            attempt += 1
            if self._down:
                self._down = False
                self.metrics.set_unavailable("")
                log.warning("applier %s: the store is available again", self.applier.name)
            self.metrics.add(applied_ops=len(ops), batches=1)
            return None, attempt

    def _unavailable(self, exc: BaseException) -> None:
        text = unavailable_text(exc)  # "out of space: <path>" for a full disk
        if not self._down:
            log.warning("applier %s: the store is unavailable, retrying until it returns: %s",
                        self.applier.name, text)
        self._down = True
        self.metrics.set_unavailable(text)

    def _bury(self, op: RowOp, error: BaseException, attempts: int) -> None:
        down = 0
        while True:
            try:
                self.dead_letter(op, error, attempts)
                break
            except Exception as exc:  # the dead-letter log's disk is full: wait, as above
                if out_of_space(exc) is None:
                    raise
                down += 1
                self._unavailable(exc)
                if self.stop.wait(self.policy.delay(down)):
                    raise Stopped from None
        if down:
            self._down = False
            self.metrics.set_unavailable("")
        self.metrics.add(dead_letters=1)


class _Sentinel(enum.Enum):
    STOP = "stop"


STOP: Final = _Sentinel.STOP
"""Queue sentinel: the worker finishes what it holds and exits."""

#: What a worker queues: one unit's operations for its partition, and the unit.
WorkItem = tuple[list[RowOp], Unit]
Done = Callable[[list[WorkItem]], None]


class PartitionWorker(threading.Thread):
    """Applies the operations queued for one partition, in queue order.

    Items are ``(ops, token)`` pairs (a list of operations of one unit for this partition);
    the worker hands the applier up to ``max_batch`` operations per call, and ``on_done``
    receives the items once all their operations are applied (or dead-lettered). An
    unexpected exception (the dead-letter log cannot be written, ...) is kept in ``failure``
    and reported through ``on_failure``; the worker then exits.
    """

    def __init__(self, number: int, runner: BatchRunner, max_batch: int, queue_size: int,
                 on_done: Done, on_failure: Callable[[BaseException], None]) -> None:
        super().__init__(name=f"gateway-apply-{runner.applier.name}-{number}", daemon=True)
        self.runner = runner
        self.max_batch = max_batch
        self.queue: queue.Queue[WorkItem | _Sentinel] = queue.Queue(maxsize=queue_size)
        self.on_done = on_done
        self.on_failure = on_failure
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._loop()
        except Stopped:
            pass
        except BaseException as exc:  # reported, then the dispatcher stops
            self.failure = exc
            self.on_failure(exc)

    def _loop(self) -> None:
        q = self.queue
        while True:
            item = q.get()
            if item is STOP:
                return
            batch = [item]
            size = len(item[0])
            stop_after = False
            while size < self.max_batch:
                try:
                    nxt = q.get_nowait()
                except queue.Empty:
                    break
                if nxt is STOP:
                    stop_after = True
                    break
                batch.append(nxt)
                size += len(nxt[0])
            ops = [op for item_ops, _ in batch for op in item_ops]
            for start in range(0, len(ops), self.max_batch):
                self.runner.run(ops[start : start + self.max_batch])
            self.on_done(batch)
            if stop_after:
                return

    def put(self, item: WorkItem | _Sentinel, stop: threading.Event) -> None:
        """Queue ``item``, blocking while the queue is full; raises ``Stopped`` if ``stop``
        is set while waiting."""
        while True:
            try:
                self.queue.put(item, timeout=0.05)
                return
            except queue.Full:
                if stop.is_set() or not self.is_alive():
                    raise Stopped from None
