"""Per-applier counters and gauges, readable while the dispatcher runs.

Counters only grow: ``entries_read``, ``transactions`` (complete transactions reduced),
``rolled_back``, ``skipped`` (already applied per the GTID set), ``ops_in`` (operations before
reduction), ``ops_out`` (after), ``applied_ops``, ``batches``, ``retries``, ``dead_letters``,
``barriers``, ``column_windows``, ``schema_events``, ``schema_unsupported``. Gauges:
``lag_entries`` (committed entries not yet under the watermark), ``lag_seconds`` (age of
the oldest such entry by its commit timestamp; 0 when caught up),
``watermark`` and ``queued_ops``. ``snapshot()`` is what the ``gateway_publish_metrics`` hook
receives.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields

__all__ = ["ApplierMetrics"]


@dataclass
class ApplierMetrics:
    """Thread-safe metrics of one applier (``applier`` names it)."""

    applier: str
    entries_read: int = 0
    transactions: int = 0
    rolled_back: int = 0
    skipped: int = 0
    ops_in: int = 0
    ops_out: int = 0
    applied_ops: int = 0
    batches: int = 0
    retries: int = 0
    dead_letters: int = 0
    barriers: int = 0
    column_windows: int = 0  # windows applied column by column (gateway.core.insert_columns)
    schema_events: int = 0  # schema events passed (applied, ignored or not supported)
    schema_unsupported: int = 0  # schema events the store could not make (schema_delivery)
    lag_entries: int = 0
    lag_seconds: float = 0.0
    watermark: int = 0
    queued_ops: int = 0
    unavailable: int = 0  # 1 while the store cannot be reached (the applier retries)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _error: str = field(default="", repr=False, compare=False)

    def add(self, **deltas: int) -> None:
        """Add to counters, e.g. ``add(applied_ops=5, batches=1)``."""
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def set(self, **values: float) -> None:
        """Set gauges, e.g. ``set(lag_entries=3)``."""
        with self._lock:
            for name, value in values.items():
                setattr(self, name, value)

    def set_unavailable(self, error: str) -> None:
        """Mark the store unavailable with ``error`` (one line), or available again when
        ``error`` is empty."""
        with self._lock:
            self.unavailable = 1 if error else 0
            self._error = error

    def unavailable_error(self) -> str:
        """Why the store is unavailable (empty while it is not)."""
        with self._lock:
            return self._error

    def snapshot(self) -> dict[str, float]:
        """All counters and gauges as ``{name: value}`` (without ``applier``)."""
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self)
                    if f.name not in ("applier", "_lock", "_error")}
