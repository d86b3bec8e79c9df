"""Helpers of the snapshot-file tests: a store to export, filled in flushed batches, and the
configuration the snapshots carry (the ``store`` fixture is served by ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.core.lsm import LSMStore
from gateway.raft import ConfState

CONF = ConfState(voters=(1, 2, 3))


def fill(store: LSMStore, start: int, count: int, index: int) -> None:
    """Rows ``k<i>`` for ``i`` in ``[start, start + count)`` at log ``index``, flushed to a
    table of their own."""
    store.write_batch([(b"k%06d" % i, b"v%06d" % i * 20) for i in range(start, start + count)],
                      log_index=index)
    store.flush()


def open_store(tmp_path) -> Iterator[LSMStore]:
    """An LSM store without background work in ``tmp_path/store``, closed afterwards."""
    s = LSMStore(str(tmp_path / "store"), background=False)
    yield s
    s.close()
