"""A compaction hands its output writer runs long enough to leave the GIL (``_batched``):
the merged runs joined in order, each batch closed as soon as it reaches the pairs or the
bytes bound, nothing lost or reordered."""

from __future__ import annotations

import random

import pytest

from gateway.core.lsm import LSMStore, compaction
from gateway.core.lsm.compaction import WRITE_RUN_BYTES, WRITE_RUN_PAIRS, _batched
from tests.lsm.conftest import SMALL


@pytest.mark.parametrize("seed", range(20))
def test_merged_runs_reach_the_writer_joined_in_order_within_the_bounds(seed: int) -> None:
    rng = random.Random(seed)
    runs = []
    k = 0
    for _ in range(rng.randrange(0, 60)):
        n = rng.choice([1, 7, 256, 1000, 3000])
        size = rng.choice([0, 10, 300, 5000])
        keys = [k + i for i in range(n)]
        k += n
        runs.append(([i.to_bytes(8, "big") for i in keys], [b"c" * size for _ in keys]))
    got = list(_batched(iter(runs)))
    assert [x for keys, _ in got for x in keys] == [x for keys, _ in runs for x in keys]
    assert [x for _, cells in got for x in cells] == [x for _, cells in runs for x in cells]
    for n, (keys, cells) in enumerate(got):
        big = len(keys) >= WRITE_RUN_PAIRS or sum(map(len, cells)) >= WRITE_RUN_BYTES
        assert big or n == len(got) - 1  # only the last batch may fall short
        assert keys  # never an empty batch


def test_a_store_compacts_to_the_same_rows_with_any_batch_bound(tmp_path, monkeypatch
                                                                ) -> None:
    """The batches change where the output's blocks are cut, never what it holds: a store
    written, overwritten in part and compacted holds the same rows with runs of one pair."""
    rng = random.Random(3)
    rows = {rng.randbytes(12): rng.randbytes(rng.choice([5, 80, 2000])) for _ in range(3000)}
    items = list(rows.items())
    for k, _ in items[::7]:
        rows[k] = b"again"
    got = []
    for pairs in (WRITE_RUN_PAIRS, 1):
        monkeypatch.setattr(compaction, "WRITE_RUN_PAIRS", pairs)
        s = LSMStore(str(tmp_path / str(pairs)), **{**SMALL, "background": False})
        try:
            for i in range(0, len(items), 250):
                s.write_batch(items[i:i + 250])
            s.write_batch([(k, b"again") for k, _ in items[::7]])
            s.compact()
            assert sum(s.stats()["levels"][1:]) > 0
            got.append(list(s.scan()))
        finally:
            s.close()
    assert got[0] == got[1] == sorted(rows.items())
