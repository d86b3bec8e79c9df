"""The record stream: encoding, reading, positions and ranges (one test per edge case)."""

from __future__ import annotations

import itertools
import mmap
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import records
from gateway.core.records import SEPARATOR, crc32c_raw, decode_record, encode_record, scan
from gateway.core.stuffing import stuff, unstuff


def _crc32c_bitwise(data: bytes, state: int = 0) -> int:
    """Bit-at-a-time CRC-32C with the reference's conventions (no inversions)."""
    for byte in data:
        state ^= byte
        for _ in range(8):
            state = (state >> 1) ^ 0x82F63B78 if state & 1 else state >> 1
    return state


def _stream(payloads: list[bytes], generation: int = 0, leading: bool = True) -> bytes:
    head = SEPARATOR if leading else b""
    return head + b"".join(encode_record(p, generation) for p in payloads)


def test_crc_is_castagnoli_without_inversions():
    assert crc32c_raw(b"123456789") == _crc32c_bitwise(b"123456789")
    assert crc32c_raw(b"") == 0
    assert crc32c_raw(b"\x00" * 16) == 0  # why the crc field is filled with FF before hashing


def test_record_header_is_crc_and_generation_little_endian():
    encoded = encode_record(b"hello", generation=7)
    assert encoded.endswith(SEPARATOR)
    body = unstuff(encoded[:-2])
    crc, generation = struct.unpack_from("<II", body)
    assert generation == 7 and body[8:] == b"hello"
    assert crc == _crc32c_bitwise(b"\xff\xff\xff\xff" + body[4:])


def test_encoding_matches_the_reference_writer(reference_vectors: dict[str, Any]):
    for case in reference_vectors["records"]:
        payload = bytes.fromhex(case["payload"])
        assert encode_record(payload, case["generation"]).hex() == case["encoded"]


def test_encode_records_equals_concatenated_encode_record():
    payloads = [b"", b"a", b"\xfe\xfd" * 200, bytes(range(256)) * 3]
    assert records.encode_records(payloads, 5) == b"".join(encode_record(p, 5) for p in payloads)


def test_generation_must_fit_in_32_bits():
    with pytest.raises(ValueError):
        encode_record(b"x", generation=1 << 32)
    with pytest.raises(ValueError):
        encode_record(b"x", generation=-1)


def test_empty_buffer_has_no_records():
    assert list(scan(b"")) == []


def test_buffer_of_only_separators_has_no_records():
    assert list(scan(SEPARATOR * 10)) == []


def test_empty_payload_round_trips():
    (record,) = scan(_stream([b""]))
    assert record.payload == b""


def test_scan_reports_offsets_end_position_and_generation():
    first, second = encode_record(b"one", 1), encode_record(b"two", 2)
    buf = SEPARATOR + first + second
    r1, r2 = scan(buf)
    assert (r1.position, r1.offset, r1.end, r1.generation, r1.payload) == (
        0, 2, 2 + len(first) - 2, 1, b"one",
    )
    assert r2.position == r1.end and r2.offset == r1.end + 2 and r2.end == len(buf) - 2
    assert r2.generation == 2 and r2.payload == b"two"


def test_first_record_needs_no_leading_separator():
    (record,) = scan(encode_record(b"first"))
    assert record.position == 0 and record.offset == 0


def test_zero_filled_hole_at_the_head_is_skipped():
    buf = bytes(10000) + encode_record(b"after the hole")
    (record,) = scan(buf)
    assert record.payload == b"after the hole" and record.position == 10000


def test_zero_filled_hole_in_the_middle_loses_nothing_else():
    buf = _stream([b"a"]) + bytes(4096) + SEPARATOR + encode_record(b"b")
    assert [r.payload for r in scan(buf)] == [b"a", b"b"]
    assert records.verify(buf).ok


def test_payload_of_megabytes_round_trips():
    payload = bytes(range(256)) * 8192 + b"\xfe\xfd" * 1000  # 2 MiB with forbidden sequences
    (record,) = scan(_stream([payload]))
    assert record.payload == payload


def test_payload_longer_than_a_run_keeps_separators_inside():
    payload = b"\xfe\xfd" + b"q" * 70000 + b"\xfe\xfd"
    assert decode_record(stuff_record(payload)) == (0, payload)


def stuff_record(payload: bytes) -> bytes:
    return encode_record(payload)[:-2]


def test_decode_record_rejects_bad_crc():
    body = bytearray(unstuff(stuff_record(b"payload")))
    body[-1] ^= 1
    assert decode_record(stuff(bytes(body))) is None


def test_decode_record_rejects_chunk_shorter_than_header():
    assert decode_record(stuff(b"\x00" * 7)) is None


def test_scan_accepts_bytearray_memoryview_and_mmap(tmp_path):
    buf = _stream([b"x", b"y"])
    path = tmp_path / "s"
    path.write_bytes(buf)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        views = [bytearray(buf), memoryview(buf), m]
        for view in views:
            assert [r.payload for r in scan(view)] == [b"x", b"y"]


def test_trailing_garbage_after_the_last_separator_is_ignored():
    buf = _stream([b"a", b"b"]) + b"\x07garbage"
    assert [r.payload for r in scan(buf)] == [b"a", b"b"]


def test_record_straddling_a_range_boundary_belongs_to_its_separator():
    buf = _stream([b"a" * 100, b"b" * 100])
    r1, r2 = scan(buf)
    cut = r2.offset + 10  # inside the second record
    assert [r.payload for r in scan(buf, 0, cut)] == [r1.payload, r2.payload]
    assert list(scan(buf, cut)) == []


def test_range_starting_inside_a_separator_skips_to_the_next():
    buf = _stream([b"a", b"b", b"c"])
    _r1, r2, r3 = scan(buf)
    assert [r.payload for r in scan(buf, r2.position + 1)] == [b"c"]
    assert [r.payload for r in scan(buf, r2.position)] == [b"b", b"c"]
    assert [r.payload for r in scan(buf, 0, r2.position)] == [b"a"]
    assert r3.position == r2.end


def test_range_beyond_the_buffer_is_empty():
    buf = _stream([b"a"])
    assert list(scan(buf, len(buf) + 5)) == []
    assert list(scan(buf, 3, 3)) == []


payload_lists = st.lists(
    st.one_of(st.binary(max_size=300), st.just(b"\xfe\xfd" * 7)), min_size=1, max_size=30
)


@given(payload_lists, st.lists(st.integers(0, 20000), max_size=8), st.booleans())
@settings(max_examples=150)
def test_any_split_into_ranges_reads_every_record_once(payloads, cuts, leading):
    buf = _stream(payloads, leading=leading)
    points = sorted({0, len(buf), *[c % (len(buf) + 1) for c in cuts]})
    pieces = []
    for lo, hi in itertools.pairwise(points):
        pieces.extend(scan(buf, lo, hi))
    assert pieces == list(scan(buf))
    expected = payloads
    if not leading and buf[0] == 0:
        # a first record whose stuffed encoding starts with 00 (its crc begins FE FD) reads as
        # a zero-filled hole without the separator every writer begins a file with
        expected = payloads[1:]
    assert [r.payload for r in pieces] == expected


def test_a_first_record_starting_with_a_zero_byte_is_read_only_after_a_separator():
    """Reading skips leading zero bytes (a hole at the head of a file: docs/formats/
    record-stream.md, "Reading"). A record whose crc begins ``FE FD`` stuffs to a leading
    ``00``: at the head of a buffer without ``FE FD`` before it, it is taken for the hole and
    the rest of it skipped as damage -- why writers begin every file with ``FE FD``."""
    record = encode_record(b"6\xc4")
    assert record[0] == 0
    assert [r.payload for r in scan(record + encode_record(b"next"))] == [b"next"]
    assert [r.payload for r in scan(SEPARATOR + record)] == [b"6\xc4"]


def test_reference_reader_recovers_the_same_records(reference_vectors: dict[str, Any]):
    for case in reference_vectors["damaged"]:
        buf = bytes.fromhex(case["stream"])
        mine = [[r.position, r.generation, r.payload.hex()] for r in scan(buf)]
        assert mine == case["records"], case["damage"]
        for rng in case["ranges"]:
            mine = [
                [r.position, r.generation, r.payload.hex()]
                for r in scan(buf, rng["start"], rng["stop"])
            ]
            assert mine == rng["records"], (case["damage"], rng["start"], rng["stop"])


def test_scan_of_a_bytearray_gives_bytes_payloads() -> None:
    # Record.payload is bytes whatever the buffer, in the Python specification as in C: a
    # short record's payload was once a bytearray slice when the buffer was a bytearray.
    buf = bytearray(encode_record(b"short") + encode_record(b"x" * 300))
    payloads = [r.payload for r in scan(buf)]
    assert payloads == [b"short", b"x" * 300]
    assert [type(p) for p in payloads] == [bytes, bytes]
