"""Edge cases of the segmented WAL, one named test each (LevelDB ``log_test.cc`` style).

Most tests run on the in-memory `FaultInjectingFileSystem` (fast, and it lets a test damage
bytes or count reads); a few use the real file system through ``tmp_path``.
"""

from __future__ import annotations

import threading
import time

import pytest

from gateway.core.fileio import FaultInjectingFileSystem, OsFileSystem
from gateway.core.records import scan
from gateway.core.wal import (
    FsyncPolicy,
    RecoveryEventKind,
    SegmentedWal,
    WalCompactedError,
    WalCorruptionError,
    WalEntry,
    WalFailedError,
    WalHardState,
    WalIndexError,
    WalOptions,
    WalTag,
    WalUnavailableError,
)
from gateway.core.wal.segment import segment_name

DIR = "/wal"
SMALL = 1024  # the smallest segment size allowed: a handful of entries each


def make_wal(
    fs: FaultInjectingFileSystem | OsFileSystem,
    directory: str = DIR,
    *,
    segment: int = SMALL,
    fsync: FsyncPolicy = FsyncPolicy.NEVER,
    **kwargs: object,
) -> SegmentedWal:
    return SegmentedWal(
        directory, fs=fs, options=WalOptions(max_segment_bytes=segment, fsync=fsync),
        **kwargs,  # type: ignore[arg-type]
    )


def entry(index: int, term: int = 1, size: int = 40) -> WalEntry:
    return WalEntry(index, term, 0, bytes([index % 251]) * size)


def fill(wal: SegmentedWal, first: int, last: int, term: int = 1, size: int = 40) -> None:
    for i in range(first, last + 1):
        wal.append([entry(i, term, size)])


def segment_paths(fs: FaultInjectingFileSystem, directory: str = DIR) -> list[str]:
    return [f"{directory}/{n}" for n in fs.listdir(directory) if n.endswith(".wal")]


def record_offsets(fs: FaultInjectingFileSystem, path: str) -> list[tuple[int, int, int]]:
    """``(offset, end, tag)`` of every valid record of ``path``."""
    return [(r.offset, r.end, r.payload[0]) for r in scan(fs.raw(path))]


# ------------------------------------------------------------------------------ basics


def test_empty_wal_has_first_index_1_and_last_index_0() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    assert (wal.first_index(), wal.last_index(), wal.term(0)) == (1, 0, 0)
    assert wal.entries(1, 1) == []
    assert wal.hard_state() == WalHardState()
    assert wal.recovery_report.clean
    wal.close()


def test_empty_wal_reopens_empty() -> None:
    fs = FaultInjectingFileSystem()
    make_wal(fs).close()
    wal = make_wal(fs)
    assert (wal.first_index(), wal.last_index()) == (1, 0)
    assert wal.recovery_report.clean
    wal.close()


def test_append_and_read_back_across_segments() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    for i in range(1, 31, 3):  # batches of 3: a batch never spans segments
        wal.append([entry(k, term=1 + k // 7) for k in range(i, i + 3)])
    got = wal.entries(1, 31)
    assert got == [entry(i, term=1 + i // 7) for i in range(1, 31)]
    assert len(segment_paths(fs)) > 1
    wal.close()


def test_one_batch_stays_in_one_segment() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 3)
    wal.append_batch([entry(i) for i in range(4, 40)], WalHardState(2, 1, 3))
    paths = segment_paths(fs)
    assert len(paths) == 2 and paths[1].endswith(segment_name(4))  # sealed before the batch
    wal.close()
    wal = make_wal(fs)
    assert wal.entries(1, 40) == [entry(i) for i in range(1, 40)]
    assert wal.hard_state() == WalHardState(2, 1, 3)
    wal.close()


def test_append_accepts_raft_entries() -> None:
    from gateway.raft.types import Entry as RaftEntry
    from gateway.raft.types import EntryType

    wal = make_wal(FaultInjectingFileSystem())
    wal.append([RaftEntry(term=2, index=1, type=EntryType.CONF_CHANGE, data=b"cc")])
    assert wal.entries(1, 2) == [WalEntry(1, 2, int(EntryType.CONF_CHANGE), b"cc")]
    wal.close()


def test_append_that_does_not_continue_the_log_is_refused() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    fill(wal, 1, 3)
    with pytest.raises(WalIndexError, match="truncate_suffix"):
        wal.append([entry(3)])
    with pytest.raises(WalIndexError):
        wal.append([entry(5)])
    with pytest.raises(WalIndexError):
        wal.append([entry(4), entry(6)])
    assert wal.last_index() == 3
    wal.close()


def test_append_with_decreasing_term_is_refused() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    fill(wal, 1, 2, term=5)
    with pytest.raises(WalIndexError, match="term"):
        wal.append([entry(3, term=4)])
    wal.close()


def test_entry_larger_than_a_segment_gets_a_segment_of_its_own() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 2)
    wal.append([entry(3, size=5000)])
    fill(wal, 4, 5)
    wal.close()
    wal = make_wal(fs)
    assert wal.entries(3, 4)[0].data == entry(3, size=5000).data
    assert wal.entries(1, 6)[-1] == entry(5)
    wal.close()


# ------------------------------------------------------------------------------ rotation


def test_rotation_seals_segment_with_index_and_footer() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 40)
    paths = segment_paths(fs)
    assert len(paths) >= 3
    assert paths[0].endswith(segment_name(1))
    for path in paths[:-1]:
        tags = [tag for _o, _e, tag in record_offsets(fs, path)]
        assert tags[0] == WalTag.SEGMENT_HEADER
        assert tags[-2:] == [WalTag.SEGMENT_INDEX, WalTag.SEGMENT_FOOTER]
        assert set(tags[1:-2]) == {WalTag.ENTRY, WalTag.HARD_STATE}
        assert tags[1:-2] == [WalTag.ENTRY, WalTag.HARD_STATE] * ((len(tags) - 3) // 2)
        assert len(fs.raw(path)) <= SMALL + 200
    wal.close()


def test_segment_files_are_named_by_their_first_index() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 40)
    for path in segment_paths(fs):
        first = int(path.rsplit("/", 1)[1][:20])
        header = next(scan(fs.raw(path)))
        assert header.generation == first
        assert wal.entries(first, first + 1)[0].index == first
    wal.close()


def test_reopen_does_not_rescan_sealed_segments() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 60)
    wal.close()
    paths = segment_paths(fs)
    fs.stats.reset()
    wal = make_wal(fs)
    for path in paths[:-1]:
        size = len(fs.raw(path))
        read = fs.stats.bytes_read_by_path[path]
        # The tail holding the footer (256 bytes) plus the index record, never the entries.
        assert read < 256 + 120, (path, read, size)
    assert fs.stats.bytes_read_by_path[paths[-1]] >= len(fs.raw(paths[-1]))  # scanned
    assert wal.recovery_report.clean
    assert wal.entries(1, 61) == [entry(i) for i in range(1, 61)]
    wal.close()


def test_damaged_footer_falls_back_to_scan_and_is_reported() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 40)
    wal.close()
    first = segment_paths(fs)[0]
    footer_offset = record_offsets(fs, first)[-1][0]
    fs.corrupt(first, footer_offset + 3, b"\x00")
    fs.stats.reset()
    wal = make_wal(fs)
    events = wal.recovery_report.of_kind(RecoveryEventKind.SEAL_DAMAGED)
    assert [e.path for e in events] == [first, first]  # footer unusable, seal damaged
    assert fs.stats.bytes_read_by_path[first] >= len(fs.raw(first))
    assert wal.entries(1, 41) == [entry(i) for i in range(1, 41)]
    wal.close()


def test_damaged_index_record_falls_back_to_scan() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 40)
    wal.close()
    first = segment_paths(fs)[0]
    index_offset = record_offsets(fs, first)[-2][0]
    fs.corrupt(first, index_offset + 5, b"\xaa")
    wal = make_wal(fs)
    assert wal.recovery_report.of_kind(RecoveryEventKind.SEAL_DAMAGED)
    assert wal.term(40) == 1 and wal.last_index() == 40
    wal.close()


def test_interrupted_seal_in_newest_segment_is_cut() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 40)
    wal.close()
    last = segment_paths(fs)[0]  # make the first segment the newest: drop the others
    for path in segment_paths(fs)[1:]:
        fs.remove(path)
    footer_offset = record_offsets(fs, last)[-1][0]
    raw = fs.raw(last)
    index_offset = record_offsets(fs, last)[-2][0]
    writer = fs.open_writable(last)
    writer.truncate(footer_offset + 4)  # the footer is torn
    wal = make_wal(fs)
    [event] = wal.recovery_report.of_kind(RecoveryEventKind.TORN_TAIL)
    assert (event.path, event.offset) == (last, index_offset)
    assert "seal" in event.detail
    n = wal.last_index()
    assert n > 1 and len(raw) > index_offset
    wal.append([entry(n + 1)])  # the segment is active again
    wal.close()
    assert make_wal(fs).entries(1, n + 2)[-1] == entry(n + 1)


# ------------------------------------------------------------------------------ damage


def test_torn_tail_is_cut_and_reported() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 5)
    wal.close()
    [path] = segment_paths(fs)
    offsets = record_offsets(fs, path)
    last_start = offsets[-1][0]  # entry 5's commit marker
    entry5 = offsets[-2][0]
    fs.open_writable(path).truncate(last_start + 10)  # the marker is half written
    wal = make_wal(fs)
    torn, batch = wal.recovery_report.events
    assert torn.kind is RecoveryEventKind.TORN_TAIL
    assert (torn.path, torn.offset, torn.length) == (path, last_start, 10)
    # Without its marker, entry 5's batch is incomplete: cut as a whole.
    assert batch.kind is RecoveryEventKind.TORN_BATCH
    assert (batch.path, batch.offset) == (path, entry5)
    assert wal.last_index() == 4
    assert len(fs.raw(path)) == entry5  # cut right after entry 4's marker
    wal.append([entry(5)])
    wal.close()
    assert make_wal(fs).entries(1, 6) == [entry(i) for i in range(1, 6)]


def test_zero_filled_tail_is_cut_and_reported() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 3)
    wal.close()
    [path] = segment_paths(fs)
    size = len(fs.raw(path))
    fs.open_writable(path).write(bytes(300))
    wal = make_wal(fs)
    [event] = wal.recovery_report.of_kind(RecoveryEventKind.TORN_TAIL)
    assert (event.offset, event.length) == (size, 300)
    assert wal.last_index() == 3
    wal.close()


def test_missing_final_separator_is_restored() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 3)
    wal.close()
    [path] = segment_paths(fs)
    size = len(fs.raw(path))
    fs.open_writable(path).truncate(size - 2)
    wal = make_wal(fs)
    [event] = wal.recovery_report.of_kind(RecoveryEventKind.TORN_TAIL)
    assert "separator" in event.detail
    assert wal.last_index() == 3 and fs.raw(path).endswith(b"\xfe\xfd")
    fill(wal, 4, 4)
    wal.close()
    assert make_wal(fs).entries(1, 5) == [entry(i) for i in range(1, 5)]


def test_damaged_middle_record_is_reported_with_file_and_offset() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 5)
    wal.close()
    [path] = segment_paths(fs)
    third = record_offsets(fs, path)[3][0]  # header, 1, 2, 3 ...
    fs.corrupt(path, third + 20, b"\x55")
    before = fs.raw(path)
    with pytest.raises(WalCorruptionError) as info:
        make_wal(fs)
    assert info.value.path == path and info.value.offset == third
    assert f"{path}: byte {third}" in str(info.value)
    assert fs.raw(path) == before  # nothing was cut or "repaired"


def test_damaged_header_of_newest_segment_followed_by_entries_is_corruption() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 3)
    wal.close()
    [path] = segment_paths(fs)
    fs.corrupt(path, 4, b"\x00\x00")
    with pytest.raises(WalCorruptionError) as info:
        make_wal(fs)
    assert info.value.offset == 2


def test_damaged_entry_in_sealed_segment_is_reported_on_read() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 40)
    wal.close()
    first = segment_paths(fs)[0]
    victim = [r for r in record_offsets(fs, first) if r[2] == WalTag.ENTRY][1]  # entry 2
    fs.corrupt(first, victim[0] + 12, b"\x99")
    wal = make_wal(fs)  # the footer is intact: open does not read entries
    assert wal.term(2) == 1
    with pytest.raises(WalCorruptionError) as info:
        wal.entries(1, 5)
    assert (info.value.path, info.value.offset) == (first, victim[0])
    wal.close()


def test_missing_middle_segment_is_corruption() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 60)
    wal.close()
    paths = segment_paths(fs)
    fs.remove(paths[1])
    with pytest.raises(WalCorruptionError) as info:
        make_wal(fs)
    assert info.value.path == paths[2]


def test_record_from_another_segment_is_damage() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 40)
    wal.close()
    first, second = segment_paths(fs)[:2]
    off, end, _tag = record_offsets(fs, second)[1]  # an entry of the second segment
    foreign = fs.raw(second)[off:end]
    o2, e2, _ = record_offsets(fs, first)[1]
    assert len(foreign) == e2 - o2
    fs.corrupt(first, o2, foreign)  # same size, valid CRC, wrong generation
    wal = make_wal(fs)  # the footer is intact, so open trusts it ...
    with pytest.raises(WalCorruptionError):
        wal.entries(1, 2)  # ... and the read notices the foreign generation
    wal.close()


# ------------------------------------------------------------------------------ truncation


def test_truncate_suffix_within_the_active_segment() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 5)
    wal.truncate_suffix(4)
    assert wal.last_index() == 3
    wal.append([entry(4, term=2)])
    wal.close()
    wal = make_wal(fs)
    assert wal.entries(1, 5) == [entry(1), entry(2), entry(3), entry(4, term=2)]
    wal.close()


def test_truncate_suffix_across_segment_boundary() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 60)
    paths = segment_paths(fs)
    second_first = int(paths[1].rsplit("/", 1)[1][:20])
    cut = second_first - 3  # inside the first (sealed) segment
    wal.truncate_suffix(cut)
    assert wal.last_index() == cut - 1
    assert segment_paths(fs) == paths[:1]
    tags = [t for _o, _e, t in record_offsets(fs, paths[0])]
    assert WalTag.SEGMENT_FOOTER not in tags  # unsealed again
    fill(wal, cut, cut + 30, term=3)
    wal.close()
    wal = make_wal(fs)
    assert wal.term(cut - 1) == 1 and wal.term(cut) == 3
    assert wal.entries(cut - 1, cut + 31) == [entry(cut - 1)] + [
        entry(i, 3) for i in range(cut, cut + 31)
    ]
    assert wal.recovery_report.clean
    wal.close()


def test_truncate_suffix_at_a_segment_first_index() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 60)
    second_first = int(segment_paths(fs)[1].rsplit("/", 1)[1][:20])
    wal.truncate_suffix(second_first)
    assert wal.last_index() == second_first - 1
    fill(wal, second_first, second_first + 2, term=2)
    wal.close()
    assert make_wal(fs).term(second_first) == 2


def test_truncate_suffix_lowers_the_durable_index() -> None:
    wal = make_wal(FaultInjectingFileSystem(), fsync=FsyncPolicy.ALWAYS)
    fill(wal, 1, 10)
    assert wal.durable_index() == 10
    wal.truncate_suffix(6)
    assert wal.durable_index() == 5
    wal.close()


def test_truncate_suffix_below_first_index_is_refused() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    fill(wal, 1, 10)
    wal.compact(5)
    with pytest.raises(WalCompactedError):
        wal.truncate_suffix(5)
    wal.truncate_suffix(6)
    assert (wal.first_index(), wal.last_index()) == (6, 5)
    wal.close()


# ------------------------------------------------------------------------------ compaction


def test_compact_prefix_deletes_whole_segments_and_keeps_the_boundary_term() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    for i in range(1, 61):
        wal.append([entry(i, term=1 + i // 20)])
    before = segment_paths(fs)
    wal.compact(30)
    assert wal.first_index() == 31
    assert wal.term(30) == 2
    with pytest.raises(WalCompactedError):
        wal.term(29)
    with pytest.raises(WalCompactedError):
        wal.entries(30, 32)
    after = segment_paths(fs)
    assert after == [p for p in before if int(p.rsplit("/", 1)[1][:20]) > 20] or len(after) < len(
        before
    )
    assert wal.entries(31, 61) == [entry(i, term=1 + i // 20) for i in range(31, 61)]
    wal.close()
    wal = make_wal(fs)
    assert (wal.first_index(), wal.term(30), wal.last_index()) == (31, 2, 60)
    wal.close()


def test_bytes_from_counts_the_records_of_the_entries_held_from_an_index() -> None:
    """What a channel slot at ``index`` holds of the log files (docs/replication.md): the
    records from ``index`` to the end, across segments, after compaction too."""
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    for i in range(1, 61):
        wal.append([entry(i, term=1 + i // 20)])
    total = wal.bytes_from(1)
    per = [wal.bytes_from(i) - wal.bytes_from(i + 1) for i in range(1, 61)]
    assert all(p > 0 for p in per) and sum(per) == total
    assert wal.bytes_from(61) == 0 and wal.bytes_from(60) == per[-1]
    wal.compact(30)
    assert wal.bytes_from(31) == sum(per[30:])
    assert wal.bytes_from(5) == wal.bytes_from(31)  # nothing held below the first index
    wal.close()


def test_compact_punches_a_hole_at_the_head_of_the_first_segment() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs, segment=64 * 1024)
    fill(wal, 1, 400, size=100)
    [path] = segment_paths(fs)
    wal.compact(200)
    raw = fs.raw(path)
    assert raw.count(bytes(4096)) >= 2  # whole blocks freed
    assert raw.startswith(b"\xfe\xfd")  # the header survives
    assert wal.entries(201, 401) == [entry(i, size=100) for i in range(201, 401)]
    wal.close()
    wal = make_wal(fs, segment=64 * 1024)
    assert wal.recovery_report.clean
    assert (wal.first_index(), wal.entries(201, 202)) == (201, [entry(201, size=100)])
    wal.close()


def test_compact_of_the_whole_log_then_append() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 30)
    wal.compact(30)
    assert (wal.first_index(), wal.last_index(), wal.term(30)) == (31, 30, 1)
    assert segment_paths(fs) == []
    fill(wal, 31, 33, term=2)
    wal.close()
    wal = make_wal(fs)
    assert wal.entries(31, 34) == [entry(i, 2) for i in range(31, 34)]
    wal.close()


def test_compact_at_or_below_the_start_is_a_no_op_and_past_the_end_is_refused() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    fill(wal, 1, 10)
    wal.compact(4)
    wal.compact(3)
    assert wal.first_index() == 5
    with pytest.raises(WalUnavailableError):
        wal.compact(11)
    wal.close()


def test_interrupted_compaction_is_finished_on_open() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 60)
    paths = segment_paths(fs)
    wal.close()
    # Simulate a crash right after the log start was saved: the segments are all still there.
    wal = make_wal(fs)
    wal._meta.save_log_start(wal._meta.log_start._replace(first_index=41, prev_term=1))
    wal.close()
    wal = make_wal(fs)
    assert wal.first_index() == 41
    removed = wal.recovery_report.of_kind(RecoveryEventKind.STALE_SEGMENT_REMOVED)
    assert removed and all(e.path in paths for e in removed)
    assert wal.entries(41, 61) == [entry(i) for i in range(41, 61)]
    wal.close()


# ------------------------------------------------------------------------------ reads


def test_term_lookups() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    terms = [1, 1, 2, 2, 2, 5, 7, 7]
    wal.append([entry(i, t) for i, t in enumerate(terms, start=1)])
    assert [wal.term(i) for i in range(0, 9)] == [0, *terms]
    with pytest.raises(WalUnavailableError):
        wal.term(9)
    wal.close()


def test_term_lookups_after_reopen_come_from_the_footer_index() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    for i in range(1, 61):
        wal.append([entry(i, term=i // 3 + 1)])
    wal.close()
    wal = make_wal(fs)
    assert [wal.term(i) for i in range(1, 61)] == [i // 3 + 1 for i in range(1, 61)]
    wal.close()


def test_entries_respect_max_bytes_but_never_return_nothing() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    fill(wal, 1, 30, size=100)
    assert len(wal.entries(1, 31, max_bytes=250)) == 2
    assert len(wal.entries(1, 31, max_bytes=10)) == 1
    assert len(wal.entries(1, 31, max_bytes=0)) == 1
    assert len(wal.entries(1, 31, max_bytes=3000)) == 30
    wal.close()


def test_entries_out_of_range() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    fill(wal, 1, 5)
    with pytest.raises(WalUnavailableError):
        wal.entries(4, 7)
    with pytest.raises(WalCompactedError):
        wal.entries(0, 2)
    with pytest.raises(WalIndexError):
        wal.entries(4, 3)
    wal.close()


def test_concurrent_reader_sees_only_fully_written_entries() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs, fsync=FsyncPolicy.BATCH)
    stop = threading.Event()
    errors: list[BaseException] = []
    seen = [0]

    def reader() -> None:
        try:
            while not stop.is_set():
                last = wal.last_index()
                first = max(1, last - 20)
                if last:
                    got = wal.entries(first, last + 1)
                    assert [e.index for e in got] == list(range(first, last + 1))
                    assert all(e == entry(e.index, size=(e.index % 50) + 1) for e in got)
                    assert wal.term(last) == 1
                    seen[0] = max(seen[0], last)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    i = 0
    while i < 400 or (seen[0] == 0 and i < 20000):  # until the readers overlapped the writer
        i += 1
        wal.append([entry(i, size=(i % 50) + 1)])
        if i % 50 == 0:
            time.sleep(0.001)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert seen[0] > 0
    wal.close()


def test_reader_racing_a_truncation_never_sees_removed_entries() -> None:
    wal = make_wal(FaultInjectingFileSystem())
    stop = threading.Event()
    errors: list[BaseException] = []
    fill(wal, 1, 40, term=1)

    def reader() -> None:
        try:
            while not stop.is_set():
                last = wal.last_index()
                try:
                    got = wal.entries(1, last + 1)
                except WalUnavailableError:
                    continue
                for e in got:  # every entry read is one that was in the log at some point
                    assert e.data == entry(e.index, e.term).data
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    for round_ in range(2, 12):
        wal.truncate_suffix(30)
        fill(wal, 30, 40, term=round_)
    stop.set()
    t.join()
    assert not errors, errors[0]
    wal.close()


# ------------------------------------------------------------------------------ durability


def test_group_commit_many_appends_share_one_fsync_under_batch_policy() -> None:
    fs = FaultInjectingFileSystem()
    durable: list[int] = []
    entered, release = threading.Event(), threading.Event()

    def gate(path: str) -> None:
        if path.endswith(".wal") and not entered.is_set():
            entered.set()
            release.wait(10)

    wal = make_wal(fs, fsync=FsyncPolicy.BATCH, on_durable=durable.append, segment=1 << 20)
    fs.stats.reset()
    fs.sync_hook = gate
    wal.append([entry(1)])
    assert entered.wait(10)  # the syncer is inside fsync #1, covering entry 1
    for i in range(2, 51):
        wal.append([entry(i)])  # none of these waits for the fsync in flight
    release.set()
    wal.sync()
    segment_syncs = sum(n for p, n in fs.stats.syncs_by_path.items() if p.endswith(".wal"))
    assert segment_syncs == 2  # 1 for entry 1, 1 for the 49 appends made meanwhile
    assert durable == [1, 50]
    wal.close()


def test_durable_index_callback_is_called_in_increasing_order() -> None:
    fs = FaultInjectingFileSystem()
    durable: list[int] = []
    wal = make_wal(fs, fsync=FsyncPolicy.BATCH, on_durable=durable.append)
    for i in range(1, 300):
        wal.append([entry(i)])
    wal.sync()
    assert durable == sorted(set(durable)) and durable[-1] == 299
    assert wal.durable_index() == 299
    wal.close()


def test_always_policy_is_durable_when_append_returns() -> None:
    fs = FaultInjectingFileSystem()
    durable: list[int] = []
    wal = make_wal(fs, fsync=FsyncPolicy.ALWAYS, on_durable=durable.append)
    for i in range(1, 6):
        assert wal.append([entry(i)]) == i
        assert wal.durable_index() == i
    assert durable == [1, 2, 3, 4, 5]
    image = fs.crash_image(seed=1)
    assert make_wal(image).last_index() == 5


def test_never_policy_is_durable_only_after_sync() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs, fsync=FsyncPolicy.NEVER, segment=64 * 1024)
    fill(wal, 1, 5)
    assert wal.durable_index() == 0
    assert wal.sync() == 5
    fill(wal, 6, 8)
    image = fs.crash_image(seed=3)
    assert 5 <= make_wal(image, segment=64 * 1024).last_index() <= 8


def test_interval_policy_syncs_in_the_background() -> None:
    fs = FaultInjectingFileSystem()
    done = threading.Event()
    wal = SegmentedWal(DIR, fs=fs, options=WalOptions(fsync=FsyncPolicy.INTERVAL,
                                                       fsync_interval=0.01),
                       on_durable=lambda i: done.set() if i == 3 else None)
    fill(wal, 1, 3)
    assert done.wait(5)
    wal.close()


def test_fsync_failure_makes_the_wal_inoperable() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 3)
    fs.sync_error = OSError(5, "Input/output error")
    with pytest.raises(WalFailedError):
        wal.sync()
    fs.sync_error = None
    with pytest.raises(WalFailedError):
        wal.append([entry(4)])
    with pytest.raises(WalFailedError):
        wal.sync()
    assert wal.entries(1, 4) == [entry(1), entry(2), entry(3)]  # reads still work
    wal.close()


def test_reopen_syncs_what_was_recovered() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 3)  # NEVER: not synced; the process "dies" without close
    wal2 = make_wal(fs)
    assert wal2.durable_index() == 3
    assert make_wal(fs.crash_image(seed=5)).last_index() == 3


# ------------------------------------------------------------------------------ hard state


def test_hard_state_survives_reopen() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    wal.save_hard_state(WalHardState(term=4, vote=2, commit=0))
    wal.save_hard_state(WalHardState(term=5, vote=3, commit=7))
    assert wal.hard_state() == WalHardState(5, 3, 7)
    image = fs.crash_image(seed=2)  # saves are synced: a power cut keeps them
    assert make_wal(image).hard_state() == WalHardState(5, 3, 7)


def test_torn_hard_state_record_keeps_the_previous_one() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    wal.save_hard_state(WalHardState(term=4, vote=2, commit=1))
    [path] = segment_paths(fs)
    size = len(fs.raw(path))
    wal.save_hard_state(WalHardState(term=5, vote=3, commit=2))
    fs.open_writable(path).truncate(size + 3)
    wal = make_wal(fs)
    assert wal.hard_state() == WalHardState(4, 2, 1)
    [event] = wal.recovery_report.of_kind(RecoveryEventKind.TORN_TAIL)
    assert event.path == path and event.offset == size


def test_torn_meta_record_keeps_the_previous_one() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 6)
    wal.save_hard_state(WalHardState(term=4, vote=2, commit=1))
    wal.truncate_suffix(6)  # saves the hard state in the meta file
    size = len(fs.raw(f"{DIR}/meta"))
    wal.save_hard_state(WalHardState(term=5, vote=3, commit=2))
    wal.truncate_suffix(5)
    fs.open_writable(f"{DIR}/meta").truncate(size + 3)
    wal = make_wal(fs)
    [event] = wal.recovery_report.of_kind(RecoveryEventKind.TORN_TAIL)
    assert event.path == f"{DIR}/meta" and event.offset == size
    # The torn record's save never returned: the previous meta record stands.
    assert wal.hard_state() == WalHardState(4, 2, 1)
    assert wal.last_index() == 4


def test_damaged_hard_state_followed_by_a_valid_one_is_corruption() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 6)
    wal.save_hard_state(WalHardState(term=4, vote=2, commit=1))
    wal.truncate_suffix(6)
    wal.save_hard_state(WalHardState(term=5, vote=3, commit=2))
    wal.truncate_suffix(5)
    wal.close()
    fs.corrupt(f"{DIR}/meta", 5, b"\x77")
    with pytest.raises(WalCorruptionError) as info:
        make_wal(fs)
    assert info.value.path == f"{DIR}/meta" and info.value.offset == 2


def test_meta_file_is_rewritten_when_it_grows() -> None:
    fs = FaultInjectingFileSystem()
    wal = SegmentedWal(DIR, fs=fs, options=WalOptions(fsync=FsyncPolicy.NEVER,
                                                       meta_rewrite_bytes=200))
    fill(wal, 1, 10)
    wal.compact(3)
    for t in range(1, 60):
        wal.save_hard_state(WalHardState(term=t, vote=1, commit=t))
        wal.append([entry(11, t)])
        wal.truncate_suffix(11)  # each saves the hard state in the meta file
    assert len(fs.raw(f"{DIR}/meta")) <= 200 + 60
    wal.close()
    wal = make_wal(fs)
    assert wal.hard_state() == WalHardState(59, 1, 59) and wal.first_index() == 4
    wal.close()


def test_leftover_meta_tmp_is_removed_and_reported() -> None:
    fs = FaultInjectingFileSystem()
    make_wal(fs).close()
    fs.open_writable(f"{DIR}/meta.tmp").write(b"\xfe\xfdjunk")
    wal = make_wal(fs)
    assert wal.recovery_report.of_kind(RecoveryEventKind.STALE_FILE_REMOVED)
    assert not fs.exists(f"{DIR}/meta.tmp")
    wal.close()


# ------------------------------------------------------------------------------ real files


def test_real_file_system_round_trip_with_rotation_and_compaction(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = OsFileSystem()
    directory = str(tmp_path / "wal")
    wal = make_wal(fs, directory, segment=8192, fsync=FsyncPolicy.BATCH)
    for i in range(1, 401):
        wal.append([entry(i, size=100)])
    wal.compact(150)
    wal.truncate_suffix(390)
    wal.save_hard_state(WalHardState(2, 1, 300))
    wal.close()
    wal = make_wal(fs, directory, segment=8192)
    assert (wal.first_index(), wal.last_index(), wal.hard_state()) == (151, 389,
                                                                       WalHardState(2, 1, 300))
    assert wal.entries(151, 390) == [entry(i, size=100) for i in range(151, 390)]
    assert wal.recovery_report.clean
    wal.close()


# ------------------------------------------------------------------------------ atomic batches


def test_torn_batch_is_cut_on_recovery() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    wal.append_batch([entry(i) for i in (1, 2, 3)], WalHardState(1, 1, 1), sync=True)
    wal.append_batch([entry(i, 2) for i in (4, 5, 6)], WalHardState(2, 2, 3), sync=True)
    wal.close()
    [path] = segment_paths(fs)
    recs = record_offsets(fs, path)
    assert recs[-1][2] == WalTag.HARD_STATE
    fs.open_writable(path).truncate(recs[-1][0])  # the second batch's marker never landed
    wal = make_wal(fs)
    [event] = wal.recovery_report.of_kind(RecoveryEventKind.TORN_BATCH)
    entry4 = recs[-4][0]
    assert (event.path, event.offset, event.length) == (path, entry4, recs[-1][0] - entry4)
    assert wal.last_index() == 3 and wal.hard_state() == WalHardState(1, 1, 1)
    assert len(fs.raw(path)) == entry4
    wal.close()
    assert make_wal(fs).recovery_report.clean


def test_crash_between_entries_and_marker_loses_the_whole_batch() -> None:
    for seed in range(40):
        fs = FaultInjectingFileSystem(seed=seed)
        wal = make_wal(fs)
        wal.append_batch([entry(i) for i in (1, 2)], WalHardState(1, 0, 0), sync=True)
        fs.arm_crash(1)  # the batch's single write lands only a random prefix
        with pytest.raises(WalFailedError):
            wal.append_batch([entry(i, 3, 300) for i in (3, 4, 5)], WalHardState(3, 2, 2),
                             sync=True)
        image = fs.crash_image(seed)
        got = make_wal(image)
        assert (got.last_index(), got.hard_state()) == (2, WalHardState(1, 0, 0)), seed
        got.close()


def test_hard_state_comes_from_the_newest_marker_across_rotation_truncation_compaction() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    for i in range(1, 41):  # many segments; the last marker of each is in its seal
        wal.append_batch([entry(i)], WalHardState(1, 1, i - 1))
    assert len(segment_paths(fs)) >= 3
    wal.close()
    wal = make_wal(fs)
    assert wal.hard_state() == WalHardState(1, 1, 39)
    wal.truncate_suffix(35)  # removes the markers after entry 34: the meta file has it
    wal.close()
    wal = make_wal(fs)
    assert wal.hard_state() == WalHardState(1, 1, 39) and wal.last_index() == 34
    wal.save_hard_state(WalHardState(2, 3, 30))
    wal.compact(34)  # the whole log: the head (and its markers) may be punched
    wal.close()
    wal = make_wal(fs)
    assert wal.hard_state() == WalHardState(2, 3, 30) and wal.first_index() == 35
    wal.append_batch([entry(35, 2)], WalHardState(2, 3, 34))
    wal.close()
    wal = make_wal(fs)
    assert wal.hard_state() == WalHardState(2, 3, 34) and wal.last_index() == 35
    wal.close()


def test_crash_right_after_rotation_keeps_the_sealed_segments_hard_state() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 10)
    wal.save_hard_state(WalHardState(4, 4, 9))
    first = segment_paths(fs)
    wal.append_batch([entry(i, 4, 200) for i in range(11, 16)], WalHardState(4, 4, 10))
    new = [p for p in segment_paths(fs) if p not in first]
    assert new
    for p in new:  # the new segment's batch never reached the disk
        fs.remove(p)
    wal = make_wal(fs)
    assert wal.last_index() == 10 and wal.hard_state() == WalHardState(4, 4, 9)
    wal.close()


def test_interrupted_reset_is_finished_on_open() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 30)
    wal.save_hard_state(WalHardState(1, 1, 5))
    wal._meta.save_state(  # what reset(20, ...) saves first, then a crash: segments remain
        wal._marker._replace(term=3, vote=2, commit=19, seq=wal._marker.seq + 1, log_end=19),
        wal._log_start._replace(first_index=20, prev_term=3))
    wal = make_wal(fs)
    assert wal.first_index() == 20 and wal.last_index() == 19
    assert wal.hard_state() == WalHardState(3, 2, 19) and wal.term(19) == 3
    assert wal.recovery_report.of_kind(RecoveryEventKind.STALE_ENTRIES_CUT)
    wal.append_batch([entry(20, 3)], WalHardState(3, 2, 19))
    wal.close()
    wal = make_wal(fs)
    assert wal.entries(20, 21) == [entry(20, 3)] and wal.recovery_report.clean
    wal.close()


def test_reset_replaces_the_log_and_hard_state() -> None:
    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 30)
    wal.reset(101, 7, WalHardState(7, 0, 100))
    assert (wal.first_index(), wal.last_index(), wal.term(100)) == (101, 100, 7)
    assert segment_paths(fs) == []
    wal.append_batch([entry(101, 7)], WalHardState(7, 0, 101))
    wal.close()
    wal = make_wal(fs)
    assert wal.entries(101, 102) == [entry(101, 7)] and wal.hard_state() == WalHardState(7, 0, 101)
    wal.close()


def test_read_hard_state_without_opening() -> None:
    from gateway.core.wal.recovery import read_hard_state

    fs = FaultInjectingFileSystem()
    wal = make_wal(fs)
    fill(wal, 1, 20)
    wal.save_hard_state(WalHardState(3, 1, 15))
    assert read_hard_state(fs, DIR) == WalHardState(3, 1, 15)
    wal.truncate_suffix(18)  # the newest hard state is now (also) in the meta file
    assert read_hard_state(fs, DIR) == WalHardState(3, 1, 15)
    wal.close()


# --- the page cache: a log is written once and read rarely ---


def _drop_wal(fs: FaultInjectingFileSystem | OsFileSystem, directory: str, drop: int,
              segment: int = 256 << 10) -> SegmentedWal:
    return SegmentedWal(directory, fs=fs, options=WalOptions(
        max_segment_bytes=segment, fsync=FsyncPolicy.ALWAYS, drop_cache_bytes=drop))


def test_synced_log_pages_are_dropped_in_steps_and_a_sealed_segment_whole() -> None:
    fs = FaultInjectingFileSystem()
    wal = _drop_wal(fs, DIR, 64 << 10)
    for i in range(1, 401):  # ~400 KiB: the first segment seals, the second stays active
        wal.append([entry(i, size=1000)])
    sizes = {p: len(fs.raw(p)) for p in segment_paths(fs)}
    sealed, active = sorted(sizes)[:-1], sorted(sizes)[-1]
    assert len(sealed) == 1
    # In steps of at least 64 KiB, not after each of the 400 fsyncs (plus the seal's).
    assert 3 <= fs.stats.cache_drops <= sum(sizes.values()) // (64 << 10) + 1
    dropped_active = fs.stats.bytes_dropped - sizes[sealed[0]]
    # The sealed segment whole; of the active one at most its whole pages, at least all but
    # the last step's worth.
    assert sizes[active] - (64 << 10) - 4096 <= dropped_active <= sizes[active] // 4096 * 4096
    assert [e.index for e in wal.entries(1, 401)] == list(range(1, 401))
    wal.close()


def test_a_log_told_to_keep_its_pages_cached_drops_nothing() -> None:
    fs = FaultInjectingFileSystem()
    wal = _drop_wal(fs, DIR, 0)
    fill(wal, 1, 400, size=1000)
    assert len(segment_paths(fs)) == 2 and fs.stats.cache_drops == 0
    wal.close()
    with pytest.raises(ValueError, match="drop_cache_bytes"):
        _drop_wal(fs, "/other", -1)


def test_entries_read_back_the_same_after_their_pages_were_dropped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = OsFileSystem()
    d = str(tmp_path / "wal")
    wal = _drop_wal(fs, d, 4096)
    fill(wal, 1, 600, size=1500)  # several sealed segments, all dropped from the cache
    assert fs.stats.bytes_dropped > 600 * 1500 * 3 // 4
    assert [e.data for e in wal.entries(1, 601)] == [entry(i, size=1500).data
                                                     for i in range(1, 601)]
    wal.close()
    wal = _drop_wal(fs, d, 4096)  # and after a reopen (recovery reads them from disk)
    assert wal.last_index() == 600
    assert [e.data for e in wal.entries(1, 601)] == [entry(i, size=1500).data
                                                     for i in range(1, 601)]
    fill(wal, 601, 700, size=1500)
    assert wal.entries(700, 701)[0].data == entry(700, size=1500).data
    wal.close()
