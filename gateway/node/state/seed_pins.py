"""Seed pins: read snapshots of the store at an epoch boundary, held for the seeds a source
serves (docs/replication.md, "Seeding a new cluster").

A seed begins with a ``SEED_PIN`` entry in the source's log. Every node applying it *arms*
a pin under the entry's ``seed_id``; the pin is *taken* -- an LSM ``ReadSnapshot`` of the
store -- at the next epoch boundary of the log: right after the next ``EpochMarker`` is
applied, or at once when no epoch-bearing record follows the last marker (the state is
already at the end of that epoch). The boundary is a position in the log, so every node
takes its pin of the same state, and any node can serve the rest of a seed when the one
serving it dies.

A pin is dropped by a ``SEED_PIN`` entry with ``release`` set, by a new pin of the same
reader's channel (a reader seeds one snapshot at a time: a read token cannot pile up pins),
when the state machine's
store is replaced (a snapshot restore: the pinned view would read a closed store), or after
``LEASE_S`` without a read (a seed that was abandoned, or a node that never served it). A
reader that finds no pin on any source node starts the seed again under a new id.

Arming and taking happen on the apply thread; serving reads from another thread; a lock
guards the table, and a pin's snapshot is never replaced once taken.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from gateway.core.lsm.read_snapshot import ReadSnapshot

__all__ = ["LEASE_S", "Pin", "SeedPins"]

#: A pin nobody read for this long is released (seconds).
LEASE_S = 600.0


@dataclass(slots=True)
class Pin:
    """One seed's pin: armed at log index ``armed_at``; ``snapshot`` (None until taken) is the
    store at the end of this cluster's epoch ``epoch``, log index ``log_index``."""

    seed_id: int
    armed_at: int
    owner: tuple[int, str] = (0, "")  # the reader's cluster id and channel
    snapshot: ReadSnapshot | None = None
    epoch: int = 0
    log_index: int = 0
    used: float = field(default_factory=time.monotonic)


class SeedPins:
    """The pins of one state machine; see the module docstring."""

    def __init__(self, lease_s: float = LEASE_S) -> None:
        self.lease_s = lease_s
        self._pins: dict[int, Pin] = {}
        self._lock = threading.Lock()

    def arm(self, seed_id: int, index: int, owner: tuple[int, str] = (0, "")) -> None:
        """Arm a pin for ``seed_id`` of reader ``owner`` (cluster id, channel), releasing the
        owner's other pins (a replay of the same entry changes nothing)."""
        self.expire()
        with self._lock:
            if seed_id in self._pins:
                return
            gone = [p for p in self._pins.values() if owner != (0, "") and p.owner == owner]
            for p in gone:
                del self._pins[p.seed_id]
            self._pins[seed_id] = Pin(seed_id, index, owner)
        for p in gone:
            if p.snapshot is not None:
                p.snapshot.close()

    def armed(self) -> bool:
        """Whether a pin waits for the next epoch boundary."""
        with self._lock:
            return any(p.snapshot is None for p in self._pins.values())

    def take(self, snapshot: ReadSnapshot, epoch: int, index: int) -> None:
        """Give every armed pin a view of the store at the end of ``epoch`` (log index
        ``index``); each pin gets its own ``ReadSnapshot`` from ``snapshot``'s store state,
        so releasing one never closes another's: the first armed pin takes ``snapshot``
        itself; the caller makes one per armed pin through :meth:`waiting`."""
        with self._lock:
            for p in self._pins.values():
                if p.snapshot is None:
                    p.snapshot, p.epoch, p.log_index = snapshot, epoch, index
                    p.used = time.monotonic()
                    return
        snapshot.close()  # nobody waited (released meanwhile)

    def waiting(self) -> int:
        """How many armed pins wait for a snapshot."""
        with self._lock:
            return sum(1 for p in self._pins.values() if p.snapshot is None)

    def get(self, seed_id: int) -> Pin | None:
        """The pin of ``seed_id`` (taken or still armed), marked as used; None when this node
        holds none."""
        with self._lock:
            p = self._pins.get(seed_id)
            if p is not None:
                p.used = time.monotonic()
            return p

    def release(self, seed_id: int) -> None:
        with self._lock:
            p = self._pins.pop(seed_id, None)
        if p is not None and p.snapshot is not None:
            p.snapshot.close()

    def expire(self, now: float | None = None) -> list[int]:
        """Release the pins unused for ``lease_s``; return their seed ids."""
        now = time.monotonic() if now is None else now
        with self._lock:
            gone = [p for p in self._pins.values() if now - p.used > self.lease_s]
            for p in gone:
                del self._pins[p.seed_id]
        for p in gone:
            if p.snapshot is not None:
                p.snapshot.close()
        return [p.seed_id for p in gone]

    def close_all(self) -> None:
        with self._lock:
            pins, self._pins = list(self._pins.values()), {}
        for p in pins:
            if p.snapshot is not None:
                p.snapshot.close()
