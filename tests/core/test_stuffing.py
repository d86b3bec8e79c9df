"""Word stuffing: edge cases named one by one, round trips, and the reference's own bytes."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core import stuffing
from gateway.core.stuffing import (
    MAX_INITIAL_RUN,
    MAX_REMAINING_RUN,
    SEPARATOR,
    StuffingError,
    stuff,
    stuffed_size,
    unstuff,
)
from tests.core.conftest import spec_bytes

# Inputs rich in FE and FD bytes, so forbidden sequences and near-misses are common.
stuffable = st.one_of(
    st.binary(max_size=2000),
    st.lists(st.sampled_from([b"\xfe", b"\xfd", b"\x00", b"A", b"\xfe\xfd"]), max_size=800).map(
        b"".join
    ),
)


def test_empty_input_encodes_to_a_single_zero_length():
    assert stuff(b"") == b"\x00"
    assert unstuff(b"\x00") == b""


def test_short_input_is_one_run_prefixed_by_its_length():
    assert stuff(b"abc") == b"\x03abc"


def test_forbidden_sequence_is_replaced_by_a_run_boundary():
    assert stuff(b"a\xfe\xfdb") == b"\x01a\x01\x00b"
    assert unstuff(b"\x01a\x01\x00b") == b"a\xfe\xfdb"


def test_input_that_is_only_the_forbidden_sequence():
    assert stuff(SEPARATOR) == b"\x00\x00\x00"


def test_lone_fe_and_fd_bytes_are_literals():
    assert stuff(b"\xfe") == b"\x01\xfe"
    assert stuff(b"\xfd\xfe") == b"\x02\xfd\xfe"


def test_first_run_of_exactly_252_bytes_is_followed_by_an_empty_run():
    data = b"x" * MAX_INITIAL_RUN
    assert stuff(data) == bytes([MAX_INITIAL_RUN]) + data + b"\x00\x00"


def test_maximum_later_run_has_no_implicit_separator():
    data = b"y" * (MAX_INITIAL_RUN + MAX_REMAINING_RUN)
    encoded = stuff(data)
    assert encoded[MAX_INITIAL_RUN + 1 : MAX_INITIAL_RUN + 3] == bytes([252, 252])
    assert encoded.endswith(b"\x00\x00")
    assert unstuff(encoded) == data


def test_run_lengths_are_little_endian_radix_253():
    data = b"z" * (MAX_INITIAL_RUN + 300)
    encoded = stuff(data)
    assert encoded[MAX_INITIAL_RUN + 1 : MAX_INITIAL_RUN + 3] == bytes([300 % 253, 300 // 253])


@given(stuffable)
def test_stuffed_output_never_contains_the_separator(data: bytes):
    assert SEPARATOR not in stuff(data)


@given(stuffable)
def test_round_trip(data: bytes):
    assert unstuff(stuff(data)) == data


@given(stuffable)
def test_stuffed_size_bounds_the_encoding(data: bytes):
    assert len(stuff(data)) <= stuffed_size(len(data))


def test_unstuff_rejects_empty_input():
    with pytest.raises(StuffingError):
        unstuff(b"")


def test_unstuff_rejects_first_length_above_252():
    with pytest.raises(StuffingError):
        unstuff(b"\xfd" + b"a" * 253)


def test_unstuff_rejects_run_longer_than_the_input():
    with pytest.raises(StuffingError):
        unstuff(b"\x05abc")


def test_unstuff_rejects_a_maximum_run_at_the_end():
    with pytest.raises(StuffingError):
        unstuff(bytes([MAX_INITIAL_RUN]) + b"a" * MAX_INITIAL_RUN)


def test_unstuff_rejects_truncated_two_byte_length():
    with pytest.raises(StuffingError):
        unstuff(b"\x01a\x01")


def test_unstuff_rejects_later_length_digit_out_of_range():
    with pytest.raises(StuffingError):
        unstuff(b"\x01a" + bytes([252, 253]) + b"b" * 10)


def test_stuffing_error_is_a_value_error():
    assert issubclass(StuffingError, ValueError)


def test_matches_reference_encoder_byte_for_byte(reference_vectors: dict[str, Any]):
    for case in reference_vectors["stuff"]:
        data = spec_bytes(case["input"])
        encoded = stuff(data)
        if "stuffed" in case:
            assert encoded.hex() == case["stuffed"], case["input"]
        else:
            assert len(encoded) == case["stuffed_len"], case["input"]
            assert hashlib.sha256(encoded).hexdigest() == case["stuffed_sha256"]
        assert unstuff(encoded) == data


def test_module_exports_constants_of_the_reference():
    assert (stuffing.RADIX, MAX_INITIAL_RUN, MAX_REMAINING_RUN) == (253, 252, 64008)
