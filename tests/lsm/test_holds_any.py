"""``LSMStore.holds_any``, ``LSMStore.held`` and ``LSMStore.cells``: the batched existence
checks the conflict screen and the idempotency lookups rely on, and the batched cell lookup
of the epoch judgement."""

from __future__ import annotations

import random

import pytest

from .conftest import key


def _mixed_store(open_store):  # type: ignore[no-untyped-def]
    """A store holding rows and retained tombstones in the memtable, in level 0 and in deeper
    levels, with odd keys below 20000 never written; returns it and the written key numbers."""
    s = open_store()
    s.tombstone_floor = lambda: (0, {})  # keep every tombstone: deletes stay held
    rng = random.Random(7)
    written: set[int] = set()
    for round_ in range(6):
        for _ in range(400):
            i = rng.randrange(0, 20000, 2)  # odd keys are never written
            if rng.random() < 0.2:
                s.delete(key(i), epoch=round_ + 1, author=2)
            else:
                s.put(key(i), b"v%d" % i)
            written.add(i)
        s.flush()  # every third flush merges level 0 into the deeper levels
    while s.stats()["levels"][0] == 0:  # and one table stays in level 0
        for i in range(20001, 20101):
            s.put(key(i), b"late")
            written.add(i)
        s.flush()
    s.put(key(3), b"in the memtable")
    written.add(3)
    levels = s.stats()["levels"]
    assert levels[0] >= 1 and sum(levels[1:]) >= 1, levels
    return s, written


def test_holds_any_agrees_with_get_version_for_every_key_across_memtables_and_levels(open_store):
    """Keys held as rows or as retained tombstones, in the memtable, in level 0 and in deeper
    levels, and keys never written (inside and outside the tables' key ranges): ``holds_any``
    of any batch is ``any(get_version(k) is not None)`` of the same batch."""
    s, written = _mixed_store(open_store)
    rng = random.Random(8)
    for _ in range(300):
        batch = [key(rng.randrange(0, 21000)) for _ in range(rng.randint(1, 12))]
        assert s.holds_any(batch) == any(s.get_version(k) is not None for k in batch), batch
    never = [key(i) for i in range(1, 20000, 2) if i not in written][:500]
    assert not s.holds_any(never)
    past_the_end = [key(50000 + i) for i in range(100)]
    assert not s.holds_any(past_the_end)
    assert s.holds_any([*never, key(min(written - {3}))])
    assert s.holds_any([key(3)]) and not s.holds_any([])


def test_held_is_the_keys_get_version_finds_across_memtables_and_levels(open_store):
    """``held`` of any batch -- repeated keys, keys never written, past the tables' range,
    retained tombstones -- is exactly ``{k for k in batch if get_version(k) is not None}``."""
    s, written = _mixed_store(open_store)
    rng = random.Random(9)
    for _ in range(300):
        batch = [key(rng.randrange(0, 21000)) for _ in range(rng.randint(1, 40))]
        batch += rng.sample(batch, min(3, len(batch)))  # some keys twice
        assert s.held(batch) == {k for k in batch if s.get_version(k) is not None}, batch
    everything = [key(i) for i in range(0, 21000)]
    assert s.held(everything) == {key(i) for i in written}
    assert s.held([key(50000 + i) for i in range(100)]) == set()
    assert s.held([]) == set()


def test_cells_are_what_cell_finds_for_every_key_across_memtables_and_levels(open_store):
    """``cells`` of any batch -- repeated keys, keys never written, past the tables' range,
    rows overwritten in newer tables, retained tombstones with their metadata -- is exactly
    ``{k: cell(k) for k in batch}``, the newest cell of each key or None."""
    s, written = _mixed_store(open_store)
    s.put(key(0), b"meta", epoch=9, author=3)  # a cell with metadata, maybe shadowing
    written.add(0)
    rng = random.Random(10)
    for _ in range(300):
        batch = [key(rng.randrange(0, 21000)) for _ in range(rng.randint(1, 40))]
        batch += rng.sample(batch, min(3, len(batch)))  # some keys twice
        assert s.cells(batch) == {k: s.cell(k) for k in batch}, batch
    everything = [key(i) for i in range(0, 21000)]
    got = s.cells(everything)
    assert got == {k: s.cell(k) for k in everything}
    assert {k for k, c in got.items() if c is not None} == {key(i) for i in written}
    assert s.cells([key(50000 + i) for i in range(100)]) == {
        key(50000 + i): None for i in range(100)}
    assert s.cells([]) == {}


def test_cells_read_frozen_memtables_newest_first_before_the_tables(open_store):
    """Frozen memtables waiting for their flush (set up by hand: a store without background
    threads flushes them at once) answer before the tables and after the live memtable, the
    newest frozen first, as ``cell`` reads them."""
    from gateway.core.lsm.format import encode_cell
    from gateway.core.lsm.memtable import Memtable

    s, _ = _mixed_store(open_store)
    older, newer = Memtable(), Memtable()
    for n, (m, tag) in enumerate(((older, b"older"), (newer, b"newer"))):
        for i in range(0, 40, 2):  # a tombstone every fourth key
            m.put(key(i), encode_cell(tag + b"%d" % i if i % 4 else None, n + 7, 2, 1))
    older.put(key(40), encode_cell(b"only older", 5, 2, 1))
    s._imm = (older, newer)
    s.put(key(2), b"live")
    batch = [key(i) for i in range(0, 60)]
    assert s.cells(batch) == {k: s.cell(k) for k in batch}
    assert s.get(key(2)) == b"live" and s.get(key(6)) == b"newer6"
    assert s.get(key(40)) == b"only older"


def test_held_cells_is_none_for_fresh_keys_and_cells_for_any_held_one(open_store):
    """``held_cells`` of any batch is None exactly when ``holds_any`` is False, and
    otherwise ``cells`` of the batch: one probe answering both."""
    s, _ = _mixed_store(open_store)
    rng = random.Random(11)
    for _ in range(300):
        batch = [key(rng.randrange(0, 21000)) for _ in range(rng.randint(1, 40))]
        if rng.random() < 0.3:  # keys never written only
            batch = [key(rng.randrange(5, 20000, 2)) for _ in range(rng.randint(1, 40))]
        got = s.held_cells(batch)
        if s.holds_any(batch):
            assert got == s.cells(batch), batch
        else:
            assert got is None, batch
    assert s.held_cells([key(3)]) == {key(3): s.cells([key(3)])[key(3)]}
    assert s.held_cells([key(50000 + i) for i in range(100)]) is None
    assert s.held_cells([]) is None


def test_a_tables_many_lookups_in_one_call_are_its_lookups_one_by_one(open_store):
    """``SSTableReader.lookup_many`` (``_block.find_many`` in C when built) is its Python
    specification and ``lookup`` key by key: the same keys and cells, in order, keys already in
    ``found`` skipped, the found ones added; a damaged block's payload raises as ``lookup``."""
    from gateway.core.lsm import sstable_reader

    s, _ = _mixed_store(open_store)
    rng = random.Random(12)
    tables = [t for _, t in s._version.tables()]
    assert tables
    for _ in range(200):
        t = rng.choice(tables)
        keys = sorted({key(rng.randrange(0, 21000)) for _ in range(rng.randint(1, 60))})
        idxs = sorted(rng.sample(range(len(keys)), rng.randint(0, len(keys))))
        skip = set(rng.sample(idxs, min(len(idxs), rng.randint(0, 3))))
        want = [(i, t.lookup(keys[i])) for i in idxs if i not in skip]
        want = [(i, c) for i, c in want if c is not None]
        for fn in (t.lookup_many, lambda k, x, f, t=t: sstable_reader._find_many_py(t, k, x, f)):
            found = set(skip)
            assert fn(keys, idxs, found) == [(keys[i], c) for i, c in want]
            assert found == skip | {i for i, _ in want}
    many = sstable_reader._find_many
    if many is not None:  # a damaged payload: the error find_cell gives, never a crash
        t = tables[0]
        with pytest.raises(ValueError):
            many(t._index_keys, {0: b"\xe1\xff\xff\xff\xff"}, t.payload, [key(0)], [0], set())
        with pytest.raises(TypeError):
            many(t._index_keys, {}, lambda i: "not bytes", [key(0)], [0], set())
