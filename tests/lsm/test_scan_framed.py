"""A scan framed as a repeated protobuf field (``LSMStore.scan_framed``, what a ``Scan``
response is made of) holds exactly the values ``scan`` yields, in order, cut where the old
per-row loop cut them: at the limit or before the byte budget passes, one value at least, and
``more`` exactly when a live value follows. ``_block.frame_values`` frames as its Python
specification ``format.frame_values_py`` does."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.lsm import format as fmt
from gateway.core.lsm.store import LSMStore

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.core.lsm import _block as accel
else:
    accel = pytest.importorskip("gateway.core.lsm._block")

_cells = st.lists(
    st.one_of(
        st.binary(max_size=300).map(lambda v: b"\x00" + v),                    # a plain value
        st.binary(max_size=300).map(lambda v: fmt.encode_cell(v, 1, 2, 3)),     # with metadata
        st.just(fmt.encode_cell(None)), st.just(fmt.encode_cell(None, 5, 1, 1)),  # tombstones
        st.binary(min_size=1, max_size=25).filter(lambda c: c[0] != 0),         # odd flags
    ),
    max_size=60)


@settings(max_examples=400, deadline=None)
@given(_cells, st.integers(0, 70), st.integers(0, 70), st.integers(0, 5000),
       st.integers(0, 8000))
def test_frame_values_frames_as_its_python_specification(cells, have, limit, size, max_bytes):
    want = fmt.frame_values_py(cells, b"\x0a", have, limit, size, max_bytes)
    assert accel.frame_values(cells, b"\x0a", have, limit, size, max_bytes) == want


def test_frame_values_refuses_an_empty_cell_and_what_is_not_bytes():
    with pytest.raises(ValueError):
        fmt.frame_values_py([b"\x00a", b""], b"\x0a", 0, 10, 0, 100)
    with pytest.raises(ValueError):
        accel.frame_values([b"\x00a", b""], b"\x0a", 0, 10, 0, 100)
    with pytest.raises(TypeError):
        accel.frame_values([b"\x00a", "text"], b"\x0a", 0, 10, 0, 100)


def _reference(values: list[bytes], limit: int, max_bytes: int) -> tuple[bytes, int, bool]:
    """The per-row loop ``Scan`` ran before (reads.scan): the specification of the cut."""
    rows: list[bytes] = []
    size = 0
    for v in values:
        size += len(v) + 6
        if len(rows) == limit or (rows and size > max_bytes):
            return fmt.frame_values_py([b"\x00" + r for r in rows], b"\x0a", 0, limit, 0,
                                       1 << 62)[0], len(rows), True
        rows.append(v)
    return (fmt.frame_values_py([b"\x00" + r for r in rows], b"\x0a", 0, limit, 0, 1 << 62)[0],
            len(rows), False)


_ops = st.lists(st.tuples(st.integers(0, 400), st.one_of(st.none(), st.binary(max_size=200)),
                          st.booleans()), max_size=300)


@settings(max_examples=60, deadline=None)
@given(_ops, st.integers(1, 450), st.integers(0, 30000), st.integers(0, 400),
       st.integers(0, 400))
def test_a_framed_scan_holds_what_scan_yields_cut_as_the_row_loop_cut_it(
        ops, limit, max_bytes, lo, hi):
    with tempfile.TemporaryDirectory() as d, LSMStore(d, memtable_bytes=4096) as store:
        for i, (k, v, meta) in enumerate(ops):  # small memtables: tables and memtables mix
            key = b"k%05d" % k
            if v is None:
                store.delete(key, epoch=1 if meta else 0, author=1 if meta else 0)
            else:
                store.put(key, v, epoch=7 if meta else 0, author=2 if meta else 0,
                          commit_ts=i if meta else 0)
            if i % 97 == 96:
                store.flush()
        start, end = b"k%05d" % min(lo, hi), b"k%05d" % max(lo, hi)
        for a, b in ((start, end), (None, None), (start, None)):
            values = [v for _, v in store.scan(a, b)]
            assert store.scan_framed(a, b, b"\x0a", limit, max_bytes) == \
                _reference(values, limit, max_bytes)
