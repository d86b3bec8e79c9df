"""The file layer: the real file system's contracts and the fault-injecting one's crash model."""

from __future__ import annotations

import pytest

from gateway.core.fileio import FaultInjectingFileSystem, OsFileSystem, SimulatedCrash


def test_os_file_system_append_read_truncate_and_counters(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = OsFileSystem()
    path = str(tmp_path / "f")
    w = fs.open_writable(path)
    w.write(b"hello ")
    w.write(b"world")
    w.sync()
    r = fs.open_readable(path)
    assert r.pread(6, 100) == b"world"
    w.truncate(5)
    w.write(b"!")
    assert fs.read_all(path) == b"hello!"
    assert fs.stats.syncs == 1 and fs.stats.bytes_written == 12
    assert fs.stats.bytes_read_by_path[path] == 5 + 6
    fs.remove(path)
    assert r.pread(0, 5) == b"hello"  # unlinked but open: still readable
    w.close()
    w.close()


def test_os_file_system_punch_hole_frees_blocks_or_reports_unsupported(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = OsFileSystem()
    path = str(tmp_path / "f")
    w = fs.open_writable(path)
    w.write(b"\x01" * (64 * 1024))
    w.sync()
    if fs.punch_hole(path, 4096, 8192):
        data = fs.read_all(path)
        assert data[4096:12288] == bytes(8192)
        assert data[:4096] == b"\x01" * 4096 and data[12288:] == b"\x01" * (64 * 1024 - 12288)
        assert len(data) == 64 * 1024
    else:
        assert fs.read_all(path) == b"\x01" * (64 * 1024)


def test_fault_fs_unsynced_appends_survive_only_as_a_prefix() -> None:
    fs = FaultInjectingFileSystem()
    fs.makedirs("/d")
    w = fs.open_writable("/d/f")
    w.write(b"durable")
    w.sync()
    fs.sync_dir("/d")
    w.write(b"-volatile")
    for seed in range(20):
        data = fs.crash_image(seed, zero_tails=False).read_all("/d/f")
        assert data.startswith(b"durable") and (b"durable-volatile").startswith(data)


def test_fault_fs_unsynced_directory_changes_are_lost() -> None:
    fs = FaultInjectingFileSystem()
    fs.makedirs("/d")
    fs.open_writable("/d/kept").sync()
    fs.sync_dir("/d")
    fs.open_writable("/d/new").sync()
    fs.remove("/d/kept")
    image = fs.crash_image(0)
    assert image.listdir("/d") == ["kept"]


def test_fault_fs_crash_point_tears_the_write_and_stops_everything() -> None:
    fs = FaultInjectingFileSystem(seed=4)
    fs.makedirs("/d")
    w = fs.open_writable("/d/f")
    fs.arm_crash(2)
    w.write(b"a" * 10)
    with pytest.raises(SimulatedCrash):
        w.write(b"b" * 100)
    assert fs.raw("/d/f").startswith(b"a" * 10) and len(fs.raw("/d/f")) < 110
    with pytest.raises(SimulatedCrash):
        w.sync()
    with pytest.raises(SimulatedCrash):
        fs.listdir("/d")


def test_fault_fs_sync_error_is_raised() -> None:
    fs = FaultInjectingFileSystem()
    fs.makedirs("/d")
    w = fs.open_writable("/d/f")
    fs.sync_error = OSError(5, "EIO")
    with pytest.raises(OSError):
        w.sync()
