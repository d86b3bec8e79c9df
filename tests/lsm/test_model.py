"""Model-based test: LSMStore behaves like a dict under any sequence of operations."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gateway.core.lsm import LSMStore, StoredRow

from .conftest import SMALL

KEYS = st.binary(min_size=0, max_size=6).map(lambda b: b"k" + b)
VALUES = st.binary(max_size=120)
OPTS = {
    **SMALL,
    "memtable_bytes": 3 << 10,
    "target_file_bytes": 2 << 10,
    "base_level_bytes": 4 << 10,
    "block_bytes": 200,
}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lsm-model-")
        self.store = LSMStore(self.dir, **OPTS, background=False)
        self.model: dict[bytes, StoredRow] = {}
        self.snaps: list[tuple[object, dict[bytes, StoredRow]]] = []

    @rule(k=KEYS, v=VALUES, epoch=st.integers(0, 2**64 - 1), author=st.integers(0, 5))
    def put(self, k, v, epoch, author):
        self.store.put(k, v, epoch=epoch, author=author, commit_ts=epoch // 3)
        self.model[k] = StoredRow(v, epoch, author, epoch // 3)

    @rule(k=KEYS)
    def delete(self, k):
        self.store.delete(k)
        self.model.pop(k, None)

    @rule(ops=st.lists(st.tuples(KEYS, st.none() | VALUES), max_size=20))
    def batch(self, ops):
        self.store.write_batch(ops)
        for k, v in ops:
            if v is None:
                self.model.pop(k, None)
            else:
                self.model[k] = StoredRow(v, 0, 0, 0)

    @rule(k=KEYS)
    def get(self, k):
        assert self.store.get_entry(k) == self.model.get(k)
        want = self.model.get(k)
        assert self.store.get(k) == (want.value if want else None)

    @rule(a=KEYS, b=KEYS)
    def scan(self, a, b):
        lo, hi = min(a, b), max(a, b)
        want = [(k, self.model[k].value) for k in sorted(self.model) if lo <= k < hi]
        assert list(self.store.scan(lo, hi)) == want

    @rule(p=st.binary(max_size=2).map(lambda b: b"k" + b))
    def prefix(self, p):
        want = [k for k in sorted(self.model) if k.startswith(p)]
        assert [k for k, _ in self.store.scan_prefix(p)] == want

    @rule()
    def flush(self):
        self.store.flush()

    @rule()
    def compact(self):
        self.store.compact()

    @rule()
    def reopen(self):
        self.store.close()
        self.store = LSMStore(self.dir, **OPTS, background=False)
        for snap, _ in self.snaps:
            snap.close()
        self.snaps = []

    @precondition(lambda self: len(self.snaps) < 3)
    @rule()
    def take_snapshot(self):
        self.snaps.append((self.store.snapshot(), dict(self.model)))

    @precondition(lambda self: self.snaps)
    @rule()
    def check_snapshot(self):
        snap, frozen = self.snaps[0]
        assert dict(snap.scan_entries()) == frozen  # unchanged by later writes and compactions
        snap.close()
        self.snaps.pop(0)

    @invariant()
    def sizes_agree(self):
        if len(self.model) < 50:
            assert len(list(self.store.scan())) == len(self.model)

    def teardown(self):
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)


StoreMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)
TestStoreBehavesLikeADict = StoreMachine.TestCase
