"""The LSM row store: every file it writes is a stuffed record stream.

Public API::

    with LSMStore(path, memtable_bytes=32 << 20) as store:
        store.put(b"k", b"v", epoch=7, author=2, commit_ts=1_700_000_000_000_000_000)
        store.get(b"k")            # b"v"
        store.get_entry(b"k")      # StoredRow(value=b"v", epoch=7, author=2, commit_ts=...)
        store.get_version(b"k")    # RowVersion(...): a delete too (value None) while its
                                   # tombstone is retained (store.tombstone_floor)
        store.write_batch([(b"a", b"1"), (b"b", None)])   # atomic; None deletes
        list(store.scan(b"a", b"z"))
        with store.snapshot() as snap: ...

Modules: :mod:`.format` (record tags, cells, blocks), :mod:`.memtable`, :mod:`.bloom`,
:mod:`.sstable_writer`, :mod:`.sstable_reader`, :mod:`.cache`, :mod:`.merge`, :mod:`.version`,
:mod:`.manifest`, :mod:`.compaction`, :mod:`.wal`, :mod:`.snapshot`, :mod:`.export`,
:mod:`.verify`, :mod:`.fs` (file layer and fault injection), :mod:`.store`. Exceptions are in
:mod:`.errors` (the tree is drawn there). Formats: ``docs/formats/sstable.md``; design:
``docs/lsm.md``.
"""

from __future__ import annotations

from gateway.core.lsm.errors import (
    BackgroundError,
    CorruptionError,
    InvalidArgumentError,
    LSMError,
    StoreClosedError,
    StoreLockedError,
)
from gateway.core.lsm.export import export_snapshot, import_snapshot
from gateway.core.lsm.format import RowVersion, StoredRow
from gateway.core.lsm.read_snapshot import ReadSnapshot
from gateway.core.lsm.store import LSMStore, WriteBatch
from gateway.core.lsm.verify import VerifyReport, verify_store

__all__ = [
    "BackgroundError",
    "CorruptionError",
    "InvalidArgumentError",
    "LSMError",
    "LSMStore",
    "ReadSnapshot",
    "RowVersion",
    "StoreClosedError",
    "StoreLockedError",
    "StoredRow",
    "VerifyReport",
    "WriteBatch",
    "export_snapshot",
    "import_snapshot",
    "verify_store",
]
