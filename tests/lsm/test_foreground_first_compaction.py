"""Foreground first: a due compaction waits while writes come in, until its level reaches
``busy_hold`` or the writes pause (docs/lsm.md, "Compaction")."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from gateway.core.lsm import InvalidArgumentError, LSMStore

from .conftest import SMALL, key

#: Level 0 is due at 2 tables; while busy it waits for 4 (2 x 2.0). Any write in a window
#: counts as busy (1 byte per second), and the memtable is large enough that only the
#: tests' own ``flush`` calls make tables.
OPTS: dict[str, Any] = {**SMALL, "memtable_bytes": 8 << 20, "l0_compaction_trigger": 2,
                        "busy_hold": 2.0, "busy_bytes_per_second": 1}


def _level0(s: LSMStore) -> int:
    return s.stats()["levels"][0]


def _until(check: Callable[[], bool], limit: float = 20.0) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.01)
    return check()


@contextmanager
def _writing(s: LSMStore) -> Iterator[None]:
    """A thread that writes a small row every millisecond while the block runs."""
    stop = threading.Event()

    def run() -> None:
        i = 0
        while not stop.is_set():
            s.put(b"w%08d" % i, b"x" * 20)
            i += 1
            stop.wait(0.001)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def _tables(s: LSMStore, count: int, start: int = 0) -> None:
    for t in range(start, start + count):
        for i in range(20):
            s.put(key(t * 20 + i), b"v%d" % t)
        s.flush()


@pytest.fixture
def open_busy(open_store: Callable[..., LSMStore]) -> Callable[..., LSMStore]:
    """Open a store with ``OPTS`` (background threads on) and the given options on top;
    closed at teardown (conftest's ``open_store``)."""
    return lambda **over: open_store(**{**OPTS, "background": True, **over})


@pytest.fixture
def store(open_busy: Callable[..., LSMStore]) -> LSMStore:
    return open_busy()


def test_a_due_level0_merge_waits_while_writes_come_in_and_runs_when_they_pause(store):
    with _writing(store):
        _tables(store, 3)  # due (2) but below the hold (4)
        time.sleep(1.0)  # four windows of writes: held throughout
        assert _level0(store) == 3
        assert store.stats()["compaction_held"] is True
    assert _until(lambda: _level0(store) == 0), "the merge did not run once writes paused"
    assert _until(lambda: not store.stats()["compaction_held"])
    assert store.stats()["levels"][1] >= 1
    assert [store.get(key(t * 20)) for t in range(3)] == [b"v0", b"v1", b"v2"]


def test_a_level_that_reaches_the_hold_is_merged_while_writes_go_on(store):
    with _writing(store):
        _tables(store, 3)
        time.sleep(0.5)
        assert _level0(store) == 3
        _tables(store, 1, start=3)  # 4 tables: the hold
        assert _until(lambda: _level0(store) == 0), "the merge waited beyond busy_hold"
    assert [store.get(key(t * 20)) for t in range(4)] == [b"v0", b"v1", b"v2", b"v3"]


def test_compact_does_not_wait_for_the_writes_to_pause(store):
    with _writing(store):
        _tables(store, 3)
        done = threading.Event()
        threading.Thread(target=lambda: (store.compact(), done.set()), daemon=True).start()
        assert done.wait(20), "compact() waited for the writes to pause"
        assert _level0(store) < 2


def test_without_the_hold_a_level_is_merged_as_soon_as_it_is_due(open_busy):
    s = open_busy(busy_hold=1.0)
    with _writing(s):
        _tables(s, 2)
        assert _until(lambda: _level0(s) == 0), "a due merge waited with busy_hold=1.0"


def test_a_store_written_slower_than_the_busy_rate_counts_as_idle(open_busy):
    """A trickle below ``busy_bytes_per_second`` does not hold the merge."""
    s = open_busy(busy_bytes_per_second=1 << 30)
    with _writing(s):
        _tables(s, 3)
        assert _until(lambda: _level0(s) < 2), "a trickle held the merge"


@pytest.mark.parametrize("bad", [{"busy_hold": 0.5}, {"busy_hold": math.nan},
                                 {"busy_bytes_per_second": -1}])
def test_a_hold_below_one_or_a_negative_rate_is_refused(tmp_path, bad):
    with pytest.raises(InvalidArgumentError, match="busy_"):
        LSMStore(str(tmp_path / "db"), **{**OPTS, **bad})


def test_level0_at_the_writers_limit_is_merged_whatever_the_hold(open_busy):
    """A hold above ``l0_stop_trigger`` would leave writers waiting on a merge that waits for
    them: at the writers' limit the merge runs."""
    s = open_busy(busy_hold=10.0, l0_stop_trigger=4)
    with _writing(s):
        _tables(s, 4)
        assert _until(lambda: _level0(s) == 0), "level 0 at the writers' limit was held"
