"""A real Spark standalone cluster for the tests: one master and two workers, separate JVMs.

``start_cluster(work)`` starts them from the installed PySpark (``SPARK_HOME`` = pyspark's
package directory, ``bin/spark-class``), on loopback only, on free ports, each worker with one
core and its own memory and work directory, and waits until the master's JSON status
(``http://127.0.0.1:<webui>/json/``) lists two ALIVE workers. Every JVM runs in its own process
group so ``StandaloneCluster.stop()`` ends it and everything it started (executors, Python
workers). Drivers are run as subprocesses (``gateway spark apply --master``, ``spark-submit``):
one test process can hold only one SparkContext, and the session-wide local one is in use.

``hidden`` directories are invisible to the workers and their executors: each worker JVM runs
in its own mount namespace (``unshare --mount``, root only) with an empty tmpfs over each of
them -- how a test shows that executors need no access to a node's data directory.

Executors import ``gateway`` and ``spark_applier`` from the checkout under test: the workers get
its ``PYTHONPATH`` (``tests/conftest.py`` puts the checkout first) and ``PYSPARK_PYTHON``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = os.path.dirname(pyspark.__file__)

__all__ = ["SPARK_HOME", "StandaloneCluster", "start_cluster"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster_env() -> dict[str, str]:
    """The environment of the cluster's JVMs and of the drivers the tests start."""
    env = dict(os.environ)
    env.update(SPARK_HOME=SPARK_HOME, PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_DAEMON_MEMORY="256m", SPARK_NO_DAEMONIZE="1")
    return env


@dataclass
class StandaloneCluster:
    """A running master and its workers; ``url`` is ``spark://127.0.0.1:PORT``."""

    url: str
    webui: str
    work: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def status(self) -> dict:
        with urllib.request.urlopen(f"{self.webui}/json/", timeout=5) as resp:
            return json.load(resp)

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")
        except OSError:
            return 0

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.work.glob("*.log")))


def start_cluster(work: Path, workers: int = 2, timeout: float = 120.0,
                  hidden: tuple[Path, ...] = ()) -> StandaloneCluster:
    """Start a master and ``workers`` workers (1 core, 1 GiB each), the workers unable to see
    the ``hidden`` directories (module docstring); ``RuntimeError`` with the JVMs' logs if the
    master does not list them all ALIVE within ``timeout`` seconds."""
    work.mkdir(parents=True, exist_ok=True)
    env = cluster_env()
    spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
    port, ui = _free_port(), _free_port()
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", work)

    def launch(name: str, args: list[str], hide: tuple[Path, ...] = ()) -> None:
        log = (work / f"{name}.log").open("wb")
        cmd = [spark_class, *args]
        if hide:
            mounts = " && ".join(f"mount -t tmpfs none {shlex.quote(str(d))}" for d in hide)
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   f"{mounts} && exec {shlex.join(cmd)}"]
        cluster.procs.append(subprocess.Popen(cmd, env=env, cwd=work,
                                              stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True))

    try:
        launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", str(port), "--webui-port", str(ui)])
        for i in range(workers):
            wdir = work / f"worker{i}"
            wdir.mkdir(exist_ok=True)
            launch(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", cluster.url,
                                  "--cores", "1", "--memory", "1g", "--host", "127.0.0.1",
                                  "--port", str(_free_port()), "--webui-port", str(_free_port()),
                                  "--work-dir", str(wdir)], hidden)
        deadline = time.monotonic() + timeout
        while cluster.alive_workers() < workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in cluster.procs):
                raise RuntimeError(f"the Spark standalone cluster did not start "
                                   f"({cluster.alive_workers()} of {workers} workers alive):\n"
                                   f"{cluster.logs()}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
    return cluster
