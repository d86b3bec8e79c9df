"""The file layer: the real file system's contracts and the fault-injecting one's crash model."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys

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


# --- the contract every implementation keeps (the LSM, positions and snapshots rely on it) ---


@pytest.fixture(params=["os", "memory"])
def any_fs(request, tmp_path):  # type: ignore[no-untyped-def]
    """Each implementation with a fresh, existing directory to work in."""
    if request.param == "os":
        return OsFileSystem(), str(tmp_path)
    fs = FaultInjectingFileSystem()
    fs.makedirs("/work")
    return fs, "/work"


def test_write_parts_appends_the_concatenation_in_order(any_fs) -> None:  # type: ignore[no-untyped-def]
    fs, d = any_fs
    path = f"{d}/parts"
    w = fs.create(path)
    w.write(b"head:")
    # Many small parts (joined), more large parts than one writev takes (handed to writev
    # where the OS file has it), empty ones among both.
    small = [bytes([i % 251]) * (i % 7) for i in range(2500)] + [b"", b"x" * (3 << 20), b"end"]
    large = [bytes([i % 251]) * (20_000 + i) for i in range(1100)] + [b""]
    for parts in (small, large, []):
        w.write_parts(parts)
    assert w.size() == 5 + sum(map(len, small)) + sum(map(len, large))
    w.sync()
    w.close()
    assert fs.read_all(path) == b"head:" + b"".join(small) + b"".join(large)


def test_os_write_parts_resumes_after_short_writes(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import os

    real = os.writev
    calls = []

    def short(fd, buffers):  # type: ignore[no-untyped-def]
        calls.append(len(buffers))
        # Write at most 50,000 bytes per call: cuts land inside parts and between them.
        out, room = [], 50_000
        for b in buffers:
            if room <= 0:
                break
            out.append(bytes(b[:room]))
            room -= len(out[-1])
        return real(fd, out)

    monkeypatch.setattr(os, "writev", short)
    fs = OsFileSystem()
    path = str(tmp_path / "short")
    w = fs.create(path)
    parts = [bytes([65 + i % 26]) * (17_000 + 3_001 * i) for i in range(40)]
    w.write_parts(parts)
    w.close()
    assert len(calls) > 1
    assert fs.read_all(path) == b"".join(parts)
    assert fs.stats.bytes_written >= sum(map(len, parts))


def test_create_truncates_and_write_atomic_replaces_whole(any_fs) -> None:  # type: ignore[no-untyped-def]
    fs, d = any_fs
    path = f"{d}/f"
    w = fs.create(path)
    w.write(b"a long first content")
    w.close()
    w = fs.create(path)
    w.write(b"short")
    w.close()
    assert fs.read_all(path) == b"short"
    fs.write_atomic(path, b"replaced")
    assert fs.read_all(path) == b"replaced"
    assert not fs.exists(path + ".tmp")
    fs.discard(path)
    fs.discard(path)  # missing is fine for discard
    assert not fs.exists(path)
    with pytest.raises(FileNotFoundError):
        fs.remove(path)


def test_link_gives_a_second_name_that_survives_removal_of_the_first(any_fs) -> None:  # type: ignore[no-untyped-def]
    fs, d = any_fs
    fs.write_atomic(f"{d}/a", b"table bytes")
    fs.link(f"{d}/a", f"{d}/b")
    fs.remove(f"{d}/a")
    assert fs.read_all(f"{d}/b") == b"table bytes"
    assert fs.listdir(d) == ["b"]


def test_map_views_the_whole_file_and_empty_files_map_empty(any_fs) -> None:  # type: ignore[no-untyped-def]
    fs, d = any_fs
    fs.write_atomic(f"{d}/t", b"\x00\x00abc\x00\x00")
    m = fs.map(f"{d}/t")
    assert len(m) == 7 and m[2:5] == b"abc" and m.rfind(b"\x00\x00", 0, 5) == 0
    m.close()
    fs.write_atomic(f"{d}/e", b"")
    assert len(fs.map(f"{d}/e")) == 0
    with pytest.raises(FileNotFoundError):
        fs.map(f"{d}/missing")


def test_lock_is_exclusive_until_released(any_fs) -> None:  # type: ignore[no-untyped-def]
    fs, d = any_fs
    held = fs.lock(f"{d}/LOCK")
    with pytest.raises(BlockingIOError):
        fs.lock(f"{d}/LOCK")
    held.release()
    held.release()
    fs.lock(f"{d}/LOCK").release()
    assert fs.is_dir(d) and not fs.is_dir(f"{d}/LOCK")


def test_write_atomic_leaves_old_or_new_content_at_every_crash_point() -> None:
    count = FaultInjectingFileSystem()
    count.makedirs("/d")
    before = count.mutations
    count.write_atomic("/d/f", b"new content")
    steps = count.mutations - before
    assert steps >= 5  # create, write, sync, rename, sync_dir
    for crash_at in range(1, steps + 1):
        for seed in range(4):
            fs = FaultInjectingFileSystem(seed=seed)
            fs.makedirs("/d")
            fs.write_atomic("/d/f", b"old")
            fs.arm_crash(crash_at)
            with pytest.raises(SimulatedCrash):
                fs.write_atomic("/d/f", b"new content")
            for image in (fs.crash_image(seed), fs.process_crash_image()):
                assert image.read_all("/d/f") in (b"old", b"new content"), crash_at


def test_process_crash_image_keeps_unsynced_bytes_and_names() -> None:
    fs = FaultInjectingFileSystem()
    fs.makedirs("/d")
    w = fs.open_writable("/d/f")
    w.write(b"never synced")
    image = fs.process_crash_image()
    assert image.read_all("/d/f") == b"never synced"
    assert fs.crash_image(1).listdir("/d") == []  # a power cut loses the unsynced name


def test_storage_code_calls_no_fsync_or_replace_outside_the_file_layer() -> None:
    """Every durable write of the gateway package goes through `gateway.core.fileio`."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2] / "gateway"
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "fileio.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in ("fsync", "fdatasync", "replace", "rename", "link")
            ):
                offenders.append(f"{path.relative_to(root.parent)}:{node.lineno}: os.{node.attr}")
    assert offenders == []


# --- drop_cache: advice that gives synced pages back, never a change of content ---

PAGE = mmap.PAGESIZE


def test_drop_cache_takes_synced_whole_pages_once_and_the_tail_only_when_whole(any_fs) -> None:  # type: ignore[no-untyped-def]
    fs, d = any_fs
    path = f"{d}/log"
    w = fs.create(path)
    data = bytes(range(256)) * (10 * PAGE // 256) + b"t" * 100
    w.write(data)
    w.drop_cache()  # nothing synced yet: nothing to drop
    assert fs.stats.cache_drops == 0
    w.sync()
    w.drop_cache(min_bytes=10 * PAGE + 1)  # below the threshold: kept
    assert fs.stats.cache_drops == 0
    w.drop_cache()  # the ten whole pages; the page holding the synced end stays
    assert (fs.stats.cache_drops, fs.stats.bytes_dropped) == (1, 10 * PAGE)
    w.drop_cache()  # dropped already
    assert fs.stats.cache_drops == 1
    more = b"m" * (2 * PAGE)
    w.write(more)
    w.drop_cache()  # written but not synced: nothing new
    assert fs.stats.cache_drops == 1
    w.sync()
    w.drop_cache()  # pages 10 and 11 are whole now; page 12 holds the end
    assert fs.stats.bytes_dropped == 12 * PAGE
    w.drop_cache(whole=True)  # a finished file: its last, partial page too
    assert fs.stats.bytes_dropped == len(data) + len(more)
    w.close()
    assert fs.read_all(path) == data + more


def test_drop_cache_after_truncate_starts_again_at_the_cut(any_fs) -> None:  # type: ignore[no-untyped-def]
    fs, d = any_fs
    path = f"{d}/log"
    w = fs.create(path)
    w.write(b"a" * (8 * PAGE))
    w.sync()
    w.drop_cache()
    assert fs.stats.bytes_dropped == 8 * PAGE
    w.truncate(3 * PAGE + 10)  # a Raft conflict cuts the tail
    w.write(b"b" * (4 * PAGE))
    w.sync()
    w.drop_cache()
    # From page 3 (it held the cut, and the new bytes went into it) to the new end's page.
    assert fs.stats.bytes_dropped == 8 * PAGE + 4 * PAGE
    w.close()
    assert fs.read_all(path) == b"a" * (3 * PAGE + 10) + b"b" * (4 * PAGE)


def _resident_pages(path: str) -> list[bool]:
    """Which pages of ``path`` are in the OS page cache (``mincore`` of a map that touches
    none of them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    pages = -(-size // PAGE)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            vec = (ctypes.c_ubyte * pages)()
            assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
            return [bool(b & 1) for b in vec]
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "posix_fadvise") or sys.platform != "linux",
                    reason="page-cache residency is read with Linux's mincore")
def test_os_drop_cache_gives_the_synced_pages_back_to_the_os(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = OsFileSystem()
    path = str(tmp_path / "seg")
    w = fs.create(path)
    data = os.urandom(64 * PAGE + 100)
    w.write(data)
    assert all(_resident_pages(path))  # just written: all cached
    w.sync()
    w.drop_cache()
    resident = _resident_pages(path)
    assert not any(resident[:64]) and resident[64]  # the end's page stays for the next append
    w.write(b"x" * 10)  # appends into the kept page
    w.sync()
    w.drop_cache(whole=True)
    assert not any(_resident_pages(path))
    w.close()
    assert fs.read_all(path) == data + b"x" * 10  # read back from disk, unchanged
