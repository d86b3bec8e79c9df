"""SSTable files: record-stream layout, blocks, index, bloom filter."""

from __future__ import annotations

import random

from gateway.core import records
from gateway.core.fileio import OsFileSystem
from gateway.core.lsm.bloom import BloomBuilder, decode_bloom, key_hash
from gateway.core.lsm.cache import BlockCache
from gateway.core.lsm.export import file_crc32c
from gateway.core.lsm.format import (
    decode_block,
    encode_block,
    encode_cell,
    may_hold_tombstones,
    tombstone_meta,
)
from gateway.core.lsm.sstable_reader import SSTableReader
from gateway.core.lsm.sstable_writer import SSTableWriter


def _write(path, keys, cells, block_bytes=256):
    w = SSTableWriter(OsFileSystem(), str(path), 7, block_bytes)
    w.add(keys, cells)
    return w.finish()


def test_table_is_a_record_stream_starting_with_a_separator(tmp_path):
    keys = [b"k%04d" % i for i in range(300)]
    _write(tmp_path / "t.sst", keys, [encode_cell(b"v")] * 300)
    data = (tmp_path / "t.sst").read_bytes()
    assert data.startswith(records.SEPARATOR) and data.endswith(records.SEPARATOR)
    report = records.verify(data)
    assert report.ok
    tags = [r.payload[0] for r in records.scan(data)]
    assert all(0xE0 <= t <= 0xEF for t in tags)
    assert tags[0] == 0xE0 and tags[-3:] == [0xE2, 0xE3, 0xE4]
    assert tags.count(0xE1) > 1  # many blocks, many keys per block


def test_reader_finds_every_key_and_no_other(tmp_path):
    rnd = random.Random(1)
    keys = sorted({rnd.randbytes(rnd.randrange(1, 30)) for _ in range(2000)})
    cells = [encode_cell(k[::-1]) for k in keys]
    meta = _write(tmp_path / "t.sst", keys, cells)
    r = SSTableReader(str(tmp_path / "t.sst"), 7, BlockCache(1 << 20))
    assert (r.smallest, r.largest, r.entries) == (keys[0], keys[-1], len(keys))
    assert (meta.smallest, meta.largest, meta.entries) == (keys[0], keys[-1], len(keys))
    for k, c in zip(keys, cells, strict=True):
        assert r.lookup(k) == c
    assert r.lookup(keys[-1] + b"\x00") is None
    assert r.lookup(b"\x00" * 40) is None
    r.close()


def test_chunks_respect_half_open_range(tmp_path):
    keys = [b"%05d" % i for i in range(1000)]
    _write(tmp_path / "t.sst", keys, [b"\x00"] * 1000)
    r = SSTableReader(str(tmp_path / "t.sst"), 7, BlockCache(1 << 20))
    got = [k for ks, _ in r.chunks(b"00100", b"00250") for k in ks]
    assert got == keys[100:250]
    r.close()


def test_block_codec_round_trips_uneven_and_empty_entries():
    keys = [b"", b"a", b"b" * 300]
    cells = [b"\x00", b"\x01", b"\x00" + b"\xfe\xfd" * 50]
    assert decode_block(encode_block(keys, cells)) == (keys, cells)


def test_bloom_has_no_false_negatives():
    b = BloomBuilder()
    keys = [b"key%d" % i for i in range(5000)]
    b.add_keys(keys)
    words = decode_bloom(b.finish())
    for k in keys:
        h1, m = key_hash(k)
        assert words[h1 % len(words)] & m == m


def test_bloom_false_positive_rate_is_near_one_percent_for_sequential_keys():
    b = BloomBuilder()
    b.add_keys([b"user:%08d" % i for i in range(20000)])
    words = decode_bloom(b.finish())
    fp = 0
    for i in range(20000, 60000):
        h1, m = key_hash(b"user:%08d" % i)
        fp += words[h1 % len(words)] & m == m
    assert fp / 40000 < 0.025


def test_a_large_table_is_synced_as_it_is_written_not_only_at_finish(tmp_path):
    # ~6 MiB: with sync_bytes of 1 MiB the file is synced about once a megabyte, so a
    # compaction never leaves hundreds of megabytes for one writeback at the end.
    keys = [b"k%06d" % i for i in range(6000)]
    cells = [encode_cell(bytes([i % 251]) * 1000) for i in range(6000)]
    synced = {}
    for sync_bytes in (1 << 20, 1 << 40):
        fs = OsFileSystem()
        path = str(tmp_path / f"t{sync_bytes}.sst")
        w = SSTableWriter(fs, path, 7, 4096, sync_bytes=sync_bytes)
        w.add(keys, cells)
        meta = w.finish()
        synced[sync_bytes] = fs.stats.syncs_by_path[path]
        assert meta.size > 5 << 20
    assert synced[1 << 40] == 1  # finish alone
    assert synced[1 << 20] >= 5
    small, large = (tmp_path / f"t{1 << 20}.sst"), (tmp_path / f"t{1 << 40}.sst")
    assert small.read_bytes() == large.read_bytes()


def test_the_writer_knows_its_files_crc_without_reading_it_back(tmp_path):
    """``file_crc`` is the CRC-32C of the finished file, the snapshot export's checksum,
    whatever the chunks it was written in."""
    keys = [b"k%06d" % i for i in range(3000)]
    cells = [encode_cell(bytes([i % 251]) * (i % 1500)) for i in range(3000)]
    for block_bytes in (256, 4096):
        fs = OsFileSystem()
        path = str(tmp_path / f"c{block_bytes}.sst")
        w = SSTableWriter(fs, path, 9, block_bytes, sync_bytes=1 << 20)
        w.add(keys[:1000], cells[:1000])
        w.add(keys[1000:], cells[1000:])
        w.finish()
        assert fs.stats.bytes_read == 0
        assert w.file_crc == file_crc32c(path)


def test_a_run_without_short_cells_is_known_to_hold_no_tombstone():
    """``may_hold_tombstones`` may say True for a live cell, never False for a tombstone."""
    long_cell = encode_cell(b"v" * 40, 3, 2, 1)
    cells = []
    for meta in ((0, 0, 0), (7, 1, 99), (1 << 40, (1 << 32) - 1, 5)):
        cells.append(encode_cell(None, *meta))
        cells += [encode_cell(b"x" * n, *meta) for n in range(0, 60)]
    for cell in cells:
        run = [long_cell, cell, long_cell]
        if tombstone_meta(cell) is not None:
            assert may_hold_tombstones(run), cell
        elif len(cell) > 21:
            assert not may_hold_tombstones(run), cell
    assert not may_hold_tombstones([])
    assert not may_hold_tombstones([long_cell] * 5)
