"""Leveled compaction, tombstone dropping, snapshots during compaction, WAL and applied index."""

from __future__ import annotations

import itertools
import os
import threading

import pytest

from gateway.core.lsm import LSMStore, StoreClosedError
from gateway.core.lsm.format import FLAG_TOMBSTONE
from gateway.core.lsm.merge import merge_runs

from .conftest import SMALL, fill, key


def _cells_in_tables(store: LSMStore):
    out = []
    for _, t in store._version.tables():
        for keys, cells in t.chunks(None, None, fill_cache=False):
            out += zip(keys, cells, strict=True)
    return out


def test_compaction_builds_deeper_levels_with_disjoint_ranges(open_store):
    s = open_store()
    fill(s, 6000)
    s.compact()
    levels = s.stats()["levels"]
    assert levels[0] < SMALL["l0_compaction_trigger"]
    assert sum(levels[2:]) > 0
    for tables in s._version.levels[1:]:
        for a, b in itertools.pairwise(tables):
            assert a.largest < b.smallest
    assert len(list(s.scan())) == 6000


def test_tombstones_are_dropped_when_compacting_into_the_bottom_level(open_store):
    s = open_store()
    fill(s, 300)
    s.flush()
    for i in range(300):
        s.delete(key(i))
    s.flush()
    assert s.stats()["levels"][:2] == [2, 0]
    assert sum(c[0] & FLAG_TOMBSTONE for _, c in _cells_in_tables(s)) == 300
    s.put(b"other", b"x")
    s.flush()  # third level-0 table: compacted into level 1, below which nothing lives
    assert s.stats()["levels"][:2] == [0, 1]
    assert _cells_in_tables(s) == [(b"other", b"\x00x")]  # tombstones and old values gone
    assert s.get(key(5)) is None


def test_tombstones_of_deletes_above_the_floor_keep_their_metadata_until_it_passes(open_store):
    """Compaction into the bottom level drops only tombstones of deletes in epochs up to the
    store's ``tombstone_floor``; newer ones stay readable with their epoch, author and commit
    time (``get_version``), and go at a later merge of their range once the floor passed."""
    s = open_store()
    floor = [10]
    s.tombstone_floor = lambda: (floor[0], {7: 100})
    fill(s, 300)
    s.flush()
    for i in range(300):  # author 7's deletes have a floor of their own (100)
        s.delete(key(i), epoch=5 if i % 2 else 20, author=7 if i % 3 == 0 else 3,
                 commit_ts=1000 + i)
    s.flush()
    s.put(b"other", b"x")
    s.flush()  # merged into level 1, below which nothing lives: tombstones may go
    assert s.stats()["levels"][:2] == [0, 1]
    tombs = [k for k, c in _cells_in_tables(s) if c[0] & FLAG_TOMBSTONE]
    assert tombs == [key(i) for i in range(0, 300, 2) if i % 3]  # epoch 20, not author 7
    assert s.get(key(4)) is None and s.get(key(5)) is None
    assert s.get_version(key(4)) == (None, 20, 3, 1004)
    assert s.get_version(key(5)) is None  # collected: nothing known
    assert s.get_version(key(6)) is None  # author 7: under its floor
    assert s.get_version(b"other") == (b"x", 0, 0, 0)
    floor[0] = 20
    for n in range(3):  # new level-0 tables over the same range: merged with level 1
        s.put(key(0) + b"+%d" % n, b"y")
        s.put(key(299) + b"+%d" % n, b"y")
        s.flush()
    assert not [k for k, c in _cells_in_tables(s) if c[0] & FLAG_TOMBSTONE]
    assert s.get_version(key(4)) is None and s.get(key(4)) is None


def test_a_snapshot_reads_tombstone_versions_too(open_store):
    s = open_store()
    s.put(b"a", b"1", epoch=3, author=1, commit_ts=7)
    s.delete(b"b", epoch=4, author=2, commit_ts=8)
    with s.snapshot() as snap:
        assert snap.get_version(b"a") == (b"1", 3, 1, 7)
        assert snap.get_version(b"b") == (None, 4, 2, 8)
        assert snap.get_version(b"c") is None


def test_tombstone_is_kept_while_an_older_value_lives_deeper(open_store):
    s = open_store()
    fill(s, 3000)
    s.compact()
    deep = [lvl for lvl, t in s._version.tables() if lvl > 1]
    assert deep
    s.delete(key(1))
    s.flush()
    s.compact()
    assert s.get(key(1)) is None
    s.close()
    with LSMStore(s.path, **SMALL, background=False) as again:
        assert again.get(key(1)) is None


def test_snapshot_ignores_later_writes_deletes_and_compactions(open_store):
    s = open_store()
    fill(s, 2000, value=lambda i: b"a%d" % i)
    snap = s.snapshot()
    for i in range(0, 2000, 2):
        s.put(key(i), b"b%d" % i)
    for i in range(1, 2000, 4):
        s.delete(key(i))
    s.compact()
    assert snap.get(key(1)) == b"a1"
    assert snap.get(key(2)) == b"a2"
    assert dict(snap.scan()) == {key(i): b"a%d" % i for i in range(2000)}
    snap.close()
    assert s.get(key(1)) is None and s.get(key(2)) == b"b2"


def test_snapshot_reads_tables_deleted_by_compaction(open_store, tmp_path):
    s = open_store()
    fill(s, 3000)
    snap = s.snapshot()
    before = {t.path for _, t in snap._version.tables()}
    fill(s, 3000, value=lambda i: b"x")
    s.compact()
    gone = [p for p in before if not os.path.exists(p)]
    assert gone  # compaction unlinked tables the snapshot still reads
    assert len(list(snap.scan())) == 3000
    assert snap.get(key(2999)) == b"v2999" * 10
    snap.close()


def test_scan_iterator_stays_valid_while_background_compaction_runs(tmp_path):
    with LSMStore(str(tmp_path / "db"), **SMALL) as s:
        fill(s, 4000)
        it = s.scan()
        first = [next(it) for _ in range(10)]
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                s.put(key(i % 4000), b"changed")
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        try:
            rest = list(it)
        finally:
            stop.set()
            t.join()
        got = first + rest
        assert [k for k, _ in got] == [key(i) for i in range(4000)]
        assert all(v == b"v%d" % i * 10 for i, (_, v) in enumerate(got))


def test_snapshot_of_closed_store_raises(open_store):
    s = open_store()
    fill(s, 100)
    snap = s.snapshot()
    s.close()
    with pytest.raises(StoreClosedError):
        snap.get(key(1))


def test_applied_index_becomes_durable_on_flush_and_survives_reopen(open_store, tmp_path):
    s = open_store()
    s.write_batch([(b"a", b"1")], log_index=5)
    s.mark_applied(7)
    assert s.applied_index == 7 and s.durable_applied_index == 0
    s.flush()
    assert s.durable_applied_index == 7
    s.close()
    with LSMStore(str(tmp_path / "db"), background=False) as again:
        assert again.durable_applied_index == 7 and again.get(b"a") == b"1"


def test_without_wal_unflushed_writes_are_lost_after_crash(open_store, tmp_path):
    s = open_store()
    s.put(b"a", b"1", log_index=1)
    s.abandon()  # no flush: the Raft log must replay index 1
    with LSMStore(str(tmp_path / "db"), background=False) as again:
        assert again.get(b"a") is None and again.durable_applied_index == 0


def test_wal_replays_unflushed_writes_after_crash(open_store, tmp_path):
    s = open_store(wal=True)
    s.put(b"a", b"1", log_index=1)
    s.write_batch([(b"b", b"2"), (b"a", None)], log_index=2)
    s.abandon()
    with LSMStore(str(tmp_path / "db"), background=False, wal=True) as again:
        assert again.get(b"a") is None and again.get(b"b") == b"2"
        assert again.durable_applied_index == 2


def test_wal_torn_tail_is_tolerated(open_store, tmp_path):
    s = open_store(wal=True)
    s.put(b"a", b"1")
    s.put(b"b", b"2" * 50)
    s.abandon()
    wal = next(f for f in os.listdir(tmp_path / "db") if f.endswith(".wal"))
    path = tmp_path / "db" / wal
    os.truncate(path, os.path.getsize(path) - 10)
    with LSMStore(str(tmp_path / "db"), background=False, wal=True) as again:
        assert again.get(b"a") == b"1" and again.get(b"b") is None


def test_merge_runs_newest_source_wins_and_order_is_total():
    newest = iter([([b"b", b"d"], [b"N", b"N"]), ([b"x"], [b"N"])])
    middle = iter([([b"a", b"b", b"c"], [b"M"] * 3)])
    oldest = iter([([b"a"], [b"O"]), ([b"d", b"e", b"z"], [b"O"] * 3)])
    out = [
        (k, c)
        for ks, cs in merge_runs([newest, middle, oldest])
        for k, c in zip(ks, cs, strict=True)
    ]
    assert out == [
        (b"a", b"M"),
        (b"b", b"N"),
        (b"c", b"M"),
        (b"d", b"N"),
        (b"e", b"O"),
        (b"x", b"N"),
        (b"z", b"O"),
    ]


def test_by_default_level0_is_merged_eight_tables_at_a_time(tmp_path):
    """The default policy lets level 0 gather 8 tables (the bytes level 1 holds by default:
    8 x 32 MiB memtables = 256 MiB) before one merge takes them all into level 1 -- half the
    rewrites of level 1 per flushed byte of merging every 4 -- and reads see every key
    throughout (docs/lsm.md, "Compaction")."""
    small = {k: v for k, v in SMALL.items() if k != "l0_compaction_trigger"}
    s = LSMStore(str(tmp_path / "db"), **{**small, "background": False})
    try:
        for t in range(8):
            for i in range(50):
                s.put(key(t * 50 + i), b"v%d" % t)
            s.flush()
            if t < 7:
                assert s.stats()["levels"][:2] == [t + 1, 0]
        assert s.stats()["levels"][0] == 0
        assert s.stats()["levels"][1] >= 1
        assert [s.get(key(i)) for i in range(0, 400, 50)] == [b"v%d" % t for t in range(8)]
    finally:
        s.close()
