"""A node process killed with SIGKILL in the middle of a new SQLite sink's backfill (issue 54
item 4): started again, the backfill resumes after its last saved chunk -- what the killed
process committed beyond it is under 5 % of the rows -- and the sink ends equal to what was
written, writes after the kill included."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gateway.appliers.position import PositionStore
from gateway.client import GatewayClient, GatewayError, row_insert, row_update
from tests.node.conftest import free_ports

ROWS = 20_000
CHUNK = 200


def _spawn(data: Path, peer: str, api: str, log: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ)  # PYTHONPATH names this checkout (tests/conftest.py)
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "run", "--node-id", "1", "--listen", peer,
             "--api", api, "--peers", f"1={peer}", "--data-dir", str(data), "--no-fsync",
             *extra], env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait(pred: Callable[[], bool], what: str, proc: subprocess.Popen, log: Path,
          timeout: float = 120.0, every: float = 0.1) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"the node exited:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if pred():
                return
        except GatewayError:
            pass
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def _sqlite(data: Path) -> list[tuple[int, str]]:
    db = sqlite3.connect(f"file:{data / 'sqlite' / 'gateway.db'}?mode=ro", uri=True)
    try:
        return sorted(db.execute("SELECT id, v FROM items").fetchall())
    except sqlite3.OperationalError:  # no such table yet
        return []
    finally:
        db.close()


def _stop(proc: subprocess.Popen, sig: int) -> None:
    proc.send_signal(sig)
    proc.wait(30)


def test_a_backfill_killed_with_sigkill_resumes_after_its_last_chunk(tmp_path):
    peer, api = (f"127.0.0.1:{p}" for p in free_ports(2))
    data, log = tmp_path / "data", tmp_path / "node.log"
    # a node without appliers, holding the rows
    proc = _spawn(data, peer, api, log, "--appliers", "")
    try:
        with GatewayClient(api) as c:
            _wait(lambda: c.status(timeout=2.0).role == "leader", "a leader", proc, log)
            for start in range(0, ROWS, 2000):
                c.write([row_insert("shop.items", {"id": i}, {"v": f"v{i}"})
                         for i in range(start, start + 2000)])
            assert c.status(timeout=2.0).appliers == []
    finally:
        _stop(proc, signal.SIGTERM)

    # the same node with a new SQLite sink, killed in the middle of its backfill: it runs in
    # slices of a few ms between SIGSTOPs, and is killed (stopped) once the progress it saved
    # passed ten chunks -- no race with how fast the machine backfills
    sink = ("--appliers", "sqlite", "-o", f"sqlite.backfill_chunk_rows={CHUNK}")
    proc = _spawn(data, peer, api, log, *sink)
    positions = PositionStore(data / "appliers", "sqlite")
    try:
        end = time.monotonic() + 120
        while True:
            assert time.monotonic() < end, "the backfill never got ten chunks far"
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.005)
            proc.send_signal(signal.SIGSTOP)
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            progress = positions.load().backfill if positions.path.exists() else None
            if progress is not None and progress.rows >= 10 * CHUNK:
                break
    finally:
        proc.kill()
        proc.wait(30)
    saved = PositionStore(data / "appliers", "sqlite").load().backfill
    assert saved is not None and not saved.done and 0 < saved.rows < ROWS
    committed = len(_sqlite(data))
    assert saved.rows <= committed <= saved.rows + CHUNK  # at most the chunk in flight
    assert committed - saved.rows < 0.05 * ROWS

    # started again: it resumes after its last chunk, while a writer writes
    proc = _spawn(data, peer, api, log, *sink)
    try:
        with GatewayClient(api) as c:
            _wait(lambda: c.status(timeout=2.0).role == "leader", "a leader", proc, log)
            for k in range(50):
                c.write([row_update("shop.items", {"id": 397 * k}, {"v": f"u{k}"}),
                         row_insert("shop.items", {"id": ROWS + k}, {"v": "new"})])

            def done() -> bool:
                st = c.status(timeout=2.0)
                (a,) = st.appliers
                assert not a.error, a.error
                return a.backfill_state == "done" and a.position >= st.applied_index
            _wait(done, "the backfill to finish and the sink to catch up", proc, log)
            (a,) = c.status(timeout=2.0).appliers
            assert a.backfill_resumes == 1
    finally:
        _stop(proc, signal.SIGTERM)
    want = {i: f"v{i}" for i in range(ROWS)}
    want.update({397 * k: f"u{k}" for k in range(50)})
    want.update({ROWS + k: "new" for k in range(50)})
    assert _sqlite(data) == sorted(want.items())
    shutil.rmtree(data, ignore_errors=True)
