"""``python -m gateway.raft.sim --seed S --count N --nodes K --steps M [--faults ...]``

Runs seeds S, S+1, ..., S+N-1. Exits 0 only if every run held every invariant and its client
history is linearizable; for each failing seed prints the error and the exact command that
reproduces it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from .cluster import ALL_FAULTS, SimConfig, run_seed


def _faults(spec: str) -> frozenset[str]:
    if spec in ("all", ""):
        return frozenset(ALL_FAULTS) if spec == "all" else frozenset()
    names = frozenset(s.strip() for s in spec.split(",") if s.strip())
    unknown = names - set(ALL_FAULTS) - {"none"}
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault(s) {sorted(unknown)}; choose from {', '.join(ALL_FAULTS)}, all, none"
        )
    return names - {"none"}


#: Most initial voters a run may have (the simulator is quadratic in the cluster size).
MAX_NODES = 15


def _int_in(lo: int, hi: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {value}")
        return value
    return parse


class _Parser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr (no usage dump, no traceback), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m gateway.raft.sim", description=__doc__)
    p.add_argument("--seed", type=_int_in(0), default=1, help="first seed")
    p.add_argument("--count", type=_int_in(1), default=1, help="number of seeds")
    p.add_argument("--nodes", type=_int_in(1, MAX_NODES), default=3,
                   help=f"initial voters (1-{MAX_NODES}; one node runs without partitions)")
    p.add_argument("--steps", type=_int_in(0), default=300, help="ticks of the faulty phase")
    p.add_argument(
        "--faults", type=_faults, default=frozenset(ALL_FAULTS),
        help=f"comma-separated subset of {','.join(ALL_FAULTS)}, or all / none (default all)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="one line per seed")
    args = p.parse_args(argv)
    failed = 0
    fault_arg = ",".join(sorted(args.faults)) or "none"
    for seed in range(args.seed, args.seed + args.count):
        res = run_seed(SimConfig(seed, args.nodes, args.steps, args.faults))
        if args.verbose or not res.ok:
            status = "ok" if res.ok else "FAIL"
            print(
                f"seed {seed}: {status} ops={res.ops} acked_writes={res.acked_writes} "
                f"elections={res.elections} snapshot_chunks={res.snapshots_sent}"
            )
        if not res.ok:
            failed += 1
            print(f"  error: {res.error}")
            print(
                "  reproduce: python -m gateway.raft.sim "
                f"--seed {seed} --count 1 --nodes {args.nodes} --steps {args.steps} "
                f"--faults {fault_arg}"
            )
    print(f"{args.count - failed}/{args.count} seeds passed ({args.nodes} nodes, "
          f"{args.steps} steps, faults: {fault_arg})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
