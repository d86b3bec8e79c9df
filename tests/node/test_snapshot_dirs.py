"""A node's own snapshot is its store export kept as a directory of links to the store's
tables (``SnapshotFiles.save_dir``), not a copy: it is the same files, its archive (what a
follower receives) is built from them when loaded and restores the same store, only the newest
snapshot -- directory or received archive -- is kept, a damaged one refuses to open naming the
file, and each table's checksum is computed once, not at every export."""

from __future__ import annotations

import os

import pytest

from gateway.core.lsm import LSMStore, export_snapshot, import_snapshot
from gateway.core.lsm import export as export_module
from gateway.node.storage.snapshot_files import (
    SnapshotArchiveError,
    SnapshotFiles,
    pack_dir,
    unpack_dir,
)
from gateway.raft import SnapshotMetadata

from .snapshot_stores import CONF, fill


def _rows(path: str) -> list[tuple[bytes, bytes]]:
    store = LSMStore(path)
    try:
        return list(store.scan())
    finally:
        store.close()


def test_a_taken_snapshot_is_the_store_tables_themselves_and_loads_as_their_archive(
        tmp_path, store):
    fill(store, 0, 500, 10)
    fill(store, 500, 500, 20)
    out = str(tmp_path / "out")
    index = export_snapshot(store, out)
    expected = pack_dir(out)
    snaps = SnapshotFiles(str(tmp_path / "snapshots"))
    size = snaps.save_dir(SnapshotMetadata(CONF, index, 3), out)

    assert not os.path.exists(out)  # moved, not copied
    kept = tmp_path / "snapshots" / f"{index:020d}.snapdir"
    tables = sorted(p for p in os.listdir(kept) if p.endswith(".sst"))
    assert len(tables) == 2
    for name in tables:  # the same inode as the store's table: no byte was written
        assert os.stat(kept / name).st_ino == os.stat(os.path.join(store.path, name)).st_ino
    snap = snaps.load()
    assert snap.metadata.index == index == 20 and snap.metadata.term == 3
    assert bytes(snap.data) == expected and size == len(expected) == snaps.size()

    # Reopened (a restart), the same snapshot; its archive restores the same rows.
    again = SnapshotFiles(str(tmp_path / "snapshots"))
    assert again.metadata == snap.metadata and bytes(again.load().data) == expected
    unpack_dir(snap.data, str(tmp_path / "received"))
    assert import_snapshot(str(tmp_path / "received"), str(tmp_path / "restored")) == 20
    assert _rows(str(tmp_path / "restored")) == list(store.scan())


def test_only_the_newest_snapshot_is_kept_whether_taken_or_received(tmp_path, store):
    snaps = SnapshotFiles(str(tmp_path / "snapshots"))
    fill(store, 0, 100, 5)
    out = str(tmp_path / "out")
    snaps.save_dir(SnapshotMetadata(CONF, export_snapshot(store, out), 1), out)
    fill(store, 100, 100, 9)
    snaps.save_dir(SnapshotMetadata(CONF, export_snapshot(store, out), 1), out)
    assert sorted(os.listdir(snaps.directory)) == ["00000000000000000009.snapdir", "CURRENT"]

    # A snapshot received from the leader is an archive; it replaces the directory ...
    received = bytes(snaps.load().data)
    snaps.stage(SnapshotMetadata(CONF, 12, 2), received)
    snaps.commit(SnapshotMetadata(CONF, 12, 2))
    assert sorted(os.listdir(snaps.directory)) == ["00000000000000000012.snap", "CURRENT"]
    assert bytes(SnapshotFiles(snaps.directory).load().data) == received

    # ... and the next one taken replaces the archive.
    fill(store, 200, 100, 15)
    snaps.save_dir(SnapshotMetadata(CONF, export_snapshot(store, out), 2), out)
    assert sorted(os.listdir(snaps.directory)) == ["00000000000000000015.snapdir", "CURRENT"]


def test_a_snapshot_directory_left_by_an_interrupted_save_is_replaced(tmp_path, store):
    snaps = SnapshotFiles(str(tmp_path / "snapshots"))
    fill(store, 0, 100, 7)
    stale = tmp_path / "snapshots" / f"{7:020d}.snapdir"
    stale.mkdir()
    (stale / "junk").write_bytes(b"left by a crash before CURRENT")
    out = str(tmp_path / "out")
    snaps.save_dir(SnapshotMetadata(CONF, export_snapshot(store, out), 1), out)
    assert "junk" not in os.listdir(stale)
    assert SnapshotFiles(snaps.directory).metadata.index == 7


def _damaged_snapshot(tmp_path, store) -> tuple[str, str]:
    fill(store, 0, 300, 4)
    out = str(tmp_path / "out")
    index = export_snapshot(store, out)
    snaps = SnapshotFiles(str(tmp_path / "snapshots"))
    snaps.save_dir(SnapshotMetadata(CONF, index, 1), out)
    kept = os.path.join(snaps.directory, f"{index:020d}.snapdir")
    table = next(os.path.join(kept, n) for n in sorted(os.listdir(kept)) if n.endswith(".sst"))
    return kept, table


@pytest.mark.parametrize("damage", ["manifest-cut", "manifest-flipped", "manifest-gone",
                                    "table-cut", "table-gone"])
def test_a_damaged_snapshot_directory_refuses_to_open_naming_the_file(tmp_path, store, damage):
    kept, table = _damaged_snapshot(tmp_path, store)
    manifest = os.path.join(kept, "SNAPSHOT")
    target = manifest if damage.startswith("manifest") else table
    if damage.endswith("gone"):
        os.remove(target)
    else:
        with open(target, "rb") as f:
            raw = f.read()
        os.remove(target)  # a new file: the store's table (the same inode) stays whole
        if damage.endswith("cut"):
            raw = raw[: len(raw) // 2]
        else:
            mid = len(raw) // 2
            raw = raw[:mid] + bytes([raw[mid] ^ 0x40]) + raw[mid + 1:]
        with open(target, "wb") as f:
            f.write(raw)
    with pytest.raises(SnapshotArchiveError) as err:
        SnapshotFiles(os.path.dirname(kept))
    msg = str(err.value)
    assert target in msg and "byte" in msg and "\n" not in msg, msg


def test_tables_are_never_read_back_to_checksum_them_more_than_once(tmp_path, store,
                                                                     monkeypatch):
    """A table the store writes carries the CRC-32C computed as it was written: exports do
    not read it back. A table opened from disk is checksummed by the first export only."""
    real = export_module.file_crc32c
    summed: list[str] = []

    def counting(path, fs=None):
        summed.append(os.path.basename(path))
        return real(path, fs)

    monkeypatch.setattr(export_module, "file_crc32c", counting)
    fill(store, 0, 200, 3)
    export_snapshot(store, str(tmp_path / "a"))
    fill(store, 200, 200, 6)
    export_snapshot(store, str(tmp_path / "b"))
    store.compact()  # the two tables are merged into a new one, written by the store too
    export_snapshot(store, str(tmp_path / "c"))
    assert summed == []
    # The recorded checksums are the files' own: a fresh import checks every one of them.
    for name in ("b", "c"):
        assert import_snapshot(str(tmp_path / name), str(tmp_path / f"{name}-store")) == 6
    assert _rows(str(tmp_path / "c-store")) == list(store.scan())
    summed.clear()  # (the imports check every file)
    path = store.path
    store.close()
    reopened = LSMStore(path)
    try:
        export_snapshot(reopened, str(tmp_path / "d"))
        export_snapshot(reopened, str(tmp_path / "e"))
        tables = sorted(n for n in os.listdir(tmp_path / "d") if n.endswith(".sst"))
        assert sorted(summed) == tables  # once each, by the first export after the open
        assert set(reopened.table_crcs) == {int(n.split(".")[0]) for n in tables}
        assert import_snapshot(str(tmp_path / "e"), str(tmp_path / "e-store")) == 6
    finally:
        reopened.close()


def test_a_snapshot_directory_on_another_file_system_is_linked_file_by_file(
        tmp_path, store, monkeypatch):
    """``rename`` across file systems fails with EXDEV: the export's files are then linked
    (there: copied, synced) into the snapshot directory, and the snapshot is the same."""
    import errno

    from gateway.core.fileio import local_fs

    fs = local_fs()
    real_rename = fs.rename

    def rename(src: str, dst: str) -> None:
        if os.path.dirname(src) != os.path.dirname(dst):  # "another file system"
            raise OSError(errno.EXDEV, "Invalid cross-device link", src)
        real_rename(src, dst)

    monkeypatch.setattr(fs, "rename", rename)
    fill(store, 0, 300, 8)
    out = str(tmp_path / "out")
    assert export_snapshot(store, out) == 8
    expected = pack_dir(out)
    snaps = SnapshotFiles(str(tmp_path / "snapshots"), fs)
    size = snaps.save_dir(SnapshotMetadata(CONF, 8, 1), out)
    assert bytes(snaps.load().data) == expected and size == len(expected)
    assert sorted(os.listdir(snaps.directory)) == ["00000000000000000008.snapdir", "CURRENT"]
    assert SnapshotFiles(snaps.directory).metadata.index == 8


@pytest.mark.parametrize("cut", [0, 5, 0.5], ids=["empty", "magic-cut", "half"])
def test_a_damaged_received_archive_refuses_to_open_naming_the_file(tmp_path, store, cut):
    fill(store, 0, 300, 6)
    out = str(tmp_path / "out")
    export_snapshot(store, out)
    snaps = SnapshotFiles(str(tmp_path / "snapshots"))
    snaps.stage(SnapshotMetadata(CONF, 6, 1), pack_dir(out))
    snaps.commit(SnapshotMetadata(CONF, 6, 1))
    path = os.path.join(snaps.directory, f"{6:020d}.snap")
    with open(path, "rb") as f:
        raw = f.read()
    with open(path, "wb") as f:
        f.write(raw[: int(len(raw) * cut) if isinstance(cut, float) else cut])
    with pytest.raises(SnapshotArchiveError) as err:
        SnapshotFiles(snaps.directory)
    msg = str(err.value)
    assert path in msg and "byte" in msg and "\n" not in msg, msg
