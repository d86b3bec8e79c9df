"""Runs of data blocks made and read in C (``gateway.core.lsm._block.encode_blocks`` /
``decode_blocks``) are exactly their Python specification's: a table written through C is
byte-identical to the one the per-block loop writes, a compaction's read of a table yields the
same pairs, and a damaged block raises the same ``CorruptionError`` (file, offset, reason)."""

from __future__ import annotations

import os
import tempfile
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.fileio import OsFileSystem
from gateway.core.lsm import CorruptionError, sstable_reader, sstable_writer
from gateway.core.lsm.cache import BlockCache
from gateway.core.lsm.sstable_reader import SSTableReader
from gateway.core.lsm.sstable_writer import SSTableWriter

# CI builds the accelerator (and these tests must not skip there); elsewhere it may be absent,
# or turned off (GATEWAY_PURE_PYTHON).
if sstable_writer._encode_blocks is None and os.environ.get("GATEWAY_REQUIRE_ACCEL") != "1":
    pytest.skip("gateway.core.lsm._block is not loaded", allow_module_level=True)

_FS = OsFileSystem()


def _write(path: str, batches: list[tuple[list[bytes], list[bytes]]], block_bytes: int,
           *, in_c: bool) -> tuple[bytes, object, int]:
    """The table's bytes, its TableMeta and data_bytes, written through C or Python."""
    encoder = sstable_writer._encode_blocks if in_c else None
    assert not in_c or encoder is not None
    with mock.patch.object(sstable_writer, "_encode_blocks", encoder):
        w = SSTableWriter(_FS, path, 7, block_bytes)
        for keys, cells in batches:
            w.add(keys, cells)
        meta = w.finish()
    with open(path, "rb") as f:
        return f.read(), meta, w.data_bytes


def _read_all(path: str, *, in_c: bool) -> tuple[str, object]:
    """("ok", pairs) of a compaction's read of the table, or ("error", path, offset, reason)."""
    decoder = sstable_reader._decode_blocks if in_c else None
    assert not in_c or decoder is not None
    reader = SSTableReader(path, 7, BlockCache(1 << 20), fs=_FS)
    try:
        with mock.patch.object(sstable_reader, "_decode_blocks", decoder):
            keys: list[bytes] = []
            cells: list[bytes] = []
            for k, c in reader.chunks(None, None, fill_cache=False):
                keys += k
                cells += c
        return "ok", (keys, cells)
    except CorruptionError as e:
        return "error", (e.path, e.offset, e.reason)
    finally:
        reader.close()


def _cell(size: int, seed: int) -> bytes:
    # Separators (FE FD) inside the data make the stuffing work.
    body = (bytes([seed % 256, 0xFE, 0xFD]) * (size // 3 + 1))[:size]
    return b"\x00" + body


_sizes = st.one_of(st.integers(0, 40), st.integers(200, 1100), st.integers(3000, 20000))


@st.composite
def _batches(draw):  # type: ignore[no-untyped-def]
    keys = sorted(draw(st.sets(st.binary(min_size=1, max_size=24), min_size=1, max_size=120)))
    cuts = sorted(draw(st.sets(st.integers(1, len(keys)), max_size=4)) | {len(keys)})
    out, lo = [], 0
    for hi in cuts:
        ks = keys[lo:hi]
        out.append((ks, [_cell(draw(_sizes), i) for i, _ in enumerate(ks)]))
        lo = hi
    return out


@settings(max_examples=150, deadline=None)
@given(_batches(), st.sampled_from([64, 512, 4096]))
def test_a_table_written_in_c_is_byte_identical_to_the_python_writers(batches, block_bytes):
    with tempfile.TemporaryDirectory() as d:
        c_bytes, c_meta, c_data = _write(f"{d}/c.sst", batches, block_bytes, in_c=True)
        py_bytes, py_meta, py_data = _write(f"{d}/py.sst", batches, block_bytes, in_c=False)
        assert c_bytes == py_bytes
        assert (c_meta, c_data) == (py_meta, py_data)
        assert _read_all(f"{d}/c.sst", in_c=True) == _read_all(f"{d}/c.sst", in_c=False)
        keys = [k for ks, _ in batches for k in ks]
        cells = [c for _, cs in batches for c in cs]
        assert _read_all(f"{d}/c.sst", in_c=True) == ("ok", (keys, cells))


def test_a_table_larger_than_a_write_chunk_is_byte_identical_too(tmp_path):
    # ~6 MiB in one add(): the C encoder is called once per ~1 MiB and must resume exactly.
    keys = [b"row%07d" % i for i in range(6000)]
    cells = [_cell(1000 + i % 97, i) for i in range(6000)]
    c_bytes, c_meta, _ = _write(str(tmp_path / "c.sst"), [(keys, cells)], 4096, in_c=True)
    py_bytes, py_meta, _ = _write(str(tmp_path / "py.sst"), [(keys, cells)], 4096, in_c=False)
    assert len(c_bytes) > 5 * sstable_writer._WRITE_CHUNK
    assert c_bytes == py_bytes and c_meta == py_meta
    assert _read_all(str(tmp_path / "c.sst"), in_c=True) == ("ok", (keys, cells))


def _block_offsets(path: str) -> tuple[list[int], list[int]]:
    reader = SSTableReader(path, 7, BlockCache(1 << 20), fs=_FS)
    try:
        return list(reader._offsets), list(reader._lengths)
    finally:
        reader.close()


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_damaged_block_raises_the_python_readers_error_naming_file_and_offset(data):
    keys = [b"k%05d" % i for i in range(400)]
    cells = [_cell(data.draw(_sizes), i) for i in range(400)]
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/t.sst"
        _write(path, [(keys, cells)], 512, in_c=True)
        offsets, lengths = _block_offsets(path)
        block = data.draw(st.integers(0, len(offsets) - 1))
        at = offsets[block] + data.draw(st.integers(0, lengths[block] - 1))
        with open(path, "r+b") as f:
            f.seek(at)
            old = f.read(1)[0]
            f.seek(at)
            f.write(bytes([old ^ data.draw(st.integers(1, 255))]))
        c_outcome = _read_all(path, in_c=True)
        assert c_outcome == _read_all(path, in_c=False)
        assert c_outcome[0] == "error"
        assert c_outcome[1][:2] == (path, offsets[block])


def test_a_block_whose_last_key_disagrees_with_the_index_is_refused_alike(tmp_path):
    keys = [b"k%05d" % i for i in range(300)]
    cells = [_cell(100, i) for i in range(300)]
    path = str(tmp_path / "t.sst")
    _write(path, [(keys, cells)], 512, in_c=True)
    outcomes = []
    for in_c in (True, False):
        reader = SSTableReader(path, 7, BlockCache(1 << 20), fs=_FS)
        last = reader._index_keys[3]  # as if the index named another key of the same length
        reader._index_keys[3] = last[:-1] + bytes([last[-1] ^ 1])
        decoder = sstable_reader._decode_blocks if in_c else None
        with (
            mock.patch.object(sstable_reader, "_decode_blocks", decoder),
            pytest.raises(CorruptionError) as e,
        ):
            list(reader.chunks(None, None, fill_cache=False))
        outcomes.append((e.value.offset, e.value.reason))
        reader.close()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == "data block 3 disagrees with the index"


def _resident_kib(path: str) -> int:
    """Resident KiB of this process's maps of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
                inside = len(head) >= 6 and head[-1] == path
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps")
@pytest.mark.parametrize("decoder", ["C", "pure Python"])
def test_a_compactions_read_gives_the_tables_pages_back_as_it_goes(tmp_path, monkeypatch,
                                                                    decoder):
    """Reading a whole table for a merge leaves at most ``RELEASE_BYTES`` of it resident in
    the process at any time (plus the run being read and the kernel's read-around) and none
    at the end (the pages stay in the page cache), where the
    map kept every page read until the table closed -- a level-0 merge's inputs are hundreds
    of MiB. The pairs read are the table's all the same, with the C decoder or without it."""
    if decoder != "C":
        monkeypatch.setattr(sstable_reader, "_decode_blocks", None)
    path = str(tmp_path / "t.sst")
    n = 12_000
    keys = [b"k%08d" % i for i in range(n)]
    cells = [b"\x00" + bytes([i % 251]) * 1024 for i in range(n)]
    _write(path, [(keys, cells)], 4096, in_c=True)
    assert os.path.getsize(path) > 3 * sstable_reader.RELEASE_BYTES
    reader = SSTableReader(path, 7, BlockCache(1 << 20), fs=_FS)
    try:
        got_k: list[bytes] = []
        got_c: list[bytes] = []
        peak = 0
        for k, c in reader.chunks(None, None, fill_cache=False):
            got_k += k
            got_c += c
            peak = max(peak, _resident_kib(path))
        assert (got_k, got_c) == (keys, cells)
        assert peak <= sstable_reader.RELEASE_BYTES // 1024 + 1024  # the table: 12 MiB
        assert _resident_kib(path) <= 8
        assert reader.lookup(keys[5000]) == cells[5000]  # read again: faulted back in
    finally:
        reader.close()


@given(st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=200)), max_size=50))
def test_pairs_bytes_is_the_sum_of_the_lengths(pairs):
    keys, cells = [k for k, _ in pairs], [c for _, c in pairs]
    assert sstable_writer._pairs_bytes(keys, cells) == sum(map(len, keys)) + sum(map(len, cells))


def test_pairs_bytes_refuses_what_is_not_two_lists_of_bytes():
    with pytest.raises(TypeError):
        sstable_writer._pairs_bytes([b"a"], [b"b", b"c"])
    with pytest.raises(TypeError):
        sstable_writer._pairs_bytes([b"a", "b"], [b"1", b"2"])
