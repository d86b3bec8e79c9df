"""``gateway schema``: table definitions and their versions (docs/schema.md). Changes go
through ``gateway sql "CREATE TABLE ..."`` / ``"ALTER TABLE ..."`` / ``"DROP TABLE ..."``."""

from __future__ import annotations

import click

from gateway.schema.codec import definition_from_proto, event_from_proto
from gateway.schema.model import SchemaEvent, TableDef

from .node import _ca, _call, _client, _target, _token

__all__ = ["describe_event", "render_definition", "schema"]


@click.group("schema")
def schema() -> None:
    """Table definitions: each table's columns, primary key and version."""


def render_definition(d: TableDef) -> list[str]:
    """``d`` as lines: the table and version, then one line per column."""
    out = [f"{d.table} version {d.version} primary key ({', '.join(d.primary_key)})"]
    for c in d.columns:
        extra = "" if c.nullable else " NOT NULL"
        extra += "" if c.default is None else f" DEFAULT {c.default!r}"
        out.append(f"  {c.name} {c.type}{extra}")
    return out


def describe_event(e: SchemaEvent) -> str:
    """One line saying what ``e`` changed."""
    if e.kind == "create":
        cols = ", ".join(c.name for c in e.definition.columns) if e.definition else ""
        what = f"{'implicit ' if e.implicit else ''}create ({cols})"
    elif e.kind == "rename_column":
        what = f"rename column {e.old_name} to {e.new_name}"
    elif e.kind in ("add_column", "drop_column") and e.column is not None:
        default = "" if e.column.default is None else f" DEFAULT {e.column.default!r}"
        what = f"{e.kind.replace('_', ' ')} {e.column.name} {e.column.type}{default}"
    else:
        what = e.kind.replace("_", " ")
    return f"version {e.version}\t{what}\tfrom cluster {e.origin or '?'}"


@schema.command("show")
@_target
@_token
@_ca
@click.argument("table")
def schema_show(target: str, token: str | None, ca: str | None, table: str) -> None:
    """Print TABLE's (schema.table) definition and version on the node asked."""
    with _client(target, token, ca, 30.0) as c:
        got = _call(lambda: c.show_table(table))
    if got.dropped:
        click.echo(f"{table} dropped at version {got.definition.version}")
        return
    for line in render_definition(definition_from_proto(got.definition)):
        click.echo(line)


@schema.command("history")
@_target
@_token
@_ca
@click.argument("table")
def schema_history(target: str, token: str | None, ca: str | None, table: str) -> None:
    """Print TABLE's schema events, oldest first, one per line; then the concurrent changes
    that lost to the winner rule on this cluster, each with its cause."""
    with _client(target, token, ca, 30.0) as c:
        got = _call(lambda: c.schema_history(table))
    for msg in got.events:
        click.echo(describe_event(event_from_proto(msg)))
    for msg, cause in zip(got.lost, got.lost_causes, strict=True):
        click.echo(f"lost: {describe_event(event_from_proto(msg))}: {cause}")
