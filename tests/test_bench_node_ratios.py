"""benchmarks/bench_node.py compares the gateway with the better of etcd's rounds, figure by
figure, and its table carries every cell's steal share in a column compare_revisions reads."""

from __future__ import annotations

import sys

import pytest

from tests.harness.benchmarks import BENCHMARKS, load_benchmark

bn = load_benchmark("bench_node")
compare = load_benchmark("compare_revisions")


def _etcd(mode: str, clients: int, rows_per_s: float, p50: float, p99: float,
          size: str = "10 B") -> object:
    r = bn.Result("etcd (round)", mode, size, clients, seconds=1.0, ops=int(rows_per_s),
                  rows=int(rows_per_s), all_rows=int(rows_per_s), p50_ms=p50, p99_ms=p99)
    r.steal = "3"
    return r


def test_best_of_rounds_takes_the_higher_rate_and_the_lower_latencies_separately():
    one = [_etcd("put", 64, 3000, 14.0, 30.0), _etcd("put", 1, 400, 2.6, 9.0)]
    two = [_etcd("put", 64, 4500, 18.0, 28.0), _etcd("put", 1, 330, 1.7, 11.0)]
    best = bn.best_of_rounds([one, two])
    assert [(b.mode, b.clients) for b in best] == [("put", 64), ("put", 1)]
    assert best[0].rows_per_s == 4500 and best[0].pct(0.5) == 14.0 and best[0].pct(0.99) == 28.0
    assert best[1].rows_per_s == 400 and best[1].pct(0.5) == 1.7 and best[1].pct(0.99) == 9.0


def test_rounds_of_different_cells_are_refused():
    with pytest.raises(ValueError):
        bn.best_of_rounds([[_etcd("put", 64, 1, 1, 1)], []])


def test_the_unary_ratios_use_the_etcd_figures_they_are_given():
    etcd = bn.best_of_rounds([[_etcd("put", 64, 2000, 20, 40), _etcd("put", 1, 300, 3.0, 9)],
                              [_etcd("put", 64, 4000, 15, 30), _etcd("put", 1, 500, 2.0, 6)]])
    for r in etcd:
        r.system = "etcd"
    gw64 = bn.Result("gateway", "Write", "10 B", 64, seconds=1.0, rows=1000)
    gw1 = bn.Result("gateway", "Write", "10 B", 1, seconds=1.0, rows=200, latencies=[0.004] * 9)
    go64 = bn.Result("gateway", "Go client Write", "10 B", 64, seconds=1.0, rows=1200)
    text = bn.ratios([gw64, gw1, go64, *etcd])
    assert "gateway: unary Write / etcd put, 64 clients, 10 B: 25% (target >= 25%)" in text
    assert "gateway: unary Write (Go client) / etcd put, 64 clients, 10 B: 30%" in text
    assert "gateway: p50 of 1 client / etcd's, 10 B: 2.0x (target <= 2x)" in text


def test_the_steal_column_is_a_figure_compare_revisions_reads_lower_is_better():
    r = bn.Result("gateway", "Write", "10 B", 64, seconds=1.0, rows=700, cpu="1100/300/300",
                  client_cpu="400", steal="12", latencies=[0.08] * 5)
    out = compare.figures(bn.table([r]))
    assert out["gateway / Write / 10 B / clients=64 :: steal %"] == 12.0
    assert out["gateway / Write / 10 B / clients=64 :: rows/s"] == 700.0
    assert any(w in "steal %" for w in compare._LOWER_IS_BETTER)


def test_the_steal_meter_reports_a_share_of_the_machine():
    got = bn.StealMeter().stop()
    assert got == "-" or 0 <= float(got) <= 100


@pytest.mark.parametrize("argv, said", [
    (["--duration", "0"], "--duration must be a number of seconds > 0, not 0"),
    (["--duration", "nan"], "not nan"),
    (["--only", "gateway,etdc"], "--only: unknown 'etdc'"),
    (["--appliers", "sqlite,rabbit"], "--appliers 'sqlite,rabbit'"),
    (["--appliers", "none,none"], "distinct"),
    (["--etcd", "/nonexistent/etcd-build"], "no executable etcd there"),
])
def test_arguments_it_would_fail_on_later_are_refused_before_anything_starts(
        argv, said, tmp_path):
    """A bad argument ends the run at once with exit status 2 and the reason -- no cluster
    started, no traceback (the Go load generator used to fail minutes in on --duration 0, and
    an unknown --only name ran nothing and printed empty tables)."""
    import subprocess

    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_node.py"), *argv],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert said in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize(("windows", "readings_taken"), [(2, 5), (1, 2)])
def test_settle_waits_out_work_that_starts_after_a_quiet_window(monkeypatch, windows,
                                                                readings_taken):
    """A merge the store held during the cell starts a moment after it: one quiet window
    followed by a busy one does not end the wait; ``windows`` quiet ones in a row do."""
    import asyncio

    readings = iter([0.0, 0.0, 1.0, 1.0, 1.0, 1.0])  # start; quiet, busy, quiet, quiet
    taken = []

    def cpu(pid: int) -> float:
        taken.append(pid)
        return next(readings)

    monkeypatch.setattr(bn, "cpu_seconds", cpu)
    asyncio.run(bn.settle([7], window=0.001, limit=10, windows=windows))
    assert len(taken) == readings_taken
