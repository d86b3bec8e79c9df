"""Point operations, batches, metadata, scans and API contracts of LSMStore."""

from __future__ import annotations

import pytest

from gateway.core.lsm import (
    InvalidArgumentError,
    LSMStore,
    StoreClosedError,
    StoredRow,
    StoreLockedError,
    WriteBatch,
)

from .conftest import fill, key


def test_get_returns_what_put_stored(open_store):
    s = open_store()
    s.put(b"a", b"1")
    assert s.get(b"a") == b"1"


def test_get_of_absent_key_is_none(open_store):
    assert open_store().get(b"nope") is None


def test_overwrite_returns_newest_value_across_flushes(open_store):
    s = open_store()
    s.put(b"k", b"old")
    s.flush()
    s.put(b"k", b"new")
    assert s.get(b"k") == b"new"
    s.flush()
    assert s.get(b"k") == b"new"


def test_delete_hides_value_in_older_table(open_store):
    s = open_store()
    s.put(b"k", b"v")
    s.flush()
    s.delete(b"k")
    assert s.get(b"k") is None
    s.flush()
    assert s.get(b"k") is None
    assert list(s.scan()) == []


def test_empty_key_and_empty_value_are_allowed(open_store):
    s = open_store()
    s.put(b"", b"")
    s.flush()
    assert s.get(b"") == b""


def test_large_value_spans_its_own_block(open_store):
    s = open_store()
    big = bytes(range(256)) * 1000 + b"\xfe\xfd" * 100
    s.put(b"big", big)
    fill(s, 200)
    s.flush()
    assert s.get(b"big") == big


def test_entry_carries_epoch_author_and_commit_timestamp(open_store):
    s = open_store()
    s.put(b"row", b"v", epoch=(5 << 32) | 3, author=2, commit_ts=1_700_000_000_123_456_789)
    expected = StoredRow(b"v", (5 << 32) | 3, 2, 1_700_000_000_123_456_789)
    assert s.get_entry(b"row") == expected
    s.flush()
    assert s.get_entry(b"row") == expected
    assert s.get(b"row") == b"v"


def test_entry_without_metadata_has_zero_fields(open_store):
    s = open_store()
    s.put(b"row", b"v")
    assert s.get_entry(b"row") == StoredRow(b"v", 0, 0, 0)


def test_metadata_out_of_range_is_rejected(open_store):
    s = open_store()
    with pytest.raises(InvalidArgumentError):
        s.put(b"k", b"v", author=1 << 32)
    with pytest.raises(InvalidArgumentError):
        s.put(b"k", b"v", epoch=-1)


def test_non_bytes_key_is_rejected(open_store):
    s = open_store()
    with pytest.raises(InvalidArgumentError):
        s.put("text", b"v")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        s.write_batch([(1, b"v")])


def test_bytearray_key_is_accepted(open_store):
    s = open_store()
    s.put(bytearray(b"k"), memoryview(b"v"))  # type: ignore[arg-type]
    assert s.get(b"k") == b"v"


def test_write_batch_applies_puts_and_deletes_later_op_wins(open_store):
    s = open_store()
    s.put(b"gone", b"x")
    b = WriteBatch()
    b.put(b"a", b"1", epoch=9, author=1)
    b.delete(b"gone")
    b.put(b"c", b"first")
    b.put(b"c", b"second")
    s.write_batch(b)
    assert s.get_entry(b"a") == StoredRow(b"1", 9, 1, 0)
    assert s.get(b"gone") is None
    assert s.get(b"c") == b"second"


def test_write_batch_accepts_tuples_and_none_deletes(open_store):
    s = open_store()
    s.write_batch([(b"a", b"1"), (b"b", b"2", 1, 2, 3)])
    s.write_batch([(b"a", None)])
    assert s.get(b"a") is None
    assert s.get_entry(b"b") == StoredRow(b"2", 1, 2, 3)


def test_malformed_batch_op_changes_nothing(open_store):
    s = open_store()
    with pytest.raises(InvalidArgumentError):
        s.write_batch([(b"a", b"1"), (b"b",)])
    assert s.get(b"a") is None


def test_scan_is_sorted_and_half_open(open_store):
    s = open_store()
    fill(s, 500)
    got = [k for k, _ in s.scan(key(100), key(200))]
    assert got == [key(i) for i in range(100, 200)]


def test_scan_merges_memtable_and_every_level(open_store):
    s = open_store()
    fill(s, 3000, value=lambda i: b"old%d" % i)
    s.compact()
    for i in range(0, 3000, 7):
        s.put(key(i), b"new%d" % i)
    for i in range(0, 3000, 11):
        s.delete(key(i))
    expected = {}
    for i in range(3000):
        if i % 11 == 0:
            continue
        expected[key(i)] = b"new%d" % i if i % 7 == 0 else b"old%d" % i
    assert dict(s.scan()) == expected
    assert [k for k, _ in s.scan()] == sorted(expected)


def test_scan_with_open_bounds_covers_everything(open_store):
    s = open_store()
    fill(s, 50)
    assert len(list(s.scan())) == 50
    assert len(list(s.scan(None, key(10)))) == 10
    assert len(list(s.scan(key(40)))) == 10


def test_prefix_scan_returns_only_matching_keys(open_store):
    s = open_store()
    for p in (b"a", b"ab", b"abc", b"abd", b"ac", b"b", b"ab\xff", b"ab\xff\xff"):
        s.put(p, p)
    s.flush()
    assert [k for k, _ in s.scan_prefix(b"ab")] == [b"ab", b"abc", b"abd", b"ab\xff", b"ab\xff\xff"]
    assert [k for k, _ in s.scan_prefix(b"ab\xff")] == [b"ab\xff", b"ab\xff\xff"]


def test_scan_entries_exposes_metadata(open_store):
    s = open_store()
    s.put(b"a", b"1", epoch=1, author=7, commit_ts=3)
    s.put(b"b", b"2")
    assert list(s.scan_entries()) == [
        (b"a", StoredRow(b"1", 1, 7, 3)),
        (b"b", StoredRow(b"2", 0, 0, 0)),
    ]


def test_context_manager_closes_and_later_calls_raise(tmp_path):
    with LSMStore(str(tmp_path / "db")) as s:
        s.put(b"a", b"1")
    with pytest.raises(StoreClosedError):
        s.get(b"a")
    with pytest.raises(StoreClosedError):
        s.put(b"a", b"2")


def test_second_open_of_same_directory_is_refused(open_store, tmp_path):
    open_store()
    with pytest.raises(StoreLockedError):
        LSMStore(str(tmp_path / "db"))


def test_background_flush_keeps_all_writes_readable(tmp_path):
    with LSMStore(
        str(tmp_path / "db"),
        memtable_bytes=32 << 10,
        block_bytes=512,
        target_file_bytes=16 << 10,
        base_level_bytes=64 << 10,
    ) as s:
        fill(s, 5000)
        for i in range(0, 5000, 3):
            assert s.get(key(i)) == b"v%d" % i * 10
        s.compact()
        assert s.stats()["levels"][0] < s._policy.l0_trigger
        assert len(list(s.scan())) == 5000
