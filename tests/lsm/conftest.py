from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gateway.core.lsm import LSMStore

#: Small sizes so that a few thousand writes exercise flushes, levels and compaction.
SMALL: dict[str, Any] = {
    "memtable_bytes": 64 << 10,
    "cache_bytes": 256 << 10,
    "block_bytes": 512,
    "target_file_bytes": 32 << 10,
    "base_level_bytes": 96 << 10,
    "level_multiplier": 4,
    "l0_compaction_trigger": 3,
}


@pytest.fixture
def open_store(tmp_path: Any) -> Any:
    """Open (and at teardown close) stores in ``tmp_path/db`` with small sizes."""
    opened: list[LSMStore] = []

    def make(**kw: Any) -> LSMStore:
        opts = {**SMALL, "background": False, **kw}
        s = LSMStore(str(tmp_path / "db"), **opts)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


def key(i: int) -> bytes:
    return b"key%08d" % i


def fill(
    store: LSMStore, n: int, start: int = 0, value: Callable[[int], bytes] | None = None
) -> None:
    for i in range(start, start + n):
        store.put(key(i), value(i) if value else b"v%d" % i * 10)
