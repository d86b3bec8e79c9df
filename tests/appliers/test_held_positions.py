"""The position an applier's target durably holds (``gateway.appliers.durable``): the SQLite
database records it in the same WAL as its data and syncs it before the position file is
saved, so a power cut or a lost or cut ``-wal`` file leaves a database that says how far it
really got, and the applier starts from there instead of from the file's claim."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from pathlib import Path

import pytest

from gateway.appliers.dispatcher import Dispatcher
from gateway.appliers.durable import covers, reconcile
from gateway.appliers.position import ApplierPosition, GtidSet, PositionStore
from gateway.appliers.source import MemorySource
from gateway.appliers.sqlite import SqliteApplier
from gateway.core.rowops import Gtid, statement_ops
from tests.appliers.fakes import ModelApplier
from tests.appliers.test_dispatcher import config, workload
from tests.reducer.model import insert, txn


def _rows(applier: SqliteApplier, t: int) -> None:
    applier.apply(statement_ops(txn(t, insert("t", [{"id": t, "a": t}])), t))


def _crash_image(src: Path, dst: Path) -> Path:
    """The files as a crash would leave them on disk while ``src`` is open: the database and
    its WAL, copied before SQLite's last close could checkpoint."""
    dst.mkdir()
    for suffix in ("", "-wal"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", dst / f"{src.name}{suffix}")
    return dst / src.name


def test_a_new_database_holds_position_0_and_a_held_position_reads_back(tmp_path):
    db = SqliteApplier(tmp_path / "out.db")
    assert db.held_position() == ApplierPosition()
    pos = ApplierPosition(7, GtidSet([Gtid(1, 9), Gtid(2, 4)]))
    db.hold_position(pos)
    assert db.held_position() == pos
    db.close()
    again = SqliteApplier(tmp_path / "out.db")
    assert again.held_position() == pos
    again.reset_target()
    assert again.held_position() == ApplierPosition()
    again.close()


def test_a_database_from_before_held_positions_cannot_tell(tmp_path):
    db = SqliteApplier(tmp_path / "out.db")
    _rows(db, 1)
    db._conn().execute("DROP TABLE _gateway_position")
    db.close()
    old = SqliteApplier(tmp_path / "out.db")
    assert old.held_position() is None
    old.hold_position(ApplierPosition(3))
    assert old.held_position() == ApplierPosition(3)
    old.close()


def test_a_lost_wal_loses_the_held_position_with_the_rows(tmp_path):
    db = SqliteApplier(tmp_path / "out.db")
    for t in range(1, 21):
        _rows(db, t)
    db.hold_position(ApplierPosition(20))
    image = _crash_image(tmp_path / "out.db", tmp_path / "crash")
    db.close()
    Path(f"{image}-wal").unlink()
    after = SqliteApplier(image)
    assert after.held_position() == ApplierPosition()
    after.close()


def test_a_cut_wal_keeps_the_held_position_of_the_rows_it_kept(tmp_path):
    """Every held position is a commit after the rows it covers, in the same WAL: a WAL cut
    anywhere keeps a prefix of commits, so the position it still holds never claims a row
    that is gone."""
    db = SqliteApplier(tmp_path / "out.db")
    for t in range(1, 11):
        _rows(db, t)
    db.hold_position(ApplierPosition(10))
    for t in range(11, 21):
        _rows(db, t)
    db.hold_position(ApplierPosition(20))
    image = _crash_image(tmp_path / "out.db", tmp_path / "crash")
    db.close()
    wal = Path(f"{image}-wal")
    full = wal.read_bytes()
    for cut in range(len(full) // 2, len(full), 4096):
        wal.write_bytes(full[:cut])
        after = SqliteApplier(image)
        held = after.held_position()
        ids = {r["id"] for r in after.rows("t")} if held.log_index else set()
        assert set(range(1, held.log_index + 1)) <= ids, (cut, held)
        after.close()
        wal.write_bytes(full)
        for extra in ("-shm",):
            Path(f"{image}{extra}").unlink(missing_ok=True)


class _Order(ModelApplier):
    """Records the positions it was asked to hold, and what the file said at that moment."""

    def __init__(self, positions: PositionStore) -> None:
        super().__init__()
        self.positions = positions
        self.held: list[tuple[int, int]] = []

    def hold_position(self, position: ApplierPosition) -> None:
        self.held.append((position.log_index, self.positions.load().log_index))


def test_the_dispatcher_has_the_target_hold_each_position_before_the_file_says_it(tmp_path):
    txns = workload(3, n=40, with_sql=False)
    applier = _Order(PositionStore(tmp_path, "model"))
    Dispatcher(applier, MemorySource(txns), tmp_path, config=config()).run()
    assert applier.held and applier.held[-1][0] == 40
    # when the target was first asked to hold a position, the file did not claim it yet
    first: dict[int, int] = {}
    for held, file_said in applier.held:
        first.setdefault(held, file_said)
    assert len(first) > 1 and all(file_said < held for held, file_said in first.items() if held)
    assert PositionStore(tmp_path, "model").load().log_index == 40


@pytest.mark.parametrize(("have", "claim", "want"), [
    (ApplierPosition(5), ApplierPosition(5), True),
    (ApplierPosition(6), ApplierPosition(5, GtidSet([Gtid(1, 9)])), True),
    (ApplierPosition(4), ApplierPosition(5), False),
    (ApplierPosition(5, GtidSet([Gtid(1, 8), Gtid(1, 9)])),
     ApplierPosition(5, GtidSet([Gtid(1, 9)])), True),
    (ApplierPosition(5, GtidSet([Gtid(1, 8)])), ApplierPosition(5, GtidSet([Gtid(1, 9)])),
     False),
])
def test_a_held_position_covers_a_claim_only_when_it_includes_all_of_it(have, claim, want):
    assert covers(have, claim) is want


def test_a_database_behind_its_position_file_is_reconciled_with_one_warning(tmp_path, caplog):
    db = SqliteApplier(tmp_path / "out.db")
    db.hold_position(ApplierPosition(10))
    positions = PositionStore(tmp_path, "sqlite")
    positions.save(ApplierPosition(25))
    with caplog.at_level(logging.WARNING, "gateway.appliers.durable"):
        got = reconcile(db, positions, positions.load(), str(db.path))
    assert got == ApplierPosition(10) == positions.load()
    (line,) = [r.getMessage() for r in caplog.records]
    assert "out.db holds up to log index 10" in line and "says 25" in line
    assert "applying the entries after index 10 again" in line
    caplog.clear()
    with caplog.at_level(logging.WARNING, "gateway.appliers.durable"):
        assert reconcile(db, positions, positions.load(), str(db.path)) == ApplierPosition(10)
    assert not caplog.records
    db.close()


def test_a_dispatcher_restarted_over_a_database_that_lost_rows_applies_them_again(tmp_path):
    """The power cut, end to end: rows applied and the position saved; the database then
    loses its WAL (never checkpointed) and the file still says the old position. The
    reconciled dispatcher applies everything again: no row is missing."""
    txns = workload(5, n=60, with_sql=False)
    state = tmp_path / "state"
    db = SqliteApplier(tmp_path / "out.db")
    Dispatcher(db, MemorySource(txns), state, config=config()).run()
    want = db.rows("t")
    image = _crash_image(tmp_path / "out.db", tmp_path / "crash")
    db.close()
    Path(f"{image}-wal").unlink()
    lost = SqliteApplier(image)
    positions = PositionStore(state, "sqlite")
    assert positions.load().log_index == 60
    with pytest.raises(sqlite3.OperationalError):
        lost.rows("t")  # the table itself was in the lost WAL
    reconcile(lost, positions, positions.load(), str(image))
    Dispatcher(lost, MemorySource(txns), state, config=config()).run()
    assert lost.rows("t") == want
    assert lost.held_position().log_index == 60
    lost.close()


def test_gateway_apply_starts_from_what_the_database_holds(tmp_path):
    """The offline ``gateway apply`` reconciles too: a database that lost rows its state
    directory's position claims (here: an older copy) gets them again."""
    from click.testing import CliRunner

    from gateway.cli import logtool, main

    log, db = tmp_path / "log", tmp_path / "out.db"
    for t in range(1, 6):
        logtool.append_transaction(log, txn(t, insert("t", [{"id": t, "a": t}])))
    first = CliRunner().invoke(main, ["apply", str(log), "-o", f"path={db}"])
    assert first.exit_code == 0, first.output
    older = SqliteApplier(db)
    older._conn().execute("DELETE FROM t WHERE id > 2")
    older.hold_position(ApplierPosition(2))
    older.close()
    again = CliRunner().invoke(main, ["apply", str(log), "-o", f"path={db}"])
    assert again.exit_code == 0, again.output
    check = SqliteApplier(db)
    assert [r["id"] for r in check.rows("t")] == [1, 2, 3, 4, 5]
    check.close()


def test_a_damaged_held_position_is_one_error_naming_the_table(tmp_path):
    from gateway.appliers.contract import ApplyError

    db = SqliteApplier(tmp_path / "out.db")
    db.hold_position(ApplierPosition(4))
    db._conn().execute("UPDATE _gateway_position SET position = x'ffff'")
    with pytest.raises(ApplyError, match=r"out\.db: _gateway_position: cannot read"):
        db.held_position()
    db.close()


def test_a_busy_target_keeps_the_older_position_in_the_file(tmp_path):
    """A database locked by another process when the position is to be saved: the file
    keeps the older position (never ahead of the database) and the dispatcher goes on."""
    from gateway.appliers.contract import TransientApplyError

    class Busy(ModelApplier):
        def hold_position(self, position: ApplierPosition) -> None:
            raise TransientApplyError("sqlite out.db: database is locked")

    txns = workload(4, n=20, with_sql=False)
    applier = Busy()
    Dispatcher(applier, MemorySource(txns), tmp_path, config=config()).run()
    assert len(applier.store) > 0
    assert PositionStore(tmp_path, "model").load().log_index == 0
