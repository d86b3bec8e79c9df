"""Index-free search over k-sorted record streams (binary and interpolation probes)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.records import SEPARATOR, Record, encode_record, search


def _key(record: Record) -> int | None:
    if record.payload[:1] != b"K":
        return None  # records without a key are ignored
    return int.from_bytes(record.payload[1:9], "big")


def _stream(keys: list[int], pad: int = 30, keyless_every: int = 0) -> bytes:
    parts = [SEPARATOR]
    for i, k in enumerate(keys):
        parts.append(encode_record(b"K" + k.to_bytes(8, "big") + b"\xfe\xfd" * (pad // 2)))
        if keyless_every and i % keyless_every == 0:
            parts.append(encode_record(b"no key here"))
    return b"".join(parts)


def _k_sorted(keys: list[int], k: int, rng: random.Random) -> list[int]:
    """Shuffle within blocks of k + 1: every element stays within k of its sorted place."""
    out = []
    for i in range(0, len(keys), k + 1):
        block = keys[i : i + k + 1]
        rng.shuffle(block)
        out.extend(block)
    return out


def _expected(keys: list[int], target: int) -> int | None:
    return next((k for k in keys if k >= target), None)


@pytest.mark.parametrize("interpolate", [None, float], ids=["binary", "interpolation"])
def test_finds_first_key_at_or_after_target_in_sorted_stream(interpolate):
    keys = list(range(0, 30000, 3))
    buf = _stream(keys)
    for target in [0, 1, 2, 3, 4, 15000, 15001, 29997, 29998, 50000, -5]:
        found = search(buf, target, _key, interpolate=interpolate)
        assert (None if found is None else _key(found)) == _expected(keys, target)


@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=1500),
    st.integers(0, 6),
    st.integers(-10, 10**6 + 10),
    st.randoms(use_true_random=False),
)
@settings(max_examples=60, deadline=None)
def test_k_sorted_streams_return_first_match_in_stream_order(keys, k, target, rnd):
    ordered = _k_sorted(sorted(keys), k, rnd)
    buf = _stream(ordered, keyless_every=7)
    found = search(buf, target, _key, k=k)
    assert (None if found is None else _key(found)) == _expected(ordered, target)


def test_search_survives_damage_and_returns_a_surviving_record():
    keys = list(range(5000))
    buf = bytearray(_stream(keys))
    for i in range(1000, len(buf), 7919):
        buf[i] ^= 0xFF  # scattered damage
    found = search(bytes(buf), 2500, _key)
    assert found is not None and _key(found) >= 2500
    survivors = [k for k in keys if k >= 2500]
    assert _key(found) <= survivors[200]  # only damaged records can be skipped


def test_search_probes_far_fewer_records_than_a_linear_scan():
    keys = list(range(100000))
    buf = _stream(keys, pad=10)
    calls = 0

    def counting_key(record: Record) -> int | None:
        nonlocal calls
        calls += 1
        return _key(record)

    assert _key(search(buf, 77777, counting_key)) == 77777
    assert calls < 2000
