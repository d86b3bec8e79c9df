"""The checks every cluster test ends with, after the faults are healed and the clients stopped:

1. the client history (plus one final linearizable read of every hot key) is linearizable;
2. no acknowledged write is missing: every acknowledged write-once key is stored with its value
   on every replica, and the hot keys hold what the final reads returned;
3. replicas converge: every node's table (a stale ``Scan`` on each node) is equal, row values,
   GTIDs and log indexes included;
4. nothing is invented: every stored value and every stale read was written by some client.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import grpc

from gateway.raft.linearizability import GET
from tests.harness.api import LINEARIZABLE, StoredRow
from tests.harness.cluster import ProcessCluster, wait_until
from tests.harness.workload import FAIL, OK, History, Workload


@dataclass
class Verdict:
    """What the verification found, for the test's own extra assertions and reports."""

    leader: int
    state: dict[str, StoredRow]
    acknowledged: int
    unknown: int
    counts: dict[str, int]


def final_reads(cluster: ProcessCluster, history: History, keys: Iterable[str], node: int) -> None:
    """Read every key linearizably through ``node`` and append the reads to the history as
    client -1 (all other clients have stopped, so these are the last operations)."""
    api = cluster.api(node)
    for key in keys:
        for attempt in range(20):
            ev = history.invoke(-1, GET, key, node, consistency="linearizable")
            try:
                out = api.get(key, LINEARIZABLE, timeout=3.0)
            except grpc.RpcError as e:
                history.complete(ev, FAIL, error=f"{e.code().name}: {e.details()}")
                if attempt == 19:
                    raise AssertionError(
                        f"final linearizable read of {key} on node {node} kept failing: "
                        f"{e.code().name}: {e.details()}\n{cluster.describe()}"
                    ) from None
                time.sleep(0.2)
                continue
            history.complete(ev, OK, output=out)
            break


def converged_state(
    cluster: ProcessCluster, nodes: list[int], timeout: float = 30.0
) -> dict[str, StoredRow]:
    """Wait until a stale scan of the test table is equal on every node in ``nodes``; return
    it. Fails with the first differing keys."""
    last: dict[int, dict[str, StoredRow]] = {}

    def probe() -> dict[str, StoredRow] | None:
        for i in nodes:
            last[i] = cluster.api(i).scan(timeout=10.0)
        first = last[nodes[0]]
        return first if all(last[i] == first for i in nodes[1:]) else None

    def describe() -> str:
        if not last:
            return cluster.describe()
        keys = sorted(set().union(*(set(s) for s in last.values())))
        diff = [k for k in keys if len({repr(s.get(k)) for s in last.values()}) > 1]
        lines = [f"{len(diff)} differing keys, first ones:"]
        for k in diff[:5]:
            lines.append(f"  {k}: " + ", ".join(f"node{i}={s.get(k)}" for i, s in last.items()))
        return "\n".join(lines) + "\n" + cluster.describe()

    return wait_until(f"equal stores on nodes {nodes}", probe, timeout, 0.2, describe)


def verify(
    cluster: ProcessCluster,
    workload: Workload,
    *,
    nodes: list[int] | None = None,
    min_acknowledged: int = 1,
    timeout: float = 30.0,
) -> Verdict:
    """Run every check on ``nodes`` (default: the live ones) after ``workload`` was stopped.
    Raises AssertionError with the evidence on the first failure."""
    history = workload.history
    members = nodes if nodes is not None else cluster.live()
    leader = cluster.wait_for_leader(members, timeout)
    hot = [workload.hot_key(i) for i in range(workload.config.hot_keys)]
    final_reads(cluster, history, hot, leader)

    result = history.check()
    if result.ok is not True:
        stuck = "\n".join("  " + o.describe() for o in result.stuck)
        raise AssertionError(
            f"history is not linearizable (ok={result.ok}) on key {result.key}: {result.detail}"
            f"\n{stuck}\ncounts: {history.counts()}\n" + _key_history(history, result.key)
        )

    cluster.wait_caught_up(members, timeout)
    state = converged_state(cluster, members, timeout)

    acked = history.acknowledged_puts()
    assert len(acked) >= min_acknowledged, (
        f"only {len(acked)} acknowledged puts (expected >= {min_acknowledged}): "
        f"{history.counts()}"
    )
    missing = [
        e for e in acked if not e.key.startswith("h") and (
            e.key not in state or state[e.key].value != e.value
        )
    ]
    assert not missing, (
        f"{len(missing)} acknowledged writes are missing from the converged store, e.g. "
        + "; ".join(f"{e.describe()} -> stored {state.get(e.key)}" for e in missing[:5])
    )
    finals = {e.key: e.output for e in history.events if e.client == -1 and e.outcome == OK}
    for key, value in finals.items():
        stored = state[key].value if key in state else None
        assert stored == value, f"{key}: final linearizable read {value!r}, stored {stored!r}"

    written = history.written_values()
    phantoms = [(k, r.value) for k, r in state.items() if r.value not in written[k]]
    assert not phantoms, f"stored values nobody wrote: {phantoms[:5]}"
    stale_phantoms = [
        e.describe()
        for e in history.events
        if e.kind == GET and e.outcome == OK and e.output not in written[e.key]
    ]
    assert not stale_phantoms, f"reads of values nobody wrote: {stale_phantoms[:5]}"

    unknown = sum(1 for e in history.events if e.kind == "put" and e.outcome == "unknown")
    return Verdict(leader, state, len(acked), unknown, history.counts())


def _key_history(history: History, key: str | None, limit: int = 60) -> str:
    evs = [e for e in history.events if e.key == key]
    lines = [f"history of {key} ({len(evs)} events; call/ret on the event clock, t in s):"]
    for e in evs[-limit:]:
        lines.append(f"  [{e.call}, {e.ret}] t={e.t_call:.3f}..{e.t_ret} {e.describe()}")
    return "\n".join(lines)
