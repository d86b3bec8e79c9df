"""Flushes and compactions give the page cache's copy of the data blocks they write back to
the OS (``drop_table_pages``), and the store reads the same rows afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.fileio import OsFileSystem
from tests.lsm.conftest import fill, key


def _value(i: int) -> bytes:
    return bytes([i % 251]) * 1000


@pytest.mark.parametrize("drop", [True, False])
def test_tables_written_by_flush_and_compaction_drop_their_data_pages(open_store: Any,
                                                                      drop: bool) -> None:
    fs = OsFileSystem()
    # 3 MB per memtable: each level-0 table passes the writer's 1 MiB sync step twice.
    store = open_store(fs=fs, memtable_bytes=4 << 20, target_file_bytes=64 << 20,
                       drop_table_pages=drop)
    fill(store, 3000, value=_value)
    store.flush()
    after_flush = fs.stats.bytes_dropped
    fill(store, 3000, start=1500, value=_value)
    store.flush()
    store.compact()
    if drop:
        assert after_flush >= 1 << 20  # the data blocks synced before the table's tail
        assert fs.stats.bytes_dropped >= after_flush + (3 << 20)  # the second flush + merge
    else:
        assert fs.stats.cache_drops == 0
    assert all(store.get(key(i)) == _value(i) for i in range(4500))
    assert store.get(key(4500)) is None
