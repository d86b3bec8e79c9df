"""Seeding as real processes: 3-node cluster A takes writes throughout; an empty 3-node
cluster B is added with ``channel add --seed``, and B's leader, then A's leader, are killed -9
in the middle of the seed; then an empty cluster C is seeded from B. Afterwards B and C hold
A's rows with their metadata (values, origin author and GTID, commit time), the seed was
never begun again (B's new leader resumed after the last chunk installed and received only
the chunks after it; after A's leader died another node of A served the rest from its pin),
and A's writes made during and after the seed arrived by the channel."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from pathlib import Path

from gateway.client import GatewayError, row_insert
from tests.replication.test_channel_processes import ProcCluster

_BEGINS = re.compile(r"seed (\d+) begins at source epoch")
_RESUMED = re.compile(r"seed (\d+) resumes after chunk (\d+)")
_DONE = re.compile(r"seed (\d+) installed at source epoch \d+: (\d+) chunk\(s\), (\d+) "
                   r"received by this leader, (\d+) restart")


class SeedCluster(ProcCluster):
    """A cluster without configured channels (they are added with ``channel add``)."""

    def write_config(self, i: int) -> Path:
        peers = ",".join(f"{k}={v}" for k, v in self.peer.items())
        cfg = self.root / f"c{self.cluster_id}n{i}.toml"
        cfg.write_text(
            f'node_id = {i}\ncluster_id = {self.cluster_id}\nlisten = "{self.peer[i]}"\n'
            f'api = "{self.api[i]}"\npeers = "{peers}"\n'
            f'data_dir = "{self.root / f"c{self.cluster_id}n{i}"}"\n'
            f'fsync = false\nlog_format = "text"\ntick_ms = 30\n')
        return cfg

    def log_text(self) -> str:
        return "".join((self.root / f"c{self.cluster_id}n{i}.log").read_text(errors="replace")
                       for i in range(1, self.n + 1))

    def rows(self, i: int, table: str) -> dict:
        """Every row of ``table`` on node ``i`` (all pages)."""
        out: dict = {}
        with self.client(i) as c:
            for r in c.scan_all(table, consistency="stale"):
                out[r.key_values[0].int_value] = (
                    r.values[0].string_value, r.author, r.gtid.server_id,
                    r.gtid.trans_id, r.commit_timestamp_ns, r.epoch, r.log_index)
        return out

    def seed_line(self) -> str:
        try:
            with self.client() as c:
                st = c.status(timeout=2.0)
        except GatewayError:
            return ""
        return next((ch.seed for ch in st.channels), "")


def _writer(a: SeedCluster, acked: list[int], stop: threading.Event) -> None:
    key = 100_000
    with a.client() as c:
        while not stop.is_set():
            idem = str(uuid.uuid4())
            while not stop.is_set():
                try:
                    c.write([row_insert("s.t", {"id": key}, {"v": f"w{key}"})],
                            idempotency_key=idem, timeout=5)
                    acked.append(key)
                    break
                except GatewayError:
                    time.sleep(0.05)  # retried with the same key: applied at most once
            key += 1
            time.sleep(0.005)


def _wait_chunks(b: SeedCluster, at_least: int) -> int:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        m = re.search(r"(\d+) chunk\(s\) installed", b.seed_line())
        if m and int(m.group(1)) >= at_least:
            return int(m.group(1))
        time.sleep(0.02)
    raise AssertionError(f"the seed did not reach {at_least} chunks: {b.seed_line()!r}")


def _same(want: dict, got: dict) -> list[int]:
    """Keys whose value, author, origin GTID or commit time differ (epoch and log index are
    each cluster's own)."""
    return sorted(k for k in want.keys() | got.keys()
                  if k not in want or k not in got or want[k][:5] != got[k][:5])


def _wait_equal(a: SeedCluster, others: list[tuple[SeedCluster, int]], timeout: float,
                exact: bool = True) -> None:
    """Wait until every node of ``others`` holds A's rows as they are now (``exact``: and no
    other row, A being quiet), with the same metadata."""
    end = time.monotonic() + timeout
    want = a.rows(1, "s.t")
    while True:
        diffs = {}
        for o, i in others:
            got = o.rows(i, "s.t")
            if not exact:
                got = {k: v for k, v in got.items() if k in want}
            diffs[(o.cluster_id, i)] = _same(want, got)
        if not any(diffs.values()):
            return
        if time.monotonic() > end:
            raise AssertionError({k: v[:10] for k, v in diffs.items()})
        time.sleep(0.5)


def test_a_new_cluster_seeded_under_writes_through_a_leader_kill_equals_its_source(tmp_path):
    os.environ["GATEWAY_SEED_CHUNK_ROWS"] = "8"  # many chunks: the kills land in the middle
    a = SeedCluster(tmp_path, 1, n=3)
    b = SeedCluster(tmp_path, 2, n=3)
    c = SeedCluster(tmp_path, 3, n=1)
    stop = threading.Event()
    acked: list[int] = []
    try:
        for i in range(1, 4):
            a.spawn(i)
        a.leader()
        with a.client() as cl:
            for start in range(0, 20_000, 1000):
                cl.write([row_insert("s.t", {"id": k}, {"v": f"v{k}"})
                          for k in range(start, start + 1000)])
        writer = threading.Thread(target=_writer, args=(a, acked, stop), daemon=True)
        writer.start()
        for i in range(1, 4):
            b.spawn(i)
        lead = b.leader()
        with b.client(lead) as cl:
            msg = cl.add_channel("fromA", list(a.api.values()), seed=True).message
        assert "seeds this cluster" in msg
        # kill -9 A's leader (which serves the seed) once some chunks are installed, then B's
        _wait_chunks(b, 100)
        a_lead = a.leader()
        a.kill(a_lead)
        a.leader()
        a.spawn(a_lead)
        before = _wait_chunks(b, 0)
        before = _wait_chunks(b, before + 100)
        b.kill(lead)
        b.leader()
        b.spawn(lead)  # back as a follower
        # the seed ends and the channel streams
        _wait_equal(a, [(b, i) for i in range(1, 4)], timeout=90, exact=False)
        text = b.log_text()
        resumed = [(int(s), int(k)) for s, k in _RESUMED.findall(text)]
        done = [tuple(map(int, m)) for m in _DONE.findall(text)]
        assert len(done) == 1, done
        seed_id, total, received, restarts = done[0]
        assert restarts == 0
        assert [int(s) for s in _BEGINS.findall(text)] == [seed_id]  # never begun again
        assert resumed and all(s == seed_id for s, _ in resumed)
        # the last resume (B's new leader) came after the chunks installed before the kill
        last = max(k for _, k in resumed)
        assert last >= before
        # and its session received only the chunks after the last one installed
        assert received == total - last
        # B, seeded, is a source at once: C seeded from B equals A too
        c.spawn(1)
        c.leader()
        with c.client(1) as cl:
            cl.add_channel("fromB", list(b.api.values()), seed=True)
        _wait_equal(a, [(c, 1)], timeout=90, exact=False)
        stop.set()
        writer.join(10)
        _wait_equal(a, [(b, i) for i in range(1, 4)] + [(c, 1)], timeout=60)
        rows = a.rows(1, "s.t")
        assert all(k in rows for k in acked)
        assert len(rows) >= 20_000 + len(acked)
        with b.client() as cl:
            peers = {p.cluster_id: p for p in cl.status(timeout=5).peers}
        assert peers[1].held_epoch > 0
    finally:
        stop.set()
        os.environ.pop("GATEWAY_SEED_CHUNK_ROWS", None)
        for x in (a, b, c):
            x.close()
