"""``spark_applier.daemon``: a query that stops reading early prints no worker traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gateway.core import messages, records
from gateway.v1 import transaction_pb2
from spark_applier.daemon import quiet_worker

_INT, _TXT = 2, 6

# A user's script: a session built with SESSION_CONF, then the queries that end their task
# before the worker has written its partition (limit, first, show).
_SCRIPT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    from spark_applier.daemon import SESSION_CONF
    from spark_applier.datasource import register

    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    if sys.argv[2] == "gateway":
        for key, value in SESSION_CONF.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    df = spark.read.format("gateway_wal").load(sys.argv[1])
    assert len(df.limit(1).collect()) == 1
    assert df.first() is not None
    df.show(1)
    spark.stop()
    print("done")
""")


def _big_log(path: Path, transactions: int = 1500, rows: int = 100) -> Path:
    """A log whose one partition takes many batches, so the worker is still writing when the
    first row ends the task."""
    out = [records.SEPARATOR]
    key = 0
    for i in range(1, transactions + 1):
        t = transaction_pb2.Transaction(epoch=1, author=1, commit_timestamp_ns=i, segment_id=1,
                                        end_segment=True)
        t.gtid.server_id, t.gtid.trans_id = 1, i
        ins = t.statements.add().insert
        ins.table.schema_name, ins.table.table_name = "shop", "orders"
        ins.key_fields.add(name="id", type=_INT)
        ins.fields.add(name="item", type=_TXT)
        for _ in range(rows):
            key += 1
            rec = ins.records.add()
            rec.key_values.add(int_value=key)
            rec.after_values.add(string_value=f"item-{key}")
        out.append(records.encode_records([messages.pack(t)]))
    path.write_bytes(b"".join(out))
    return path


def _run(log: Path, daemon: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.run([sys.executable, "-c", _SCRIPT, str(log), daemon], env=env,
                          capture_output=True, text=True, timeout=600)


def test_queries_that_stop_reading_early_print_no_worker_traceback(tmp_path: Path) -> None:
    log = _big_log(tmp_path / "log.bin")
    result = _run(log, "gateway")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "done" in result.stdout
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "BrokenPipeError" not in result.stderr


@pytest.mark.skipif(not os.environ.get("GATEWAY_SPARK_STOCK_DAEMON"),
                    reason="shows the stock daemon's traceback (set GATEWAY_SPARK_STOCK_DAEMON)")
def test_the_stock_daemon_prints_the_traceback_this_daemon_avoids(tmp_path: Path) -> None:
    result = _run(_big_log(tmp_path / "log.bin"), "stock")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "BrokenPipeError" in result.stderr


def test_a_closed_worker_socket_ends_the_worker_quietly_and_other_errors_propagate() -> None:
    def gone(sock: socket.socket, authenticated: bool) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def reset(sock: socket.socket, authenticated: bool) -> int:
        raise ConnectionResetError(104, "Connection reset by peer")

    def broken(sock: socket.socket, authenticated: bool) -> int:
        raise ValueError("a bug")

    a, b = socket.socketpair()
    try:
        assert quiet_worker(gone)(a, True) == 1  # not reused, no traceback
        assert quiet_worker(reset)(a, False) == 1
        assert quiet_worker(lambda s, auth: 0)(a, True) == 0
        with pytest.raises(ValueError, match="a bug"):
            quiet_worker(broken)(a, True)
    finally:
        a.close()
        b.close()
