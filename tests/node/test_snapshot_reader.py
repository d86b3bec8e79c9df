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
from gateway.node import snapshot_files
from gateway.node.snapshot_files import ArchiveReader, SnapshotFiles, pack_dir, unpack_dir
from gateway.raft import ConfState, SnapshotMetadata
from gateway.raft.snapshot_transfer import SnapshotSender

CONF = ConfState(voters=(1, 2, 3))


def _fill(store: LSMStore, start: int, count: int, index: int) -> None:
    store.write_batch([(b"k%06d" % i, b"v%06d" % i * 20) for i in range(start, start + count)],
                      log_index=index)
    store.flush()


def _taken(tmp_path, store: LSMStore, batches: int = 3) -> tuple[SnapshotFiles, bytes]:
    """A snapshot taken of ``store`` (a directory of links to its tables) and its archive."""
    for b in range(batches):
        _fill(store, b * 400, 400, b + 1)
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


@pytest.fixture()
def store(tmp_path):
    s = LSMStore(str(tmp_path / "store"), background=False)
    yield s
    s.close()


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
        sender.start(2, type(snap)(snap.metadata, data))
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
    _fill(store, 5000, 300, 9)
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
