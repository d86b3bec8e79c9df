"""Exception rows per (cluster, table), read from the cluster at most once per ``fresh``
seconds however many requests ask (docs/console.md, "Conflicts").

Contract: ``get`` returns the rows and when they were read (wall clock, ns). A read younger
than ``fresh`` is served as is; an older one is served while one background read replaces it
(so a busy node's ``ConflictsList`` is not on the request path); one older than ``stale``,
or none, is read on the request (its error, if any, goes to the caller). The caller shows
the read time, so the page says how old the rows are. ``drop`` forgets a table's rows after
an action changed them, so the next request reads them again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Rows = list[dict[str, Any]]


@dataclass
class _Entry:
    read_mono: float
    read_ns: int
    rows: Rows
    refreshing: bool = False


def _thread(fn: Callable[[], None]) -> None:
    threading.Thread(target=fn, name="console-rows", daemon=True).start()


class RowsCache:
    def __init__(self, load: Callable[[int, str], Rows], *, fresh: float = 2.0,
                 stale: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 spawn: Callable[[Callable[[], None]], None] = _thread) -> None:
        if not 0 < fresh <= stale:
            raise ValueError("RowsCache: need 0 < fresh <= stale")
        self._load = load
        self._fresh = fresh
        self._stale = stale
        self._clock = clock
        self._spawn = spawn
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, str], _Entry] = {}
        #: bumped by ``drop``: a read begun before an action is not stored after it
        self._generation = 0

    def get(self, cid: int, table: str) -> tuple[Rows, int]:
        """(rows, read_at_ns) of ``table`` on cluster ``cid``."""
        key = (cid, table)
        with self._lock:
            e = self._entries.get(key)
            age = self._clock() - e.read_mono if e is not None else None
            if e is not None and age is not None and age < self._stale:
                if age >= self._fresh and not e.refreshing:
                    e.refreshing = True
                    gen = self._generation
                    self._spawn(lambda: self._refresh(key, e, gen))
                return e.rows, e.read_ns
        return self._read(key)

    def drop(self, cid: int, table: str | None = None) -> None:
        """Forget ``table``'s rows on ``cid`` (every table's when None)."""
        with self._lock:
            for key in [k for k in self._entries
                        if k[0] == cid and (table is None or k[1] == table)]:
                del self._entries[key]
            self._generation += 1

    def _read(self, key: tuple[int, str], gen: int | None = None) -> tuple[Rows, int]:
        """Read and keep the rows, unless ``drop`` ran since ``gen`` (default: now)."""
        if gen is None:
            with self._lock:
                gen = self._generation
        mono, ns = self._clock(), time.time_ns()
        rows = self._load(*key)
        with self._lock:
            cur = self._entries.get(key)
            if gen == self._generation and (cur is None or cur.read_mono <= mono):
                self._entries[key] = _Entry(mono, ns, rows)
        return rows, ns

    def _refresh(self, key: tuple[int, str], old: _Entry, gen: int) -> None:
        try:
            self._read(key, gen)
        except Exception:  # the kept rows age on; past ``stale`` a read shows the error
            with self._lock:
                old.refreshing = False
