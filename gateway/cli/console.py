"""``gateway console``: serve the read-only web console of a deployment (docs/console.md)."""

from __future__ import annotations

import sys

import click

from .node import _ca, read_ca
from .plugins import BadInput

__all__ = ["console"]


@click.command("console")
@click.option("--target", "-t", "targets", multiple=True, required=True, metavar="HOST:PORT",
              help="API address of a node (repeatable: one per cluster, or one and the "
                   "others are found by following the channels' sources).")
@click.option("--listen", default="127.0.0.1:8080", show_default=True,
              help="HOST:PORT the console serves on (anyone who reaches it sees the "
                   "deployment: keep it on loopback or behind a proxy).")
@click.option("--token", envvar="GATEWAY_TOKEN", default=None,
              help="Read token for every cluster (also GATEWAY_TOKEN).")
@click.option("--admin-token", envvar="GATEWAY_CONSOLE_ADMIN_TOKEN", default=None,
              help="Admin token: enables the actions (pause/resume, delete handled "
                   "exception rows), each confirmed (also GATEWAY_CONSOLE_ADMIN_TOKEN).")
@_ca
@click.option("--conflict-table", "conflict_tables", multiple=True, metavar="SCHEMA.TABLE",
              help="Count and browse this table's exceptions (repeatable; tables named by a "
                   "conflict rule without wildcards are counted anyway).")
@click.option("--interval", type=float, default=2.0, show_default=True,
              help="Seconds between two polls of every cluster.")
def console(targets: tuple[str, ...], listen: str, token: str | None,
            admin_token: str | None, ca: str | None, conflict_tables: tuple[str, ...],
            interval: float) -> None:
    """Serve a web page (and its JSON under /api/v1/) showing the clusters, their nodes and
    leaders, the channels with direction, state, lag and an hour of history, the appliers and
    the conflicts. Read-only unless --admin-token is given. Runs until interrupted."""
    import threading

    from gateway.console.exceptions import ExceptionsError
    from gateway.console.local import LocalConsole

    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise BadInput(f"--listen {listen!r}: expected HOST:PORT")
    if interval <= 0:
        raise BadInput(f"--interval {interval}: must be positive")
    root = read_ca(ca)
    try:
        app = LocalConsole(list(targets), token=token or "", admin_token=admin_token or "",
                           root_certificates=root, conflict_tables=conflict_tables,
                           interval=interval, listen=(host.strip("[]"), int(port)))
    except ExceptionsError as exc:
        raise BadInput(f"--conflict-table: {exc}") from None
    except OSError as exc:
        raise BadInput(f"--listen {listen}: {exc.strerror or exc}") from None
    app.start()
    clusters = ", ".join(str(c) for c in sorted(app.poller.snapshot().clusters)) or "none yet"
    mode = "admin actions enabled" if admin_token else "read-only"
    print(f"gateway console on {app.url}/ ({mode}; clusters: {clusters})", file=sys.stderr,
          flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        app.close()
