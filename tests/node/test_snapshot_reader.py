"""A snapshot sent to a follower is read from its files a range at a time: ``SnapshotFiles.load``
opens the files and reads nothing, the ``ArchiveReader`` it returns gives any byte range of the
archive ``pack_dir`` would build (so the Raft core's sender cuts the same chunks as from the
bytes), keeps reading a snapshot a newer one removed, refuses a file cut short instead of
sending a short archive, restores through ``unpack_dir`` as the bytes do, and closes its files.
A leader used to build the whole archive in memory on its event loop (a 393 MiB store: 0.7-1.5 s
of blocked loop, +707-787 MiB peak RSS)."""

from __future__ import annotations

import gc
import os
import random

import pytest

from gateway.core.lsm import LSMStore, export_snapshot
from gateway.node.storage import snapshot_files
from gateway.node.storage.snapshot_files import (
    ArchiveReader,
    SnapshotFiles,
    SpooledArchive,
    check_archive,
    pack_dir,
    unpack_dir,
)
from gateway.raft import Snapshot, SnapshotChunk, SnapshotMetadata
from gateway.raft.snapshot_transfer import SnapshotReceiver, SnapshotSender
from tests.raft.harness import transfer

from .snapshot_stores import CONF, fill


def _taken(tmp_path, store: LSMStore, batches: int = 3) -> tuple[SnapshotFiles, bytes]:
    """A snapshot taken of ``store`` (a directory of links to its tables) and its archive."""
    for b in range(batches):
        fill(store, b * 400, 400, b + 1)
    out = str(tmp_path / "out")
    index = export_snapshot(store, out)
    expected = pack_dir(out)
    snaps = SnapshotFiles(str(tmp_path / "snapshots"))
    snaps.save_dir(SnapshotMetadata(CONF, index, 2), out)
    return snaps, expected


def _open_in(directory: str) -> int:
    """How many of this process's file descriptors are open on files in ``directory``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(directory + os.sep)
    return count


def test_loading_reads_nothing_and_any_range_is_the_archives(tmp_path, store, monkeypatch):
    snaps, expected = _taken(tmp_path, store)
    reads = []
    real_pread = os.pread
    monkeypatch.setattr(snapshot_files.os, "pread",
                        lambda fd, n, off: reads.append(n) or real_pread(fd, n, off))
    snap = snaps.load()
    assert isinstance(snap.data, ArchiveReader) and reads == []
    reader = snap.data
    assert len(reader) == len(expected) == snaps.size()

    # every offset around a part boundary (magic, file headers, file ends), and random ranges
    edges = sorted({0, len(expected)} | {expected.find(name.encode()) + d
                                         for name in os.listdir(snaps._dir(2 + 1))
                                         for d in (-11, -10, -1, 0, 1)})
    cuts = [(a, b) for a in edges for b in edges if a <= b]
    rng = random.Random(7)
    cuts += [tuple(sorted(rng.randrange(len(expected) + 1) for _ in range(2)))
             for _ in range(300)]
    for a, b in cuts:
        assert reader[a:b] == expected[a:b], (a, b)
    assert reader[-10:] == expected[-10:] and reader[:0] == b"" and reader[5:3] == b""
    assert reader[len(expected) - 3 : len(expected) + 50] == expected[-3:]
    assert bytes(reader) == expected and reads
    with pytest.raises(TypeError, match="slices"):
        reader[3]
    with pytest.raises(ValueError, match="contiguous"):
        reader[::2]
    reader.close()


def test_the_snapshot_sender_cuts_a_reader_into_the_chunks_of_its_bytes(tmp_path, store):
    snaps, expected = _taken(tmp_path, store)
    snap = snaps.load()

    def chunks(data) -> list[tuple[int, int, bytes]]:
        sender = SnapshotSender(chunk_size=777, window=3)
        sender.start(2, Snapshot(snap.metadata, data))
        out = []
        while batch := sender.next_chunks(2):
            out += [(c.offset, c.total, c.data) for c in batch]
            sender.ack(2, snap.metadata.index, batch[-1].offset + len(batch[-1].data))
        assert sender.complete(2)
        return out

    got = chunks(snap.data)
    assert got == chunks(expected)
    assert b"".join(c for _, _, c in got) == expected and len(got) == -(-len(expected) // 777)


def test_a_reader_keeps_reading_the_snapshot_a_newer_one_removed(tmp_path, store):
    snaps, expected = _taken(tmp_path, store)
    old = snaps.load()
    fill(store, 5000, 300, 9)
    out = str(tmp_path / "out2")
    snaps.save_dir(SnapshotMetadata(CONF, export_snapshot(store, out), 3), out)
    assert not os.path.exists(snaps._dir(old.metadata.index))  # the old directory is gone
    assert bytes(old.data) == expected
    assert bytes(snaps.load().data) == pack_dir(snaps._dir(9))


def test_a_file_cut_short_after_loading_is_an_error_naming_it_not_a_short_archive(
        tmp_path, store):
    snaps, expected = _taken(tmp_path, store)
    reader = snaps.load().data
    directory = snaps._dir(3)
    table = max((os.path.join(directory, n) for n in os.listdir(directory)),
                key=os.path.getsize)
    size = os.path.getsize(table)
    os.truncate(table, size - 100)
    with pytest.raises(OSError, match=rf"{os.path.basename(table)}: ended at byte "
                                      rf"{size - 100}, {size} expected .*changed"):
        bytes(reader)
    # ranges before the damage still read; any that reaches the lost bytes fails
    end = expected.find(os.path.basename(table).encode()) + len(os.path.basename(table)) + 8
    end += size  # where the table's bytes end in the archive
    assert reader[:end - 100] == expected[:end - 100]
    with pytest.raises(OSError, match="changed while it was archived"):
        reader[end - 101 : end - 99]


def test_unpack_dir_restores_from_a_reader_what_it_restores_from_the_bytes(
        tmp_path, store, monkeypatch):
    monkeypatch.setattr(snapshot_files, "_CHUNK", 1000)  # files written in many pieces
    snaps, expected = _taken(tmp_path, store)
    a, b = str(tmp_path / "from-reader"), str(tmp_path / "from-bytes")
    assert unpack_dir(snaps.load().data, a) == unpack_dir(expected, b) > 1
    assert sorted(os.listdir(a)) == sorted(os.listdir(b))
    for name in os.listdir(a):
        with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
            assert fa.read() == fb.read()
    assert pack_dir(a) == expected


def test_a_received_archive_is_read_by_range_too(tmp_path, store):
    snaps, expected = _taken(tmp_path, store)
    snaps.save(SnapshotMetadata(CONF, 12, 4), expected)  # as a follower installs one
    assert sorted(os.listdir(snaps.directory)) == ["00000000000000000012.snap", "CURRENT"]
    reader = SnapshotFiles(snaps.directory).load().data
    assert isinstance(reader, ArchiveReader)
    assert bytes(reader) == expected and reader[100:5000] == expected[100:5000]


def test_a_reader_closes_its_files_when_closed_or_collected(tmp_path, store):
    snaps, _ = _taken(tmp_path, store)
    directory = snaps._dir(3)
    assert _open_in(directory) == 0
    reader = snaps.load().data
    assert _open_in(directory) == len(os.listdir(directory)) > 1  # one per file
    reader.close()
    reader.close()  # idempotent
    assert _open_in(directory) == 0
    reader = snaps.load().data
    del reader
    gc.collect()
    assert _open_in(directory) == 0


def test_a_received_snapshot_is_spooled_to_a_file_and_renamed_into_place(tmp_path, store):
    _, expected = _taken(tmp_path, store)
    snaps = SnapshotFiles(str(tmp_path / "follower"))
    meta = SnapshotMetadata(CONF, 12, 4)
    got = transfer(Snapshot(meta, expected), SnapshotReceiver(snaps.spool), chunk_size=1000,
                   window=4)
    spool = os.path.join(snaps.directory, "incoming-1.spool")
    assert isinstance(got.data, SpooledArchive) and bytes(got.data) == expected
    assert os.path.getsize(spool) == len(expected)  # on disk, not in memory

    inode = os.stat(spool).st_ino
    assert snaps.stage(meta, got.data) == len(expected)  # as install_snapshot stages it
    snaps.commit(meta)
    assert sorted(os.listdir(snaps.directory)) == ["00000000000000000012.snap", "CURRENT"]
    assert os.stat(snaps._path(12)).st_ino == inode  # renamed, not copied
    check_archive(snaps._path(12))
    assert bytes(SnapshotFiles(snaps.directory).load().data) == expected
    # the restore that follows the install reads the same reader, after the rename
    assert unpack_dir(got.data, str(tmp_path / "restored")) > 1
    assert pack_dir(str(tmp_path / "restored")) == expected
    # a file cut short after the rename is named as it is now called, not as the spool was
    os.truncate(snaps._path(12), 100)
    with pytest.raises(OSError, match=r"00000000000000000012\.snap: ended at byte 100"):
        got.data[50:200]


def test_a_spool_a_newer_snapshot_replaced_or_a_restart_cut_short_is_removed(tmp_path):
    snaps = SnapshotFiles(str(tmp_path / "snaps"))

    def spools() -> dict[str, int]:
        return {n: os.path.getsize(os.path.join(snaps.directory, n))
                for n in os.listdir(snaps.directory) if n.endswith(".spool")}

    receiver = SnapshotReceiver(snaps.spool)
    receiver.receive(SnapshotChunk(SnapshotMetadata(CONF, 5, 1), 0, 10, b"GWSNAP1\n"))
    assert spools() == {"incoming-1.spool": 8}
    receiver.receive(SnapshotChunk(SnapshotMetadata(CONF, 9, 2), 0, 100, b"GWSNAP1\nxy"))
    assert spools() == {"incoming-2.spool": 10}  # the newer one's bytes only
    receiver.drop()
    assert spools() == {}
    receiver.receive(SnapshotChunk(SnapshotMetadata(CONF, 9, 2), 0, 100, b"GWSNAP1\nxy"))
    assert spools() == {"incoming-3.spool": 10}
    SnapshotFiles(snaps.directory)  # a restart
    assert spools() == {}


def test_a_finished_spool_never_staged_is_removed_when_its_snapshot_is_dropped(tmp_path):
    snaps = SnapshotFiles(str(tmp_path / "snaps"))
    receiver = SnapshotReceiver(snaps.spool)
    _, snap = receiver.receive(SnapshotChunk(SnapshotMetadata(CONF, 5, 1), 0, 8, b"GWSNAP1\n"))
    path = os.path.join(snaps.directory, "incoming-1.spool")
    assert snap is not None and os.path.exists(path)
    directory = snaps.directory
    assert _open_in(directory) == 2  # the spool's writer and the archive's reader
    del snap  # the core refused it (e.g. older than its commit index): nothing stages it
    gc.collect()
    assert not os.path.exists(path) and _open_in(directory) == 0


def test_a_loaded_reader_staged_elsewhere_is_copied_a_piece_at_a_time(
        tmp_path, store, monkeypatch):
    monkeypatch.setattr(snapshot_files, "_CHUNK", 4096)
    snaps, expected = _taken(tmp_path, store)
    reader = snaps.load().data
    pieces = list(reader)
    assert b"".join(pieces) == expected and len(pieces) == -(-len(expected) // 4096) > 10
    assert {len(p) for p in pieces[:-1]} == {4096}
    other = SnapshotFiles(str(tmp_path / "other"))
    assert other.save(SnapshotMetadata(CONF, 30, 5), reader) == len(expected)
    assert bytes(other.load().data) == expected
