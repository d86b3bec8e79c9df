"""Conflict functions from plugins in the node: a rule naming one is checked against the
loaded plugins (configuration file and admin API), judges replicated rows like a built-in, and
a node that lacks the function stops instead of applying the epoch differently."""

from __future__ import annotations

import asyncio
import dataclasses
import types

import pluggy
import pytest

from gateway import hookspecs
from gateway.client import GatewayClient, GatewayError
from gateway.conflict import ConflictRule, with_plugins
from gateway.core import messages
from gateway.node.server import GatewayNode, NodeStartError
from gateway.node.state.state_machine import ConflictFunctionMissingError, StoreStateMachine
from gateway.raft import Entry, EntryType
from gateway.replication import ReplicationState, build_unit
from gateway.replication.epochs import SealedEpoch
from gateway.v1 import gtid_pb2, replication_pb2, transaction_pb2
from tests.conflict.test_plugin_functions import first_wins
from tests.node.test_conflict_screen import _stmt

from .conftest import leader_of, node_configs, run, running, wait_for


def _pm(functions: dict) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    mod = types.ModuleType("conflict_plugin_under_test")
    mod.gateway_register_conflict_functions = hookspecs.hookimpl(  # type: ignore[attr-defined]
        lambda: functions)
    pm.register(mod, name="mine")
    return pm


def _entries() -> list[Entry]:
    """Two epochs of cluster 2 inserting row 1 of s.t, then again with another value."""
    view = ReplicationState(1)
    out = []
    for n, value in ((1, 10), (2, 20)):
        txn = transaction_pb2.Transaction(
            gtid=gtid_pb2.Gtid(server_id=2, trans_id=n), epoch=(1 << 32) | n, author=2,
            commit_timestamp_ns=1000 + n, segment_id=1, end_segment=True,
            statements=[_stmt("insert", "t", [1], value)])
        sealed = SealedEpoch((1 << 32) | n, [replication_pb2.ReplicatedItem(transaction=txn)],
                             last_log_index=n)
        for part in build_unit(view, "c", 2, sealed, (3 << 32) | n):
            part.derived_trans_id, part.derived_commit_ts = 100 + n, 5000 + n
            out.append(Entry(term=1, index=len(out) + 2, type=EntryType.NORMAL,
                             data=messages.pack(part)))
    return out


def test_a_plugin_function_judges_replicated_rows_and_records_what_it_rejects(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    loads = []
    sm.load_functions = lambda: loads.append(1) or with_plugins({"MY$FIRST_WINS": first_wins})
    sm.conflict_rules = {"s.t": ConflictRule("s.t", "MY$FIRST_WINS")}
    outcomes = sm.apply(_entries())
    assert [o.error for o in outcomes] == [None, None] and loads == [1]
    row = sm.get_row("s", "t", [_stmt("insert", "t", [1], 0).insert.records[0].key_values[0]])
    assert row.values[0].int_value == 10  # the first insert won
    ex = list(sm.scan_rows("s", "t$EX", [], []))
    assert len(ex) == 1 and sm.conflict_counters["c"]["conflict_fn_other"] == 1
    sm.close()


def test_a_node_without_the_function_stops_instead_of_judging_differently(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    sm.conflict_rules = {"s.t": ConflictRule("s.t", "MY$FIRST_WINS")}
    with pytest.raises(ConflictFunctionMissingError,
                       match=r"log index 2: a conflict rule names the function MY\$FIRST_WINS"):
        sm.apply(_entries())
    assert sm.applied_index == 0  # nothing of the batch applied
    sm.close()


def test_rules_naming_plugin_functions_are_checked_against_the_loaded_plugins(tmp_path):
    cfg = node_configs(tmp_path, 1, cluster_id=1)[0]
    bad = dataclasses.replace(cfg, conflicts=(ConflictRule("s.*", "MY$NOPE"),))

    async def refused():
        with pytest.raises(NodeStartError, match=r"conflicts\[0\]: table s\.\*: unknown "
                                                 r"conflict function 'MY\$NOPE'"):
            await GatewayNode(bad, _pm({"MY$FIRST_WINS": first_wins})).start()

    run(refused(), 30)
    good = dataclasses.replace(cfg, conflicts=(ConflictRule("s.*", "MY$FIRST_WINS"),))

    async def go():
        async with running(good, plugins=lambda: _pm({"MY$FIRST_WINS": first_wins})) as nodes:
            await leader_of(nodes)

            def admin():
                with GatewayClient(good.api, timeout=20) as c:
                    c.set_conflict_rule("crm.*", "MY$FIRST_WINS")
                    try:
                        c.set_conflict_rule("crm.*", "MY$NOPE")
                    except GatewayError as exc:
                        return exc.details
                return ""

            assert "unknown conflict function 'MY$NOPE'" in await asyncio.to_thread(admin)
            await wait_for(lambda: {r.table: r.function for r in nodes[0].status()
                                    .conflict_rules} == {"s.*": "MY$FIRST_WINS",
                                                         "crm.*": "MY$FIRST_WINS"},
                           10, "the file's rule and the admin's")

    run(go(), 60)
    broken = dataclasses.replace(cfg, data_dir=str(tmp_path / "other"),
                                 conflicts=(ConflictRule("s.*", "MY$FIRST_WINS"),))

    async def bad_registration():
        with pytest.raises(NodeStartError, match="a built-in function has that name"):
            await GatewayNode(broken, _pm({"NDB$EPOCH": first_wins,
                                           "MY$FIRST_WINS": first_wins})).start()

    run(bad_registration(), 30)


def test_outcomes_of_entries_the_log_compacted_are_forgotten(tmp_path):
    """What conflicts left of an entry (``unit_outcome``) is kept while the log may hold the
    entry, and deleted once its compaction passed it (the snapshot taker calls
    ``forget_outcomes`` after compacting)."""
    sm = StoreStateMachine(str(tmp_path / "sm"), cluster_id=1)
    sm.load_functions = lambda: with_plugins({"MY$FIRST_WINS": first_wins})
    sm.conflict_rules = {"s.t": ConflictRule("s.t", "MY$FIRST_WINS")}
    entries = _entries()
    sm.apply(entries)
    rejected = entries[1].index  # the second insert of row 1
    assert sm.unit_outcome(entries[0].index) is None  # applied as it came: nothing recorded
    assert sm.unit_outcome(rejected) is not None
    assert sm.forget_outcomes(rejected - 1) == 0
    assert sm.unit_outcome(rejected) is not None
    assert sm.forget_outcomes(rejected) == 1
    assert sm.unit_outcome(rejected) is None
    sm.close()
