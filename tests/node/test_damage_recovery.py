"""Damage to every file of a node's data directory (issue 12, items 1 and 2).

A node is run once (SQLite applier, snapshots every 100 entries, one dead letter), stopped
cleanly, and its data directory copied per test. Each test damages one file and starts the
node through the start path `gateway run` uses (``GatewayNode.start``): the outcome is either
the documented recovery (docs/node.md, "Damage and recovery") or ``NodeStartError`` with one
line naming the file -- never another exception, never a silent start over lost entries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.appliers.position import ApplierPosition, PositionStore
from gateway.cli.sql import sql_to_statements
from gateway.client import AsyncGatewayClient
from gateway.core import records
from gateway.node import GatewayNode
from gateway.node.server import NodeStartError

from .conftest import leader_of, node_configs, run, running

WRITES = 300


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cleanly stopped node's data directory: snapshot + compacted WAL, two SSTables,
    SQLite database, applier position and one dead letter."""
    base = tmp_path_factory.mktemp("pristine")
    cfg = node_configs(base, 1, appliers={"sqlite": {}}, snapshot_entries=100)[0]

    async def body() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            async with AsyncGatewayClient(cfg.api) as c:
                for i in range(WRITES - 10):
                    await c.write(sql_to_statements(
                        f"INSERT INTO shop.items (id, name) VALUES ({i}, '{'y' * 50}')", []))
                # The shape the tests damage, whatever the run's timing: a snapshot with the
                # WAL compacted under it, then entries after it. The log is compacted when a
                # snapshot is taken, up to the appliers' saved positions (saved about once a
                # second): so let them be saved, then take the snapshot.
                for _ in range(500):
                    st = node.status()
                    if st.appliers and st.appliers[0].position >= st.applied_index:
                        break
                    await asyncio.sleep(0.02)
                await asyncio.sleep(1.5)
                await node.driver.snapshot_now()
                for _ in range(500):
                    if node.driver.storage.first_index() > 2:
                        break
                    await asyncio.sleep(0.02)
                else:
                    raise AssertionError("the WAL was not compacted under the snapshot")
                for i in range(WRITES - 10, WRITES):
                    await c.write(sql_to_statements(
                        f"INSERT INTO shop.items (id, name) VALUES ({i}, '{'y' * 50}')", []))
                # the same table name in a second schema: dead-lettered by the SQLite applier
                await c.write(sql_to_statements("INSERT INTO other.items (id) VALUES (1)", []))
            await wait_applied(node)

    run(body(), timeout=120)
    data = Path(cfg.data_dir)
    assert (data / "appliers" / "sqlite.deadletters").exists()
    assert list((data / "raft" / "snapshots").glob("*.snapdir/*.sst"))
    return data


async def wait_applied(node: GatewayNode) -> None:
    for _ in range(500):
        st = node.status()
        if st.appliers and st.appliers[0].position >= st.applied_index and \
                st.appliers[0].dead_letters:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the applier did not catch up")


@pytest.fixture()
def data_dir(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(pristine, target, ignore=shutil.ignore_patterns("LOCK"))
    return target


def start(data: Path) -> str:
    """Start a node on ``data`` and stop it; ``"started"`` or the ``NodeStartError`` text."""
    cfg = node_configs(data.parent, 1, appliers={"sqlite": {}})[0]
    cfg = dataclasses.replace(cfg, data_dir=str(data))

    async def body() -> str:
        node = GatewayNode(cfg)
        try:
            await node.start()
        except NodeStartError as exc:
            return str(exc)
        await node.stop()
        return "started"

    return run(body())


def refusal(data: Path) -> str:
    out = start(data)
    assert out != "started", "the node started over damaged state"
    assert "\n" not in out
    return out


# -- damage ----------------------------------------------------------------------------------

def zero(b: bytes) -> bytes:
    return b""


def half(b: bytes) -> bytes:
    return b[: len(b) // 2]


def garbage(b: bytes) -> bytes:
    return bytes((i * 151 + 7) % 251 for i in range(len(b)))


def flip(at: float) -> Callable[[bytes], bytes]:
    def damage(b: bytes) -> bytes:
        k = int(len(b) * at)
        return b[:k] + bytes(x ^ 0x5A for x in b[k : k + 8]) + b[k + 8 :]
    return damage


def damage_file(path: Path, how: Callable[[bytes], bytes]) -> None:
    path.write_bytes(how(path.read_bytes()))


def one(data: Path, pattern: str) -> Path:
    found = sorted(data.glob(pattern))
    assert found, pattern
    return found[-1]


# -- item 1: a log cut short under state that is ahead of it --------------------------------

def test_cut_wal_tail_refuses_start_because_the_store_is_ahead(data_dir, caplog):
    segment = one(data_dir, "raft/wal/*.wal")
    os.truncate(segment, segment.stat().st_size - 3000)
    with caplog.at_level(logging.WARNING):
        msg = refusal(data_dir)
    # the hard state's commit index and the store are both past the cut: either is named
    assert ("the store applied up to index" in msg or "was committed" in msg) and "are lost" in msg
    assert "rejoining the cluster" in msg
    # the cut the WAL's recovery made is logged with file and offset
    assert any("WAL recovery: torn-tail: " + str(segment) + ": byte " in r.getMessage()
               for r in caplog.records)
    assert refusal(data_dir) == msg  # the refusal does not go away on a second start


def test_wal_recovery_events_are_logged_with_file_and_offset(data_dir, caplog):
    segment = one(data_dir, "raft/wal/*.wal")
    with segment.open("ab") as f:
        f.write(b"\x01\x02torn append")
    with caplog.at_level(logging.WARNING):
        assert start(data_dir) == "started"
    assert any(f"torn-tail: {segment}: byte " in r.getMessage() for r in caplog.records)


def test_hard_state_commit_beyond_the_log_refuses_start(data_dir):
    damage_file(one(data_dir, "raft/wal/*.wal"), zero)
    msg = refusal(data_dir)
    # the hard state's commit index or the store's applied index (whichever the check meets
    # first: both are past the emptied log) is named with the lost entries
    assert ("its hard state says index" in msg or "the store applied up to index" in msg) \
        and "are lost" in msg, msg


def test_applier_position_ahead_of_the_log_refuses_start(data_dir):
    positions = PositionStore(data_dir / "appliers", "sqlite")
    positions.save(ApplierPosition(10_000))
    msg = refusal(data_dir)
    assert str(positions.path) in msg and "applied up to index 10000" in msg


def _sqlite_rows(d: Path) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(d / "sqlite" / "gateway.db") as conn:
        return sorted(conn.execute('SELECT * FROM "items"').fetchall())


def _catch_up(data: Path) -> None:
    """Run a node on ``data`` until its SQLite applier caught up with the log; it must never
    report no lag while rows are missing from its database."""
    cfg = dataclasses.replace(node_configs(data.parent, 1, appliers={"sqlite": {}})[0],
                              data_dir=str(data))

    async def body() -> None:
        async with running(cfg) as (node,):
            for _ in range(1000):
                st = node.status()
                a = st.appliers[0]
                assert not a.error, a.error
                if a.running and a.position >= st.applied_index and a.lag_entries == 0:
                    return
                await asyncio.sleep(0.02)
            raise AssertionError("the applier did not catch up")

    run(body(), timeout=60)


def test_empty_sqlite_target_under_a_saved_position_is_rebuilt_with_a_warning(
        data_dir, pristine, caplog):
    damage_file(data_dir / "sqlite" / "gateway.db", zero)
    with caplog.at_level(logging.WARNING):
        _catch_up(data_dir)
    assert any("gateway.db holds up to log index 0 but its position file" in r.getMessage()
               for r in caplog.records)
    assert _sqlite_rows(data_dir) == _sqlite_rows(pristine)
    assert len(_sqlite_rows(data_dir)) == WRITES


def test_a_damaged_position_file_is_reported_once_by_the_applier_that_continues_from_it(
        data_dir, pristine, caplog):
    """The node's start-up check reads every position file too (it refuses a start the file
    makes unsafe); the line saying where the applier continues from is the applier's."""
    damage_file(data_dir / "appliers" / "sqlite.position", lambda b: b[:-20])  # torn tail
    with caplog.at_level(logging.WARNING):
        _catch_up(data_dir)
    said = [r.getMessage() for r in caplog.records
            if "applier 'sqlite' continues from position" in r.getMessage()]
    assert len(said) == 1, said
    assert "sqlite.position: byte " in said[0]
    assert _sqlite_rows(data_dir) == _sqlite_rows(pristine)


def test_a_sqlite_database_older_than_its_position_file_gets_the_rows_again(
        data_dir, pristine, tmp_path, caplog):
    """The position file ahead of the database (a database restored from an older copy):
    the rows after the database's own held position come back, from the log."""
    import json
    import sqlite3

    from gateway.v1 import applier_pb2

    # the last 10 writes came after the snapshot, so the log holds them after its index
    snap = json.loads((data_dir / "raft" / "snapshots" / "CURRENT").read_text())["index"]
    db = data_dir / "sqlite" / "gateway.db"
    with sqlite3.connect(db) as conn:  # the copy of before the last 10 writes
        conn.execute("DELETE FROM items WHERE id >= ?", (WRITES - 10,))
        (blob,) = conn.execute("SELECT position FROM _gateway_position").fetchone()
        held = applier_pb2.ApplierPosition.FromString(blob)
        claimed = held.log_index
        held.log_index = snap
        del held.applied[:]
        conn.execute("UPDATE _gateway_position SET position = ?", (held.SerializeToString(),))
    assert PositionStore(data_dir / "appliers", "sqlite").load().log_index == claimed
    with caplog.at_level(logging.WARNING):
        _catch_up(data_dir)
    assert any(f"holds up to log index {snap} but its position file" in r.getMessage()
               and f"says {claimed}" in r.getMessage() for r in caplog.records)
    assert not any("rebuilding its target from the store" in r.getMessage()
                   for r in caplog.records)  # applied again from the log
    assert _sqlite_rows(data_dir) == _sqlite_rows(pristine)


# -- item 2: every damaged file: documented recovery or one line naming it -------------------
# The tables of damaged files that refuse the start and of torn tails that are recovered are
# rows of the damage matrix (test_damage_matrix.py), with the same assertions.


def test_damaged_sqlite_database_fails_the_start_in_one_line(data_dir):
    from gateway.appliers.contract import ApplierConfigError

    damage_file(data_dir / "sqlite" / "gateway.db", half)
    with pytest.raises(ApplierConfigError) as err:
        start(data_dir)
    assert "gateway.db" in str(err.value) and "\n" not in str(err.value)


# -- the offline tools report the same damage ----------------------------------------------

def _cli(*args: str) -> tuple[int, str]:
    from click.testing import CliRunner

    from gateway.cli import main

    res = CliRunner().invoke(main, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, res.output


@pytest.mark.parametrize("how", [garbage, half, flip(0.9)], ids=["garbage", "half", "flip"])
def test_log_verify_reports_a_damaged_wal_segment(data_dir, how):
    segment = one(data_dir, "raft/wal/*.wal")
    damage_file(segment, how)
    code, out = _cli("log", "verify", str(data_dir / "raft" / "wal"))
    assert code == 1, out
    assert f"{segment}: byte " in out or "committed entries lost" in out, out


def test_log_verify_ignores_the_compacted_head_of_a_segment(data_dir):
    """The pristine log was compacted: the head of its segment is a punched hole with records
    cut at its edges, which the plain record-stream check reports as damage."""
    segment = one(data_dir, "raft/wal/*.wal")
    assert not records.verify(segment.read_bytes()).ok
    code, out = _cli("log", "verify", str(data_dir / "raft" / "wal"))
    assert code == 0 and out.rstrip().endswith("ok"), out


def test_log_verify_passes_an_intact_wal(data_dir):
    code, out = _cli("log", "verify", str(data_dir / "raft" / "wal"))
    assert code == 0, out


@pytest.mark.parametrize("how", [half, flip(0.5)], ids=["half", "flip"])
def test_store_verify_reports_a_damaged_table(data_dir, how):
    table = one(data_dir, "store/*.sst")
    damage_file(table, how)
    code, out = _cli("store", "verify", str(data_dir / "store"))
    assert code == 1, out
    assert "corrupt: " in out and table.name in out and "byte" in out, out


def test_wiped_sqlite_target_on_a_compacted_log_is_rebuilt_from_the_store(data_dir, pristine):
    """Database and position removed (the documented way to rebuild the target) while the log
    was compacted past index 1: the applier is refilled from the store, not left empty."""
    import sqlite3

    def rows(d: Path) -> list[tuple]:
        with sqlite3.connect(d / "sqlite" / "gateway.db") as conn:
            return sorted(conn.execute('SELECT * FROM "items"').fetchall())

    os.remove(data_dir / "sqlite" / "gateway.db")
    os.remove(data_dir / "appliers" / "sqlite.position")
    cfg = dataclasses.replace(node_configs(data_dir.parent, 1, appliers={"sqlite": {}})[0],
                              data_dir=str(data_dir))

    async def body() -> None:
        async with running(cfg) as (node,):
            for _ in range(500):
                st = node.status()
                if st.appliers[0].position >= st.applied_index:
                    break
                await asyncio.sleep(0.02)
            assert not st.appliers[0].error

    run(body(), timeout=60)
    assert len(rows(data_dir)) == WRITES
    assert rows(data_dir) == rows(pristine)


def test_the_last_logged_trans_id_skips_entries_a_cut_wal_lost_under_a_snapshot():
    """A WAL that lost its tail below the newest snapshot: the log's last index is the
    snapshot's, but the entries after the WAL's end are only in the snapshot (so in the
    store's counter). The scan reads what the WAL holds instead of failing the start."""
    from gateway.node.state.consistency import last_logged_trans_id
    from gateway.node.state.wire import encode_transaction
    from gateway.raft import Entry, EntryType
    from gateway.raft.errors import UnavailableError
    from gateway.v1 import gtid_pb2, transaction_pb2

    wal = {i: Entry(term=1, index=i, type=EntryType.NORMAL, data=encode_transaction(
        transaction_pb2.Transaction(gtid=gtid_pb2.Gtid(server_id=1, trans_id=i))))
        for i in range(5, 261)}

    class Storage:
        def first_index(self) -> int:
            return 5

        def last_index(self) -> int:
            return 310  # the snapshot's

        def entries(self, lo: int, hi: int, _max: int) -> list[Entry]:
            if hi - 1 > 260:
                raise UnavailableError(f"entries [{lo}, {hi}): last index is 260")
            return [wal[i] for i in range(lo, hi)]

    assert last_logged_trans_id(Storage(), 300, 1) == 300  # type: ignore[arg-type]
    assert last_logged_trans_id(Storage(), 7, 1) == 260  # type: ignore[arg-type]


def test_the_dead_letter_count_in_status_is_what_the_log_holds_after_a_restart(data_dir):
    """The pristine directory holds one dead letter (the second schema's table); a restarted
    node reports it, where the count of the run that wrote it used to start again at 0."""
    from gateway.appliers.deadletter import DeadLetterLog

    on_disk = DeadLetterLog(data_dir / "appliers", "sqlite").count()
    assert on_disk >= 1
    cfg = dataclasses.replace(node_configs(data_dir.parent, 1, appliers={"sqlite": {}})[0],
                              data_dir=str(data_dir))

    async def body() -> int:
        async with running(cfg) as (node,):
            return node.status().appliers[0].dead_letters

    assert run(body(), timeout=60) == on_disk
