"""Durable positions, GTID sets, the CutHead watermark and the entry sources."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.appliers.position import ApplierPosition, GtidSet, PositionStore
from gateway.appliers.progress import ProgressTracker
from gateway.appliers.source import EntrySourceError, LogFileSource, MemorySource
from gateway.cli import logtool
from gateway.core import messages, records
from gateway.core.rowops import Gtid
from gateway.v1 import epoch_pb2
from tests.reducer.model import insert, txn

GTIDS = st.lists(st.tuples(st.integers(1, 3), st.integers(1, 40)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(GTIDS, st.tuples(st.integers(1, 3), st.integers(1, 40)))
def test_gtid_set_is_a_set_of_gtids_kept_as_merged_ranges(gtids, probe):
    s = GtidSet(Gtid(*g) for g in gtids)
    assert (probe in s) == (probe in set(gtids))
    assert len(s) == len(set(gtids))
    ranges = list(s.ranges())
    for (sa, _, ea), (sb, fb, _) in itertools.pairwise(ranges):
        assert sa < sb or fb > ea + 1  # disjoint and never adjacent within an origin
    assert GtidSet.from_proto(s.to_proto()) == s


@settings(max_examples=300, deadline=None)
@given(GTIDS, GTIDS, st.lists(st.tuples(st.integers(1, 3), st.integers(1, 40),
                                        st.integers(0, 6)), max_size=8))
def test_gtid_set_bulk_adds_and_checks_are_the_one_by_one_ones(first, more, spans):
    """``update`` and ``add_range`` leave the set ``add`` of each GTID leaves; ``holds_any``
    says whether one of them is in it."""
    one_by_one = GtidSet(Gtid(*g) for g in first)
    bulk = GtidSet(Gtid(*g) for g in first)
    assert bulk.holds_any([Gtid(*g) for g in more]) == any(g in one_by_one for g in more)
    for g in more:
        one_by_one.add(Gtid(*g))
    bulk.update(Gtid(*g) for g in more)
    assert bulk == one_by_one and list(bulk.ranges()) == list(one_by_one.ranges())
    for sid, lo, width in spans:
        for t in range(lo, lo + width):
            one_by_one.add(Gtid(sid, t))
        bulk.add_range(sid, lo, lo + width - 1)
        assert list(bulk.ranges()) == list(one_by_one.ranges())


def test_gtid_set_prints_ranges_per_origin():
    assert str(GtidSet([Gtid(1, 1), Gtid(1, 2), Gtid(1, 3), Gtid(1, 7), Gtid(2, 5)])) \
        == "1:1-3:7,2:5"


def test_position_store_returns_the_last_saved_position(tmp_path):
    store = PositionStore(tmp_path, "a")
    assert store.load().log_index == 0
    for i in range(1, 4):
        store.save(ApplierPosition(i, GtidSet([Gtid(1, i)])))
    loaded = store.load()
    assert loaded.log_index == 3 and list(loaded.applied.ranges()) == [(1, 3, 3)]
    assert store.path.read_bytes().startswith(b"\xfe\xfd")


def test_a_torn_last_position_record_falls_back_to_the_previous_one(tmp_path):
    store = PositionStore(tmp_path, "a")
    store.save(ApplierPosition(5))
    store.save(ApplierPosition(9))
    data = store.path.read_bytes()
    store.path.write_bytes(data[:-4])  # crash in the middle of the second append
    assert store.load().log_index == 5
    store.save(ApplierPosition(11))  # appended after a separator: not swallowed
    assert store.load().log_index == 11


def test_the_position_file_is_compacted_to_the_latest_record(tmp_path):
    store = PositionStore(tmp_path, "a", compact_bytes=200)
    for i in range(1, 30):
        store.save(ApplierPosition(i))
    assert store.path.stat().st_size <= 200
    assert store.load().log_index == 29


def test_watermark_moves_only_over_the_contiguous_prefix():
    t = ProgressTracker(ApplierPosition(0))
    for i in range(1, 7):
        t.register(i)
    t.finish([2, 3, 5])
    assert t.watermark == 0
    t.finish([1])
    assert t.watermark == 3
    t.finish([6, 4])
    assert t.watermark == 6
    with pytest.raises(ValueError, match="registered after"):
        t.register(8)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.data())
def test_the_watermark_is_the_done_prefix_whatever_the_order_and_chunks(n, data):
    t = ProgressTracker(ApplierPosition(0))
    t.register_run(1, n, [100 + i for i in range(1, n + 1)])
    order = data.draw(st.permutations(range(1, n + 1)))
    if data.draw(st.booleans()):  # mostly in order, as the dispatcher finishes them
        order = sorted(order)
    done: set[int] = set()
    pos = 0
    while pos < n:
        k = data.draw(st.integers(1, n - pos))
        chunk = order[pos:pos + k]
        pos += k
        t.finish(chunk if data.draw(st.booleans()) else tuple(chunk))
        done.update(chunk)
        want = 0
        while want + 1 in done:
            want += 1
        assert t.watermark == want
        assert t.oldest_pending_commit_ts() == (None if want == n else 101 + want)


def test_a_unit_is_recorded_only_when_done_and_after_units_it_depends_on():
    t = ProgressTracker(ApplierPosition(0))
    for i in (1, 2, 3):
        t.register(i)
    u1 = t.start_unit([1], [Gtid(1, 1)], ["r", "s"], 2)
    u2 = t.start_unit([2], [Gtid(1, 2)], ["r"], 1)
    u3 = t.start_unit([3], [Gtid(1, 3)], ["x"], 1)
    t.op_done(u2)
    t.op_done(u3)
    assert not u2.recorded and u3.recorded  # u2 shares row r with unfinished u1
    assert Gtid(1, 3) in t.applied and t.watermark == 0
    t.op_done(u1, 2)
    assert u1.recorded and u2.recorded and t.watermark == 3


def test_a_barrier_unit_waits_for_every_earlier_unit_and_blocks_every_later_one():
    t = ProgressTracker(ApplierPosition(0))
    for i in (1, 2, 3):
        t.register(i)
    u1 = t.start_unit([1], [Gtid(1, 1)], ["a"], 1)
    ub = t.start_unit([2], [Gtid(1, 2)], [], 1, barrier=True)
    u3 = t.start_unit([3], [Gtid(1, 3)], ["z"], 1)
    t.op_done(ub)
    t.op_done(u3)
    assert not ub.recorded and not u3.recorded
    t.op_done(u1)
    assert ub.recorded and u3.recorded


def _log(path, *items):
    for item in items:
        if isinstance(item, bytes):
            with open(path, "ab") as f:
                f.write(item)
        else:
            logtool.append_transaction(path, item)


def test_log_file_source_indexes_records_from_one_and_follows_appends(tmp_path):
    path = tmp_path / "log"
    _log(path, txn(1, insert("t", [{"id": 1}])))
    marker = records.encode_record(messages.pack(epoch_pb2.EpochMarker(server_id=1, epoch=1)))
    _log(path, marker)
    source = LogFileSource(path)
    assert source.last_index() == 2
    entries = source.read(1, 10)
    assert [e.index for e in entries] == [1, 2]
    assert entries[0].transaction.gtid.trans_id == 1 and entries[1].transaction is None
    _log(path, txn(2, insert("t", [{"id": 2}])))
    (e3,) = source.read(3, 10)
    assert e3.index == 3 and e3.transaction.gtid.trans_id == 2


def test_log_file_source_ignores_a_record_still_being_written(tmp_path):
    path = tmp_path / "log"
    _log(path, txn(1, insert("t", [{"id": 1}])))
    whole = records.encode_record(messages.pack(txn(2, insert("t", [{"id": 2}]))))
    _log(path, whole[:5])
    source = LogFileSource(path)
    assert source.last_index() == 1
    _log(path, whole[5:])
    assert source.last_index() == 2


def test_log_file_source_refuses_damage_instead_of_shifting_indexes(tmp_path):
    path = tmp_path / "log"
    _log(path, txn(1, insert("t", [{"id": 1}])), txn(2, insert("t", [{"id": 2}])),
         txn(3, insert("t", [{"id": 3}])))
    data = bytearray(path.read_bytes())
    second = list(records.scan(bytes(data)))[1]
    data[second.offset + 3] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(EntrySourceError, match="damaged bytes at offsets"):
        LogFileSource(path)


@pytest.mark.parametrize("content, message", [
    (None, "no such log file"), (b"hello", "not a log")])
def test_log_file_source_rejects_what_is_not_a_log(tmp_path, content, message):
    path = tmp_path / "log"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(EntrySourceError, match=message):
        LogFileSource(path)


def test_memory_source_reads_ranges():
    src = MemorySource([None, None, None])
    assert [e.index for e in src.read(2, 5)] == [2, 3] and src.last_index() == 3


def test_an_entry_read_with_its_head_parses_its_transaction_only_when_asked():
    from gateway.appliers.source import CommittedEntry
    from gateway.node.appliers.feed import transaction_entry
    from gateway.v1 import transaction_pb2

    txn = transaction_pb2.Transaction(commit_timestamp_ns=77, segment_id=1, end_segment=True)
    txn.gtid.server_id, txn.gtid.trans_id = 3, 9
    wire = txn.SerializeToString()
    lazy = transaction_entry(5, b"\x01" + wire)
    assert lazy.head == (3, 9, 77) and lazy.wire == wire
    assert lazy._transaction is None  # not parsed by the read
    assert lazy == CommittedEntry(5, txn, wire=wire)
    assert lazy.transaction == txn
    with pytest.raises(ValueError):
        CommittedEntry(5, None, head=(3, 9, 77))
    # another segment, a rollback: parsed by the read, no head
    txn.segment_id = 2
    assert transaction_entry(6, b"\x01" + txn.SerializeToString()).head is None
    txn.segment_id = 1
    txn.rollback.SetInParent()
    parsed = transaction_entry(7, b"\x01" + txn.SerializeToString())
    assert parsed.head is None and parsed._transaction == txn


def test_a_whole_transaction_of_an_open_gtid_is_refused_as_add_refuses_it():
    from gateway.core.reducer import SegmentAssembler, SegmentOrderError
    from gateway.node.appliers.feed import transaction_entry
    from gateway.v1 import transaction_pb2

    first = transaction_pb2.Transaction(segment_id=1, end_segment=False)
    first.gtid.server_id, first.gtid.trans_id = 1, 4
    whole = transaction_pb2.Transaction(segment_id=1, end_segment=True)
    whole.gtid.server_id, whole.gtid.trans_id = 1, 4
    asm = SegmentAssembler()
    assert asm.add(1, first) is None
    entry = transaction_entry(2, b"\x01" + whole.SerializeToString())
    assert entry.head is not None
    with pytest.raises(SegmentOrderError):
        asm.add_whole(Gtid(1, 4), entry)
    done = asm.add_whole(Gtid(1, 5), transaction_entry(3, b"\x01" + whole.SerializeToString()))
    assert done is not None and done.indexes == (3,) and done.wire == whole.SerializeToString()
    assert done.segments == (whole,) and not done.rolled_back
