"""The C point search and decoding of data blocks (``gateway.core.lsm._block``) answer what
their Python specification in ``format.py`` answers: the cell of every key held, None for
every key not held, the block's last key, its pairs, and an error -- never a wrong answer or
a read past the end -- for a damaged payload."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.lsm import format as fmt

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.core.lsm import _block as accel
else:
    accel = pytest.importorskip("gateway.core.lsm._block")

_keys = st.lists(st.binary(max_size=20), max_size=300, unique=True).map(sorted)


def _outcome(fn, *args):  # type: ignore[no-untyped-def]
    try:
        return ("ok", fn(*args))
    except (ValueError, struct.error):
        return ("error",)


@settings(max_examples=300, deadline=None)
@given(_keys, st.data())
def test_find_gives_every_cell_held_and_none_for_keys_not_held(keys, data):
    cells = [data.draw(st.binary(max_size=40)) for _ in keys]
    payload = fmt.encode_block(keys, cells)
    for k, c in zip(keys, cells, strict=True):
        assert accel.find(payload, k) == c
    others = data.draw(st.lists(st.binary(max_size=21), max_size=40))
    for k in others:
        assert accel.find(payload, k) == fmt._find_cell_py(payload, k)
        if k not in keys:
            assert accel.find(payload, k) is None
    assert accel.last_key(payload) == fmt._block_last_key_py(payload)
    assert accel.last_key(payload) == (keys[-1] if keys else None)


@settings(max_examples=400, deadline=None)
@given(_keys, st.data())
def test_a_damaged_payload_gets_the_specifications_answer_or_its_error(keys, data):
    payload = bytearray(fmt.encode_block(keys, [k[::-1] for k in keys]))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(payload)))
    damaged = bytes(payload[:cut]) + data.draw(st.binary(max_size=3))
    probe = data.draw(st.sampled_from(keys) if keys else st.binary(max_size=20))
    assert _outcome(accel.find, damaged, probe) == _outcome(fmt._find_cell_py, damaged, probe)
    assert _outcome(accel.last_key, damaged) == _outcome(fmt._block_last_key_py, damaged)
    assert _outcome(accel.decode, damaged) == _outcome(fmt.decode_block_py, damaged)


@settings(max_examples=300, deadline=None)
@given(_keys, st.data())
def test_decode_gives_the_pairs_a_block_was_made_of(keys, data):
    cells = [data.draw(st.binary(max_size=60)) for _ in keys]
    payload = fmt.encode_block(keys, cells)
    assert accel.decode(payload) == fmt.decode_block_py(payload) == (keys, cells)
    assert accel.decode(memoryview(payload)) == (keys, cells)  # a cached payload's view too


def test_blocks_of_more_pairs_than_the_stack_holds_are_searched_too():
    keys = [b"%06d" % i for i in range(5000)]
    payload = fmt.encode_block(keys, [k + b"!" for k in keys])
    assert accel.find(payload, b"004321") == b"004321!"
    assert accel.find(payload, b"004321x") is None
    assert accel.last_key(payload) == b"004999"


_META = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 0, 1, 2**32 - 1, 2**32, -1,
                                                              2**64, True, 1.0]))
_OPS = st.lists(st.one_of(
    st.tuples(st.binary(max_size=6), st.none() | st.binary(max_size=8), _META, _META, _META),
    st.tuples(st.binary(max_size=6), st.none() | st.binary(max_size=8)),  # the general path's
    st.tuples(st.just(bytearray(b"k")), st.binary(max_size=3), st.just(1), st.just(2),
              st.just(3))), max_size=12)


@settings(max_examples=500, deadline=None)
@given(_OPS)
def test_cells_of_write_ops_are_the_specifications_and_the_stores(ops):
    from gateway.core.lsm.store import LSMStore

    want = fmt.encode_cells_py(ops)
    assert accel.cells(ops) == want
    assert accel.cells(tuple(ops)) is None and fmt.encode_cells_py(tuple(ops)) is None
    if want is not None:
        # what the store's general loop (every op of any shape) builds for the same ops
        assert want == LSMStore._cells(ops)
        assert want == {k: fmt.encode_cell(v, e, a, t) for k, v, e, a, t in ops}
