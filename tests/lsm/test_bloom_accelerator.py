"""The C accelerator of batched bloom probes (``gateway.core.lsm._bloom``) returns exactly
what its Python specification in ``bloom.py`` returns: the two hashes of every key, and the
indices of keys a filter may hold."""

from __future__ import annotations

import os
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.lsm import bloom

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.core.lsm import _bloom as accel
else:
    accel = pytest.importorskip("gateway.core.lsm._bloom")

_MASKS = array("Q", bloom.MASKS)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=50))
def test_hashes_are_the_crc32c_and_zlib_masks_of_the_specification(keys):
    h1s, masks = accel.hashes(keys, _MASKS)
    want_h1, want_masks = bloom._key_hashes_py(keys)
    assert list(memoryview(h1s).cast("I")) == list(want_h1)
    assert list(memoryview(masks).cast("Q")) == list(want_masks)
    for k, h, m in zip(keys, want_h1, want_masks, strict=True):
        assert (h, m) == bloom.key_hash(k)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=16), min_size=1, max_size=60, unique=True),
       st.lists(st.binary(min_size=1, max_size=16), max_size=60), st.data())
def test_probes_find_every_key_added_and_agree_with_the_specification(added, others, data):
    b = bloom.BloomBuilder()
    b.add_keys(added)
    words = bloom.decode_bloom(b.finish())
    keys = added + others
    h1s, masks = bloom._key_hashes_py(keys)
    start = data.draw(st.integers(0, len(keys)))
    stop = data.draw(st.integers(start, len(keys)))
    got = accel.maybe(words, h1s, masks, start, stop)
    assert got == bloom._maybe_present_py(words, h1s, masks, start, stop)
    assert set(range(start, min(stop, len(added)))) <= set(got)  # no false negative


def test_bad_arguments_are_errors_not_crashes():
    words = array("Q", [0xFF])
    with pytest.raises(ValueError):
        accel.maybe(words, array("I", [1]), array("Q", [1, 2]), 0, 1)
    with pytest.raises(ValueError):
        accel.maybe(words, array("I", [1]), array("Q", [1]), 0, 2)
    with pytest.raises(TypeError):
        accel.maybe(array("I", [1]), array("I", [1]), array("Q", [1]), 0, 1)
    with pytest.raises(TypeError):
        accel.hashes([b"a", "b"], _MASKS)
    with pytest.raises(ValueError):
        accel.hashes([b"a"], array("Q", [1]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=24), max_size=30), max_size=4))
def test_filters_built_in_c_are_the_specifications_bytes(batches):
    import struct
    import zlib

    b = bloom.BloomBuilder()
    keys = []
    for batch in batches:
        b.add_keys(iter(batch) if len(batch) % 2 else batch)
        keys += batch
    got = b.finish()
    # the on-disk format, computed from the format's definition (docs/formats/sstable.md)
    nwords = max(1, (len(keys) * bloom.BITS_PER_KEY + 63) // 64)
    words = [0] * nwords
    for k in keys:
        words[bloom._crc(k) % nwords] |= bloom.MASKS[zlib.crc32(k) >> (32 - bloom.MASK_BITS)]
    want = struct.pack("<BBBI", bloom.TAG_BLOOM, 1, bloom.K, nwords) + array("Q", words).tobytes()
    assert got == want
    assert accel.build(b._h1, b._m, nwords) == array("Q", bloom._build_words_py(
        b._h1, b._m, nwords)).tobytes()
    with pytest.raises(ValueError):
        accel.build(b._h1, array("Q", [1] * (len(keys) + 1)), nwords)
