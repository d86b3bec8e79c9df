"""The WAL's hand-written protobuf codec against the generated ``gateway.v1.wal_pb2``, and its
type tags against the registry in ``gateway.core.messages``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core import messages
from gateway.core.wal import codec
from gateway.core.wal.codec import WalTag
from gateway.v1 import wal_pb2

u64 = st.integers(0, (1 << 64) - 1)
u32 = st.integers(0, (1 << 32) - 1)


@given(index=st.integers(1, (1 << 64) - 1), term=u64, type_=u32, data=st.binary(max_size=300))
def test_entry_encoding_is_byte_identical_to_protobuf(
    index: int, term: int, type_: int, data: bytes
) -> None:
    ours = codec.encode_entry(index, term, type_, data)
    msg = wal_pb2.WalEntry(index=index, term=term, type=type_, data=data)
    assert ours == bytes([WalTag.ENTRY]) + msg.SerializeToString(deterministic=True)
    assert codec.decode_wal_entry(ours) == codec.WalEntry(index, term, type_, data)


@given(term=u64, vote=u64, commit=u64)
def test_hard_state_encoding_is_byte_identical_to_protobuf(
    term: int, vote: int, commit: int
) -> None:
    ours = codec.encode_hard_state(codec.WalHardState(term, vote, commit))
    msg = wal_pb2.WalHardState(term=term, vote=vote, commit=commit)
    assert ours[1:] == msg.SerializeToString(deterministic=True)
    assert codec.decode_hard_state(ours) == codec.WalHardState(term, vote, commit)


def test_footer_and_index_encodings_are_byte_identical_to_protobuf() -> None:
    ft = codec.SegmentFooter(7, 3, 1000, 1100, 0xDEADBEEF)
    assert codec.encode_footer(ft)[1:] == wal_pb2.WalSegmentFooter(
        first_index=7, count=3, index_offset=1000, index_end=1100, index_crc32c=0xDEADBEEF,
        format_version=1).SerializeToString(deterministic=True)
    ix = codec.SegmentIndex(7, 3, b"\x01" * 16, b"\x02" * 16)
    assert codec.encode_index(ix)[1:] == wal_pb2.WalSegmentIndex(
        first_index=7, count=3, bounds=b"\x01" * 16, term_runs=b"\x02" * 16
    ).SerializeToString(deterministic=True)


def test_decoder_accepts_reordered_and_unknown_fields() -> None:
    body = wal_pb2.WalEntry(index=5, term=2, data=b"x").SerializeToString()
    reordered = b"\x22\x01x" + b"\x10\x02" + b"\x08\x05" + b"\x2d\x00\x00\x00\x00"  # + fixed32 #5
    assert codec.decode_wal_entry(bytes([WalTag.ENTRY]) + reordered) == codec.decode_wal_entry(
        bytes([WalTag.ENTRY]) + body)


@pytest.mark.parametrize("bad", [b"\x08", b"\x22\x05ab", b"\x0f\x00", b"\x08" + b"\xff" * 11])
def test_malformed_payload_raises_payload_error(bad: bytes) -> None:
    with pytest.raises(codec.PayloadError):
        codec.decode_wal_entry(bytes([WalTag.ENTRY]) + bad)


def test_wal_tags_are_in_the_storage_range_and_collide_with_no_registered_tag() -> None:
    for tag in WalTag:
        assert 32 <= tag <= 63
        registered = {t.value: t.name for t in messages.TypeTag}
        if tag.value in registered:
            # Registered since: it must be registered for the WAL record of the same name.
            assert registered[tag.value] in (tag.name, f"WAL_{tag.name}"), (tag, registered)


def test_an_entry_payload_is_its_head_followed_by_its_data():
    from gateway.core.wal.codec import decode_wal_entry, encode_entry, entry_head

    for index, term, type_, data in [(1, 0, 0, b""), (2, 5, 1, b"x"), (1 << 40, 1 << 33, 2,
                                                                        b"\xfe\xfd" * 999)]:
        payload = entry_head(index, term, type_, len(data)) + data
        assert payload == encode_entry(index, term, type_, data)
        e = decode_wal_entry(payload)
        assert (e.index, e.term, e.data) == (index, term, data)
