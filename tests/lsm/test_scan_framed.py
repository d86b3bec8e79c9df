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
from gateway.core.varint import encode_uvarint

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


def _frame(rows: list[bytes]) -> bytes:
    return b"".join(b"\x0a" + encode_uvarint(len(r)) + r for r in rows)


def _reference(values: list[bytes], limit: int, max_bytes: int) -> tuple[bytes, int, bool]:
    """The per-row loop ``Scan`` ran before (reads.scan): the specification of the cut."""
    rows: list[bytes] = []
    size = 0
    for v in values:
        size += len(v) + 6
        if len(rows) == limit or (rows and size > max_bytes):
            return _frame(rows), len(rows), True
        rows.append(v)
    return _frame(rows), len(rows), False


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
            framed, count, more, shape = store.scan_framed(a, b, b"\x0a", limit, max_bytes)
            assert (framed, count, more) == _reference(values, limit, max_bytes)
            assert shape is None


# --- values that share a shape: records of some fields factored out into one shape ---------

def _record(field: int, wire: int, payload: bytes) -> bytes:
    return encode_uvarint(field << 3 | wire) + payload


_records = st.one_of(
    st.builds(lambda f, n: _record(f, 0, encode_uvarint(n)), st.integers(1, 6),
              st.integers(0, 1 << 64 - 1)),
    st.builds(lambda f, b: _record(f, 2, encode_uvarint(len(b)) + b), st.integers(1, 6),
              st.binary(max_size=12)),
    st.builds(lambda f, b: _record(f, 1, b), st.integers(1, 6), st.binary(min_size=8,
                                                                              max_size=8)),
    st.builds(lambda f, b: _record(f, 5, b), st.integers(1, 6), st.binary(min_size=4,
                                                                              max_size=4)),
)
_shape = [_record(1, 2, b"\x03abc"), _record(2, 2, b"\x01k"), _record(4, 2, b"\x02kv")]
_messages = st.one_of(
    st.lists(_records, max_size=6).map(b"".join),                    # any records
    st.lists(_records.filter(lambda r: r[0] >> 3 not in (1, 2, 4)), max_size=4).map(
        lambda rest: b"".join(_shape[:2] + rest[:1] + _shape[2:] + rest[1:])),  # the shape
    st.binary(max_size=10),                                          # often not a message
)
_shaped_cells = st.lists(st.one_of(_messages.map(lambda m: b"\x00" + m),
                                   st.just(fmt.encode_cell(None))), max_size=30)


@settings(max_examples=500, deadline=None)
@given(_shaped_cells, st.integers(0, 40), st.integers(0, 3000),
       st.sampled_from([b"\x01\x02\x04", b"\x02", b"\x04\x01"]),
       st.one_of(st.none(), st.just(b"".join(_shape)), st.just(b"")))
def test_frame_values_factors_out_a_shape_as_its_python_specification(cells, limit, max_bytes,
                                                                     fields, shape):
    want = fmt.frame_values_py(cells, b"\x0a", 0, limit, 0, max_bytes, fields, shape)
    assert accel.frame_values(cells, b"\x0a", 0, limit, 0, max_bytes, fields, shape) == want


def test_a_value_whose_shape_records_are_scattered_is_framed_without_them_too():
    """More runs of other records than the C framing keeps apart (eight): the rest is then
    copied record by record, to the same bytes."""
    def scattered(n: int) -> bytes:
        return b"".join(_record(1, 0, encode_uvarint(7)) + _record(2, 0, encode_uvarint(i))
                        for i in range(n))

    cells = [b"\x00" + scattered(12), b"\x00" + scattered(12), b"\x00" + scattered(3)]
    want = fmt.frame_values_py(cells, b"\x0a", 0, 10, 0, 1 << 20, b"\x01")
    assert accel.frame_values(cells, b"\x0a", 0, 10, 0, 1 << 20, b"\x01") == want
    framed, have, _, stopped, shape = want
    assert (have, stopped, shape) == (3, fmt.FRAMED_ALL, _record(1, 0, b"\x07") * 12)
    rest = b"".join(_record(2, 0, encode_uvarint(i)) for i in range(12))
    assert framed.startswith((b"\x0a" + encode_uvarint(len(rest)) + rest) * 2)


def _row(i: int, table: str, with_meta: bool) -> bytes:
    from gateway.v1 import gateway_pb2, statement_pb2, value_pb2
    vc = value_pb2.FIELD_TYPE_VARCHAR
    row = gateway_pb2.Row(key_values=[value_pb2.Value(int_value=i)],
                          values=[value_pb2.Value(int_value=i), value_pb2.Value(string_value="x")],
                          epoch=i, log_index=i)
    if with_meta:
        row.table.CopyFrom(statement_pb2.TableMetadata(schema_name="s", table_name=table))
        row.key_fields.add(name="id", type=value_pb2.FIELD_TYPE_INTEGER)
        row.fields.add(name="id", type=value_pb2.FIELD_TYPE_INTEGER)
        row.fields.add(name="v", type=vc)
    return row.SerializeToString()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.sampled_from(["t", "t", "t", "u"]),
                          st.booleans()), max_size=120),
       st.integers(1, 150), st.integers(0, 20000))
def test_rows_framed_with_a_shared_shape_read_back_as_the_rows_stored(rows, limit, max_bytes):
    """The client's rule -- a row without a table takes the response's shape -- gives back
    every stored row; rows of another shape keep theirs, and a row without a table of its
    own makes the scan frame every row whole (no shape)."""
    from gateway.node.state.row_reads import ROW_SHAPE_FIELDS
    from gateway.v1 import gateway_pb2

    with tempfile.TemporaryDirectory() as d, LSMStore(d, memtable_bytes=2048) as store:
        for n, (k, table, meta) in enumerate(rows):
            store.put(b"k%05d" % k, _row(k, table, meta or n % 7 != 3))
        values = [v for _, v in store.scan(None, None)]
        framed, count, more, shape = store.scan_framed(None, None, b"\x0a", limit, max_bytes,
                                                       ROW_SHAPE_FIELDS)
        whole = _reference(values, limit, max_bytes)
        assert (count, more) == whole[1:]
        got = gateway_pb2.ScanResponse.FromString(framed)
        shared = gateway_pb2.RowShape.FromString(shape or b"")
        for r in got.rows:
            if not r.HasField("table"):
                if shared.HasField("table"):
                    r.table.CopyFrom(shared.table)
                r.key_fields.extend(shared.key_fields)
                r.fields.extend(shared.fields)
        want = [gateway_pb2.Row.FromString(v) for v in values[:count]]
        assert list(got.rows) == want
        taken = [gateway_pb2.Row.FromString(v) for v in values[:count]]
        if taken and taken[0].HasField("table") and \
                any(not r.HasField("table") for r in taken):
            assert shape is None and framed == whole[0]  # told apart only whole
        if shape:
            assert len(framed) < len(whole[0]) or count == 0


def test_snapshots_of_a_small_memtable_share_one_copy_until_it_is_written(tmp_path):
    """A small active memtable is copied for a snapshot, and the copy is kept for the next
    snapshot while nothing is written (scans of a quiet store sort it once); any write --
    put, delete, batch -- makes the next snapshot copy it again, so a scan sees the write."""
    with LSMStore(str(tmp_path / "db")) as store:
        store.put(b"a", b"1")
        first = store._frozen_copy(store._mem)
        assert store._frozen_copy(store._mem) is first
        writes = [lambda: store.put(b"b", b"2"), lambda: store.delete(b"a"),
                  lambda: store.write_batch([(b"c", b"3", 0, 0, 0)]),
                  lambda: store.put(b"b", b"2")]  # the same value again is a write too
        seen = [first]
        for write in writes:
            write()
            now = store._frozen_copy(store._mem)
            assert all(now is not s for s in seen)
            seen.append(now)
        assert [k for k, _ in store.scan()] == [b"b", b"c"]
        assert store.scan_framed(None, None, b"\x0a", 10, 1 << 20)[1] == 2
