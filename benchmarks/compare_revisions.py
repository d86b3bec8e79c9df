"""Run one benchmark on two source trees, alternately, and print the median of every figure
with the ratio new/base: the check that a refactoring left speed alone.

    python benchmarks/compare_revisions.py --base ../base --new . --runs 5 -- \
        benchmarks/bench_lsm.py --n 300000 --engines gateway

Each run is ``python <benchmark args>`` with the tree as working directory and first on
``PYTHONPATH``. Runs alternate in ABBA order (base new, new base, ...) so drift of a shared
machine and whatever the previous run leaves behind (page cache, CPU frequency) hit both
alike; medians damp the rest. Figures are read from the benchmark's output: every line
is cut into cells at ``|`` or runs of two or more spaces; the first cell names the figure and
every later cell that is a plain number (commas, a trailing unit such as ``us``, ``s``,
``MiB`` or ``x`` allowed) is a value, and a cell of numbers joined by ``/`` (a per-node column
such as ``CPU us/row L/F/F``) is one value per node, ``[node 1]`` first. A figure is "worse"
when it moved the wrong way by more than ``--tolerance`` (default 5 %): down for rates, up
for times, latencies, sizes and costs (names containing ``(s)``, `` us``, ``ms``,
``latency``, ``p50``, ``p99``, ``RSS``, ``disk``, ``cost``, ``settle``, ``steal``, ``CPU/``:
``bench_channels.py``'s ``replica CPU/row``). Timings are informative; the exit code is
always 0 unless a run fails.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

_NUMBER = re.compile(r"^([0-9][0-9,]*(?:\.[0-9]+)?)\s*(us|ms|s|MiB|GiB|KiB|x|%)?$")
#: Units of values that are better lower whatever their column is called (a time, a size).
_LOWER_UNITS = ("us", "ms", "s", "MiB", "GiB", "KiB")
_PER_NODE = re.compile(r"^[0-9][0-9,]*(?:\.[0-9]+)?(?:/[0-9][0-9,]*(?:\.[0-9]+)?){1,8}$")
#: Table columns whose number names the case rather than measuring it.
_CASE_COLUMNS = ("clients", "batch", "window", "size", "n", "rows", "threads", "workers")
_LOWER_IS_BETTER = (
    "(s)", " us", "us/", "ms", "latency", "p50", "p99", "rss", "disk", "cost", "settle", "errors",
    "steal", "cpu/",
)


def lower_is_better(key: str, timed: set[str]) -> bool:
    """Whether figure ``key`` (``label :: column``) is a cost: its value carried a time or
    size unit (``timed``), or its column -- its label, for an unnamed column ``[i]`` -- names
    one (``_LOWER_IS_BETTER``)."""
    column = key.rsplit(" :: ", 1)[-1].lower()
    named = column if column[:1] != "[" else key.lower()
    return key in timed or any(w in named for w in _LOWER_IS_BETTER)


def figures(output: str, timed: set[str] | None = None) -> dict[str, float]:
    """Every ``label :: column`` -> value found in ``output`` (see the module docstring);
    ``timed`` (when given) gets the figures whose value carried a time or size unit, which
    are better lower whatever their column says (a ``median`` column of ``9.0 us``)."""
    out: dict[str, float] = {}
    lines = output.splitlines()
    header: list[str] = []
    for i, line in enumerate(lines):
        if re.match(r"^\|[-| :]+\|$", line.strip()):
            continue
        cells = [c.strip() for c in re.split(r"\||\s{2,}", line) if c.strip()]
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.lstrip().startswith("|") and re.match(r"^\|[-| :]+\|$", nxt):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
            continue
        if not line.lstrip().startswith("|"):
            header = []
        if len(cells) < 2 or _NUMBER.match(cells[0]):
            continue
        raw = [c.strip() for c in line.strip().strip("|").split("|")] if header else cells
        first = next((j for j, c in enumerate(raw) if j and _NUMBER.match(c)), len(raw))
        label = " / ".join(c for c in raw[:first] if c)
        if header and first < len(header) and header[first].lower() in _CASE_COLUMNS:
            label += f" / {header[first]}={raw[first]}"  # the number names the case
            first += 1
        n = 2
        base_label = label
        while any(k.startswith(label + " :: ") for k in out):
            label = f"{base_label} #{n}"
            n += 1
        for j in range(first, len(raw)):
            name = header[j] if header and j < len(header) else f"[{j}]"
            m = _NUMBER.match(raw[j])
            if m:
                out[f"{label} :: {name}"] = float(m.group(1).replace(",", ""))
                if timed is not None and m.group(2) in _LOWER_UNITS:
                    timed.add(f"{label} :: {name}")
            elif _PER_NODE.match(raw[j]):  # "L/F/F": one figure per node
                for k, part in enumerate(raw[j].split("/")):
                    out[f"{label} :: {name} [node {k + 1}]"] = float(part.replace(",", ""))
    return out


def run(tree: str, argv: list[str], timeout: float, extra: list[str],
        timed: set[str]) -> dict[str, float]:
    env = dict(os.environ)
    paths = [tree, *(os.path.join(tree, e) for e in extra), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    proc = subprocess.run([sys.executable, *argv], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        sys.exit(f"{tree}: {' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return figures(proc.stdout, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="source tree of the baseline revision")
    ap.add_argument("--new", required=True, help="source tree of the revision under test")
    ap.add_argument("--runs", type=int, default=5, help="runs per tree (alternating)")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--pythonpath", default="plugins/gateway-rabbit,plugins/gateway-cassandra,"
                    "plugins/gateway-plugin-template",
                    help="comma-separated directories inside each tree to put on PYTHONPATH "
                         "after it (default: the plugin packages, so each tree loads its own)")
    ap.add_argument("benchmark", nargs=argparse.REMAINDER,
                    help="-- then the benchmark script and its arguments")
    args = ap.parse_args()
    argv = args.benchmark[1:] if args.benchmark[:1] == ["--"] else args.benchmark
    if not argv:
        ap.error("name the benchmark after --")
    extra = [e for e in args.pythonpath.split(",") if e]
    base_runs: list[dict[str, float]] = []
    new_runs: list[dict[str, float]] = []
    timed: set[str] = set()
    for i in range(args.runs):
        pair = [(args.base, base_runs), (args.new, new_runs)]
        for tree, into in pair if i % 2 == 0 else pair[::-1]:  # ABBA: no order bias
            into.append(run(os.path.abspath(tree), argv, args.timeout, extra, timed))
        print(f"run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)
    keys = [k for k in base_runs[0] if all(k in r for r in base_runs + new_runs)]
    print(f"{' '.join(argv)}: median of {args.runs} alternating runs per tree")
    print(f"base {args.base}  new {args.new}  load {os.getloadavg()[0]:.2f}")
    print("| figure | base | new | new/base | |")
    print("|---|---|---|---|---|")
    worse = 0
    for k in keys:
        b = statistics.median(r[k] for r in base_runs)
        n = statistics.median(r[k] for r in new_runs)
        ratio = n / b if b else float("nan")
        lower_better = lower_is_better(k, timed)
        bad = ratio > 1 + args.tolerance if lower_better else ratio < 1 - args.tolerance
        worse += bad
        print(f"| {k} | {b:,.4g} | {n:,.4g} | {ratio:.3f} | {'WORSE' if bad else ''} |")
    print(f"{worse} figure(s) worse than {args.tolerance:.0%}")


if __name__ == "__main__":
    main()
