"""A token bucket for log lines that may come in floods (dead letters, repeated failures).

``LogRateLimiter(burst, per_seconds)`` lets ``burst`` lines through at once and then one every
``per_seconds / burst`` seconds. ``admit()`` says whether this line may be logged and how many
lines were suppressed since the last admitted one, so the caller can say "N more suppressed"
on the next line it logs: nothing is hidden without a count. Thread-safe; the clock is
injectable for tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["LogRateLimiter"]


class LogRateLimiter:
    """Token bucket over a monotonic clock (see the module docstring)."""

    def __init__(self, burst: int = 10, per_seconds: float = 10.0, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1 or per_seconds <= 0:
            raise ValueError("burst must be >= 1 and per_seconds > 0")
        self.burst = burst
        self._rate = burst / per_seconds
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._suppressed = 0
        self._lock = threading.Lock()

    def admit(self) -> tuple[bool, int]:
        """``(log it, lines suppressed since the last admitted line)``; the count is reset
        when a line is admitted."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self._rate)
            self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                suppressed, self._suppressed = self._suppressed, 0
                return True, suppressed
            self._suppressed += 1
            return False, 0
