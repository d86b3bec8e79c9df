"""Clusters replicating to each other as real processes in the default configuration (the
SQLite applier on every node), under a fault schedule drawn from a seed, with the bank,
list-append and hot-key workloads writing on every cluster all along; after heal every
cluster, node and sink agrees and every node restarts (tests/harness/scenario.py,
docs/testing.md "The fault harness across clusters").

- ``test_a_seeded_fault_schedule_leaves_every_cluster_equal_and_restartable``: a few fixed
  seeds on small topologies (part of the normal run). Every one kills the PRIMARY right after
  it realigned a conflict; before issue 52 item 1 was fixed each failed there (the restarted
  node refused to start: "applier 'sqlite' applied transaction 1:N but the Raft log ... ends
  at transaction 1:N-1").
- ``test_soak``: ``GATEWAY_SOAK_SEEDS=N`` more seeds (``GATEWAY_SOAK_STEPS`` faults each,
  default 10) over every topology; skipped unless set.
- ``test_replay``: ``GATEWAY_FAULT_SEED=S`` (and ``GATEWAY_FAULT_STEPS``) runs the cell a
  failure printed; skipped unless set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness.clusters import Topology, env_int
from tests.harness.scenario import Cell, run_cell

#: hot rows and lists judged row by row; the bank's transfers whole (_TRANS)
RULES = (("fault.*", "NDB$EPOCH2"), ("fault.bank", "NDB$EPOCH2_TRANS"))


def _topology(kind: str, sizes: tuple[int, ...]) -> Topology:
    roles = {c: "PRIMARY" if c == 1 else "SECONDARY" for c in range(1, len(sizes) + 1)}
    return Topology(kind, sizes, roles, RULES)


#: A seed's topology is ``TOPOLOGIES[seed % len(TOPOLOGIES)]``: the first three are the small
#: ones the normal run covers.
TOPOLOGIES = (
    _topology("pair", (1, 1)),
    _topology("ring", (1, 1, 1)),
    _topology("pair", (3, 1)),
    _topology("pair", (1, 3)),
    _topology("pair", (3, 3)),
    _topology("ring", (3, 1, 1)),
)
WORKLOADS = ("hot", "bank", "append")
CI_SEEDS = (0, 1, 2)
CI_STEPS = 6
SOAK_FIRST = 1000


def cell_for_seed(seed: int, steps: int) -> Cell:
    """The cell a seed names: everything about it follows from the seed and the step count."""
    return Cell(seed, TOPOLOGIES[seed % len(TOPOLOGIES)], WORKLOADS, steps)


#: A ring of a 3-node PRIMARY and two single nodes (1 -> 2 -> 3 -> 1) loses acknowledged
#: appends of cluster 3 with no exception row, in most runs of this seed with 16 faults (1001
#: and 1007 too): cluster 3 appends (accepted by the PRIMARY), applies cluster 2's concurrent
#: change of the list over it, appends again on top; the PRIMARY rejects 2's change but
#: accepts 3's second one (the row was last written by cluster 3 itself), whose list holds 2's
#: rejected element and lacks 3's first one. Not an item of issue 52 yet: the lead decides.
_RING_MISS = pytest.mark.xfail(strict=False, reason="found by this harness: in a ring the "
                               "PRIMARY accepts a secondary's change built on another "
                               "secondary's change it rejected in the same epoch")


@pytest.mark.slow
@pytest.mark.parametrize("seed,steps", [*((s, CI_STEPS) for s in CI_SEEDS),
                                        pytest.param(1013, 16, marks=_RING_MISS)])
def test_a_seeded_fault_schedule_leaves_every_cluster_equal_and_restartable(
        seed: int, steps: int, tmp_path: Path) -> None:
    run_cell(tmp_path, cell_for_seed(seed, steps))


def _soak_seeds() -> list[int]:
    n = env_int("GATEWAY_SOAK_SEEDS", 0)
    return list(range(SOAK_FIRST, SOAK_FIRST + n))


@pytest.mark.slow
@pytest.mark.parametrize("seed", _soak_seeds() or [pytest.param(
    -1, marks=pytest.mark.skip(reason="set GATEWAY_SOAK_SEEDS=N to run N more seeds"))])
def test_soak(seed: int, tmp_path: Path) -> None:
    run_cell(tmp_path, cell_for_seed(seed, env_int("GATEWAY_SOAK_STEPS", 10)))


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("GATEWAY_FAULT_SEED", "").strip(),
                    reason="set GATEWAY_FAULT_SEED=S (and GATEWAY_FAULT_STEPS) to replay a cell")
def test_replay(tmp_path: Path) -> None:
    seed = env_int("GATEWAY_FAULT_SEED", 0)
    default_steps = CI_STEPS if seed in CI_SEEDS else 10
    run_cell(tmp_path, cell_for_seed(seed, env_int("GATEWAY_FAULT_STEPS", default_steps)))
