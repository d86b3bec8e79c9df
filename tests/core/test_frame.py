"""The 2008 transport frame: compact lengths, frames, and the streaming reader.

The seed's C functions are ported below as oracles. ``seed_length_decode`` reproduces C's
arithmetic on an LP64 machine (``*ptr << (8 * i)`` promotes the byte to a 32-bit ``int``), which
is why lengths of 2**31 and more are refused: the seed would misread them.
"""

from __future__ import annotations

import io
import socket
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.frame import (
    MAX_LENGTH,
    ChecksumMismatchError,
    Frame,
    FrameError,
    FrameReader,
    LengthOverflowError,
    TruncatedFrameError,
    decode_frame,
    decode_length,
    encode_frame,
    encode_length,
)

# --- oracles: the seed's length_encode / length_decode, ported line by line -----------------


def seed_length_encode(length: int) -> bytes:
    """Port of the seed's ``length_encode``.

    The published text is cut off after ``pow2 <<= 1;``; the missing ``++log2m1; }`` follows
    from the invariant comments (``log2m1 == ceil(log2(ptr - buf)) - 1``) and the examples.
    """
    assert length > 1
    if length < 256:
        return bytes((length & 0xFF,))
    buf = [0]
    ptr = 0
    log2m1 = -1
    pow2 = 1
    while length > 0:
        assert pow2 == 1 << (log2m1 + 1)
        assert ptr <= 1 << (log2m1 + 1)
        ptr += 1
        buf.append(length & 0xFF)
        length >>= 8
        if ptr > pow2:
            pow2 <<= 1
            log2m1 += 1
    ptr += 1
    while ptr < pow2 + 1:
        buf.append(0)
        ptr += 1
    buf[0] = log2m1 & 0xFF
    assert ptr == pow2 + 1
    return bytes(buf)


def _c_promoted_shift(byte: int, shift: int) -> int:
    """``(size_t)((int)byte << shift)`` as gcc/clang compute it on x86-64 (LP64)."""
    value = (byte << shift) & 0xFFFF_FFFF
    if value >= 1 << 31:  # does not fit an int: wraps negative, then sign-extends
        value -= 1 << 32
    return value % (1 << 64)


def seed_length_decode(buf: bytes) -> tuple[int, int]:
    """Port of the seed's ``length_decode``: returns (length, bytes consumed)."""
    if buf[0] > 1:
        return buf[0], 1
    count = 1 << (buf[0] + 1)
    length = 0
    for i in range(count):
        length |= _c_promoted_shift(buf[1 + i], 8 * i)
    return length, 1 + count


BOUNDARY_LENGTHS = [
    0, 1, 2, 3, 127, 128, 254, 255, 256, 257, 767,
    65535, 65536, 65537, 66047, 2**24 - 1, 2**24, 2**24 + 1, 2**31 - 2, MAX_LENGTH,
]  # fmt: skip

# --- compact length ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "encoded"),
    [(42, "2a"), (767, "00 ff 02"), (66047, "01 ff 01 01 00")],
)
def test_seed_examples_encode_and_decode(length: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert encode_length(length) == raw
    assert decode_length(raw) == (length, len(raw))


@pytest.mark.parametrize("length", BOUNDARY_LENGTHS)
def test_seed_length_decode_reads_every_boundary_length(length: int) -> None:
    raw = encode_length(length)
    assert seed_length_decode(raw + b"\xee" * 8) == (length, len(raw))
    assert decode_length(raw) == (length, len(raw))


@given(st.integers(0, MAX_LENGTH))
def test_seed_length_decode_reads_every_emitted_length(length: int) -> None:
    raw = encode_length(length)
    assert seed_length_decode(raw) == (length, len(raw))
    assert decode_length(raw) == (length, len(raw))


@given(st.integers(2, MAX_LENGTH))
def test_encoding_is_byte_identical_to_seed_length_encode(length: int) -> None:
    assert encode_length(length) == seed_length_encode(length)


@pytest.mark.parametrize("length", [n for n in BOUNDARY_LENGTHS if n > 1])
def test_boundary_encodings_are_byte_identical_to_seed_length_encode(length: int) -> None:
    assert encode_length(length) == seed_length_encode(length)


@pytest.mark.parametrize(("length", "encoded"), [(0, "00 00 00"), (1, "00 01 00")])
def test_lengths_zero_and_one_take_the_two_byte_long_form(length: int, encoded: str) -> None:
    assert encode_length(length) == bytes.fromhex(encoded)
    assert seed_length_decode(bytes.fromhex(encoded)) == (length, 3)


@pytest.mark.parametrize(
    ("length", "encoded"),
    [(255, "ff"), (256, "00 00 01"), (65535, "00 ff ff"), (65536, "01 00 00 01 00")],
)
def test_encoding_switches_form_at_the_byte_boundaries(length: int, encoded: str) -> None:
    assert encode_length(length) == bytes.fromhex(encoded)


@pytest.mark.parametrize("length", [2**31, 2**32 - 1])
def test_lengths_with_bit_31_set_are_refused_because_the_seed_misreads_them(length: int) -> None:
    naive = b"\x01" + length.to_bytes(4, "little")
    assert seed_length_decode(naive)[0] != length
    with pytest.raises(ValueError, match="outside"):
        encode_length(length)


@pytest.mark.parametrize("length", [2**32, 2**40, 2**64 - 1])
def test_lengths_needing_eight_bytes_are_refused_because_the_seed_reads_marker_2_as_two(
    length: int,
) -> None:
    assert seed_length_encode(length)[0] == 2
    assert seed_length_decode(seed_length_encode(length)) == (2, 1)
    with pytest.raises(ValueError, match="outside"):
        encode_length(length)


def test_negative_length_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        encode_length(-1)


def test_first_byte_two_is_the_length_two_not_a_marker() -> None:
    # Only 0 and 1 are markers: there is no "unknown marker" byte, every other value is a length.
    assert decode_length(b"\x02\x00\x00\x00\x00") == (2, 1)


def test_long_form_above_the_maximum_is_refused() -> None:
    with pytest.raises(LengthOverflowError, match="exceeds the maximum") as e:
        decode_length(b"\x00\x01\x00\x00\x00\x80", pos=1)
    assert e.value.offset == 1


def test_non_minimal_long_forms_are_read_as_the_seed_reads_them() -> None:
    assert decode_length(b"\x00\x2a\x00") == (42, 3)
    assert decode_length(b"\x01\xff\x02\x00\x00") == (767, 5)


def test_decode_length_at_a_position_returns_the_next_position() -> None:
    buf = b"\xaa\xbb" + encode_length(66047) + b"\xcc"
    assert decode_length(buf, 2) == (66047, 7)


@pytest.mark.parametrize("raw", ["", "00", "00 ff", "01", "01 ff 01 01"])
def test_truncated_length_raises(raw: str) -> None:
    with pytest.raises(TruncatedFrameError, match="truncated length"):
        decode_length(bytes.fromhex(raw))


# --- frames ----------------------------------------------------------------------------------


def test_worked_example_from_the_spec() -> None:
    # docs/formats/transport-frame.md: EpochMarker(server_id=1, epoch=5) under tag 2.
    message = bytes.fromhex("08 01 10 05")
    frame = bytes.fromhex("04 02 08 01 10 05 d3 14 4d ae")
    assert encode_frame(2, message) == frame
    assert decode_frame(frame) == (2, message, len(frame))


def test_crc_is_zlib_crc32_of_length_tag_and_message_stored_little_endian() -> None:
    frame = encode_frame(7, b"x" * 300)
    assert frame[:4] == bytes.fromhex("00 2c 01 07")
    assert frame[-4:] == zlib.crc32(frame[:-4]).to_bytes(4, "little")


def test_empty_message_frame_uses_the_two_byte_zero_length() -> None:
    frame = encode_frame(3, b"")
    assert frame[:4] == bytes.fromhex("00 00 00 03")
    assert len(frame) == 8
    assert decode_frame(frame) == (3, b"", 8)


def test_large_message_takes_the_four_byte_length() -> None:
    message = bytes(range(256)) * 300
    frame = encode_frame(1, message)
    assert frame[0] == 1
    assert decode_frame(frame) == (1, message, len(frame))


@given(tag=st.integers(0, 255), message=st.binary(max_size=70_000))
@settings(max_examples=60)
def test_frames_round_trip(tag: int, message: bytes) -> None:
    frame = encode_frame(tag, message)
    assert decode_frame(frame) == (tag, message, len(frame))


@given(messages=st.lists(st.tuples(st.integers(0, 255), st.binary(max_size=600)), max_size=8))
def test_concatenated_frames_decode_in_order(messages: list[tuple[int, bytes]]) -> None:
    buf = b"".join(encode_frame(tag, msg) for tag, msg in messages)
    pos = 0
    decoded = []
    while pos < len(buf):
        tag, msg, pos = decode_frame(buf, pos)
        decoded.append((tag, msg))
    assert decoded == messages


def test_bad_crc_raises_with_the_frame_offset() -> None:
    first = encode_frame(1, b"first")
    second = bytearray(encode_frame(1, b"second"))
    second[-1] ^= 0x01
    buf = first + bytes(second)
    with pytest.raises(ChecksumMismatchError, match=f"frame at offset {len(first)}") as e:
        decode_frame(buf, len(first))
    assert e.value.offset == len(first)


def test_damaged_tag_is_caught_by_the_crc() -> None:
    frame = bytearray(encode_frame(1, b"payload"))
    frame[1] = 2
    with pytest.raises(ChecksumMismatchError):
        decode_frame(bytes(frame))


@given(data=st.data())
def test_any_single_bit_flip_is_detected(data: st.DataObject) -> None:
    frame = bytearray(encode_frame(5, b"some message body"))
    index = data.draw(st.integers(0, len(frame) - 1))
    frame[index] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(FrameError):
        decode_frame(bytes(frame))


def test_truncated_body_raises() -> None:
    frame = encode_frame(1, b"0123456789")
    with pytest.raises(TruncatedFrameError, match="needs 16 bytes, 8 available"):
        decode_frame(frame[:8])


def test_truncated_crc_raises() -> None:
    frame = encode_frame(1, b"0123456789")
    with pytest.raises(TruncatedFrameError):
        decode_frame(frame[:-1])


def test_missing_tag_raises_truncated() -> None:
    with pytest.raises(TruncatedFrameError):
        decode_frame(b"\x05")


def test_errors_report_absolute_offsets_with_base_offset() -> None:
    frame = encode_frame(1, b"abc")
    with pytest.raises(TruncatedFrameError, match="frame at offset 4096") as e:
        decode_frame(frame[:-2], base_offset=4096)
    assert e.value.offset == 4096


def test_frame_errors_are_value_errors() -> None:
    for cls in (TruncatedFrameError, LengthOverflowError, ChecksumMismatchError):
        assert issubclass(cls, FrameError)
    assert issubclass(FrameError, ValueError)


@pytest.mark.parametrize("tag", [-1, 256])
def test_encode_frame_refuses_tags_outside_a_byte(tag: int) -> None:
    with pytest.raises(ValueError, match="type tag"):
        encode_frame(tag, b"")


# --- streaming reader ------------------------------------------------------------------------


class _TrickleSource:
    """A non-seekable stream without read1 that returns at most ``step`` bytes per read."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = data
        self._pos = 0
        self._step = step

    def read(self, n: int = -1) -> bytes:
        n = self._step if n < 0 else min(n, self._step)
        chunk = self._data[self._pos : self._pos + n]
        self._pos += len(chunk)
        return chunk


def _stream(*messages: bytes) -> tuple[bytes, list[int]]:
    offsets, parts, pos = [], [], 0
    for message in messages:
        frame = encode_frame(1, message)
        offsets.append(pos)
        parts.append(frame)
        pos += len(frame)
    return b"".join(parts), offsets


def test_reader_yields_frames_with_offsets_and_sizes() -> None:
    data, offsets = _stream(b"a", b"", b"x" * 1000)
    frames = list(FrameReader(io.BytesIO(data)))
    assert [f.offset for f in frames] == offsets
    assert [f.message for f in frames] == [b"a", b"", b"x" * 1000]
    assert frames[-1].end == len(data)
    assert frames[0] == Frame(offset=0, type_tag=1, message=b"a", size=len(encode_frame(1, b"a")))


def test_reader_of_an_empty_stream_yields_nothing() -> None:
    assert list(FrameReader(io.BytesIO(b""))) == []


@given(
    messages=st.lists(st.binary(max_size=700), max_size=10),
    step=st.integers(1, 300),
    chunk_size=st.integers(1, 2048),
)
def test_reader_handles_any_read_granularity(
    messages: list[bytes], step: int, chunk_size: int
) -> None:
    data, offsets = _stream(*messages)
    frames = list(FrameReader(_TrickleSource(data, step), chunk_size=chunk_size))
    assert [f.message for f in frames] == messages
    assert [f.offset for f in frames] == offsets


def test_reader_stops_at_a_torn_tail_with_its_offset() -> None:
    data, offsets = _stream(b"one", b"two", b"three")
    reader = FrameReader(io.BytesIO(data[:-3]))
    assert next(reader).message == b"one"
    assert next(reader).message == b"two"
    with pytest.raises(TruncatedFrameError) as e:
        next(reader)
    assert e.value.offset == offsets[2]


def test_reader_raises_on_a_damaged_frame_after_yielding_the_good_ones() -> None:
    data, offsets = _stream(b"one", b"two", b"three")
    damaged = bytearray(data)
    damaged[offsets[1] + 3] ^= 0xFF
    reader = FrameReader(io.BytesIO(bytes(damaged)))
    assert next(reader).message == b"one"
    with pytest.raises(ChecksumMismatchError) as e:
        next(reader)
    assert e.value.offset == offsets[1]


def test_reader_reports_offsets_relative_to_where_the_stream_starts(tmp_path) -> None:
    data, offsets = _stream(b"one", b"two")
    path = tmp_path / "frames.bin"
    path.write_bytes(b"HEADER" + data)
    with path.open("rb") as f:
        f.seek(6)
        frames = list(FrameReader(f))
    assert [fr.offset for fr in frames] == [6 + o for o in offsets]


def test_reader_refuses_a_length_above_its_limit() -> None:
    data, _ = _stream(b"x" * 5000)
    with pytest.raises(LengthOverflowError, match="reader's limit 4096"):
        list(FrameReader(io.BytesIO(data), max_length=4096))


def test_reader_offset_property_tracks_the_next_frame() -> None:
    data, offsets = _stream(b"one", b"two")
    reader = FrameReader(io.BytesIO(data), offset=100)
    next(reader)
    assert reader.offset == 100 + offsets[1]


def test_reader_over_a_socket_yields_a_frame_before_the_peer_closes() -> None:
    left, right = socket.socketpair()
    with left, right:
        right.settimeout(5)
        left.sendall(encode_frame(1, b"ping"))
        with right.makefile("rb") as stream:
            reader = FrameReader(stream)
            assert next(reader).message == b"ping"  # would time out if it waited for 64 KiB
            left.sendall(encode_frame(2, b"pong"))
            left.shutdown(socket.SHUT_WR)
            assert [f.message for f in reader] == [b"pong"]
