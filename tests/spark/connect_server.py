"""A Spark Connect server for the tests, started from the installed PySpark.

``start_connect_server(work, master)`` runs ``sbin/start-connect-server.sh --wait`` (the
server's JVM in the foreground, in its own process group) with its driver on ``master`` -- the
standalone cluster of ``tests/spark/standalone.py`` or ``local[N]`` -- bound to loopback on a
free port, with its pid and log files in ``work`` (never the shared ``/tmp`` pid file of
``spark-daemon.sh``, which would make two servers on one machine refuse each other). It waits
until the server logs that it listens and returns its ``sc://`` URL.

The server's Python workers (they run the ``gateway_wal``/``gateway_store`` readers and the
tasks' writers) import ``gateway`` and ``spark_applier`` from the checkout under test: the
server inherits the ``PYTHONPATH`` that ``tests/conftest.py`` sets, and ``PYSPARK_PYTHON``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.spark.standalone import SPARK_HOME, _free_port, cluster_env

__all__ = ["ConnectServer", "start_connect_server"]

_STARTED = "Spark Connect server started at"


@dataclass
class ConnectServer:
    """A running Spark Connect server; ``url`` is ``sc://127.0.0.1:PORT``."""

    url: str
    work: Path
    proc: subprocess.Popen[bytes]

    def log(self) -> str:
        """The server's console output and log (the last lines of each)."""
        return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-4000:]}"
                         for p in [*sorted(self.work.glob("*.out")), self.work / "console.log"]
                         if p.exists())

    def started(self) -> bool:
        console = self.work / "console.log"
        return console.exists() and _STARTED in console.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def start_connect_server(work: Path, master: str, *, conf: dict[str, str] | None = None,
                         timeout: float = 180.0) -> ConnectServer:
    """Start a Spark Connect server whose driver runs on ``master``; ``RuntimeError`` with its
    log if it does not listen within ``timeout`` seconds."""
    work.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = cluster_env()
    # the server is a driver, not a small daemon: it needs the driver memory of a job
    env.update(SPARK_LOG_DIR=str(work), SPARK_PID_DIR=str(work), SPARK_DAEMON_MEMORY="1g",
               SPARK_IDENT_STRING=f"gateway-tests-{port}")
    settings = {"spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(port),
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                **(conf or {})}
    args = [os.path.join(SPARK_HOME, "sbin", "start-connect-server.sh"), "--wait",
            "--master", master]
    for k, v in settings.items():
        args += ["--conf", f"{k}={v}"]
    console = (work / "console.log").open("wb")
    proc = subprocess.Popen(args, env=env, cwd=work, stdout=console, stderr=subprocess.STDOUT,
                            start_new_session=True)
    server = ConnectServer(f"sc://127.0.0.1:{port}", work, proc)
    deadline = time.monotonic() + timeout
    try:
        while not server.started():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not start "
                                   f"(exit {proc.poll()}):\n{server.log()}")
            time.sleep(0.5)
    except BaseException:
        server.stop()
        raise
    return server
