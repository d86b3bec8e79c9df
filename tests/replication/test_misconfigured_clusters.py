"""Misconfiguration cells of the multi-cluster harness: two single-node clusters as real
processes (the SQLite applier on both) set up the way an operator or an application gets it
wrong -- writes into an exceptions table, two PRIMARY clusters, two SECONDARY clusters, a
rule set before its table exists -- and a role flip done right. Each says what the product
must do instead of diverging silently (issue 52 items 8-10 and 12: before their fixes the
first four failed -- the write into ``$EX`` was accepted and the conflict's exception row was
lost, two PRIMARY and two SECONDARY clusters raised no error or warning, a VARCHAR ``ts`` was
judged by ``NDB$MAX(ts)`` as a string)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from google.protobuf import text_format

from gateway.client import GatewayError, row_insert, row_update
from tests.harness.cluster import ClusterError, wait_until
from tests.harness.clusters import MultiCluster, Topology, channel_name
from tests.harness.faults import Fault, Runner
from tests.harness.fingerprints import counted_exceptions, exception_count, store_image
from tests.harness.scenario import (
    converge,
    failure_report,
    heal_and_check,
    start_workloads,
    tables_of,
)

EPOCH_RULE = (("shop.*", "NDB$EPOCH"),)


@contextmanager
def started(tmp_path: Path, topology: Topology, what: str) -> Iterator[MultiCluster]:
    """The clusters of ``topology``, started; a failure inside is reported with every
    cluster's state and log tails."""
    mc = MultiCluster(tmp_path, topology)
    try:
        mc.start()
        yield mc
    except Exception as e:
        raise AssertionError(failure_report(e, what, "  (no schedule)", [], mc, [])) from None
    finally:
        mc.close()


def seed_items(mc: MultiCluster, rows: int = 3) -> None:
    """``shop.items`` rows ``0..rows-1`` written on cluster 1, held by every cluster."""
    with mc.client(1) as c:
        c.write([row_insert("shop.items", {"id": k}, {"v": "base"}) for k in range(rows)])
    for cid in mc.topology.cids:
        api = mc.apis(cid)[0]
        wait_until(f"cluster {cid} holding the seeded rows",
                   lambda a=api: len(store_image(a, ["shop.items"])["shop.items"]) == rows,
                   90, 0.2, mc.describe)


def concurrent_updates(mc: MultiCluster, table: str, key: dict, values: dict[int, dict]) -> None:
    """Every channel paused, cluster ``c`` writes ``values[c]`` to the row ``key``, every
    channel resumed: each cluster changed the row before seeing the others' change."""
    for replica, source in mc.topology.edges():
        mc.admin(replica, "channel_action", channel_name(source), "pause")

    def paused() -> bool:
        for cid in mc.topology.cids:
            st = mc.status(cid)
            if st is None or any(ch.state != "paused" for ch in st.channels):
                return False
        return True

    wait_until("every channel paused", paused, 60, 0.1, mc.describe)
    for cid, vals in sorted(values.items()):
        with mc.client(cid) as c:
            c.write([row_update(table, key, vals)])
    for replica, source in mc.topology.edges():
        mc.admin(replica, "channel_action", channel_name(source), "resume")


def channel_errors(mc: MultiCluster) -> list[str]:
    out = []
    for cid in mc.topology.cids:
        st = mc.status(cid)
        if st is not None:
            out += [f"cluster {cid} {ch.name}: {ch.last_error}" for ch in st.channels
                    if ch.last_error]
    return out


def wait_for_status(mc: MultiCluster, what: str, found: Callable[[], bool]) -> None:
    wait_until(what, found, 30, 0.5, mc.describe)


def test_a_write_into_an_exceptions_table_is_refused_and_conflicts_still_realign(
        tmp_path: Path) -> None:
    topo = Topology("pair", (1, 1), {1: "PRIMARY", 2: "SECONDARY"}, EPOCH_RULE)
    with started(tmp_path, topo, "test_misconfigured_clusters.py -k exceptions_table") as mc:
        seed_items(mc)
        refusal: GatewayError | None = None
        with mc.client(1) as c:
            try:
                c.write([row_insert("shop.items$EX", {"id": 1}, {"note": "handled"})])
            except GatewayError as e:
                refusal = e
        concurrent_updates(mc, "shop.items", {"id": 1}, {1: {"v": "A1"}, 2: {"v": "B1"}})
        images = converge(mc, ["shop.items", "shop.items$EX"], timeout=90)
        for cid, image in images.items():
            assert image["shop.items"][(1,)].value("v") == "A1", (
                f"cluster {cid} holds {image['shop.items'][(1,)]} for row 1: not realigned "
                "on the primary's value")
            st = mc.status(cid)
            assert st is not None
            counted, recorded = counted_exceptions(st), exception_count(image, cid)
            assert counted == recorded, (
                f"cluster {cid}: its conflict counters count {counted} rejected rows, its "
                f"exceptions table holds {recorded} rows it recorded")
        assert exception_count(images[1], 1) == 1, "the conflict was not recorded"
        assert refusal is not None, "a client's write into shop.items$EX was accepted"
        assert refusal.code.name == "INVALID_ARGUMENT", refusal


def test_two_primary_clusters_stop_with_a_reason_naming_the_role(tmp_path: Path) -> None:
    topo = Topology("pair", (1, 1), {1: "PRIMARY", 2: "PRIMARY"}, EPOCH_RULE)
    with started(tmp_path, topo, "test_misconfigured_clusters.py -k two_primary") as mc:
        # both write the same new row: a conflict on each side (a refusal may come sooner,
        # at the first epoch a PRIMARY receives from the other)
        for cid in (1, 2):
            with mc.client(cid) as c:
                c.write([row_insert("shop.items", {"id": 1}, {"v": f"c{cid}"})])
        wait_for_status(mc, "a channel error saying another cluster is PRIMARY too",
                        lambda: any("PRIMARY" in e for e in channel_errors(mc)))


def _status_text(mc: MultiCluster, cid: int) -> str:
    """Cluster ``cid``'s Status as text, without its own role and rules (which name roles
    anyway)."""
    st = mc.status(cid)
    if st is None:
        return ""
    st.ClearField("conflict_role")
    st.ClearField("conflict_rules")
    return text_format.MessageToString(st)


def test_two_secondary_clusters_are_warned_that_no_peer_is_primary(tmp_path: Path) -> None:
    topo = Topology("pair", (1, 1), {1: "SECONDARY", 2: "SECONDARY"}, EPOCH_RULE)
    with started(tmp_path, topo, "test_misconfigured_clusters.py -k two_secondary") as mc:
        seed_items(mc)
        concurrent_updates(mc, "shop.items", {"id": 1}, {1: {"v": "A1"}, 2: {"v": "B1"}})
        wait_for_status(mc, "a status warning that no peer cluster is PRIMARY",
                        lambda: any("PRIMARY" in _status_text(mc, c) for c in (1, 2)))


def _names_ts(text: str) -> bool:
    """``text`` names the column ``ts`` (as a word: not "exists" or "counts")."""
    return re.search(r"\bts\b", text) is not None


def test_a_rule_set_before_its_table_is_checked_when_the_table_appears(tmp_path: Path) -> None:
    topo = Topology("pair", (1, 1), {}, (("late.*", "NDB$MAX(ts)"),))
    with started(tmp_path, topo, "test_misconfigured_clusters.py -k before_its_table") as mc:
        with mc.client(1) as c:
            try:
                c.write([row_insert("late.items", {"id": 1}, {"v": "a", "ts": "9"})])
            except GatewayError as e:  # refused where the table first appears: the way out
                assert e.code.name == "INVALID_ARGUMENT" and _names_ts(e.details), e
                return
        wait_until("cluster 2 holding late.items, or a channel refusing it naming ts",
                   lambda: len(store_image(mc.apis(2)[0], ["late.items"])["late.items"]) == 1
                   or any(_names_ts(e) for e in channel_errors(mc)), 60, 0.2, mc.describe)
        if any(_names_ts(e) for e in channel_errors(mc)):
            return  # refused where the replica first meets the table: the way out
        concurrent_updates(mc, "late.items", {"id": 1},
                           {1: {"v": "A", "ts": "10"}, 2: {"v": "B", "ts": "9"}})
        try:
            wait_for_status(mc, "a channel refusing NDB$MAX(ts) on a VARCHAR ts, naming it",
                            lambda: any(_names_ts(e) for e in channel_errors(mc)))
        except ClusterError:
            held = {cid: store_image(mc.apis(cid)[0], ["late.items"])["late.items"]
                    for cid in (1, 2)}
            raise AssertionError(f"NDB$MAX(ts) judged VARCHAR ts values (as strings) with no "
                                 f"error: {held}") from None


def test_a_role_flip_between_quiet_clusters_keeps_every_check(tmp_path: Path) -> None:
    """The PRIMARY hands the role over (workloads held, the clusters equal, the old primary
    steps down first), the workloads go on under faults, and every check of the harness holds
    with the new primary (the bank's total after every epoch since the flip)."""
    rules = (("fault.*", "NDB$EPOCH2"), ("fault.bank", "NDB$EPOCH2_TRANS"))
    topo = Topology("pair", (1, 1), {1: "PRIMARY", 2: "SECONDARY"}, rules, roles_by_api=True)
    log: list[str] = ["role flip cell"]
    schedule = [Fault("partition", 2, 1.5, 1.0, 0.0), Fault("pause-channel", 1, 1.5, 1.0, 0.0),
                Fault("sigstop", 2, 1.5, 1.0, 0.0)]
    mc = MultiCluster(tmp_path, topo, seed=7)
    workloads = []
    try:
        mc.start()
        workloads = start_workloads(mc, ("hot", "bank", "append"), 7, log)
        time.sleep(3.0)
        for w in workloads:
            w.hold()
        converge(mc, tables_of(workloads))
        log.append("quiet and equal: flipping the roles")
        mc.flip_roles(2)
        for cid, role in ((1, "SECONDARY"), (2, "PRIMARY")):
            st = mc.status(cid)
            assert st is not None and st.conflict_role == role, (cid, st and st.conflict_role)
        for w in workloads:
            w.release()
        time.sleep(2.0)
        Runner(mc, log, workloads).run(schedule)
        heal_and_check(mc, workloads, log)
    except Exception as e:
        raise AssertionError(failure_report(
            e, "python3 -m pytest tests/replication/test_misconfigured_clusters.py -k role_flip",
            "\n".join(f"  {f}" for f in schedule), log, mc, workloads)) from None
    finally:
        mc.close()
