"""One cell of the multi-cluster fault harness: start a topology, set up its workloads, run a
fault schedule drawn from a seed while they write, heal, and check what every cluster, node and
sink holds (docs/testing.md, "The fault harness across clusters").

After heal, :func:`check_converged`:

1. every cluster holds the same rows and the same exception rows (values, origin author and
   GTID), fingerprinted;
2. within each cluster every node holds what its leader holds;
3. each cluster's exception rows number what its conflict counters count, and each says why;
4. every node's SQLite sink equals that node's store;
5. each workload's own invariants (:mod:`tests.harness.workloads`);

then every node is stopped (SIGTERM) and started again: all come up, and the fingerprints and
sinks are what they were.

A failure raises AssertionError with the seed, the topology, the schedule and what it did, every
cluster's state and every node's log tail; ``GATEWAY_FAULT_SEED=<seed>`` replays it.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.harness.cluster import wait_until
from tests.harness.clusters import MultiCluster, Topology, node_db
from tests.harness.faults import Runner, describe_schedule, draw_schedule
from tests.harness.fingerprints import (
    Image,
    counted_exceptions,
    diff,
    exception_causes,
    exception_count,
    fingerprint,
    sink_differences,
    sqlite_image,
    store_image,
)
from tests.harness.workloads import WORKLOADS, Workload

EX_KEY = ["server_id", "source_server_id", "source_epoch", "count"]
CONVERGE_TIMEOUT = 240.0


@dataclass(frozen=True)
class Cell:
    """A topology, the workloads writing on it, and the seed its schedule is drawn from."""

    seed: int
    topology: Topology
    workloads: tuple[str, ...] = ("hot",)
    steps: int = 6

    def __str__(self) -> str:
        return (f"seed={self.seed} topology={self.topology} workloads={list(self.workloads)} "
                f"steps={self.steps}")


def tables_of(workloads: Sequence[Workload]) -> list[str]:
    out: list[str] = []
    for w in workloads:
        for t in w.tables:
            out += [t, f"{t}$EX"]
    return out


def key_columns_of(workloads: Sequence[Workload]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for w in workloads:
        for t, keys in w.key_columns.items():
            out[t] = keys
            out[f"{t}$EX"] = EX_KEY
    return out


def leader_image(mc: MultiCluster, cid: int, tables: list[str]) -> Image:
    lead = mc.leader(cid)
    return store_image(mc.clusters[cid].nodes[lead].api_address, tables)


def converge(mc: MultiCluster, tables: list[str], timeout: float = CONVERGE_TIMEOUT
             ) -> dict[int, Image]:
    """Wait until every cluster's leader holds the same ``tables`` and no channel lags, then
    until every node of each cluster holds what its leader holds; returns the leaders'
    images."""
    cids = mc.topology.cids
    last: dict[int, Image] = {}

    def quiet() -> bool:
        mc.check_running()
        for cid in cids:
            st = mc.status(cid)
            if st is None or any(ch.state != "running" or ch.lag_epochs for ch in st.channels):
                return False
        return True

    def same() -> dict[int, Image] | None:
        if not quiet():
            return None
        last.clear()
        last.update({cid: leader_image(mc, cid, tables) for cid in cids})
        first = last[cids[0]]
        return dict(last) if all(last[c] == first for c in cids) else None

    def divergence() -> str:
        if len(last) < len(cids):
            return mc.describe()
        base = last[cids[0]]
        return "\n".join([f"cluster {c} vs cluster {cids[0]}:\n{diff(last[c], base)}"
                          for c in cids[1:]] + [mc.describe()])

    wait_until("every cluster holding the same rows and exceptions, no channel lagging",
               same, timeout, 1.0, divergence)
    # a second look a few epochs later: nothing was still on its way
    time.sleep(1.0)
    images = wait_until("the clusters staying equal", same, timeout, 1.0, divergence)
    for cid in cids:
        cl = mc.clusters[cid]
        cl.wait_caught_up(sorted(cl.nodes), timeout=timeout)
        lead = mc.leader(cid)
        for i in sorted(cl.nodes):
            if i == lead:
                continue
            mine = store_image(cl.nodes[i].api_address, tables)
            assert mine == images[cid], (
                f"cluster {cid}: node {i} differs from its leader {lead}:\n"
                f"{diff(mine, images[cid])}")
    return images


def check_sinks(mc: MultiCluster, tables: list[str], key_columns: dict[str, list[str]],
                timeout: float = 120.0) -> None:
    """Every node's SQLite database holds what its store holds (waits for the appliers)."""
    for cid, i in mc.nodes():
        cl = mc.clusters[cid]
        api = cl.nodes[i].api_address
        db = node_db(cl, i)
        problems: list[str] = []

        def equal(api: str = api, db: Path = db, problems: list[str] = problems) -> bool:
            problems[:] = sink_differences(store_image(api, tables),
                                           sqlite_image(db, key_columns))
            return not problems

        wait_until(f"cluster {cid} node {i}'s SQLite sink equal to its store", equal, timeout,
                   1.0, lambda p=problems: "\n".join(p))


def check_converged(mc: MultiCluster, workloads: Sequence[Workload]) -> dict[int, Image]:
    """Checks 1-5 of the module docstring; returns each cluster's image."""
    tables = tables_of(workloads)
    images = converge(mc, tables)
    for cid in mc.topology.cids:
        st = mc.status(cid)
        assert st is not None, f"cluster {cid} answers no Status"
        retired = mc.retired_exceptions.get(cid, 0)
        counted = counted_exceptions(st) + retired
        recorded = exception_count(images[cid], cid)
        assert counted == recorded, (
            f"cluster {cid}: its conflict counters count {counted} rejected rows ({retired} "
            f"of them by channels removed since), its exceptions tables hold {recorded} rows "
            f"it recorded")
    causes = exception_causes(images[mc.topology.cids[0]])
    assert all(causes), f"exception rows without a cause: {causes.count('')} of {len(causes)}"
    check_sinks(mc, tables, key_columns_of(workloads))
    for w in workloads:
        w.check(images)
    return images


def check_restart(mc: MultiCluster, workloads: Sequence[Workload],
                  before: dict[int, Image]) -> None:
    """Stop every node, start every node: all come up, nothing changed."""
    codes = mc.stop_all()
    bad = {k: c for k, c in codes.items() if c != 0}
    assert not bad, f"nodes that did not exit 0 on SIGTERM (cluster, node): {bad}"
    mc.start_all()
    after = check_converged(mc, workloads)
    for cid in mc.topology.cids:
        assert fingerprint(after[cid]) == fingerprint(before[cid]), (
            f"cluster {cid} after a restart of every node: {fingerprint(after[cid])}, before: "
            f"{fingerprint(before[cid])}\n{diff(after[cid], before[cid])}")


def heal_and_check(mc: MultiCluster, workloads: Sequence[Workload], log: list[str]) -> None:
    """Heal every fault, stop the workloads, run every check, restart every node and check
    again."""
    mc.heal()
    time.sleep(1.0)
    for w in workloads:
        w.stop()
    log += [f"{w.name}: {w.out.summary()}" for w in workloads]
    images = check_converged(mc, workloads)
    log += [f"{w.name}: {note}" for w in workloads for note in w.notes]
    log += [f"cluster {c}: {fingerprint(im)}" for c, im in sorted(images.items())]
    check_restart(mc, workloads, images)
    log.append("every node restarted; same fingerprints")


def start_workloads(mc: MultiCluster, names: Sequence[str], seed: int,
                    log: list[str]) -> list[Workload]:
    workloads = [WORKLOADS[name](mc, seed * 31 + i) for i, name in enumerate(names)]
    for w in workloads:
        w.setup()
    log.append("workloads set up")
    for w in workloads:
        w.start()
    return workloads


def failure_report(e: BaseException, replay: str, schedule: str, log: list[str],
                   mc: MultiCluster, workloads: Sequence[Workload]) -> str:
    """What a failed cell prints: the cause, how to replay it, the schedule, what ran, every
    cluster's state, every node's log tail."""
    for w in workloads:
        w._stop.set()
    report = [
        f"multi-cluster fault cell failed: {type(e).__name__}: {e}",
        f"replay: {replay}",
        "schedule:", schedule,
        "run:", *[f"  {line}" for line in log],
        *(f"{w.name}: {w.out.summary()}" for w in workloads),
        "state:",
    ]
    try:
        report.append(mc.describe())
    except Exception as d:  # the report is a courtesy: never hide the cause
        report.append(f"(state unavailable: {d!r})")
    report.append(mc.log_tails(40))
    report.append("traceback:\n" + "".join(traceback.format_exception(e))[-4000:])
    return "\n".join(report)


def replay_command(cell: Cell) -> str:
    return (f"GATEWAY_FAULT_SEED={cell.seed} GATEWAY_FAULT_STEPS={cell.steps} python3 -m pytest "
            f"tests/replication/test_fault_schedule.py -k replay  (topology {cell.topology}, "
            f"workloads {list(cell.workloads)})")


def run_cell(root: Path, cell: Cell, *,
             prepare: Callable[[MultiCluster], None] | None = None) -> list[str]:
    """Run ``cell`` under ``root``; returns the run's log. ``prepare`` runs once the clusters
    are up, before the workloads' setup."""
    log: list[str] = [f"cell: {cell}"]
    schedule = draw_schedule(cell.seed, cell.topology.cids, cell.topology.primary, cell.steps)
    mc = MultiCluster(root, cell.topology, seed=cell.seed)
    workloads: list[Workload] = []
    try:
        mc.start()
        log.append("clusters up")
        if prepare is not None:
            prepare(mc)
        workloads = start_workloads(mc, cell.workloads, cell.seed, log)
        time.sleep(1.0)
        Runner(mc, log, workloads).run(schedule)
        heal_and_check(mc, workloads, log)
        return log
    except Exception as e:
        raise AssertionError(failure_report(e, replay_command(cell), describe_schedule(schedule),
                                            log, mc, workloads)) from None
    finally:
        mc.close()
