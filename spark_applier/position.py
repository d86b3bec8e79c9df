"""The durable applied position of a Spark bulk apply, so runs resume where the last ended.

It is an ``gateway.appliers.position.ApplierPosition`` -- a log index watermark plus the set of
GTIDs applied after it -- kept by the same ``PositionStore`` the dispatcher uses (a record
stream, fsynced, compacted), under the name ``spark-<target name>`` in the state directory.
A run reads from ``log_index + 1``, skips the GTIDs in the set, and saves the new position
only after every write of the run returned: a run interrupted anywhere leaves the previous
position, and since the writes are idempotent, repeating them is harmless.
"""

from __future__ import annotations

import os

from gateway import ApplierPosition, PositionStore

__all__ = ["SparkPositionStore"]


class SparkPositionStore:
    """The position of the bulk applier writing to target ``name``."""

    def __init__(self, state_dir: str | os.PathLike[str], name: str) -> None:
        self._store = PositionStore(state_dir, f"spark-{name}")
        self.path = self._store.path

    def load(self) -> ApplierPosition:
        """The last saved position (index 0, no GTIDs, before the first run)."""
        return self._store.load()

    def save(self, position: ApplierPosition) -> None:
        """Make ``position`` durable (append + fsync)."""
        self._store.save(position)
