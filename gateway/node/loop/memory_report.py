"""Where a node's memory goes: a JSON line per interval, for ``benchmarks/bench_memory.py``.

Off unless ``gateway run`` finds ``GATEWAY_MEMORY_REPORT=DIR`` in its environment: then a
daemon thread appends one JSON object per ``GATEWAY_MEMORY_REPORT_INTERVAL_MS`` (default 500)
to ``DIR/node-<id>.jsonl``. With ``GATEWAY_MEMORY_TRACE=N`` (N > 0) the process also traces
Python allocations from its start (``tracemalloc``, which slows the node) and each line
that reaches a new peak of the resident set carries the ``N`` modules that hold the most
traced bytes -- the Python objects alive at that peak, by the module that allocated them.

Each line (every size in bytes):

- ``rss``/``hwm``: the resident set now and at its peak (``VmRSS``/``VmHWM``);
- ``maps``: the resident set by kind of mapping (``/proc/self/smaps``): ``code`` (the
  interpreter and shared libraries), ``tables`` (the store's table files, mapped for
  reads: file-backed, the kernel reclaims them), ``files`` (other mapped files), ``heap``
  (``brk``: small ``malloc`` blocks), ``anon`` (anonymous maps: the interpreter's object
  arenas, large ``malloc`` blocks, thread arenas and stacks);
- ``malloc``: glibc's ``mallinfo2`` -- ``used`` (blocks handed out), ``free`` (freed but
  kept by the allocator), ``mmapped`` (blocks in their own maps) -- or ``{}`` elsewhere;
- ``components``: what the node's own accounting says it holds: ``memtable`` (the active
  memtable's budgeted bytes), ``immutable_memtables`` (frozen ones waiting for their
  flush), ``block_cache``, ``raft_entry_cache`` (the log's in-memory tail, entry data);
- ``gc``: the collector's pending ``counts`` and its ``collections`` so far, per generation
  (not the number of objects it tracks: ``gc.get_objects()`` from this thread would hold a
  reference to every tracked object -- a tuple other threads are still building among them,
  whose ``tuple(generator)`` then fails with ``SystemError: Objects/tupleobject.c: bad
  argument to internal function`` on CPython 3.11, CPython issue 101855);
- ``threads``; ``traced``/``traced_peak`` and ``top`` (``[[module, bytes], ...]``) when
  tracing.

A line is a measurement, not a contract: its keys may change with the benchmark.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import threading
import time
import tracemalloc
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ENV_DIR", "ENV_TRACE", "maybe_trace", "read_maps", "start"]

ENV_DIR = "GATEWAY_MEMORY_REPORT"
ENV_INTERVAL = "GATEWAY_MEMORY_REPORT_INTERVAL_MS"
ENV_TRACE = "GATEWAY_MEMORY_TRACE"


def maybe_trace(env: Mapping[str, str] = os.environ) -> None:
    """Start tracing Python allocations when ``GATEWAY_MEMORY_TRACE`` asks for it; call as
    early as possible (what was allocated before is not traced)."""
    if env.get(ENV_DIR) and int(env.get(ENV_TRACE, "0") or 0) > 0:
        tracemalloc.start(1)


def _status() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:", "Threads:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0])
    return out


def read_maps(pid: int | str = "self", tables: str = "") -> dict[str, int]:
    """Resident bytes of process ``pid`` by kind of mapping (the module docstring's
    ``maps``); a mapped file under ``tables`` (a directory) counts as ``tables``."""
    out = {"code": 0, "tables": 0, "files": 0, "heap": 0, "anon": 0}
    kind = "anon"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if not head.endswith(":"):  # a mapping's first line: range perms offset dev inode path
                parts = line.split()
                name = parts[5] if len(parts) > 5 else ""
                if name == "[heap]":
                    kind = "heap"
                elif not name or name.startswith("["):
                    kind = "anon"
                elif ".so" in os.path.basename(name) or "x" in parts[1]:
                    kind = "code"
                elif tables and name.startswith(tables):
                    kind = "tables"
                else:
                    kind = "files"
            elif head == "Rss:":
                out[kind] += int(line.split()[1]) * 1024
    return out


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo() -> Callable[[], dict[str, int]]:
    """A function reading glibc's allocator totals, or one returning ``{}`` without glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return dict
    fn.restype = _MallInfo2

    def read() -> dict[str, int]:
        m = fn()
        return {"used": m.uordblks + m.hblkhd, "free": m.fordblks, "mmapped": m.hblkhd}

    return read


def _top(n: int) -> list[list[Any]]:
    """The ``n`` modules holding the most traced bytes, as ``[module, bytes]``."""
    sizes: dict[str, int] = {}
    for stat in tracemalloc.take_snapshot().statistics("filename"):
        name = stat.traceback[0].filename
        for marker in ("site-packages/", "/gateway/", "python3.11/"):
            if marker in name:
                name = name.split(marker, 1)[1]
                break
        sizes[name] = sizes.get(name, 0) + stat.size
    return [[k, v] for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:n]]


def start(node_id: int, components: Callable[[], dict[str, int]], tables: str,
          env: Mapping[str, str] = os.environ,
          stop: threading.Event | None = None) -> threading.Thread | None:
    """Start the reporting thread when ``GATEWAY_MEMORY_REPORT`` names a directory (see the
    module docstring); ``components()`` gives the node's own accounting, ``tables`` the
    store's directory. The thread ends once ``stop`` is set (never without one: a node
    reports until its process exits). None when reporting is off."""
    directory = env.get(ENV_DIR)
    if not directory:
        return None
    interval = int(env.get(ENV_INTERVAL, "500") or 500) / 1000
    top_n = int(env.get(ENV_TRACE, "0") or 0)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"node-{node_id}.jsonl")
    mallinfo = _mallinfo()
    stopped = stop if stop is not None else threading.Event()

    def run() -> None:
        peak = 0
        with open(path, "a", buffering=1) as out:
            while not stopped.is_set():
                st = _status()
                line: dict[str, Any] = {
                    "t": time.time(), "rss": st.get("VmRSS", 0) * 1024,
                    "hwm": st.get("VmHWM", 0) * 1024, "threads": st.get("Threads", 0),
                    "maps": read_maps("self", tables), "malloc": mallinfo(),
                    "components": components(),
                    "gc": {"counts": list(gc.get_count()),
                           "collections": [g["collections"] for g in gc.get_stats()]},
                }
                if top_n and tracemalloc.is_tracing():
                    line["traced"], line["traced_peak"] = tracemalloc.get_traced_memory()
                    if line["rss"] > peak:
                        line["top"] = _top(top_n)
                if line["rss"] > peak:
                    peak = line["rss"]
                out.write(json.dumps(line) + "\n")
                stopped.wait(interval)

    thread = threading.Thread(target=run, name="memory-report", daemon=True)
    thread.start()
    return thread
