"""``gateway spark apply``: bulk apply a log through Spark, once or in micro-batches.

Exit codes: 0 success; 1 the run finished but found damaged records, rejected transactions or
dead-lettered operations (listed on stderr); 2 bad input (missing source, bad target spec,
pyspark missing), one line on stderr, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import click

__all__ = ["spark_group"]


class _BadInput(click.ClickException):
    exit_code = 2


class _Problems(click.ClickException):
    exit_code = 1


@click.group("spark")
def spark_group() -> None:
    """Bulk apply and read logs with Spark (PySpark, local mode by default)."""


def _session(master: str | None, remote: str | None, cores: str) -> tuple[Any, bool]:
    """The Spark session to use and whether this command created it (and must stop it):
    a Spark Connect client of ``remote`` (``sc://HOST:PORT``), else a session on ``master``
    (``local[2]`` when neither is given)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise _BadInput("pyspark is not installed (pip install 'gateway[spark]')") from None
    if remote is not None:
        return _remote_session(SparkSession, remote), True
    active = SparkSession.getActiveSession()
    if active is not None:  # called from a program that already runs Spark: use its session
        return active, False
    from .daemon import SESSION_CONF

    builder = (SparkSession.builder.appName("gateway-spark-apply")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", cores))
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    spark = builder.master(master or "local[2]").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


def _remote_session(session_class: Any, remote: str) -> Any:
    """A Spark Connect session of ``remote``; ``_BadInput`` (one line) if it cannot be made.
    The server's own configuration (master, shuffle partitions) applies."""
    if not remote.startswith("sc://"):
        raise _BadInput(f"--remote {remote!r}: expected a Spark Connect URL sc://HOST:PORT")
    try:
        spark = session_class.builder.remote(remote).getOrCreate()
        spark.range(1).collect()  # connect now: a wrong address is one line here
    except Exception as exc:  # pyspark and grpc raise many types (a missing client
        # dependency, a session of another kind in this process): the user gets the first line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _BadInput(f"--remote {remote}: cannot use the Spark Connect server: "
                        f"{first}") from None
    return spark


def _echo_report(report: Any) -> None:
    d = report.damage
    click.echo(f"{report.target}: {report.ops_written} row operations written, "
               f"{report.barriers} barriers, from {d.get('transactions', 0)} transactions "
               f"({d.get('rows', 0)} logged operations); position {report.start.log_index} -> "
               f"{report.end.log_index}")
    for item in d.get("damaged", []):
        click.echo(f"damaged: {item[0]}: bytes {item[1]}-{item[2]}", err=True)
    for item in d.get("undecodable", []):
        click.echo(f"undecodable: {item[0]}: byte {item[1]}: {item[2]}", err=True)
    for item in d.get("rejected", []) + [[r] for r in report.rejected]:
        click.echo(f"rejected: {': '.join(map(str, item))}", err=True)
    if report.dead_letters:
        click.echo(f"dead-lettered: {report.dead_letters} operations (gateway deadletter list "
                   f"--applier {report.target})", err=True)


@spark_group.command("apply")
@click.option("--source", required=True,
              help="A WAL directory, a standalone log file, or a running node's log: "
                   "gateway://HOST:PORT (its API address; executors then read it over the "
                   "network, not from its files).")
@click.option("--token", envvar="GATEWAY_TOKEN", default=None,
              help="With a gateway:// source: a bearer token with the read permission (also "
                   "GATEWAY_TOKEN).")
@click.option("--ca", envvar="GATEWAY_CA", default=None, type=click.Path(dir_okay=False),
              help="With a gateway:// source: the CA certificate of the node's TLS API.")
@click.option("--target", "target_spec", required=True,
              help="parquet:DIR, sqlite:FILE, delta:DIR or cassandra://HOST:PORT/KEYSPACE")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where the applied position is kept. [default: SOURCE.spark-state; "
                   "required with a gateway:// source]")
@click.option("--master", default=None,
              help="Spark master URL (local[N], spark://HOST:PORT, yarn, k8s://...). "
                   "[default: local[2]]")
@click.option("--remote", default=None,
              help="Run through a Spark Connect server, sc://HOST:PORT, instead of a driver of "
                   "its own (not with --master; the parquet: target needs --master).")
@click.option("--partition-bytes", type=click.IntRange(64), default=None,
              help="Bytes of log per input partition. [default: the log over twice the CPU "
                   "count, 4-128 MiB]")
@click.option("--until", "index_to", type=click.IntRange(1), default=None,
              help="Stop after this log index.")
@click.option("--follow", is_flag=True, help="Keep applying micro-batches as the log grows.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="With --follow: apply at least every N seconds when entries wait.")
@click.option("--max-entries", type=click.IntRange(1), default=100_000, show_default=True,
              help="With --follow: apply as soon as M entries wait (and at most M per batch).")
def apply_command(source: str, token: str | None, ca: str | None, target_spec: str,
                  state_dir: str | None, master: str | None, remote: str | None,
                  partition_bytes: int | None, index_to: int | None, follow: bool,
                  interval: float, max_entries: int) -> None:
    """Reduce the log to the final state of every row and write it to a target.

    Resumes from the durable position in the state directory. Example:

        gateway spark apply --source /var/lib/gateway/wal --target parquet:/data/tables
    """
    from gateway import ApplyError, PositionStoreError

    from .remote import RemoteLogError, RemoteSource, is_remote, read_ca

    read_options: dict[str, str] = {}
    if is_remote(source):
        try:
            RemoteSource.parse(source, token or "", read_ca(ca))
        except ValueError as exc:
            raise _BadInput(f"--source: {exc}" if str(exc).startswith("gateway")
                            else f"--{exc}") from None
        if not state_dir:
            raise _BadInput("--state-dir is required with a gateway:// source (where the "
                            "applied position is kept)")
        read_options = {k: v for k, v in (("token", token), ("ca", ca)) if v}
    elif not os.path.exists(source):
        raise _BadInput(f"--source: {source}: no such file or directory")
    else:
        # Absolute on the driver: executors run in their own working directories (a
        # standalone worker's work/app-*/N) and resolve a relative path against those.
        source = os.path.abspath(source)
    state = os.path.abspath(state_dir or f"{source.rstrip('/')}.spark-state")
    if master is not None and remote is not None:
        raise _BadInput("--master and --remote exclude each other: --remote runs the job on "
                        "the Spark Connect server's own master")
    spark, owned = _session(master, remote, "4")
    try:
        from .bulk import apply_log
        from .layout import LogLayoutError
        from .runner import MicroBatchRunner
        from .targets import TargetSpecError, make_target

        try:
            target = make_target(spark, target_spec)
        except (TargetSpecError, ApplyError) as exc:
            raise _BadInput(str(exc)) from None
        problems = 0
        try:
            if follow:
                runner = MicroBatchRunner(spark, source, target, state, interval=interval,
                                          max_entries=max_entries,
                                          partition_bytes=partition_bytes,
                                          read_options=read_options)

                def seen(report: Any) -> None:
                    nonlocal problems
                    _echo_report(report)
                    problems += report.problems

                with contextlib.suppress(KeyboardInterrupt):
                    runner.run(on_batch=seen)
            else:
                report = apply_log(spark, source, target, state,
                                   partition_bytes=partition_bytes, index_to=index_to,
                                   read_options=read_options)
                _echo_report(report)
                problems = report.problems
        except RemoteLogError as exc:
            raise _Problems(str(exc)) from None
        except (LogLayoutError, ValueError) as exc:
            raise _BadInput(str(exc).splitlines()[0]) from None
        except (ApplyError, PositionStoreError, OSError) as exc:
            raise _Problems(f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
        except Exception as exc:
            # A task's RemoteLogError reaches the driver inside Spark's job failure (a Python
            # worker traceback in a Java exception): print its one line, not the traceback.
            line = remote_error_line(exc)
            if line is None:
                raise
            raise _Problems(line) from None
        if problems:
            raise _Problems(f"{problems} problem(s) found; see above")
    finally:
        if owned:
            spark.stop()


def remote_error_line(exc: BaseException) -> str | None:
    """The ``RemoteLogError`` line inside a failed Spark job's error ``exc``, or None."""
    marker = "RemoteLogError: "
    text = str(exc)
    at = text.rfind(marker)
    if at < 0:
        return None
    return text[at + len(marker):].splitlines()[0].strip()
