"""A flush's and a compaction's C work -- a memtable's sort (``_memsort.sorted_pairs``), the
bloom's key hashes (``_bloom.hashes``) and the data blocks (``_block.encode_blocks``) -- gives
exactly what the Python specification gives, below and above the sizes at which it runs
without the GIL (4,096 keys; 64 KiB of pairs), and raises the same errors for bad input."""

from __future__ import annotations

import os
import random
from array import array
from unittest import mock

import pytest

from gateway.core.fileio import OsFileSystem
from gateway.core.lsm import bloom, memtable, merge, sstable_writer
from gateway.core.lsm.memtable import Memtable
from gateway.core.lsm.sstable_writer import SSTableWriter

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extensions must be built
    from gateway.core.lsm import _bloom, _memsort
else:
    _memsort = pytest.importorskip("gateway.core.lsm._memsort")
    _bloom = pytest.importorskip("gateway.core.lsm._bloom")
if sstable_writer._encode_blocks is None:
    pytest.skip("gateway.core.lsm._block is not loaded", allow_module_level=True)

#: Table sizes on both sides of the C code's thresholds.
SIZES = (0, 1, 2, 31, 33, 500, 4095, 4096, 20000)


def _keys(n: int, order: str, rng: random.Random) -> list[bytes]:
    """``n`` distinct keys inserted in ``order``: shared prefixes, different lengths, empty."""
    keys = {b""} if n else set()
    while len(keys) < n:
        keys.add(b"t\x00" + rng.randbytes(rng.randint(0, 6)) + bytes([rng.randint(0, 255)]))
    out = list(keys)
    if order == "ascending":
        out.sort()
    elif order == "descending":
        out.sort(reverse=True)
    elif order == "runs":  # sorted stretches of varied lengths, as a writer's batches
        out.sort()
        pieces, i = [], 0
        while i < len(out):
            j = i + rng.randint(1, 300)
            pieces.append(out[i:j])
            i = j
        rng.shuffle(pieces)
        out = [k for p in pieces for k in (p if rng.random() < 0.7 else p[::-1])]
    else:
        rng.shuffle(out)
    return out


def _table(keys: list[bytes], rng: random.Random) -> Memtable:
    mem = Memtable()
    for k in keys:
        mem.put(k, bytes([0]) + rng.randbytes(rng.randint(0, 40)))
    return mem


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("order", ["ascending", "descending", "runs", "random"])
def test_a_tables_sort_in_c_is_the_specifications(n: int, order: str) -> None:
    rng = random.Random(n * 7 + len(order))
    mem = _table(_keys(n, order, rng), rng)
    keys, cells = _memsort.sorted_pairs(mem.data)
    assert (keys, cells) == mem._sorted_items_py()
    assert all(cells[i] is mem.data[k] for i, k in enumerate(keys))  # the objects, no copies


def test_a_tables_sort_after_views_made_runs_is_the_specifications() -> None:
    rng = random.Random(5)
    mem = _table(_keys(6000, "random", rng), rng)
    mem.view(None, None)  # a view sorts the keys so far into runs
    for k in _keys(3000, "random", rng):
        mem.put(k + b"\xff", b"\x00x")
    mem.view(b"t", None)
    assert mem._runs  # the Python path merges runs; C sorts the dict itself
    assert _memsort.sorted_pairs(mem.data) == mem._sorted_items_py()
    with mock.patch.object(memtable, "_sorted_pairs", None):
        mem._sorted = None
        py = mem.sorted_items()
    mem._sorted = None
    assert mem.sorted_items() == py


@pytest.mark.parametrize("bad", [{b"a": b"x", "b": b"y"}, {b"a": b"x", b"b": bytearray(b"y")},
                                 {i: b"x" for i in range(5000)}])
def test_a_sort_of_anything_but_bytes_is_a_type_error(bad: dict) -> None:
    with pytest.raises(TypeError, match="must be bytes"):
        _memsort.sorted_pairs(bad)
    with pytest.raises(TypeError):
        _memsort.sorted_pairs([(b"a", b"b")])


@pytest.mark.parametrize("n", [10, 4095, 4096, 30000])
def test_many_keys_hash_as_the_specification(n: int) -> None:
    keys = _keys(n, "random", random.Random(n))
    h1s, masks = _bloom.hashes(keys, array("Q", bloom.MASKS))
    want_h1, want_masks = bloom._key_hashes_py(keys)
    assert list(memoryview(h1s).cast("I")) == list(want_h1)
    assert list(memoryview(masks).cast("Q")) == list(want_masks)
    with pytest.raises(TypeError, match="keys must be bytes"):
        _bloom.hashes([*keys, "x"], array("Q", bloom.MASKS))


def _write(path: str, keys: list[bytes], cells: list[bytes], *, in_c: bool) -> bytes:
    encoder = sstable_writer._encode_blocks if in_c else None
    with mock.patch.object(sstable_writer, "_encode_blocks", encoder):
        w = SSTableWriter(OsFileSystem(), path, 3, 4096)
        w.add(keys, cells)
        w.finish()
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("n,size", [(50, 10), (2000, 40), (30000, 30), (400, 9000)])
def test_large_runs_of_blocks_are_the_per_block_loops_bytes(tmp_path, n: int,
                                                            size: int) -> None:
    rng = random.Random(n + size)
    keys = sorted(_keys(n, "random", rng))
    cells = [b"\x00" + (bytes([i % 256, 0xFE, 0xFD]) * size)[:size] for i in range(n)]
    c = _write(str(tmp_path / "c.sst"), keys, cells, in_c=True)
    py = _write(str(tmp_path / "py.sst"), keys, cells, in_c=False)
    assert c == py


def test_a_run_of_blocks_stops_at_its_limit_and_goes_on_where_it_stopped() -> None:
    enc = sstable_writer._encode_blocks
    keys = [b"k%06d" % i for i in range(10000)]
    cells = [b"\x00" + b"v" * 50 for _ in keys]
    whole = enc(keys, cells, 0, 50, 4096, 0, 1 << 30)
    assert whole[1] == len(keys)
    parts, start, offset, last_keys = [], 0, 0, []
    while start < len(keys):
        data, start, lk, _, _, _ = enc(keys, cells, start, 50, 4096, offset, 100_000)
        assert start % 50 == 0 or start == len(keys)
        parts.append(data)
        offset += len(data)
        last_keys += lk
    assert b"".join(parts) == whole[0] and last_keys == whole[2]
    with pytest.raises(TypeError, match="pair 9999"):
        enc([*keys[:-1], "x"], cells, 0, 50, 4096, 0, 1 << 30)  # type: ignore[list-item]


@pytest.mark.parametrize("sources,size", [(2, 100), (3, 6000), (4, 20000)])
def test_a_compactions_rounds_merge_as_the_specification(sources: int, size: int) -> None:
    rng = random.Random(sources)
    runs = []
    for s in range(sources):  # newest first; overlapping keys, each source in chunks
        keys = sorted(_keys(size, "random", rng))
        cells = [bytes([s]) + k for k in keys]
        step = rng.randint(500, 5000)
        runs.append([(keys[i:i + step], cells[i:i + step]) for i in range(0, size, step)])

    def merged() -> list[tuple[list[bytes], list[bytes]]]:
        return list(merge.merge_runs([iter(r) for r in runs]))

    with mock.patch.object(memtable, "_sorted_pairs", None):
        want = merged()
    got = merged()
    assert [k for ks, _ in got for k in ks] == [k for ks, _ in want for k in ks]
    assert [c for _, cs in got for c in cs] == [c for _, cs in want for c in cs]


def test_a_sort_beside_a_writer_sees_the_table_of_one_moment() -> None:
    # the dict is read under the GIL and sorted without it: a writer running meanwhile
    # (adding keys, replacing cells) changes nothing the sort returns, and nothing crashes
    import threading

    rng = random.Random(3)
    mem = _table(_keys(20000, "random", rng), rng)
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set() and i < 50_000:
            mem.put(b"w%08d" % i, b"\x00n")
            mem.put(b"t\x00", b"\x00r%d" % i)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(8):
            keys, cells = _memsort.sorted_pairs(mem.data)
            assert keys == sorted(keys) and len(set(keys)) == len(keys) == len(cells)
            assert all(type(c) is bytes for c in cells)
            assert set(keys) <= set(mem.data)
    finally:
        stop.set()
        t.join()


@pytest.mark.parametrize("n", SIZES)
def test_a_memtables_growth_in_c_is_the_lengths_added_up(n):
    rng = random.Random(n)
    batch = {rng.randbytes(rng.randint(1, 30)): rng.randbytes(rng.randint(0, 300))
             for _ in range(n)}
    assert _memsort.pairs_bytes(batch) == sum(map(len, batch)) + sum(map(len, batch.values()))
    mem = Memtable()
    mem.apply(batch)
    want = _memsort.pairs_bytes(batch) + memtable.ENTRY_OVERHEAD * len(batch)
    assert mem.approximate_bytes == want


def test_a_batch_of_other_bytes_likes_is_still_sized():
    with pytest.raises(TypeError):
        _memsort.pairs_bytes({b"k": bytearray(b"xyz")})
    with pytest.raises(TypeError):
        _memsort.pairs_bytes([b"k"])
    assert memtable._batch_bytes({b"k": bytearray(b"xyz")}) == 4
