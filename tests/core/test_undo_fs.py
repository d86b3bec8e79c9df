"""``UndoableFileSystem``: what a refused start changed is put back byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

from gateway.core.fileio import OsFileSystem
from gateway.core.records import SEPARATOR
from gateway.core.undo_fs import UndoableFileSystem
from gateway.core.wal import FsyncPolicy, SegmentedWal, WalEntry, WalOptions


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(root.rglob("*"))}


def test_every_kind_of_change_is_undone(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"hello world")
    (tmp_path / "b").write_bytes(b"bbb")
    (tmp_path / "c").write_bytes(b"ccc")
    before = tree(tmp_path)
    fs = UndoableFileSystem(OsFileSystem())
    w = fs.open_writable(str(tmp_path / "a"))
    w.truncate(5)
    w.write(b"!")
    w.close()
    fs.remove(str(tmp_path / "b"))
    fs.rename(str(tmp_path / "c"), str(tmp_path / "c2"))
    fs.makedirs(str(tmp_path / "new" / "deeper"))
    fs.write_atomic(str(tmp_path / "new" / "deeper" / "f"), b"made")
    fs.create(str(tmp_path / "d")).close()
    assert tree(tmp_path) != before
    assert sorted(Path(p).name for p in fs.undo()) == ["a", "b", "c", "c2", "d", "f", "f.tmp"]
    assert tree(tmp_path) == before


def test_keep_accepts_the_changes_and_stops_journaling(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"hello")
    fs = UndoableFileSystem(OsFileSystem())
    fs.remove(str(tmp_path / "a"))
    fs.keep()
    fs.create(str(tmp_path / "b")).close()
    assert not fs.journaling and fs.undo() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_a_wal_recovery_cut_is_put_back(tmp_path: Path) -> None:
    wal_dir = tmp_path / "wal"
    opts = WalOptions(fsync=FsyncPolicy.NEVER)
    wal = SegmentedWal(str(wal_dir), options=opts)
    wal.append([WalEntry(i, 1, 0, b"x" * 100) for i in range(1, 20)])
    wal.sync()
    wal.close()
    segment = sorted(wal_dir.glob("*.wal"))[-1]
    with segment.open("ab") as f:  # a torn append: recovery cuts it
        f.write(SEPARATOR + b"\x01\x02torn")
    before = tree(wal_dir)
    fs = UndoableFileSystem(OsFileSystem())
    wal = SegmentedWal(str(wal_dir), fs=fs, options=opts)
    assert not wal.recovery_report.clean
    wal.close()
    assert tree(wal_dir) != before
    fs.undo()
    assert tree(wal_dir) == before


def test_cuts_and_appends_in_any_order_are_undone(tmp_path: Path) -> None:
    original = bytes(range(256)) * 40
    for steps in (["cut:5000", "append", "cut:3000", "append"], ["append", "cut:100"],
                  ["cut:9000", "remove"], ["append", "append", "cut:10240"]):
        path = tmp_path / "f"
        path.write_bytes(original)
        fs = UndoableFileSystem(OsFileSystem())
        w = fs.open_writable(str(path))
        for step in steps:
            if step == "append":
                w.write(b"new bytes")
            elif step == "remove":
                w.close()
                fs.remove(str(path))
            else:
                w.truncate(int(step.split(":")[1]))
        w.close()
        fs.undo()
        assert path.read_bytes() == original, steps
