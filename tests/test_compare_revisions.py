"""benchmarks/compare_revisions.py reads the figures of every benchmark's output format."""

from __future__ import annotations

from tests.harness.benchmarks import load_benchmark

compare = load_benchmark("compare_revisions")


def test_table_rows_are_named_by_their_text_cells_and_case_column():
    out = compare.figures(
        "| system | call | row | clients | rows/s | p50 ms | errors | CPU L/F/F |\n"
        "|---|---|---|---|---|---|---|---|\n"
        "| gateway | Write | 10 B | 1 | 1,197 | 4.76 | 0 | 3221/1889/1889 |\n"
        "| gateway | Write | 10 B | 64 | 786 | 78.30 | 0 | 1054/430/440 |\n"
    )
    assert out == {
        "gateway / Write / 10 B / clients=1 :: rows/s": 1197.0,
        "gateway / Write / 10 B / clients=1 :: p50 ms": 4.76,
        "gateway / Write / 10 B / clients=1 :: errors": 0.0,
        "gateway / Write / 10 B / clients=64 :: rows/s": 786.0,
        "gateway / Write / 10 B / clients=64 :: p50 ms": 78.3,
        "gateway / Write / 10 B / clients=64 :: errors": 0.0,
        # a per-node column ("L/F/F") is one figure per node
        "gateway / Write / 10 B / clients=1 :: CPU L/F/F [node 1]": 3221.0,
        "gateway / Write / 10 B / clients=1 :: CPU L/F/F [node 2]": 1889.0,
        "gateway / Write / 10 B / clients=1 :: CPU L/F/F [node 3]": 1889.0,
        "gateway / Write / 10 B / clients=64 :: CPU L/F/F [node 1]": 1054.0,
        "gateway / Write / 10 B / clients=64 :: CPU L/F/F [node 2]": 430.0,
        "gateway / Write / 10 B / clients=64 :: CPU L/F/F [node 3]": 440.0,
    }


def test_metric_tables_and_aligned_columns_with_units():
    out = compare.figures(
        "| metric | gateway |  |\n|---|---|\n| puts/s | 237,791 |  |\n| settle (s) | 0.4 |  |\n"
        "\n"
        "committed entries/s (3 nodes)      370,785  >= 100,000\n"
        "cost per committed entry           2.64 us\n"
    )
    assert out == {
        "puts/s :: gateway": 237791.0,
        "settle (s) :: gateway": 0.4,
        "committed entries/s (3 nodes) :: [1]": 370785.0,
        "cost per committed entry :: [1]": 2.64,
    }


def test_repeated_labels_stay_apart():
    out = compare.figures("a    1\na    2\n")
    assert out == {"a :: [1]": 1.0, "a #2 :: [1]": 2.0}


def test_values_with_a_time_or_size_unit_are_marked_lower_is_better():
    """A column named for what it sums up (``median``) holding ``9.0 us`` is a cost: rising
    is worse, whatever the column's name says."""
    timed: set[str] = set()
    out = compare.figures("| shape | median | rows/s | RSS |\n|---|---|---|---|\n"
                          "| 2 x 1 | 9.0 us | 1,200 | 300 MiB |\n", timed)
    assert out == {"2 x 1 :: median": 9.0, "2 x 1 :: rows/s": 1200.0, "2 x 1 :: RSS": 300.0}
    assert timed == {"2 x 1 :: median", "2 x 1 :: RSS"}


def test_a_cost_ratio_falling_is_better_and_a_rate_falling_is_worse():
    """``applier cost / SQLite alone`` (bench_applier_feed) is a ratio of two costs: it
    falling is an improvement; a rate's column (rows/s) falling is not."""
    out = compare.figures(
        "| feed | CPU us/row | SQLite alone CPU us/row | applier cost / SQLite alone |\n"
        "|---|---|---|---|\n| 2 row(s) | 1.5 | 0.5 | 3.00x |\n")
    key = "2 row(s) :: applier cost / SQLite alone"
    assert out[key] == 3.0
    assert compare.lower_is_better(key, set())
    assert not compare.lower_is_better("gateway / Write :: rows/s", set())
