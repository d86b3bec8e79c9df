"""``gateway alarm``: the NOSPACE alarms of a cluster (docs/node.md, "Disk full and fsync
failure")."""

from __future__ import annotations

import json

import click

from .node import _ca, _call, _client, _target, _token
from .plugins import BadInput

__all__ = ["alarm"]


@click.group("alarm")
def alarm() -> None:
    """NOSPACE alarms: while one is raised, every node refuses writes (RESOURCE_EXHAUSTED)."""


@alarm.command("list")
@_target
@_token
@_ca
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def alarm_list(target: str, token: str | None, ca: str | None, fmt: str) -> None:
    """One line per raised alarm: the node, its path, free bytes and threshold."""
    with _client(target, token, ca, 10.0) as c:
        st = _call(lambda: c.status())
    rows = [{"node_id": a.node_id, "path": a.path, "free_bytes": a.free_bytes,
             "min_free_bytes": a.min_free_bytes} for a in st.alarms]
    if fmt == "json":
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("no alarm raised")
    for r in rows:
        click.echo(f"NOSPACE node {r['node_id']}: {r['path'] or '.'}: {r['free_bytes']} bytes "
                   f"free, min_free_bytes {r['min_free_bytes']}")


@alarm.command("disarm")
@_target
@_token
@_ca
@click.option("--all", "all_nodes", is_flag=True, help="Clear every raised alarm.")
@click.argument("node_id", type=int, required=False)
def alarm_disarm(target: str, token: str | None, ca: str | None, all_nodes: bool,
                 node_id: int | None) -> None:
    """Clear the NOSPACE alarm of NODE_ID (or --all); admin permission. A node still short of
    space raises its alarm again at its next check."""
    if all_nodes == (node_id is not None):
        raise BadInput("name one NODE_ID, or --all")
    if node_id is not None and node_id <= 0:
        raise BadInput(f"NODE_ID must be a positive integer, not {node_id}")
    with _client(target, token, ca, 30.0) as c:
        click.echo(_call(lambda: c.disarm_alarm(node_id or 0, all_nodes=all_nodes)).message)
