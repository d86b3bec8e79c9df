"""Two 3-node clusters replicating to each other under NDB$EPOCH2_TRANS, as real processes:
rows changed in both at once, the primary's leader killed (SIGKILL) while it judges and
realigns them, restarted. Afterwards both clusters converge: every node of both holds the same
rows and the same exceptions, and the primary recorded conflicts.

The writes need the primary's refreshes to converge (a secondary that merely applied what
arrives would not): the secondary's transactions span rows the primary never writes (odd
ids), rejected whole with the rows in conflict, and it deletes rows the primary updates."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from gateway.client import GatewayClient, GatewayError, row_delete, row_insert, row_update
from tests.harness.cluster import ProcessCluster, wait_until

ROWS = 60


def _config(path: Path, role: str, channel: str, sources: list[str]) -> str:
    srcs = ", ".join(f'"{s}"' for s in sources)
    path.write_text(f'conflict_role = "{role}"\nepoch_ms = 100\n'
                    f'[[channels]]\nname = "{channel}"\nsources = [{srcs}]\n'
                    f'[[conflicts]]\ntable = "shop.*"\nfunction = "NDB$EPOCH2_TRANS"\n')
    return str(path)


def _rows(api: str, table: str = "shop.items") -> dict:
    with GatewayClient(api, timeout=10) as c:
        return {tuple(v.SerializeToString() for v in r.key_values):
                tuple(v.SerializeToString() for v in r.values)
                for r in c.scan_all(table, consistency="stale")}


_SHOWN = ("max_replicated_epoch", "last_conflict_epoch", "trans_reject_count",
          "refresh_op_count")


def _divergence(apis: list[str], status_of: list[str]) -> str:
    """What differs between the nodes ``apis`` (against the first): rows and exceptions by
    key, and each node's channel status -- for a failed convergence."""
    lines = []
    for table in ("shop.items", "shop.items$EX"):
        views = []
        for api in apis:
            try:
                views.append(_rows(api, table))
            except Exception as exc:  # a node down: say so, compare the others
                lines.append(f"{api} {table}: {exc}")
                views.append({})
        base = views[0]
        lines.append(f"{table}: {len(base)} rows at {apis[0]}")
        for api, v in zip(apis[1:], views[1:], strict=True):
            diff = sorted(k for k in base.keys() | v.keys() if base.get(k) != v.get(k))
            lines.append(f"  {api}: {len(v)} rows, {len(diff)} differ"
                         + "".join(f"\n    {k}: {base.get(k)} | {v.get(k)}" for k in diff[:8]))
    for api in status_of:
        try:
            with GatewayClient(api, timeout=5) as c:
                st = c.status()
            lines.append(f"{api}: " + "; ".join(
                f"{ch.name} {ch.state} applied_epoch={ch.applied_epoch} lag={ch.lag_epochs} "
                f"err={ch.last_error!r} " + " ".join(
                    f"{k}={ch.conflicts.get(k, 0)}" for k in _SHOWN) for ch in st.channels))
        except Exception as exc:
            lines.append(f"{api}: status: {exc}")
    return "\n".join(lines)


def _write_rounds(apis: list[str], tag: str, rounds: int, errors: list[str]) -> None:
    """``rounds`` rounds of transactions of 10 consecutive rows. The primary (``A``) updates
    the even rows; the secondary (``B``) updates all ten, and in its last round deletes the
    first of each ten instead. A write cut by the killed leader is retried once and otherwise
    left (its outcome does not matter here)."""
    with GatewayClient(apis, timeout=10) as c:
        for r in range(rounds):
            for lo in range(0, ROWS, 10):
                if tag == "A":
                    stmts = [row_update("shop.items", {"id": k}, {"v": f"A{r}"})
                             for k in range(lo, lo + 10, 2)]
                else:
                    last = r == rounds - 1
                    stmts = [row_delete("shop.items", {"id": k}) if last and k == lo else
                             row_update("shop.items", {"id": k}, {"v": f"B{r}"})
                             for k in range(lo, lo + 10)]
                for _ in range(2):
                    try:
                        c.write(stmts)
                        break
                    except GatewayError as exc:
                        errors.append(str(exc))
                        time.sleep(0.3)


def test_clusters_converge_after_the_primarys_leader_dies_mid_realignment(
    make_cluster: Callable[..., ProcessCluster], tmp_path: Path,
) -> None:
    a = make_cluster(3, start=False)
    b = make_cluster(3, start=False)
    a_apis = [n.api_address for n in a.nodes.values()]
    b_apis = [n.api_address for n in b.nodes.values()]
    a.node_args += ["--cluster-id", "1", "--appliers", "", "--config",
                    _config(tmp_path / "a.toml", "PRIMARY", "fromB", b_apis)]
    b.node_args += ["--cluster-id", "2", "--appliers", "", "--config",
                    _config(tmp_path / "b.toml", "SECONDARY", "fromA", a_apis)]
    a.start()
    b.start()
    with GatewayClient(a_apis, timeout=20) as c:
        c.write([row_insert("shop.items", {"id": k}, {"v": "seed"}) for k in range(ROWS)])
    wait_until("B holds the seeded rows", lambda: len(_rows(b_apis[0])) == ROWS, 30)

    errors: list[str] = []
    writers = [threading.Thread(target=_write_rounds, args=(a_apis, "A", 4, errors)),
               threading.Thread(target=_write_rounds, args=(b_apis, "B", 4, errors))]
    for w in writers:
        w.start()
    # the primary's leader dies once it has begun realigning (conflicts counted)
    lead = a.wait_for_leader()

    def judging() -> bool:
        with GatewayClient(a.nodes[lead].api_address, timeout=5) as c:
            st = c.status()
        return any(ch.conflicts.get("last_conflict_epoch") for ch in st.channels)

    wait_until("A finds conflicts", judging, 30)
    a.kill(lead)
    for w in writers:
        w.join(60)
    a.wait_for_new_leader(lead, among=[i for i in a.nodes if i != lead])
    a.restart(lead)

    every = a_apis + b_apis

    def converged() -> bool:
        views = [_rows(api) for api in every]
        ex = [_rows(api, "shop.items$EX") for api in every]
        return (all(v == views[0] for v in views) and len(views[0]) > 0
                and all(e == ex[0] for e in ex) and len(ex[0]) > 0)

    def divergence() -> str:
        return _divergence(every, a_apis + b_apis)

    wait_until("both clusters, every node, hold the same rows and exceptions", converged, 90,
               describe=divergence)
    with GatewayClient(a_apis, timeout=10) as c:
        counters = dict(c.status().channels[0].conflicts)
    assert counters["conflict_fn_epoch2_trans"] > 0 and counters["refresh_op_count"] > 0
    assert counters["trans_reject_count"] > 0
    assert counters["last_conflict_epoch"] > 0
