"""Test doubles: an applier over the reference store model, with failure injection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from gateway.appliers.contract import Applier, Capabilities
from gateway.core.rowops import RowOp
from tests.reducer.model import Store, apply_op


class ModelApplier(Applier):
    """Applies operations to ``store`` (the reference model) and records, per row, the order
    in which operations arrived. ``fail(op, attempt)`` may raise to inject failures."""

    def __init__(self, name: str = "model", *, capabilities: Capabilities | None = None,
                 fail: Callable[[RowOp, int], None] | None = None) -> None:
        self.name = name
        self.capabilities = capabilities or Capabilities(accepts_sql=True, max_batch=8)
        self.store: Store = {}
        self.trace: list[Store] = []
        self.history: dict[tuple, list[tuple[int, int]]] = {}
        self.calls = 0
        self.attempts: dict[tuple, int] = {}
        self.fail = fail
        self.concurrent_rows: set = set()
        self.overlap = False
        self._lock = threading.Lock()

    def apply(self, ops: Sequence[RowOp]) -> None:
        with self._lock:
            self.calls += 1
            rows = {op.row_id for op in ops}
            if rows & self.concurrent_rows:
                self.overlap = True
            self.concurrent_rows |= rows
        try:
            if self.fail is not None:
                for op in ops:
                    key = (op.row_id, op.log_index, op.statement, op.kind)
                    with self._lock:
                        self.attempts[key] = self.attempts.get(key, 0) + 1
                        n = self.attempts[key]
                    self.fail(op, n)
            with self._lock:
                for op in ops:
                    apply_op(self.store, op, self.trace)
                    self.history.setdefault(op.row_id, []).append((op.log_index, op.statement))
        finally:
            with self._lock:
                self.concurrent_rows -= rows
