"""Bound the number of glibc's malloc arenas of a node process (``malloc_arena_max``).

glibc gives each thread that allocates its own arena, up to eight per core, and each arena
keeps the chunks its thread freed for its own later use. A node's fifteen threads (gRPC's,
the applier's pool, the flush and compaction, the event loop) allocate and free large
short-lived buffers -- requests, log entries, a flush's runs -- so every arena ends up holding
free memory nobody reuses: under `bench_memory.py`'s load the allocator's free chunks were the
largest holder of a node's peak (docs/benchmarks.md, "Memory per node"). Two arenas take the
peak below etcd's member (0.91-0.96x, against 0.99-1.13x) for ~4 % of the rate of a
write-heavy cell (a channel's source taking 500-row transactions), so two is the default.

:func:`limit_arenas` calls ``mallopt(M_ARENA_MAX, n)``: it bounds the arenas created after it,
so ``gateway run`` calls it before the node starts its threads. An operator's own
``MALLOC_ARENA_MAX`` or ``GLIBC_TUNABLES`` arena setting (read by glibc at start) is left to
stand. Without glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["M_ARENA_MAX", "limit_arenas"]

#: ``M_ARENA_MAX`` of glibc's ``<malloc.h>``.
M_ARENA_MAX = -8


def limit_arenas(n: int, environ: dict[str, str] | None = None) -> bool:
    """Bound this process's malloc arenas to ``n`` (0: leave glibc's default); whether the
    bound was set. Not set when ``environ`` (default ``os.environ``) already sets glibc's
    arena count, or without glibc."""
    env = os.environ if environ is None else environ
    if n <= 0 or "MALLOC_ARENA_MAX" in env or "arena_max" in env.get("GLIBC_TUNABLES", ""):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, n))
