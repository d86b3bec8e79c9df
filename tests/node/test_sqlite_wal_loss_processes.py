"""A node's SQLite database that lost commits its applier position claims (issue 52, item 2):
a node process killed with SIGKILL after its applier caught up, then its ``gateway.db-wal``
deleted or cut -- what a power cut does to commits SQLite made with ``synchronous=NORMAL``
and never checkpointed. Started again, the node notices the database is behind its position
(one warning line) and applies the entries again: every acknowledged row is back, and the
applier never reports no lag while rows are missing."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.client import GatewayClient, GatewayError, row_insert
from tests.node.conftest import free_ports

ROWS = 2100


def _spawn(data: Path, peer: str, api: str, log: Path) -> subprocess.Popen:
    env = dict(os.environ)  # PYTHONPATH names this checkout (tests/conftest.py)
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "run", "--node-id", "1", "--listen", peer,
             "--api", api, "--peers", f"1={peer}", "--data-dir", str(data)],
            env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait(pred: Callable[[], bool], what: str, proc: subprocess.Popen, log: Path,
          timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"the node exited:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if pred():
                return
        except GatewayError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _rows_in_sqlite(data: Path) -> int:
    db = sqlite3.connect(f"file:{data / 'sqlite' / 'gateway.db'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    except sqlite3.OperationalError:  # no such table: the table was in the lost WAL
        return 0
    finally:
        db.close()


def _caught_up(c: GatewayClient, applied: int = 0) -> bool:
    """The applier reports no lag, and the node applied its log up to ``applied``."""
    st = c.status(timeout=2.0)
    (a,) = st.appliers
    assert not a.error, a.error
    return a.running and a.lag_entries == 0 and a.position >= st.applied_index >= applied


def _delete(wal: Path) -> None:
    wal.unlink()


def _cut(wal: Path) -> None:
    with wal.open("r+b") as f:
        f.truncate(wal.stat().st_size // 2)


@pytest.mark.parametrize("damage", [_delete, _cut], ids=["wal-deleted", "wal-cut-in-half"])
def test_a_sqlite_database_that_lost_its_wal_gets_every_row_again(tmp_path, damage):
    peer, api = (f"127.0.0.1:{p}" for p in free_ports(2))
    data, log = tmp_path / "data", tmp_path / "node.log"
    proc = _spawn(data, peer, api, log)
    try:
        with GatewayClient(api, timeout=20) as c:
            _wait(lambda: c.status(timeout=1.0).role == "leader", "a leader", proc, log)
            for start in range(0, ROWS, 100):
                c.write([row_insert("shop.items", {"id": i}, {"v": f"v{i}"})
                         for i in range(start, start + 100)])
            _wait(lambda: _caught_up(c), "the applier caught up", proc, log)
            time.sleep(1.5)  # its position saved (about once a second)
            _wait(lambda: _caught_up(c), "the applier caught up", proc, log)
            applied = c.status().applied_index
        assert _rows_in_sqlite(data) == ROWS
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        wal = data / "sqlite" / "gateway.db-wal"
        assert wal.exists() and wal.stat().st_size > 0
        damage(wal)
        (data / "sqlite" / "gateway.db-shm").unlink(missing_ok=True)
        assert _rows_in_sqlite(data) < ROWS  # the damage lost acknowledged rows

        proc = _spawn(data, peer, api, log)
        with GatewayClient(api, timeout=20) as c:
            _wait(lambda: _caught_up(c, applied), "the applier caught up again", proc, log)
        assert _rows_in_sqlite(data) == ROWS
        text = log.read_text(errors="replace")
        assert text.count("but its position file") == 1, text[-3000:]
        assert "applying the entries after index" in text
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
