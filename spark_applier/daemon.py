"""PySpark's Python worker daemon, with the data source's modules loaded once and no traceback
when a task ends before its worker finished writing.

Spark starts one daemon per executor (``python -m <spark.python.daemon.module>``) and forks a
worker from it for every Python task it cannot give to an idle worker. Two things of the stock
daemon (``pyspark.daemon``) cost a ``gateway_wal`` reader:

1. **A task that stops reading early kills its worker, and the stock daemon prints a
   traceback.** ``limit(n)``, ``first()``, ``take()`` and ``show()`` end their task once they
   have their rows; the JVM then closes the worker's socket while the worker is still writing
   batches. The worker's last flush fails with ``BrokenPipeError`` (or ``ConnectionResetError``)
   and the stock daemon, told by the JVM to treat a failed flush as fatal
   (``spark.python.daemon.killWorkerOnFlushFailure``, default true), prints the traceback on
   the executor's stderr -- in local mode, the user's terminal. Nothing is lost: the JVM no
   longer listens on that socket and has already finished the task, and the worker exits
   either way. Here that case ends the worker quietly (the same exit, not reused); any other
   exception keeps the stock behaviour.
2. **Every forked worker imports the reader's modules again** (pyarrow, numpy, protobuf, the
   log formats: most of a fresh worker's start), and since a task ended early kills its
   worker, every ``limit``/``first`` query pays it. This daemon imports them once, before it
   forks, so a new worker starts with them loaded. (The stock daemon imports nothing before
   forking because a thread running at ``fork`` may hold a lock the child then waits on for
   ever; the threads these imports start -- OpenBLAS's and jemalloc's -- register
   ``pthread_atfork`` handlers for exactly that.)

Use it with ``spark.python.daemon.module=spark_applier.daemon`` (``SESSION_CONF``, which
``gateway spark apply``, the tests and the benchmark set); it must be importable by every
executor's Python, as the data source already must be.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

__all__ = ["MODULE", "SESSION_CONF", "quiet_worker"]

#: The value of ``spark.python.daemon.module`` that selects this daemon.
MODULE = "spark_applier.daemon"

#: Spark settings a session reading Gateway logs should be built with (``builder.config``).
SESSION_CONF: dict[str, str] = {
    "spark.python.daemon.module": MODULE,
    "spark.python.worker.reuse": "true",
}

_GONE = (BrokenPipeError, ConnectionResetError)


def quiet_worker(worker: Callable[[socket.socket, bool], int]
                 ) -> Callable[[socket.socket, bool], int]:
    """``pyspark.daemon.worker`` that returns exit code 1 (end the worker, do not reuse it)
    instead of raising when the JVM closed the worker's socket (see the module docstring)."""
    def run(sock: socket.socket, authenticated: bool) -> int:
        try:
            return worker(sock, authenticated)
        except _GONE:
            return 1

    return run


def _preload() -> None:
    """Import what a ``gateway_wal``/``gateway_store`` task and its planner import, once."""
    import pyspark.worker  # noqa: F401  (the UDF worker every task runs)

    from . import datasource, store_source  # noqa: F401  (pyarrow, numpy, the log formats)


def main() -> None:
    """Run the daemon (``python -m spark_applier.daemon [worker module]``)."""
    from pyspark import daemon

    _preload()
    # the manager looks ``worker`` up when it forks; the wrapper has its signature, mypy
    # only sees a Callable in place of the function
    daemon.worker = quiet_worker(daemon.worker)  # type: ignore[assignment]
    daemon.manager()


if __name__ == "__main__":
    main()
