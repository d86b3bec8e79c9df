"""A full disk and a failed fsync under every file of the node (issue 52, item 3), on the file
layer's fault double: the disk fills (``capacity``), an fsync fails (``sync_error``).

The rule: a failed fsync is never retried on the same file descriptor (the kernel may have
dropped the dirty pages it could not write, and marked them clean: a second fsync would then
succeed for data that is gone). The file is treated as crashed: the WAL stops taking writes
(the node fails-stop and recovers from what is durable), an applier position is rewritten
whole into a new file, the LSM's memtable log refuses further writes.
"""

from __future__ import annotations

import errno
import os

import pytest

from gateway.appliers.position import ApplierPosition, GtidSet, PositionStore, PositionStoreError
from gateway.core.fileio import FaultInjectingFileSystem, OsFileSystem
from gateway.core.lsm.memtable_log import MemtableLogWriter
from gateway.core.records import scan
from gateway.core.wal import FsyncPolicy, SegmentedWal, WalFailedError, WalOptions
from gateway.core.wal.codec import WalEntry
from gateway.node.base.errors import DataLossError, NoSpaceError, StorageFailedError
from gateway.node.storage.storage_errors import client_error

DATA = "/data"
WAL = f"{DATA}/raft/wal"


def _wal(fs: FaultInjectingFileSystem) -> SegmentedWal:
    return SegmentedWal(WAL, fs=fs, options=WalOptions(max_segment_bytes=1 << 20,
                                                        fsync=FsyncPolicy.ALWAYS))


def _entry(index: int, size: int = 100) -> WalEntry:
    return WalEntry(index, 1, 0, bytes([index % 251]) * size)


def test_the_fault_double_runs_out_of_space_naming_the_file_and_landing_nothing():
    fs = FaultInjectingFileSystem()
    fs.makedirs("/d")
    f = fs.open_writable("/d/f")
    fs.capacity = 10
    f.write(b"12345678")
    assert fs.free_bytes("/d") == 2
    with pytest.raises(OSError) as caught:
        f.write(b"abc")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == "/d/f"
    assert fs.raw("/d/f") == b"12345678"
    fs.capacity = None  # space returns
    f.write(b"abc")
    assert fs.raw("/d/f") == b"12345678abc"


def test_a_full_disk_under_the_wal_fails_it_with_the_segment_named_and_loses_nothing_durable():
    fs = FaultInjectingFileSystem()
    wal = _wal(fs)
    for i in range(1, 6):
        wal.append([_entry(i)])
    fs.capacity = sum(len(fs.raw(f"{WAL}/{n}")) for n in fs.listdir(WAL)) + 50
    with pytest.raises(WalFailedError) as caught:
        wal.append([_entry(6, 4000)])
    mapped = client_error(caught.value, DATA, 2)
    assert isinstance(mapped, NoSpaceError)
    segment = next(n for n in fs.listdir(WAL) if n.endswith(".wal"))
    assert str(mapped) == f"node 2: out of space: raft/wal/{segment}"
    fs.capacity = None
    with pytest.raises(WalFailedError):  # inoperable: the node stops, no write retried
        wal.append([_entry(6)])
    reopened = _wal(fs.crash_image(seed=3))  # the restart recovers what was durable
    assert reopened.last_index() == 5
    assert reopened.entries(1, 6) == [_entry(i) for i in range(1, 6)]


def test_a_failed_wal_fsync_is_never_retried_and_the_restart_keeps_the_durable_prefix():
    fs = FaultInjectingFileSystem()
    wal = SegmentedWal(WAL, fs=fs, options=WalOptions(fsync=FsyncPolicy.NEVER))
    for i in range(1, 4):
        wal.append([_entry(i)])
    wal.sync()
    for i in range(4, 7):
        wal.append([_entry(i)])
    fs.sync_error = OSError(errno.EIO, "Input/output error")
    syncs = fs.stats.syncs
    with pytest.raises(WalFailedError) as caught:
        wal.sync()
    fs.sync_error = None  # the next fsync would "succeed": it must never be made
    for call in (wal.sync, lambda: wal.append([_entry(7)])):
        with pytest.raises(WalFailedError):
            call()
    assert fs.stats.syncs == syncs  # the failed one raised before counting; none after
    mapped = client_error(caught.value, DATA, 1)
    assert isinstance(mapped, StorageFailedError) and "Input/output error" in str(mapped)
    assert DATA not in str(mapped).replace("raft/wal", "")
    for seed in range(5):  # a power cut after the failure: at least the synced prefix
        image = fs.crash_image(seed=seed)
        got = _wal(image)
        assert 3 <= got.last_index() <= 6
        assert got.entries(1, got.last_index() + 1) == \
            [_entry(i) for i in range(1, got.last_index() + 1)]


def test_a_position_save_after_a_failed_fsync_rewrites_the_file_whole():
    fs = FaultInjectingFileSystem()
    fs.makedirs("/state")
    store = PositionStore("/state", "sqlite", fs=fs)

    def pos(n: int) -> ApplierPosition:
        applied = GtidSet()
        applied.add_range(1, 1, n)
        return ApplierPosition(n, applied)

    store.save(pos(3))
    fs.sync_error = OSError(errno.EIO, "Input/output error")
    with pytest.raises(PositionStoreError, match="cannot write"):
        store.save(pos(4))
    fs.sync_error = None
    store.save(pos(5))
    # One record in a new file, not an append after the record whose fsync failed (whose
    # bytes the disk may not hold: a hole before the newest record).
    records = list(scan(fs.raw("/state/sqlite.position")))
    assert len(records) == 1
    loaded = store.load()
    assert loaded.log_index == 5 and store.damage is None
    store.save(pos(6))  # and back to appending
    assert len(list(scan(fs.raw("/state/sqlite.position")))) == 2


def test_the_memtable_log_refuses_writes_after_a_failed_fsync():
    fs = FaultInjectingFileSystem()
    fs.makedirs("/s")
    log = MemtableLogWriter(fs, "/s/000001.wal", 1, sync=True)
    log.append([b"k"], [b"v"], 1)
    fs.sync_error = OSError(errno.EIO, "Input/output error")
    with pytest.raises(OSError):
        log.append([b"k2"], [b"v2"], 2)
    fs.sync_error = None
    syncs = fs.stats.syncs
    with pytest.raises(OSError, match="earlier write or fsync failed"):
        log.fsync()
    with pytest.raises(OSError, match="earlier write or fsync failed"):
        log.append([b"k3"], [b"v3"], 3)
    assert fs.stats.syncs == syncs


def test_storage_failures_map_to_one_line_codes_with_paths_relative_to_the_data_directory():
    from gateway.core.lsm.errors import CorruptionError
    from gateway.core.wal.errors import WalCorruptionError

    data = "/var/lib/gateway"
    damaged = client_error(CorruptionError(f"{data}/store/000012.sst", 4096,
                                           "block checksum mismatch"), data, 3)
    assert isinstance(damaged, DataLossError)
    assert str(damaged) == "node 3: damaged data: store/000012.sst: byte 4096: " \
                           "block checksum mismatch"
    wal = client_error(WalCorruptionError(f"{data}/raft/wal/1.wal", 10, "bad"), data, 3)
    assert isinstance(wal, DataLossError) and "raft/wal/1.wal: byte 10" in str(wal)
    quota = client_error(OSError(errno.EDQUOT, "Disk quota exceeded", f"{data}/x"), data, 3)
    assert isinstance(quota, NoSpaceError) and str(quota) == "node 3: out of space: x"
    outside = client_error(OSError(errno.ENOSPC, "No space", "/elsewhere/db"), data, 3)
    assert str(outside) == "node 3: out of space: /elsewhere/db"
    assert client_error(ValueError("not storage"), data, 3) is None
    assert client_error(KeyError("x"), data, 3) is None


def test_a_dead_letter_after_a_failed_fsync_never_leaves_damage_before_valid_letters():
    """The failed append's bytes are lost on disk (the kernel dropped the pages it could not
    write: modelled by overwriting them); the next letter rewrites the file with its valid
    records, so the log still opens (no "damage followed by valid records")."""
    from gateway.appliers.deadletter import DeadLetterError, DeadLetterLog
    from tests.reducer.model import insert, txn

    fs = FaultInjectingFileSystem()
    fs.makedirs("/state")
    letters = DeadLetterLog("/state", "sqlite", fs=fs)
    path = "/state/sqlite.deadletters"
    letters.add(txn(1, insert("t", [{"id": 1}])), ValueError("bad 1"), attempts=1)
    size = len(fs.raw(path))
    fs.sync_error = OSError(errno.EIO, "Input/output error")
    with pytest.raises(DeadLetterError, match="cannot write"):
        letters.add(txn(2, insert("t", [{"id": 2}])), ValueError("bad 2"), attempts=1)
    fs.sync_error = None
    # the lost pages: the disk holds what its blocks held before (old bytes, not zeros)
    fs.corrupt(path, size, b"\xab" * (len(fs.raw(path)) - size))
    letters.add(txn(3, insert("t", [{"id": 3}])), ValueError("bad 3"), attempts=1)
    reread = DeadLetterLog("/state", "sqlite", fs=fs)
    assert reread.check() is None
    assert [x.message.error for x in reread.letters()] == ["bad 1", "bad 3"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_the_os_file_layer_names_the_file_a_real_enospc_came_from():
    """``/dev/full`` answers every write with ENOSPC: the real file layer's error names the
    file (``os.write`` on a descriptor names none), so the client's line can too."""
    fs = OsFileSystem()
    f = fs.open_writable("/dev/full")
    try:
        with pytest.raises(OSError) as caught:
            f.write(b"x" * 100)
    finally:
        f.close()
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == "/dev/full"
    assert str(client_error(caught.value, "/dev", 4)) == "node 4: out of space: full"
    assert fs.free_bytes("/") > 0
