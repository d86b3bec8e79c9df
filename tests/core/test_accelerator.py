"""The C accelerator must agree with the pure-Python specification on every input."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import records, stuffing
from tests.harness.debug_alloc import run_under_debug_allocator

accel = records._accel

if accel is None:
    if os.environ.get("GATEWAY_REQUIRE_ACCEL"):
        raise RuntimeError("GATEWAY_REQUIRE_ACCEL is set but gateway.core._recordstream is absent")
    pytest.skip("C accelerator not built", allow_module_level=True)

blobs = st.one_of(
    st.binary(max_size=3000),
    st.lists(st.sampled_from([b"\xfe", b"\xfd", b"\x00", b"A", b"\xfe\xfd"]), max_size=900).map(
        b"".join
    ),
)


@given(blobs)
def test_stuff_agrees(data: bytes):
    assert accel.stuff(data) == stuffing.stuff(data)


@given(blobs)
def test_unstuff_agrees_including_rejections(data: bytes):
    try:
        expected = stuffing.unstuff(data)
    except stuffing.StuffingError:
        with pytest.raises(ValueError):
            accel.unstuff(data)
    else:
        assert accel.unstuff(data) == expected


@given(blobs, st.integers(0, 2**32 - 1))
def test_encode_agrees(payload: bytes, generation: int):
    assert accel.encode_record(payload, generation) == records._encode_py(payload, generation)


@given(blobs)
def test_decode_agrees(chunk: bytes):
    assert accel.decode_record(chunk) == records._decode_py(chunk)


@given(st.binary(max_size=2000), st.integers(0, 2**32 - 1))
def test_crc_agrees(data: bytes, state: int):
    assert accel.crc32c_raw(data, state) == records.crc32c_raw(data, state)


@given(
    st.lists(blobs, min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 4000), st.binary(min_size=1, max_size=20)), max_size=4),
    st.integers(0, 5000),
    st.integers(0, 60000),
    st.integers(0, 300),
)
@settings(max_examples=200, deadline=None)
def test_scan_agrees_on_damaged_streams(payloads, damage, start, stop, zeros):
    buf = bytearray(bytes(zeros) + b"".join(records._encode_py(p, 3) for p in payloads))
    for pos, junk in damage:
        pos %= len(buf)
        buf[pos : pos + len(junk)] = junk
    data = bytes(buf)
    fast = list(records._scan_accel(data, start, min(stop, len(data))))
    slow = list(records._scan_py(data, start, min(stop, len(data))))
    assert fast == slow


def test_scan_batches_resume_without_loss():
    payloads = [i.to_bytes(3, "little") for i in range(10000)]
    data = records.encode_records(payloads)
    head = records.first_nonzero(data)
    got, start = [], 0
    while True:
        batch, resume = accel.scan_batch(data, start, len(data), head, records.Record, 7)
        got.extend(batch)
        if resume < 0:
            break
        start = resume
    assert [r.payload for r in got] == payloads



def test_a_scan_starting_before_the_buffer_is_refused():
    # head < 0 made the scan read the bytes in front of the buffer
    data = records.encode_records([b"abc"])
    with pytest.raises(ValueError, match="head before the buffer"):
        accel.scan_batch(data, -4, len(data), -4, records.Record, 7)
    assert accel.scan_batch(data, -4, len(data), 0, records.Record, 7)[0][0].payload == b"abc"

@settings(max_examples=60)
@given(blobs, blobs, st.integers(0, 2**32 - 1))
def test_encode_with_a_prefix_is_the_record_of_the_concatenation(prefix: bytes, payload: bytes,
                                                                  generation: int):
    want = records._encode_py(prefix + payload, generation)
    assert accel.encode_record(payload, generation, prefix) == want
    assert records.encode_record(memoryview(payload), generation, prefix) == want


def test_encode_reuses_its_scratch_without_leaking_bytes_between_records():
    """Large, larger than the kept scratch, then small and mid-size records after them: each
    is exactly its own record (a kept buffer must not show an earlier record's bytes)."""
    big = bytes(range(256)) * (40 << 10)  # 10 MiB: over the kept size, allocated per call
    mid = b"\xfe\xfd" * 300_000
    for prefix, payload in [(b"h", mid), (b"", big), (b"\x20\x08", mid[:1000]),
                            (b"", b"x" * 600), (b"p" * 5, mid), (b"", b"")]:
        got = accel.encode_record(payload, 7, prefix)
        assert got == records._encode_py(prefix + payload, 7)
        assert records.decode_record(got[:-2]) == (7, prefix + payload)


def test_the_python_encoder_takes_a_prefix_too(monkeypatch):
    monkeypatch.setattr(records, "_accel", None)
    assert records.encode_record(b"data", 3, b"head") == accel.encode_record(b"headdata", 3)
    assert records.encode_record(b"data", 3) == accel.encode_record(b"data", 3)


class _Entry:
    """What the WAL appends: ``index``, ``term``, ``type`` (an int or an IntEnum) and bytes."""

    def __init__(self, index: int, term: int, type_: int, data: bytes) -> None:
        self.index, self.term, self.type, self.data = index, term, type_, data


uint64 = st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1))
entries_st = st.lists(
    st.builds(_Entry, st.integers(1, 2**64 - 1), uint64, st.integers(0, 2**32 - 1), blobs),
    max_size=12)


@given(entries_st, st.integers(0, 2**32 - 1))
@settings(max_examples=300)
def test_wal_entry_records_agree_with_the_segments_specification(entries, generation):
    """``encode_entries`` -- the WAL segment's hot loop in C -- writes, for every entry, the
    record the Python comprehension it replaced writes (``entry_head`` + ``encode_record``),
    and each record's length; a segment encodes the same bytes either way."""
    from gateway.core.wal import segment
    from gateway.core.wal.codec import entry_head

    expected = [records._encode_py(entry_head(e.index, e.term, e.type, len(e.data)) + e.data,
                                   generation) for e in entries]
    recs, lengths = accel.encode_entries(entries, generation)
    assert recs == expected
    assert lengths == [len(r) for r in expected]
    assert segment._encode_entries is accel.encode_entries


def test_wal_entry_records_refuse_what_is_not_an_entry():
    """A field that is not a uint64, or data that is not bytes-like, raises -- nothing is
    written for the batch."""
    for bad in (_Entry(-1, 1, 0, b"x"), _Entry(1, 2**64, 0, b"x"), _Entry(1, 1, "0", b"x"),
                _Entry(1, 1, 0, "text")):
        with pytest.raises((ValueError, TypeError)):
            accel.encode_entries([_Entry(1, 1, 0, b"ok"), bad], 0)
    with pytest.raises(AttributeError):
        accel.encode_entries([object()], 0)
    assert accel.encode_entries([], 5) == ([], [])


def test_wal_entry_records_take_an_int_enum_type():
    """The Raft log's entries carry their type as an ``IntEnum``: encoded as its value."""
    import enum

    class Kind(enum.IntEnum):
        NORMAL = 0
        CONF_CHANGE = 1

    got = accel.encode_entries([_Entry(7, 3, Kind.CONF_CHANGE, b"c"), _Entry(8, 3, Kind.NORMAL,
                                                                              b"")], 9)
    assert got == accel.encode_entries([_Entry(7, 3, 1, b"c"), _Entry(8, 3, 0, b"")], 9)


# The caller's list emptied by an entry's property in the middle of encode_entries: the entry
# being read must stay alive and the next one must not be read from the emptied list. Run in a
# child: before the fix the C code read the freed entry and the list's freed items.
_ENTRIES_EMPTIED_BY_A_PROPERTY = """
from gateway.core import _recordstream

class Entry:
    term, type, data = 1, 0, b"x"
    @property
    def index(self):
        entries.clear()
        return 1

entries = [Entry() for _ in range(3)]  # the list holds the only reference of each
try:
    _recordstream.encode_entries(entries, 0)
except ValueError as e:
    print("refused:", e)
"""


def test_entries_changed_by_a_property_are_refused_not_read_after_free():
    out = run_under_debug_allocator(_ENTRIES_EMPTIED_BY_A_PROPERTY)
    assert out.startswith("refused: encode_entries: entries changed length"), out
