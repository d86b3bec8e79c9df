"""A snapshot archive streamed from the export's files to disk (``archive_chunks`` through
``write_atomic``) holds the same bytes ``pack_dir`` builds in memory (what a follower receives
and ``unpack_dir`` reads), and a file that changes size meanwhile is an error, never a
silently inconsistent archive."""

from __future__ import annotations

import os

import pytest

from gateway.core.fileio import local_fs
from gateway.node.storage import snapshot_files
from gateway.node.storage.snapshot_files import archive_chunks, check_archive, pack_dir, unpack_dir


def _files(directory, spec: dict[str, bytes]) -> None:
    os.makedirs(directory, exist_ok=True)
    for name, data in spec.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


@pytest.mark.parametrize("spec", [
    {},
    {"EMPTY": b""},
    {"b.sst": b"x" * 3_000_001, "a.sst": bytes(range(256)) * 50, "SNAPSHOT": b"\x00manifest"},
])
def test_the_streamed_archive_is_pack_dirs_bytes(tmp_path, monkeypatch, spec):
    monkeypatch.setattr(snapshot_files, "_CHUNK", 4096)  # many chunks per file
    src = tmp_path / "export"
    _files(src, spec)
    os.makedirs(src / "a-subdirectory")  # not a file: left out by both
    out = str(tmp_path / "00000000000000000007.snap")
    size = local_fs().write_atomic(out, archive_chunks(str(src)))
    with open(out, "rb") as f:
        got = f.read()
    assert got == pack_dir(str(src)) and size == len(got)
    assert not os.path.exists(out + ".tmp")
    check_archive(out)
    assert unpack_dir(got, str(tmp_path / "back")) == len(spec)
    for name, data in spec.items():
        with open(tmp_path / "back" / name, "rb") as f:
            assert f.read() == data


def test_a_file_changing_size_while_archived_is_an_error(tmp_path, monkeypatch):
    src = tmp_path / "export"
    _files(src, {"a.sst": b"a" * 10})
    real = os.path.getsize
    monkeypatch.setattr(snapshot_files.os.path, "getsize",
                        lambda p: real(p) + 1 if p.endswith("a.sst") else real(p))
    out = str(tmp_path / "1.snap")
    with pytest.raises(OSError, match=r"a\.sst: 10 bytes read, 11 expected"):
        local_fs().write_atomic(out, archive_chunks(str(src)))
    assert not os.path.exists(out)
