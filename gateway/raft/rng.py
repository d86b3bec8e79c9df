"""A small seeded pseudo-random generator (SplitMix64), so that nothing in ``gateway.raft``
touches the global ``random`` module state (or imports ``random``, which pulls in ``os``).

The core only needs ``randrange``; the simulator uses the rest. Same seed, same sequence, on
every platform and Python version.
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence
from typing import Protocol, TypeVar

_MASK = (1 << 64) - 1
T = TypeVar("T")


class RandomSource(Protocol):
    """What the core needs from a random generator (``random.Random`` also satisfies it)."""

    def randrange(self, start: int, stop: int) -> int: ...


class SplitMix64:
    """Deterministic 64-bit generator. Not cryptographic."""

    __slots__ = ("_state",)

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK

    def next_u64(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def randrange(self, start: int, stop: int) -> int:
        """A uniform integer in ``[start, stop)``; ``stop`` must exceed ``start``."""
        span = stop - start
        if span <= 0:
            raise ValueError(f"empty range [{start}, {stop})")
        return start + self.next_u64() % span

    def random(self) -> float:
        """A float in ``[0, 1)``."""
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))

    def chance(self, p: float) -> bool:
        """True with probability ``p``."""
        return p > 0 and self.random() < p

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self.randrange(0, len(seq))]

    def shuffle(self, seq: MutableSequence[T]) -> None:
        for i in range(len(seq) - 1, 0, -1):
            j = self.randrange(0, i + 1)
            seq[i], seq[j] = seq[j], seq[i]

    def fork(self) -> SplitMix64:
        """An independent generator seeded from this one."""
        return SplitMix64(self.next_u64())
