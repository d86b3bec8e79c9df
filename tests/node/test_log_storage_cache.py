"""``RaftLogStorage``'s in-memory tail is bounded in entries *and* bytes: whatever is appended,
truncated (a conflicting suffix) or compacted, every read answers as the log does, and the
tail never holds more than its limits -- entries larger than the byte limit are read from the
WAL."""

from __future__ import annotations

import random

import pytest

from gateway.node.storage.storage import RaftLogStorage
from gateway.raft import CompactedError, Entry, HardState, Ready


def _entry(rng: random.Random, term: int, index: int) -> Entry:
    size = rng.choice([0, 10, 60, 150, 400])  # 400 > the byte limit below
    return Entry(term, index, data=bytes([index % 251]) * size)


@pytest.mark.parametrize("seed", range(6))
def test_reads_match_the_log_and_the_cache_stays_within_its_limits(tmp_path, seed):
    rng = random.Random(seed)
    storage = RaftLogStorage(str(tmp_path / "raft"), fsync=False, cache_entries=8,
                             cache_bytes=300)
    storage.bootstrap((1,))
    log: dict[int, Entry] = {}  # the model: index -> entry
    first, term = 2, 1
    try:
        for _ in range(120):
            op = rng.random()
            last = storage.last_index()
            if op < 0.7 or last < first:  # append, sometimes over a conflicting suffix
                start = last + 1 if rng.random() < 0.8 or last < first else \
                    rng.randint(first, last)
                term += rng.random() < 0.2
                ents = [_entry(rng, term, i) for i in range(start, start + rng.randint(1, 6))]
                for i in [i for i in log if i >= start]:
                    del log[i]
                log.update({e.index: e for e in ents})
                storage.save_ready(Ready(hard_state=HardState(term, 0, first - 1),
                                         entries=ents, must_sync=True))
            else:  # compact a prefix
                upto = rng.randint(first - 1, last - 1)
                storage.compact(upto)
                first = max(first, upto + 1)
                for i in [i for i in log if i < first]:
                    del log[i]
            assert storage.first_index() == first
            assert storage.last_index() == max(log, default=first - 1)
            for lo in range(first, storage.last_index() + 1):
                got = storage.entries(lo, storage.last_index() + 1, 1 << 30)
                assert [(e.index, e.term, e.data) for e in got] == \
                    [(log[i].index, log[i].term, log[i].data) for i in sorted(log) if i >= lo]
                assert storage.term(lo) == log[lo].term
            if first > 2:
                with pytest.raises(CompactedError):
                    storage.entries(first - 1, first, 1 << 30)
            cache = storage._cache
            assert len(cache) <= 8
            assert storage._cached_bytes == sum(len(e.data) for e in cache) <= 300
            if cache:  # the tail, in order, up to the last index
                assert [e.index for e in cache] == list(range(
                    storage._cache_start, storage._cache_start + len(cache)))
                assert cache[-1].index == storage.last_index()
    finally:
        storage.close()
