"""benchmarks/bench_applier_feed.py runs SQLite alone beside the applier on the same rows, and
refuses arguments that would make it divide by zero."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from tests.harness.benchmarks import BENCHMARKS, load_benchmark

_SCRIPT = BENCHMARKS / "bench_applier_feed.py"


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_benchmark("bench_applier_feed")


def test_rows_of_reads_back_every_row_the_payloads_insert(bench):
    rows = bench.rows_of(bench.payloads(5, 3, 4))
    assert len(rows) == 15
    assert len({k for k, _ in rows}) == 15
    assert all(v == "xxxx" for _, v in rows)


def test_sqlite_alone_writes_the_same_rows_with_the_applier_s_pages_and_journal(bench, tmp_path):
    rows = bench.rows_of(bench.payloads(60, 3, 10))  # 180 rows: 128 + 16 + 1-row statements
    path = tmp_path / "floor.db"
    spent = bench.sqlite_floor(rows, [150, 30], path)
    assert spent > 0
    conn = sqlite3.connect(path)
    try:
        assert sorted(conn.execute('SELECT "k", "v" FROM "kv"')) == sorted(rows)
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_a_run_prints_sqlite_alone_and_the_ratio_beside_the_applier(tmp_path):
    done = subprocess.run([sys.executable, str(_SCRIPT), "--transactions", "40", "--rows", "2"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    head, _, line = done.stdout.strip().splitlines()[-3:]
    assert "SQLite alone CPU us/row" in head and "applier cost / SQLite alone" in head
    assert line.startswith("| 2 row(s) of 10 B per transaction |")
    ratio = line.rstrip(" |").rsplit("|", 1)[-1].strip()
    assert ratio.endswith("x") and float(ratio[:-1]) > 0


@pytest.mark.parametrize("args", [["--transactions", "0"], ["--rows", "0"],
                                  ["--value-bytes", "-1"]])
def test_arguments_that_leave_nothing_to_measure_are_refused(args):
    done = subprocess.run([sys.executable, str(_SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "must be at least" in done.stderr
