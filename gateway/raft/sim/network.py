"""Simulated network: per-link drop probability, delay (hence reordering), duplication, and
partitions (arbitrary blocked directed links: leader isolation, bridges, one-way links)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

from ..rng import SplitMix64
from ..types import Message


@dataclass(slots=True)
class NetworkFaults:
    """Probabilities are per message; delays are in virtual time units."""

    drop_max: float = 0.0
    duplicate: float = 0.0
    delay_min: int = 1
    delay_max: int = 1
    reorder_spike: float = 0.0
    spike_max: int = 40


class Network:
    """Messages in flight, ordered by delivery time (ties broken by send order)."""

    __slots__ = (
        "_drop", "_queue", "_seq", "blocked", "dropped", "faults", "lossless", "rng", "sent"
    )

    def __init__(self, rng: SplitMix64, faults: NetworkFaults) -> None:
        self.rng = rng
        self.faults = faults
        self._queue: list[tuple[int, int, Message]] = []
        self._seq = 0
        self._drop: dict[tuple[int, int], float] = {}
        self.blocked: set[tuple[int, int]] = set()
        #: while set, no random drops (partitions still apply)
        self.lossless = False
        self.sent = 0
        self.dropped = 0

    def link_drop(self, a: int, b: int) -> float:
        p = self._drop.get((a, b))
        if p is None:
            p = self.rng.random() * self.faults.drop_max
            self._drop[(a, b)] = p
        return p

    def _delay(self) -> int:
        f = self.faults
        d = self.rng.randrange(f.delay_min, f.delay_max + 1)
        if self.rng.chance(f.reorder_spike):
            d += self.rng.randrange(1, f.spike_max + 1)
        return d

    def send(self, m: Message, now: int) -> None:
        self.sent += 1
        link = (m.from_, m.to)
        if link in self.blocked or (
            not self.lossless and self.rng.chance(self.link_drop(*link))
        ):
            self.dropped += 1
            return
        self._push(m, now + self._delay())
        if self.rng.chance(self.faults.duplicate):
            self._push(replace(m, entries=list(m.entries)), now + self._delay())

    def _push(self, m: Message, at: int) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, m))

    def due(self, now: int) -> list[Message]:
        """Messages whose delivery time has come; those on links blocked meanwhile vanish."""
        out = []
        q = self._queue
        while q and q[0][0] <= now:
            m = heapq.heappop(q)[2]
            if (m.from_, m.to) in self.blocked:
                self.dropped += 1
                continue
            out.append(m)
        return out

    # -- partitions -------------------------------------------------------------------------

    def heal(self) -> None:
        self.blocked.clear()

    def split(self, groups: list[set[int]]) -> None:
        """Only nodes in the same group can talk."""
        self.blocked.clear()
        where = {n: gi for gi, g in enumerate(groups) for n in g}
        for a in where:
            for b in where:
                if where[a] != where[b]:
                    self.blocked.add((a, b))

    def isolate(self, node: int, others: list[int]) -> None:
        self.split([{node}, set(others) - {node}])

    def bridge(self, left: set[int], middle: int, right: set[int]) -> None:
        """``left`` and ``right`` cannot talk to each other; ``middle`` talks to both."""
        self.blocked.clear()
        for a in left:
            for b in right:
                self.blocked.add((a, b))
                self.blocked.add((b, a))

    def one_way(self, src: set[int], dst: set[int]) -> None:
        """Messages from ``src`` to ``dst`` are lost; the reverse direction still works."""
        self.blocked.clear()
        for a in src:
            for b in dst:
                if a != b:
                    self.blocked.add((a, b))

    def pending(self) -> int:
        return len(self._queue)
