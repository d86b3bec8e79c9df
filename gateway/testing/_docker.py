"""Waiting on a Docker container's health check (shared by the container backends)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["wait_healthy"]


# Any: a docker-py container (the package has no type information)
def wait_healthy(container: Any, timeout: float, what: str) -> None:
    """Return once Docker reports the docker-py ``container`` healthy (its image's
    HEALTHCHECK passed). Raises ``RuntimeError`` naming ``what``, the container's state and the
    end of its log when it stops running or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        container.reload()
        state = container.attrs["State"]
        if state.get("Health", {}).get("Status") == "healthy":
            return
        if not state.get("Running") or time.monotonic() > deadline:
            tail = container.logs().decode(errors="replace")[-2000:]
            running = state.get("Running")
            why = f"within {timeout:g}s" if running else f"({state.get('Status')})"
            raise RuntimeError(f"{what} did not become healthy {why}: {tail}")
        time.sleep(0.3)
