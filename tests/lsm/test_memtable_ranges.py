"""Reading a range of the active memtable without freezing it (``Memtable.view``) and the
store scans built on it: same pairs, in order, as of the moment the view or scan was made --
whatever is written while it is read; no level-0 table per scan."""

from __future__ import annotations

import itertools
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.lsm import LSMStore
from gateway.core.lsm import memtable as memtable_module
from gateway.core.lsm import store as store_module
from gateway.core.lsm.memtable import Memtable, RangeView
from gateway.core.lsm.merge import merge_runs

_KEYS = st.binary(min_size=0, max_size=3)
_BOUND = st.none() | _KEYS
# a step: a batch of writes (overwrites included), making a view of a range, reading some
# blocks of a view made earlier, or dropping one
_STEPS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.dictionaries(_KEYS, st.binary(max_size=2), max_size=40)),
    st.tuples(st.just("view"), st.tuples(_BOUND, _BOUND)),
    st.tuples(st.just("read"), st.integers(0, 5)),
    st.tuples(st.just("drop"), st.integers(0, 5))), max_size=60)


def _want(data: dict[bytes, bytes], start: bytes | None, end: bytes | None
          ) -> list[tuple[bytes, bytes]]:
    return sorted((k, v) for k, v in data.items()
                  if (start is None or k >= start) and (end is None or k < end))


class _Reading:
    """A view being read block by block, beside what it must yield."""

    def __init__(self, view: RangeView, want: list[tuple[bytes, bytes]]) -> None:
        self.view, self.want, self.got = view, want, []
        self.blocks = merge_runs(view.sources(view.start, view.end))

    def step(self) -> bool:
        block = next(self.blocks, None)
        if block is None:
            assert self.got == self.want
            return False
        self.got += zip(*block, strict=True)
        return True


@settings(max_examples=400, deadline=None)
@given(_STEPS)
def test_a_view_reads_its_range_in_key_order_as_of_its_making(steps):
    run, memtable_module._RUN = memtable_module._RUN, 2  # several blocks per view
    try:
        _play(steps)
    finally:
        memtable_module._RUN = run


def _play(steps: list) -> None:
    mem = Memtable()
    model: dict[bytes, bytes] = {}
    reading: list[_Reading] = []
    for kind, arg in steps:
        if kind == "write":
            if len(arg) == 1:
                [(k, v)] = arg.items()
                mem.put(k, v)
            else:
                mem.apply(arg)
            model.update(arg)
        elif kind == "view":
            start, end = arg
            v = mem.view(start, end)
            want = _want(model, start, end)
            for k, c in want[:3]:
                assert v.get(k) == c
            reading.append(_Reading(v, want))
            runs = mem._runs  # sizes fall by half or more: a bounded number of runs
            assert all(len(a) >= 2 * len(b) for a, b in itertools.pairwise(runs))
            assert sorted(k for run in runs for k in run) == sorted(model)
        elif kind == "read" and reading:
            r = reading[arg % len(reading)]
            if not r.step():
                reading.remove(r)
        elif kind == "drop" and reading:
            reading.pop(arg % len(reading)).view.close()
        assert mem.data == model  # views never change the table
    for r in reading:  # what later writes replaced is still read as it was
        while r.step():
            pass
    assert not any(v.saved for v in (ref() for ref in mem._views) if v is not None
                   and v.closed)


def test_a_scan_of_a_large_active_memtable_freezes_nothing(tmp_path):
    """A scan under write load used to freeze the active memtable (a level-0 table, then
    compaction) and sort all of it; now it copies only the range and the table stays."""
    s = LSMStore(str(tmp_path / "db"), memtable_bytes=64 << 20, background=False)
    try:
        for i in range(5000):
            s.put(b"k%05d" % i, b"v%d" % i)
        mem = s._mem
        tables = s.stats()["levels"]
        for rnd in range(20):
            lo = rnd * 200
            got = list(s.scan(b"k%05d" % lo, b"k%05d" % (lo + 50)))
            assert got == [(b"k%05d" % i, b"v%d" % i) for i in range(lo, lo + 50)]
            s.put(b"k%05d" % (lo + 1), b"new")  # a write between scans
            s.put(b"a%d" % rnd, b"x")  # and a new key before every range
        assert s._mem is mem and not s._imm and s.stats()["levels"] == tables
        assert [k for k, _ in s.scan(None, b"b")] == sorted(b"a%d" % r for r in range(20))
        assert dict(s.scan_entries(b"k00201", b"k00202"))[b"k00201"].value == b"new"
        it = s.scan(b"k", None)  # an iterator reads the store as of its making
        s.put(b"k00000", b"later")
        s.put(b"k99999", b"later")
        got = list(it)
        assert len(got) == 5000 and got[0] == (b"k00000", b"v0")
    finally:
        s.close()


def test_the_store_model_holds_with_every_scan_copying_a_range(monkeypatch):
    """The store's model test, with every scan of a non-empty active memtable taking the
    range-copy path (the small tables of the model test stay under the copy limit)."""
    from tests.lsm.test_model import StoreMachine

    monkeypatch.setattr(store_module, "SNAPSHOT_COPY_LIMIT", 0)
    runner = StoreMachine.TestCase("runTest")
    runner.settings = settings(max_examples=40, stateful_step_count=60, deadline=None)
    runner.runTest()


def test_scans_beside_a_writer_thread_each_see_one_moment(tmp_path):
    """A writer thread rewrites every key with one version per batch while scans run on
    another thread: each scan sees a single version on all its keys (the reader takes the
    dict's cell before the saved one, the writer saves before replacing)."""
    s = LSMStore(str(tmp_path / "db"), memtable_bytes=256 << 20, background=False)
    keys = [b"k%05d" % i for i in range(3000)]
    s.write_batch([(k, b"0") for k in keys])
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        v = 0
        try:
            while not stop.is_set():
                v += 1
                s.write_batch([(k, b"%d" % v) for k in keys])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=write)
    t.start()
    try:
        seen = set()
        for _ in range(150):
            got = list(s.scan(b"k", b"l"))
            assert [k for k, _ in got] == keys
            versions = {v for _, v in got}
            assert len(versions) == 1, sorted(versions)[:5]
            seen |= versions
        assert len(seen) > 10  # the writer did run between scans
    finally:
        stop.set()
        t.join()
        s.close()
    assert not errors
