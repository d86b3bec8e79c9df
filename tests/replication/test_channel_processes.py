"""Two 3-node clusters as real processes on loopback, replicating both ways under write load,
with the leader of either cluster killed (-9) and restarted and the channels' connections cut
by a fault-injecting TCP proxy. Afterwards every node of both clusters holds every
acknowledged write, once, with its origin's author and GTID, and the replicas of each cluster
are equal row for row, metadata included."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from gateway.client import GatewayClient, GatewayError, row_insert
from gateway.testing.proxy import ProxyNetwork
from tests.node.conftest import free_ports

ROOT = Path(__file__).resolve().parents[2]


class ProcCluster:
    def __init__(self, root: Path, cluster_id: int, n: int = 3) -> None:
        self.root, self.cluster_id, self.n = root, cluster_id, n
        ports = free_ports(2 * n)
        self.peer = {i + 1: f"127.0.0.1:{ports[2 * i]}" for i in range(n)}
        self.api = {i + 1: f"127.0.0.1:{ports[2 * i + 1]}" for i in range(n)}
        self.procs: dict[int, subprocess.Popen] = {}
        self.channel_sources: list[str] = []

    def write_config(self, i: int) -> Path:
        peers = ",".join(f"{k}={v}" for k, v in self.peer.items())
        srcs = ", ".join(f'"{s}"' for s in self.channel_sources)
        cfg = self.root / f"c{self.cluster_id}n{i}.toml"
        cfg.write_text(
            f'node_id = {i}\ncluster_id = {self.cluster_id}\nlisten = "{self.peer[i]}"\n'
            f'api = "{self.api[i]}"\npeers = "{peers}"\n'
            f'data_dir = "{self.root / f"c{self.cluster_id}n{i}"}"\n'
            f'fsync = false\nlog_format = "text"\ntick_ms = 30\n'
            f'[[channels]]\nname = "peer"\nsources = [{srcs}]\n')
        return cfg

    def spawn(self, i: int) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), os.environ.get("PYTHONPATH", "")])}
        log = open(self.root / f"c{self.cluster_id}n{i}.log", "ab")  # noqa: SIM115
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "run", "--config", str(self.write_config(i))],
            env=env, stdout=log, stderr=log)

    def kill(self, i: int) -> None:
        p = self.procs.pop(i)
        p.send_signal(signal.SIGKILL)
        p.wait()

    def close(self) -> None:
        for i in list(self.procs):
            p = self.procs.pop(i)
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def client(self, i: int | None = None) -> GatewayClient:
        targets = [self.api[i]] if i else list(self.api.values())
        return GatewayClient(targets, timeout=20)

    def leader(self, timeout: float = 30.0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for i in list(self.procs):
                try:
                    with self.client(i) as c:
                        st = c.status(timeout=1.0)
                    if st.role == "leader":
                        return i
                except GatewayError:
                    pass
            time.sleep(0.1)
        raise AssertionError(f"cluster {self.cluster_id}: no leader")

    def rows(self, i: int, table: str) -> dict:
        """Every row of ``table`` on node ``i``, all pages (the writers ack over 1,000
        keys on a fast machine: one page would miss the newest)."""
        out = {}
        with self.client(i) as c:
            for r in c.scan_all(table, consistency="stale"):
                out[r.key_values[0].int_value] = (r.values[0].string_value, r.author,
                                                  r.gtid.server_id, r.gtid.trans_id,
                                                  r.commit_timestamp_ns, r.epoch, r.log_index)
        return out


def _writer(cluster: ProcCluster, table: str, acked: list[int], stop: threading.Event) -> None:
    key = 0
    with cluster.client() as c:
        while not stop.is_set():
            idem = str(uuid.uuid4())
            while not stop.is_set():
                try:
                    c.write([row_insert(table, {"id": key}, {"v": f"{table}-{key}"})],
                            idempotency_key=idem, timeout=5)
                    acked.append(key)
                    break
                except GatewayError:
                    time.sleep(0.05)  # retried with the same key: applied at most once
            key += 1
            time.sleep(0.01)


def test_two_three_node_clusters_replicate_both_ways_through_kills_and_cut_channels(tmp_path):
    rng = random.Random(7)
    net = ProxyNetwork(seed=7)
    a, b = ProcCluster(tmp_path, 1), ProcCluster(tmp_path, 2)
    # cluster 1's channel reads cluster 2 through proxies (link ids: 1 -> 20+i), and back
    a.channel_sources = [f"127.0.0.1:{net.add_link(1, 20 + i, int(b.api[i].rsplit(':')[1]))}"
                         for i in b.api]
    b.channel_sources = [f"127.0.0.1:{net.add_link(2, 10 + i, int(a.api[i].rsplit(':')[1]))}"
                         for i in a.api]
    stop = threading.Event()
    acked = {"shop.a": [], "shop.b": []}
    try:
        for c in (a, b):
            for i in range(1, 4):
                c.spawn(i)
        a.leader()
        b.leader()
        writers = [threading.Thread(target=_writer, args=(a, "shop.a", acked["shop.a"], stop)),
                   threading.Thread(target=_writer, args=(b, "shop.b", acked["shop.b"], stop))]
        for w in writers:
            w.start()
        time.sleep(2)
        for victim in (a, b, a):
            lead = victim.leader()
            victim.kill(lead)
            time.sleep(1.0)
            for i in range(1, 4):  # cut the channels' connections both ways
                net.drop(1, 20 + i)
                net.drop(2, 10 + i)
            time.sleep(rng.uniform(0.5, 1.5))
            victim.spawn(lead)
            time.sleep(1.5)
        stop.set()
        for w in writers:
            w.join(30)
        assert len(acked["shop.a"]) > 20 and len(acked["shop.b"]) > 20
        end = time.monotonic() + 60
        while True:
            views = {(c.cluster_id, i, t): c.rows(i, t) for c in (a, b) for i in range(1, 4)
                     for t in ("shop.a", "shop.b")}
            done = all(set(acked[t]) <= set(v) for (_, _, t), v in views.items())
            if done or time.monotonic() > end:
                break
            time.sleep(0.5)
        for (cid, i, t), v in views.items():
            missing = set(acked[t]) - set(v)
            assert not missing, f"cluster {cid} node {i} lacks {t} {sorted(missing)[:10]}"
            origin = 1 if t == "shop.a" else 2
            assert {r[1] for r in v.values()} == {origin}
            assert {r[2] for r in v.values()} == {origin}
            gtids = [r[3] for r in v.values()]
            assert len(gtids) == len(set(gtids)), "an origin transaction applied twice"
        for t in ("shop.a", "shop.b"):
            for c in (a, b):  # replicas of one cluster: equal, metadata included
                assert views[(c.cluster_id, 1, t)] == views[(c.cluster_id, 2, t)] \
                    == views[(c.cluster_id, 3, t)]
            # across clusters: values, author, GTID, commit time (the row epoch is the local
            # epoch of the last change in each cluster, the log index its own log's)
            assert {k: r[:5] for k, r in views[(1, 1, t)].items()} == \
                {k: r[:5] for k, r in views[(2, 1, t)].items()}
        with a.client() as c:
            st = c.status()
        assert any(p.cluster_id == 2 and p.max_replicated_epoch > 0 for p in st.peers)
    finally:
        stop.set()
        a.close()
        b.close()
        net.close()
