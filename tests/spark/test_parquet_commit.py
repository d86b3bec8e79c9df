"""The Parquet target's commit protocol: a crash after any step is rolled back or finished by
the next run, on a local path and on a ``file://`` URI, with no rename anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_applier.bulk import apply_log
from spark_applier.commit import TableCommits
from spark_applier.writers import ParquetTarget
from tests.spark.test_bulk import parquet_state
from tests.spark.workload import TABLES, random_log, reference_state, write_log_file


class Crash(Exception):
    pass


def _names(d: Path) -> list[str]:
    """The entries of ``d`` but Hadoop's local checksum files (``.NAME.crc``)."""
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) if d.is_dir() else []


def _layout(root: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Per table directory: its commit files and data directories."""
    return {t.name: (_names(t / "_commits"), _names(t / "_data"))
            for t in sorted(root.iterdir())}


@pytest.mark.parametrize(("step", "uri"), [("data", False), ("commit", True),
                                           ("cleanup", False)])
def test_a_crash_after_any_commit_step_is_repaired_by_the_next_run(
        spark, tmp_path: Path, step: str, uri: bool) -> None:
    txns = random_log(51, 60, segments=False)
    log = write_log_file(tmp_path / "log.bin", txns)
    want = reference_state(log, tmp_path / "ref.db")
    root = f"file://{tmp_path / 'out'}" if uri else str(tmp_path / "out")
    first = apply_log(spark, str(log), ParquetTarget(spark, root), str(tmp_path / "state"),
                      index_to=30)  # every table has a version 1
    assert first.end.log_index == 30
    seen: list[str] = []

    def fault(name: str) -> None:
        seen.append(name)
        if name == step and seen.count(step) == 2:  # the second table's publish
            raise Crash(step)

    with pytest.raises(Crash):
        apply_log(spark, str(log), ParquetTarget(spark, root, fault=fault),
                  str(tmp_path / "state"))
    crashed = _layout(tmp_path / "out")
    second = sorted(crashed)[1]
    commits, data = crashed[second]
    # data: an orphan data directory; commit: two commits, two versions; cleanup: one of each
    assert (len(commits), len(data)) == {"data": (1, 2), "commit": (2, 2),
                                         "cleanup": (1, 1)}[step]
    version = TableCommits(spark, f"file://{tmp_path / 'out' / second}").current()[0]
    assert version == (1 if step == "data" else 2)

    report = apply_log(spark, str(log), ParquetTarget(spark, root), str(tmp_path / "state"))
    assert report.end.log_index == len(txns) and report.problems == 0
    assert parquet_state(spark, root) == want
    for commits, data in _layout(tmp_path / "out").values():
        assert len(commits) == 1 and len(data) == 1  # nothing left over


def test_a_torn_commit_file_is_ignored_and_removed(spark, tmp_path: Path) -> None:
    txns = random_log(52, 30, segments=False)
    log = write_log_file(tmp_path / "log.bin", txns)
    target = ParquetTarget(spark, str(tmp_path / "out"))
    apply_log(spark, str(log), target, str(tmp_path / "state"))
    table = tmp_path / "out" / f"table={'.'.join(sorted(TABLES)[0])}"
    before = parquet_state(spark, tmp_path / "out")
    (table / "_data" / "9-orphan").mkdir()
    (table / "_commits" / f"{9:020d}.json").write_text('{"version": 9, "da')
    assert parquet_state(spark, tmp_path / "out") == before
    TableCommits(spark, f"file://{table}").recover()
    assert _names(table / "_commits") == [f"{1:020d}.json"]
    assert len(_names(table / "_data")) == 1
