"""``gateway.fileio``: the public shape of the product's file layer for plugin packages."""

from __future__ import annotations

import contextlib

from gateway.fileio import (
    FaultInjectingFileSystem,
    SimulatedCrash,
    append_synced,
    read_file,
    write_atomic,
)


def test_write_atomic_leaves_the_old_or_the_new_content_after_a_crash_at_any_step() -> None:
    probe = FaultInjectingFileSystem()
    write_atomic("/pos", b"old", fs=probe)
    before = probe.mutations
    write_atomic("/pos", b"new content", fs=probe)
    steps = probe.mutations - before
    assert steps >= 3
    for step in range(1, steps + 1):
        fs = FaultInjectingFileSystem(seed=step)
        write_atomic("/pos", b"old", fs=fs)
        fs.arm_crash(step)
        with contextlib.suppress(SimulatedCrash):
            write_atomic("/pos", b"new content", fs=fs)
        assert read_file("/pos", fs=fs.crash_image()) in (b"old", b"new content"), step


def test_append_synced_returns_offsets_and_read_file_sees_missing_files() -> None:
    fs = FaultInjectingFileSystem()
    assert read_file("/log", fs=fs) is None
    assert append_synced("/log", b"ab", fs=fs) == 0
    assert append_synced("/log", b"cd", fs=fs) == 2
    assert read_file("/log", fs=fs.crash_image()) == b"abcd"
