"""Give the memory glibc's allocator keeps after ``free`` back to the OS, periodically.

A node's large short-lived buffers -- requests and log entries of hundreds of KiB, a flush's
runs of blocks, the applier's batches -- are allocated and freed by several threads, and
glibc keeps what they free: in each thread's arena and in the middle of the main heap, where
no shrink of the heap's top reaches it, and above its dynamic ``mmap`` threshold (raised by
the first large block freed) even blocks that would have had their own map. Under the
benchmark load that kept memory a node no longer used resident, as much as anything the
node holds on purpose (docs/benchmarks.md, "Memory per node").

:class:`MallocTrimmer` runs a daemon thread that every ``interval`` seconds reads the
allocator's free bytes (``mallinfo2``) and, when they exceed ``min_free`` bytes, calls
``malloc_trim(0)``, which returns every whole free page of every arena to the OS
(``MADV_DONTNEED``): the pages stay mapped and a later allocation faults them in again.
Both are C calls made without the GIL. Without glibc (or one older than 2.33, which has no
``mallinfo2``) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

from gateway.node.loop.periodic import Periodic

__all__ = ["MIN_FREE_BYTES", "MallocTrimmer", "glibc_allocator"]

#: Free bytes the allocator may keep before a trim is worth its walk over the free chunks.
MIN_FREE_BYTES = 8 << 20


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def glibc_allocator() -> tuple[Callable[[], int], Callable[[], int]] | None:
    """``(free_bytes, trim)`` of this process's glibc allocator, or None without one:
    ``free_bytes()`` is what it keeps in free chunks (``mallinfo2().fordblks``), ``trim()``
    calls ``malloc_trim(0)`` and returns 1 if it gave memory back."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        info, trim = libc.mallinfo2, libc.malloc_trim
    except (OSError, AttributeError):
        return None
    info.restype = _MallInfo2
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return (lambda: int(info().fordblks)), (lambda: int(trim(0)))


class MallocTrimmer(Periodic):
    """The trimming thread (module docstring; its life is ``Periodic``'s: nothing runs
    without glibc). ``trims`` counts the trims made, ``checks`` the intervals looked at."""

    name = "malloc-trim"

    def __init__(self, interval: float, min_free: int = MIN_FREE_BYTES,
                 allocator: tuple[Callable[[], int], Callable[[], int]] | None = None) -> None:
        super().__init__(interval)
        self.min_free = min_free
        self._allocator = allocator if allocator is not None else glibc_allocator()
        self.trims = 0
        self.checks = 0

    def enabled(self) -> bool:
        return self._allocator is not None

    def tick(self) -> bool:
        return self.check()

    def check(self) -> bool:
        """One interval's work: trim if the allocator keeps more than ``min_free``; whether
        it trimmed."""
        if self._allocator is None:
            return False
        free_bytes, trim = self._allocator
        self.checks += 1
        if free_bytes() <= self.min_free:
            return False
        trim()
        self.trims += 1
        return True
