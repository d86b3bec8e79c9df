"""Executors that cannot see a node's data directory read its log over ``gateway://``.

A real node (``gateway run``) writes its WAL under a directory that the standalone cluster's
workers cannot see: each worker JVM runs in its own mount namespace with an empty tmpfs over it
(``tests/spark/standalone.py``, ``hidden``). A read of the WAL by path fails in the executors;
the ``gateway://`` read (the node's ``LogRead`` RPC) succeeds and equals local mode row for
row, and ``gateway spark apply --master spark://...`` from it equals the sequential dispatcher.
The targets are written to a directory the workers do see. One cluster and one node for the
module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.client import GatewayClient, row_delete, row_insert, row_update
from gateway.formats import WalTag, decode_wal_entry, records
from gateway.testing.launcher import Launcher
from gateway.v1 import transaction_pb2
from spark_applier import layout
from spark_applier.writers import ParquetTarget
from tests.spark.standalone import SPARK_HOME, StandaloneCluster, cluster_env, start_cluster
from tests.spark.test_bulk import _normal
from tests.spark.workload import reference_state, write_log_file

HERE = Path(__file__).resolve().parent
_ORDER = ("log_index", "segment_id", "op_no", "op")


def _run(args: list[str], cwd: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=cluster_env(), capture_output=True, text=True,
                            timeout=400)
    if ok:
        assert result.returncode == 0, f"{args[:4]} exited {result.returncode}:\n" \
                                       f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


class _Setup:
    def __init__(self, cluster: StandaloneCluster, wal: Path, uri: str, base: Path) -> None:
        self.cluster, self.wal, self.uri, self.base = cluster, wal, uri, base


@pytest.fixture(scope="module")
def hidden_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Setup]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("hiding the node's data directory from the workers needs root and "
                    "unshare(1) (a mount namespace per worker JVM)", pytrace=False)
    base = tmp_path_factory.mktemp("remote-cluster")
    data = base / "node-data"
    data.mkdir()
    try:
        cluster = start_cluster(base / "cluster", hidden=(data,))
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    node = Launcher(data, 1, node_args=["--no-fsync"],
                    proxied=False, cwd=str(base))
    try:
        node.start(wait_leader=False)
        node.wait_for_leader(timeout=60)
        api = node.nodes[1].api_address
        with GatewayClient(api) as c:  # (tokens: tests/spark/test_remote_source.py)
            for i in range(60):
                c.write([row_insert("shop.orders", {"id": i}, {"qty": i, "note": f"n{i}"})])
            for i in range(0, 60, 3):
                c.write([row_update("shop.orders", {"id": i}, {"qty": 1000 + i}),
                         row_insert("shop.items", {"sku": f"s{i}"}, {"price": 0.5 * i})])
            for i in range(0, 60, 7):
                c.write([row_delete("shop.orders", {"id": i})])
        yield _Setup(cluster, node.nodes[1].data_dir / "raft" / "wal", f"gateway://{api}",
                     base)
    finally:
        node.close(term_timeout=20)
        cluster.stop()


def _committed_transactions(wal: Path) -> list[transaction_pb2.Transaction]:
    """The node's committed transactions in log order, read from its files (the driver's
    view): the input of the sequential reference."""
    out = []
    lay = layout.discover(wal)
    for rr in layout.plan_ranges(lay, partition_bytes=1 << 40):
        buf = layout.open_buffer(rr.file.path)
        try:
            for rec in records.scan(buf, rr.start, rr.stop):
                if rec.payload[:1] != bytes((WalTag.ENTRY,)) or \
                        rec.generation != rr.file.generation:
                    continue
                entry = decode_wal_entry(rec.payload)
                if entry.index <= (lay.commit or 0) and entry.type == 0 and \
                        entry.data[:1] == b"\x01":
                    out.append(transaction_pb2.Transaction.FromString(entry.data[1:]))
        finally:
            if not isinstance(buf, bytes):
                buf.close()
    return out


def test_executors_blind_to_the_data_dir_fail_by_path_and_read_gateway_like_local_mode(
        spark, hidden_node: _Setup, tmp_path: Path) -> None:
    s = hidden_node
    out = s.base / "shared" / "job"
    _run([os.path.join(SPARK_HOME, "bin", "spark-submit"), "--master", s.cluster.url,
          "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
          "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.task.maxFailures=1",
          str(HERE / "remote_job.py"),
          str(s.wal), s.uri, "r", str(out)], cwd=tmp_path)
    done = json.loads((out / "done.json").read_text())
    assert done["path"] == "failed", done  # the executors cannot see the WAL's files
    assert "FileNotFoundError" in done["path_error"] or "No such file" in done["path_error"]
    assert done["executors"] == 3 and done["partitions"] >= 2
    local = spark.read.format("gateway_wal").load(str(s.wal)).collect()
    remote = spark.read.parquet(str(out / "rows")).collect()
    assert len(local) > 100

    def key(r):  # type: ignore[no-untyped-def]
        return tuple(r[k] for k in _ORDER)

    assert sorted(remote, key=key) == sorted(local, key=key)


def test_cli_applies_the_node_on_the_blind_cluster_like_the_dispatcher(
        spark, hidden_node: _Setup, tmp_path: Path) -> None:
    s = hidden_node
    want = reference_state(write_log_file(tmp_path / "log.bin",
                                          _committed_transactions(s.wal)), tmp_path / "ref.db")
    assert want
    target = s.base / "shared" / "cli"
    result = _run([sys.executable, "-m", "gateway.cli", "spark", "apply", "--source", s.uri,
                   "--token", "r", "--target", f"parquet:{target}", "--state-dir",
                   str(tmp_path / "state"), "--master", s.cluster.url,
                   "--partition-bytes", "4096"], cwd=tmp_path)
    assert "position 0 -> " in result.stdout
    got = {}
    for table in ("orders", "items"):
        df = ParquetTarget(spark, str(target)).read_table("shop", table)
        assert df is not None, table
        got[table] = sorted(({k: _normal(v) for k, v in r.asDict().items()
                              if v is not None and not k.startswith("_")}
                             for r in df.collect()), key=repr)
    assert got == want
