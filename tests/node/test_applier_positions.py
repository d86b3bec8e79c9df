"""Applier scopes and replicated applier positions without a cluster: where the scope comes
from (factory, default, configuration), how every replica records a position entry, and that
readers of the log other than the state machine pass over it."""

from __future__ import annotations

import itertools
import types

import pytest

from gateway.appliers.contract import ApplierConfigError, ApplierFactory, scope_of
from gateway.appliers.sqlite import SQLITE_FACTORY
from gateway.cli import logtool
from gateway.core import messages
from gateway.node.base.config import ConfigError, load_config
from gateway.node.state import keys
from gateway.node.state.state_machine import StoreStateMachine
from gateway.node.state.wire import decode_entry, encode_transaction
from gateway.raft import Entry, EntryType
from gateway.v1 import applier_pb2, gtid_pb2, statement_pb2, transaction_pb2, value_pb2

# -- scope ------------------------------------------------------------------------------------


def _factory(**kw: object) -> ApplierFactory:
    return ApplierFactory("kv", lambda options: None, **kw)  # type: ignore[arg-type,return-value]


def test_the_sqlite_applier_is_node_scoped():
    assert scope_of(SQLITE_FACTORY) == "node"


def test_a_factory_that_declares_no_scope_is_cluster_scoped():
    assert scope_of(_factory()) == "cluster"
    legacy = types.SimpleNamespace(name="old", create=lambda o: None)  # no attribute at all
    assert scope_of(legacy) == "cluster"


def test_the_configured_scope_overrides_the_factory():
    assert scope_of(SQLITE_FACTORY, "cluster") == "cluster"
    assert scope_of(_factory(scope="cluster"), "node") == "node"


def test_a_factory_with_an_unknown_scope_is_refused():
    with pytest.raises(ValueError, match="scope must be one of node, cluster"):
        _factory(scope="everywhere")
    with pytest.raises(ApplierConfigError, match="'old': scope"):
        scope_of(types.SimpleNamespace(name="old", scope="global"))


def test_config_scope_key_is_the_nodes_and_not_an_applier_option(tmp_path):
    path = tmp_path / "node.toml"
    path.write_text('[appliers.rabbit]\nscope = "node"\nurl = "amqp://x"\n'
                    '[appliers.sqlite]\npath = "x.db"\n')
    cfg = load_config(str(path), env={})
    assert cfg.applier_settings("rabbit") == ("node", {"url": "amqp://x"})
    assert cfg.applier_settings("sqlite") == (None, {"path": "x.db"})


def test_config_with_an_invalid_scope_names_the_key(tmp_path):
    path = tmp_path / "node.toml"
    path.write_text('[appliers.rabbit]\nscope = "leader"\n')
    with pytest.raises(ConfigError) as err:
        load_config(str(path), env={})
    assert str(err.value).startswith("appliers.rabbit.scope: must be one of node or cluster")
    assert "'leader'" in str(err.value)


# -- the state machine ------------------------------------------------------------------------


def _position(index: int, applier: str, log_index: int, last_trans: int) -> Entry:
    msg = applier_pb2.ApplierPosition(applier=applier, log_index=log_index,
                                      saved_at_ns=1_700_000_000 * 10**9 + index)
    if last_trans:
        msg.applied.add(server_id=1).ranges.add(first=1, last=last_trans)
    return Entry(term=1, index=index, type=EntryType.NORMAL, data=messages.pack(msg))


def _txn(index: int) -> Entry:
    stmt = statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name="t"),
        key_fields=[statement_pb2.FieldMetadata(name="id", type=value_pb2.FIELD_TYPE_INTEGER)],
        records=[statement_pb2.InsertRecord(key_values=[value_pb2.Value(int_value=index)])]))
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=index), epoch=1 << 32 | 1, author=1,
        commit_timestamp_ns=1_700_000_000 * 10**9 + index, segment_id=1, end_segment=True,
        statements=[stmt])
    return Entry(term=1, index=index, type=EntryType.NORMAL, data=encode_transaction(txn))


def _log() -> list[Entry]:
    return [_txn(2), _txn(3), _position(4, "rabbit", 3, 2), _txn(5),
            _position(6, "cassandra", 5, 3), _position(7, "rabbit", 2, 1),  # stale: ignored
            Entry(term=1, index=8, type=EntryType.NORMAL,
                  data=bytes((messages.TypeTag.APPLIER_POSITION,)) + b"\xff\xff"),  # garbage
            _position(9, "", 9, 0),  # names no applier
            _txn(10), _position(11, "rabbit", 10, 4)]


def test_a_position_entry_is_recorded_by_applier_and_never_moves_back(tmp_path):
    sm = StoreStateMachine(str(tmp_path / "a"))
    log = _log()
    outcomes = sm.apply(log[:7])
    assert [o.index for o in outcomes] == [2, 3, 5]  # positions are no transactions
    assert sm.applier_positions["rabbit"].log_index == 3  # not the stale 2
    assert sm.applier_positions["cassandra"].log_index == 5
    sm.apply(log[7:])
    assert sm.applier_positions["rabbit"].log_index == 10
    assert set(sm.applier_positions) == {"rabbit", "cassandra"}
    assert sm.applied_index == 11
    raw = sm.store.get(keys.applier_position_key("rabbit"))
    assert raw == log[-1].data[1:]  # the entry's own bytes
    sm.close()
    again = StoreStateMachine(str(tmp_path / "a"))  # read back from the store
    assert again.applier_positions["rabbit"] == applier_pb2.ApplierPosition.FromString(raw)
    again.close()


def test_position_entries_apply_to_the_same_bytes_in_any_batching(tmp_path):
    log = _log()
    stores = []
    for n, cuts in enumerate(([], [1, 4, 7], list(range(1, len(log))))):
        sm = StoreStateMachine(str(tmp_path / f"s{n}"))
        bounds = [0, *cuts, len(log)]
        for lo, hi in itertools.pairwise(bounds):
            sm.apply(log[lo:hi])
        stores.append(list(sm.store.scan_prefix(b"")))
        sm.close()
    assert stores[0] == stores[1] == stores[2]


# -- other readers of the log -----------------------------------------------------------------


def test_a_position_entry_is_no_transaction_for_feeds_and_the_leaders_scan():
    # The Subscribe feed and the leader's trans-id scan read entries through decode_entry (and
    # CommittedLogSource by the same type tag): a position is (None, "") there, like an epoch
    # marker.
    assert decode_entry(_position(4, "rabbit", 3, 2).data) == (None, "")


def test_log_tools_render_a_position_entry():
    msg = messages.unpack(_position(4, "rabbit", 3, 2).data)
    entry = logtool.LogEntry(0, messages.TypeTag.APPLIER_POSITION, msg)
    assert logtool.render_text(entry) == ["# Applier position: rabbit at log index 3"]
    assert logtool.render_json(entry)["type"] == "applier_position"
    assert logtool.transaction_gtid(entry) is None
