"""benchmarks/bench_seed.py seeds a replica in its --quick mode and prints its table (the
replica's row count checked against the source's), measures its writer's window with the
stalls at its edges, and refuses a row count it cannot load."""

from __future__ import annotations

import subprocess
import sys

from tests.harness.benchmarks import BENCHMARKS, load_benchmark

_SCRIPT = BENCHMARKS / "bench_seed.py"


def test_a_writer_window_counts_its_writes_and_its_longest_gap_edges_included():
    bench = load_benchmark("bench_seed")
    rate, gap = bench.window([0.5, 1.0, 1.1, 3.0, 9.0], 1.0, 3.5)
    assert rate == 3 / 2.5
    assert round(gap) == 1900  # 1.1 -> 3.0; the edges are 1.0 and 3.5
    rate, gap = bench.window([0.5, 9.0], 1.0, 3.0)  # nothing acknowledged inside: all a stall
    assert (rate, round(gap)) == (0.0, 2000)


def test_quick_mode_seeds_a_replica_and_prints_the_table_with_its_targets():
    done = subprocess.run([sys.executable, str(_SCRIPT), "--quick"], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| appliers |"))
    assert "seed/export" in header and "during/without" in header
    rows = [line for line in lines if line.startswith("| sqlite |")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[4].endswith("x") and float(cells[4][:-1]) > 0  # seed/export
    assert "ratio " in cells[-1] and "rate " in cells[-1] and "pause " in cells[-1]
    assert lines[0].startswith("load average before:") and "20,000 rows" in lines[0]
    assert lines[-1].startswith("load average after:")


def test_a_row_count_below_one_is_refused_before_any_cluster_starts():
    done = subprocess.run([sys.executable, str(_SCRIPT), "--rows", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "--rows: 0 is not a positive number of rows" in done.stderr
    assert "Traceback" not in done.stderr
