"""Handing one schema event to one applier under its ``schema_policy``.

The dispatcher calls ``SchemaDelivery.deliver(index, event)`` on its own thread once every
earlier transaction was applied by the applier and before it admits any later one (the
ordering is the dispatcher's; this module is the policy and the failure handling):

- ``stop``: raises ``SchemaStopError`` naming the applier, table, version and change;
- ``ignore``, or ``apply`` for an applier without ``apply_schema``: passed by;
- ``apply``: ``applier.apply_schema(event)``. While the store is unavailable it is retried
  with backoff for as long as that lasts (the applier shows as unavailable, as for rows);
  other transient errors up to the retry policy's attempts; ``UnsupportedOperationError``
  (the store cannot make this change: CQL renames only key columns) is logged as one warning
  line, counted in ``schema_unsupported``, kept as the applier's ``schema_note`` and passed
  by; any other failure, or a transient one that outlasts its attempts, raises
  ``SchemaStopError``: a change the store did not take would make the rows after it fail
  one by one, so the applier stops before it instead, its position right before the event.

``on_event(applier, event, outcome)`` -- the ``gateway_schema_event`` hook -- is told every
event that was passed (``outcome`` ``applied``, ``ignored`` or ``unsupported``), in log order.
Raises ``Stopped`` when the dispatcher stops during a backoff (the event comes again after a
restart: ``apply_schema`` must be idempotent).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .contract import (
    SCHEMA_IGNORE,
    SCHEMA_STOP,
    Applier,
    SchemaStopError,
    UnsupportedOperationError,
    is_transient,
    is_unavailable,
    unavailable_text,
)
from .metrics import ApplierMetrics
from .workers import RetryPolicy, Stopped

if TYPE_CHECKING:
    from gateway.schema.model import SchemaEvent

__all__ = ["APPLIED", "IGNORED", "UNSUPPORTED", "SchemaDelivery", "SchemaHook", "describe"]

log = logging.getLogger("gateway.appliers")

APPLIED, IGNORED, UNSUPPORTED = "applied", "ignored", "unsupported"
#: ``(applier name, event, outcome)``: the ``gateway_schema_event`` hook.
SchemaHook = Callable[[str, "SchemaEvent", str], None]


def describe(event: SchemaEvent) -> str:
    """One phrase naming the change: ``table shop.items version 3 (add_column c)``."""
    what = event.kind
    if event.kind == "rename_column":
        what += f" {event.old_name} -> {event.new_name}"
    elif event.column is not None:
        what += f" {event.column.name}"
    return f"table {event.table} version {event.version} ({what})"


class SchemaDelivery:
    """The schema policy of one applier; see the module docstring."""

    def __init__(self, applier: Applier, retry: RetryPolicy, metrics: ApplierMetrics,
                 stop: threading.Event, on_event: SchemaHook | None = None) -> None:
        self.applier = applier
        self.retry = retry
        self.metrics = metrics
        self._stop = stop
        self._on_event = on_event
        #: The last change the store could not make (one line), or empty.
        self.note = ""

    def deliver(self, index: int, event: SchemaEvent) -> str:
        """Apply ``event`` (log entry ``index``) under the applier's policy; return the
        outcome (``applied``, ``ignored``, ``unsupported``) or raise ``SchemaStopError`` /
        ``Stopped``."""
        name = self.applier.name
        policy = getattr(self.applier, "schema_policy", "apply")
        where = f"applier {name}: schema change at log index {index}, {describe(event)}"
        if policy == SCHEMA_STOP:
            raise SchemaStopError(f"{where}: stopped by schema_policy 'stop' (position kept "
                                  f"before it; set schema_policy to apply or ignore and "
                                  f"restart)")
        method: Callable[[SchemaEvent], None] | None = getattr(self.applier, "apply_schema",
                                                               None)
        if policy == SCHEMA_IGNORE or method is None:
            outcome = IGNORED
        else:
            outcome = self._apply(method, event, where)
        self.metrics.add(schema_events=1)
        if self._on_event is not None:
            self._on_event(name, event, outcome)
        return outcome

    def _apply(self, method: Callable[[SchemaEvent], None], event: SchemaEvent,
               where: str) -> str:
        attempt = 0
        down = False
        while True:
            try:
                method(event)
            except UnsupportedOperationError as exc:
                self.note = " ".join(f"{where}: not applied: {exc}".split())
                log.warning("%s", self.note)
                self.metrics.add(schema_unsupported=1)
                return UNSUPPORTED
            except Exception as exc:
                if is_unavailable(exc):
                    down = True
                    self.metrics.set_unavailable(unavailable_text(exc))
                elif not is_transient(exc) or attempt + 1 >= self.retry.max_attempts:
                    raise SchemaStopError(" ".join(
                        f"{where}: apply_schema failed: {type(exc).__name__}: {exc}".split())
                    ) from None
                attempt += 1
                self.metrics.add(retries=1)
                if self._stop.wait(self.retry.delay(attempt)):
                    raise Stopped from None
                continue
            if down:
                self.metrics.set_unavailable("")
            return APPLIED
