"""A daemon thread that does one small job every ``interval`` seconds (``malloc_trim``'s
trimmer, ``gc_policy``'s sweeper).

:class:`Periodic` holds the thread's life: ``start()`` once (nothing when ``interval`` <= 0
or the subclass is not ``enabled()``), ``stop()`` ends it (joined for at most 5 s), and in
between ``tick()`` runs every ``interval`` seconds on the thread.
"""

from __future__ import annotations

import threading

__all__ = ["Periodic"]


class Periodic:
    """Calls :meth:`tick` every ``interval`` seconds on a daemon thread named ``name``."""

    name = "periodic"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def enabled(self) -> bool:
        """Whether there is anything to do here (checked once, by ``start``)."""
        return True

    def tick(self) -> object:
        """One interval's work."""
        raise NotImplementedError

    def start(self) -> None:
        """Start the thread (nothing with ``interval`` <= 0, when not ``enabled()``, or when
        started already)."""
        if self.interval <= 0 or self._thread is not None or not self.enabled():
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()
