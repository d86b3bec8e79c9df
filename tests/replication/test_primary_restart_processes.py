"""A PRIMARY that realigned a conflict restarts after kill -9 (issue 52, item 1): two
single-node clusters as real processes, the SQLite applier on (the default), one NDB$EPOCH
conflict found and realigned by the PRIMARY -- its derived transaction (exception row and
refresh) is applied by its SQLite applier under a GTID that only a replicated-epoch entry of
its log names. Killed with SIGKILL and started again, the PRIMARY starts, its applier runs
without error, and its rows, exception rows and SQLite database are as before."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gateway.client import GatewayClient, GatewayError, row_insert, row_update
from tests.node.conftest import free_ports


class _Node:
    """One single-node cluster ``gateway run`` process with conflict rules and a channel."""

    def __init__(self, root: Path, cluster_id: int, role: str) -> None:
        self.root, self.cluster_id, self.role = root, cluster_id, role
        peer, api = free_ports(2)
        self.peer, self.api = f"127.0.0.1:{peer}", f"127.0.0.1:{api}"
        self.data = root / f"c{cluster_id}"
        self.source = ""
        self.proc: subprocess.Popen | None = None

    def spawn(self) -> None:
        cfg = self.root / f"c{self.cluster_id}.toml"
        cfg.write_text(
            f'node_id = 1\ncluster_id = {self.cluster_id}\nlisten = "{self.peer}"\n'
            f'api = "{self.api}"\npeers = "1={self.peer}"\ndata_dir = "{self.data}"\n'
            f'fsync = false\nlog_format = "text"\ntick_ms = 30\n'
            f'conflict_role = "{self.role}"\n'
            f'[[conflicts]]\ntable = "shop.*"\nfunction = "NDB$EPOCH"\n'
            f'[[channels]]\nname = "peer"\nsources = ["{self.source}"]\n')
        env = dict(os.environ)  # PYTHONPATH names this checkout (tests/conftest.py)
        log = open(self.root / f"c{self.cluster_id}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "run", "--config", str(cfg)],
            env=env, stdout=log, stderr=log)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def client(self) -> GatewayClient:
        return GatewayClient(self.api, timeout=20)

    def status(self):
        if self.proc is not None and self.proc.poll() is not None:
            log = (self.root / f"c{self.cluster_id}.log").read_text(errors="replace")
            raise AssertionError(f"cluster {self.cluster_id} exited:\n{log[-3000:]}")
        with self.client() as c:
            return c.status(timeout=2.0)

    def rows(self, table: str) -> dict:
        with self.client() as c:
            return {tuple(v.int_value for v in r.key_values): list(r.values)
                    for r in c.scan_all(table, consistency="stale")}


def _wait(pred: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < end:
        try:
            if pred():
                return
        except GatewayError as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def _items(node: _Node) -> dict:
    return {k: v[0].string_value for k, v in node.rows("shop.items").items()}


def _sqlite(node: _Node, query: str) -> list[tuple]:
    db = sqlite3.connect(f"file:{node.data / 'sqlite' / 'gateway.db'}?mode=ro", uri=True)
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


def _applier_caught_up(node: _Node) -> bool:
    st = node.status()
    (a,) = st.appliers
    return a.running and not a.error and a.position >= st.applied_index


def test_a_primary_that_realigned_a_conflict_restarts_after_kill_9(tmp_path):
    a, b = _Node(tmp_path, 1, "PRIMARY"), _Node(tmp_path, 2, "SECONDARY")
    a.source, b.source = b.api, a.api
    try:
        a.spawn()
        b.spawn()
        _wait(lambda: a.status().role == "leader" and b.status().role == "leader", "leaders")
        with a.client() as ca:
            for k in range(3):
                ca.write([row_insert("shop.items", {"id": k}, {"v": f"base{k}"})])
        _wait(lambda: len(_items(b)) == 3, "B has the base rows")
        top = max(r.epoch for r in a.client().scan("shop.items").rows)
        _wait(lambda: any(p.cluster_id == 2 and p.max_replicated_epoch >= top
                          for p in a.status().peers), "A knows B applied them")
        with a.client() as ca, b.client() as cb:
            ca.channel_action("peer", "pause")
            cb.channel_action("peer", "pause")
            _wait(lambda: a.status().channels[0].state == "paused"
                  and b.status().channels[0].state == "paused", "paused")
            ca.write([row_update("shop.items", {"id": 1}, {"v": "A1"})])
            cb.write([row_update("shop.items", {"id": 1}, {"v": "B1"})])
            ca.channel_action("peer", "resume")
            cb.channel_action("peer", "resume")
        want = {(0,): "base0", (1,): "A1", (2,): "base2"}
        _wait(lambda: _items(a) == want and _items(b) == want, "both on the primary's version")
        _wait(lambda: len(a.rows("shop.items$EX")) == 1, "A's exception row")
        _wait(lambda: _applier_caught_up(a), "A's SQLite applier caught up")
        # the derived transaction is in A's SQLite database under A's own GTID
        last_trans = a.status().last_trans_id
        assert _sqlite(a, "SELECT MAX(last) FROM _gateway_applied_ranges WHERE "
                          "server_id = 1") == [(last_trans,)]
        applied = a.status().applied_index
        before = (_items(a), a.rows("shop.items$EX"), _sqlite(a, "SELECT * FROM items"))

        a.kill()
        a.spawn()
        _wait(lambda: a.status().applied_index >= applied, "A applied its log again")
        _wait(lambda: _applier_caught_up(a), "A's SQLite applier runs after the restart")
        assert (_items(a), a.rows("shop.items$EX"), _sqlite(a, "SELECT * FROM items")) \
            == before
        assert sorted(_sqlite(a, "SELECT id, v FROM items")) == [
            (0, "base0"), (1, "A1"), (2, "base2")]
        assert a.status().last_trans_id >= last_trans
        with a.client() as ca:  # new writes get GTIDs after the derived transaction's
            res = ca.write([row_insert("shop.items", {"id": 9}, {"v": "after"})])
        assert res.gtid.trans_id > last_trans
    finally:
        a.close()
        b.close()
