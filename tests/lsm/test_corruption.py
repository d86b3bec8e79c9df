"""Damaged files are detected by checksum and reported with file and byte offset."""

from __future__ import annotations

import os
import re

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.core import records
from gateway.core.lsm import CorruptionError, LSMStore
from gateway.core.lsm.format import TAG_BLOCK, TAG_BLOOM, TAG_FOOTER, TAG_INDEX

from .conftest import SMALL, fill, key


def _make(tmp_path, n=2000):
    path = str(tmp_path / "db")
    with LSMStore(path, **SMALL, background=False) as s:
        fill(s, n)
        s.compact()
    return path


def _tables(path):
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".sst"))


def _record_of(path, tag):
    with open(path, "rb") as f:
        data = f.read()
    for r in records.scan(data):
        if r.payload[0] == tag:
            return r
    raise AssertionError(f"no record with tag {tag:#x}")


def _flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x20]))


@pytest.mark.parametrize(
    "tag,what", [(TAG_FOOTER, "footer"), (TAG_INDEX, "index"), (TAG_BLOOM, "bloom")]
)
def test_damaged_table_metadata_refuses_open_naming_file_and_offset(tmp_path, tag, what):
    path = _make(tmp_path)
    table = _tables(path)[0]
    rec = _record_of(table, tag)
    _flip(table, (rec.offset + rec.end) // 2)
    with pytest.raises(CorruptionError) as e:
        LSMStore(path, background=False)
    assert e.value.path == table
    assert e.value.offset == rec.offset
    assert what in str(e.value) and f"byte offset {rec.offset}" in str(e.value)


def test_damaged_data_block_is_never_served(tmp_path):
    path = _make(tmp_path)
    table = _tables(path)[-1]
    rec = _record_of(table, TAG_BLOCK)
    _flip(table, rec.end - 3)
    with LSMStore(path, background=False) as s:
        with pytest.raises(CorruptionError) as e:
            for i in range(2000):
                s.get(key(i))
        assert e.value.path == table and e.value.offset == rec.offset


def test_damaged_data_block_refuses_open_with_paranoid_checks(tmp_path):
    path = _make(tmp_path)
    table = _tables(path)[0]
    rec = _record_of(table, TAG_BLOCK)
    _flip(table, rec.offset + 5)
    with pytest.raises(CorruptionError, match=re.escape(f"{table}: byte offset {rec.offset}")):
        LSMStore(path, paranoid_checks=True, background=False)


def test_truncated_table_refuses_open(tmp_path):
    path = _make(tmp_path)
    table = _tables(path)[0]
    size = os.path.getsize(table)
    os.truncate(table, size - 7)
    with pytest.raises(CorruptionError, match="truncated"):
        LSMStore(path, background=False)


def test_missing_table_refuses_open(tmp_path):
    path = _make(tmp_path)
    os.unlink(_tables(path)[0])
    with pytest.raises(CorruptionError, match="missing"):
        LSMStore(path, background=False)


def test_damaged_manifest_refuses_open_naming_offset(tmp_path):
    path = _make(tmp_path)
    manifest = os.path.join(path, "MANIFEST")
    with open(manifest, "rb") as f:
        rec = list(records.scan(f.read()))[-1]
    _flip(manifest, rec.offset + 3)
    with pytest.raises(CorruptionError) as e:
        LSMStore(path, background=False)
    assert e.value.path == manifest and e.value.offset == rec.offset


def test_verify_cli_reports_ok_with_exit_0(tmp_path):
    path = _make(tmp_path)
    result = CliRunner().invoke(main, ["store", "verify", path])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok: ")


def test_verify_cli_reports_corruption_with_exit_1(tmp_path):
    path = _make(tmp_path)
    table = _tables(path)[0]
    rec = _record_of(table, TAG_BLOCK)
    _flip(table, rec.offset + 5)
    result = CliRunner().invoke(main, ["store", "verify", path])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [f"corrupt: {table}: byte offset {rec.offset}: data block 0 fails its checksum"]


def test_verify_cli_rejects_non_store_with_exit_2(tmp_path):
    result = CliRunner().invoke(main, ["store", "verify", str(tmp_path)])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "not an LSM store" in result.output
    result = CliRunner().invoke(main, ["store", "verify", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "no such directory" in result.output
