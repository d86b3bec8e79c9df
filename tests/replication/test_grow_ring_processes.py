"""A pair grown into a ring of 3 under writes, as real processes (issue 54, "Tests", first
bullet; docs/replication.md "Seeding a new cluster", "Growing a pair into a ring").

Cluster 1 (one node, PRIMARY) and cluster 2 (three nodes) replicate both ways in the default
configuration (the SQLite applier on every node), with the hot-key, bank, list-append and
insert workloads writing on both (conflict rules ``NDB$EPOCH2``, the bank's transfers
``NDB$EPOCH2_TRANS``, as the fault schedule's pairs). Then:

1. an empty cluster 3 (three nodes) is started and seeded from cluster 2 with ``channel add
   from2 --seed`` (chunks of 4 rows: some 1,000 chunks); once some chunks are installed
   cluster 3's leader is killed -9, some chunks later cluster 2's leader (which serves the
   seed); both come back (as followers) while the seed goes on;
2. once the seed ended and cluster 1 holds cluster 2's epochs up to the seed's epoch ``E``,
   the ring is closed: cluster 1 removes its channel from 2 (and cluster 2 drops its slot) and
   adds one from 3. Cluster 1 holds none of cluster 3's epochs, so the channel reads cluster
   3's log from its start: everything after ``E`` of cluster 2 that cluster 3 applied, whose
   origin transactions cluster 1 already holds it skips (its watermark per origin), and
   cluster 2's transactions up to ``E`` -- in the seed, not in cluster 3's log -- it holds
   already (which is why it waits for ``E``);
3. cluster 3's clients start writing too; after a while the writes stop.

After quiescence every cluster, node and SQLite sink holds the same rows and exceptions
(fingerprints), exception rows number what the conflict counters count, each workload's
checks hold (every acknowledged insert on every cluster; hot rows hold only written values;
every acknowledged append is in its list or in ``fault.append$EX`` with a cause -- conflicts
after the seed detected as the pair and ring model tests require; the bank's total after
every epoch of the PRIMARY's log), no cluster's log holds an origin transaction twice, and
every node restarts to the same fingerprints.

Rate: the workloads' client threads (two per cluster and workload with a pause of 20-200 ms
after each write, four inserting without a pause) give some 300 acknowledged transactions a
second in all on a 2-core machine (336 tx/s in the run that set this figure; the test prints
it), not the 1,000 tx/s the issue names: seven node processes with fsync on and the clients
share the two cores, and eight inserting clients gave no more. About 60 s.
``GATEWAY_GROW_SEEDS=N`` runs N more seeds (their kills land at other chunks);
``GATEWAY_GROW_SEED=S`` replays seed S in the main test.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest

from tests.harness.cluster import wait_until
from tests.harness.clusters import MultiCluster, Topology, channel_name, env_int
from tests.harness.scenario import (
    failure_report,
    heal_and_check,
    leader_image,
    start_workloads,
    tables_of,
)
from tests.harness.workloads import check_each_origin_once
from tests.replication.test_fault_schedule import RULES

WORKLOADS = ("hot", "bank", "append", "inserts")
_CHUNKS = re.compile(r"seed (\d+) at source epoch (\d+): (\d+) chunk\(s\) installed")
_DONE = re.compile(r"seed (\d+) installed at source epoch (\d+)")
PAIR = Topology("pair", (1, 3), {1: "PRIMARY", 2: "SECONDARY"}, RULES)
RING = Topology("ring", (1, 3, 3), {1: "PRIMARY", 2: "SECONDARY", 3: "SECONDARY"}, RULES)


def _seed_status(mc: MultiCluster) -> tuple[int, int] | None:
    """(seed epoch, chunks installed) of cluster 3's seed, while it runs."""
    st = mc.status(3)
    for ch in st.channels if st is not None else ():
        m = _CHUNKS.search(ch.seed)
        if m:
            return int(m.group(2)), int(m.group(3))
    return None


def _wait_chunks(mc: MultiCluster, at_least: int) -> int:
    def probe() -> int | None:  # a killed node may be down: no check_running here
        got = _seed_status(mc)
        return got[1] if got is not None and got[1] >= at_least else None
    return wait_until(f"cluster 3's seed installing {at_least} chunks", probe, 120, 0.05,
                      mc.describe)


def _kill_leader(mc: MultiCluster, cid: int, log: list[str]) -> int:
    """Kill -9 cluster ``cid``'s leader and wait for the next one; returns the killed node
    (not started again: a node's start takes longer than the rest of the seed)."""
    cl = mc.clusters[cid]
    lead = mc.leader(cid)
    cl.kill(lead)
    got = _seed_status(mc)
    log.append(f"killed -9 cluster {cid}'s leader {lead} at seed chunk "
               f"{got[1] if got else '?'}")
    mc.leader(cid)
    return lead


def _respawn(mc: MultiCluster, cid: int, i: int) -> None:
    cl = mc.clusters[cid]
    cl.spawn(i)
    cl.wait_api(i, 90)


def _seed_epoch(mc: MultiCluster) -> int:
    """The source epoch of cluster 3's seed once it ended (its nodes' logs say it)."""
    def probe() -> int | None:
        mc.check_running()
        cl = mc.clusters[3]
        for i in cl.nodes:
            m = _DONE.search(cl.log_text(i))
            if m:
                return int(m.group(2))
        return None
    return wait_until("cluster 3's seed ending", probe, 180, 0.2, mc.describe)


def _applied_epoch(mc: MultiCluster, replica: int, source: int) -> int:
    st = mc.status(replica)
    for ch in st.channels if st is not None else ():
        if ch.name == channel_name(source):
            return int(ch.applied_epoch)
    return 0


def grow(root: Path, seed: int) -> list[str]:
    """Run the scenario of the module docstring; returns its log."""
    rng = random.Random(seed)
    log: list[str] = [f"seed {seed}"]
    mc = MultiCluster(root, PAIR, seed=seed, env={"GATEWAY_SEED_CHUNK_ROWS": "4"})
    workloads = []
    t0 = time.monotonic()
    try:
        mc.start()
        workloads = start_workloads(mc, WORKLOADS, seed, log)
        t_writes = time.monotonic()
        time.sleep(2.0)
        mc.add_cluster(3, 3, "SECONDARY")
        log.append(f"cluster 3 up; {mc.add_channel(3, 2, seed=True)}")
        _wait_chunks(mc, rng.randint(30, 150))
        killed3 = _kill_leader(mc, 3, log)
        got = _seed_status(mc)
        _wait_chunks(mc, (got[1] if got else 0) + rng.randint(30, 150))
        killed2 = _kill_leader(mc, 2, log)
        _respawn(mc, 3, killed3)
        _respawn(mc, 2, killed2)
        epoch = _seed_epoch(mc)
        log.append(f"seed ended at cluster 2's epoch {epoch}")
        wait_until(f"cluster 1 holding cluster 2's epoch {epoch}",
                   lambda: _applied_epoch(mc, 1, 2) >= epoch, 120, 0.2, mc.describe)
        mc.remove_channel(1, 2)
        mc.admin(2, "channel_action", f"1/{channel_name(2)}", "drop-slot")
        log.append(f"cluster 1 reads from 3: {mc.add_channel(1, 3)}")
        mc.set_topology(RING)
        for w in workloads:
            w.add_clients(3)
        time.sleep(5.0)
        acked = sum(len(w.out.acked) for w in workloads)
        log.append(f"{acked} writes acknowledged in {time.monotonic() - t_writes:.0f} s "
                   f"of writes ({acked / (time.monotonic() - t_writes):.0f} tx/s)")
        heal_and_check(mc, workloads, log)
        image = leader_image(mc, 1, tables_of(workloads))
        via3 = sum(1 for t, rows in image.items() if t.endswith("$EX")
                   for k in rows if k[:2] == (1, 3))
        assert via3, "the PRIMARY recorded no conflict of a change read from cluster 3"
        log.append(f"cluster 1 recorded {via3} exception rows of changes read from 3")
        for cid in RING.cids:
            log.append(f"cluster {cid}: {check_each_origin_once(mc, cid)} origin transactions,"
                       f" each once")
        log.append(f"done in {time.monotonic() - t0:.0f} s")
        return log
    except Exception as e:
        raise AssertionError(failure_report(
            e, f"GATEWAY_GROW_SEED={seed} python3 -m pytest "
               f"tests/replication/test_grow_ring_processes.py", "(kills at random chunks)",
            log, mc, workloads)) from None
    finally:
        mc.close()


@pytest.mark.slow
def test_a_pair_under_writes_grows_into_a_ring_of_three_through_seed_kills(tmp_path):
    print("\n".join(grow(tmp_path, env_int("GATEWAY_GROW_SEED", 0))))


def _more_seeds() -> list[int]:
    return list(range(1, 1 + env_int("GATEWAY_GROW_SEEDS", 0)))


@pytest.mark.slow
@pytest.mark.parametrize("seed", _more_seeds() or [pytest.param(
    -1, marks=pytest.mark.skip(reason="set GATEWAY_GROW_SEEDS=N to run N more seeds"))])
def test_soak(seed: int, tmp_path: Path) -> None:
    print("\n".join(grow(tmp_path, seed)))
