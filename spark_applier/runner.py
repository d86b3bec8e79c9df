"""``MicroBatchRunner``: the spark plugin's applier loop. From its durable position it applies
the log in micro-batches -- whenever ``max_entries`` committed entries are waiting, or
``interval`` seconds have passed with at least one waiting -- each one a bulk apply
(``bulk.apply_log``) that ends by saving the new position.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MicroBatchRunner"]


class MicroBatchRunner:
    """Applies ``source`` to ``target`` in micro-batches; see the module docstring."""

    def __init__(self, spark: Any, source: str, target: Any, state_dir: str, *,
                 interval: float = 10.0, max_entries: int = 100_000,
                 partition_bytes: int | None = None, poll: float = 0.5,
                 read_options: Mapping[str, str] | None = None) -> None:
        if interval <= 0 or max_entries < 1:
            raise ValueError("interval must be > 0 and max_entries >= 1")
        self.spark, self.source, self.target, self.state_dir = spark, source, target, state_dir
        self.interval, self.max_entries, self.poll = interval, max_entries, poll
        self.partition_bytes = partition_bytes
        self.read_options = dict(read_options or {})
        self._stop = threading.Event()

    def stop(self) -> None:
        """Make ``run`` return after the batch in progress."""
        self._stop.set()

    def waiting(self) -> tuple[int, int]:
        """``(applied position, last committed index)`` now."""
        from . import remote
        from .layout import discover, last_index
        from .position import SparkPositionStore

        applied = SparkPositionStore(self.state_dir, self.target.name).load().log_index
        if remote.is_remote(self.source):
            return applied, remote.last_index(remote.source_of(self.source, self.read_options))
        return applied, last_index(discover(self.source))

    def run_once(self) -> Any:
        """Apply at most ``max_entries`` waiting entries; the ``ApplyReport`` or None."""
        from .bulk import apply_log

        applied, last = self.waiting()
        if last <= applied:
            return None
        return apply_log(self.spark, self.source, self.target, self.state_dir,
                         partition_bytes=self.partition_bytes,
                         index_to=min(last, applied + self.max_entries),
                         read_options=self.read_options)

    def run(self, *, on_batch: Callable[[Any], None] | None = None,
            max_batches: int | None = None) -> int:
        """Loop until ``stop()`` (or ``max_batches`` batches); return the batches applied."""
        batches = 0
        last_run = time.monotonic()
        while not self._stop.is_set() and (max_batches is None or batches < max_batches):
            applied, last = self.waiting()
            due = time.monotonic() - last_run >= self.interval
            if last - applied >= self.max_entries or (due and last > applied):
                report = self.run_once()
                last_run = time.monotonic()
                if report is not None:
                    batches += 1
                    if on_batch is not None:
                        on_batch(report)
                continue
            self._stop.wait(self.poll)
        return batches
