"""``gateway conflicts``: the conflict rules and role of a cluster (docs/conflicts.md)."""

from __future__ import annotations

import json

import click

from .node import _ca, _call, _client, _target, _token

__all__ = ["conflicts"]

_ROLES = ["PRIMARY", "SECONDARY", "PASS", "NONE"]


@click.group("conflicts")
def conflicts() -> None:
    """Conflict detection between replicating clusters: rules per table, this cluster's role."""


@conflicts.command("set")
@_target
@_token
@_ca
@click.option("--role", type=click.Choice(_ROLES, case_sensitive=False), default=None,
              help="Also set this cluster's role (the epoch functions need one).")
@click.argument("table")
@click.argument("function")
def conflicts_set(target: str, token: str | None, ca: str | None, role: str | None,
                  table: str, function: str) -> None:
    """Judge replicated changes of TABLE (schema.table; * and ? wildcards) with FUNCTION, as
    MySQL writes it: NDB$MAX(ts), NDB$OLD(ts), NDB$EPOCH2, NDB$EPOCH_TRANS, LWW, ..."""
    with _client(target, token, ca, 30.0) as c:
        if role is not None:
            click.echo(_call(lambda: c.set_conflict_role(role.upper())).message)
        click.echo(_call(lambda: c.set_conflict_rule(table, function)).message)


@conflicts.command("unset")
@_target
@_token
@_ca
@click.argument("table")
def conflicts_unset(target: str, token: str | None, ca: str | None, table: str) -> None:
    """Remove the rule of the table pattern TABLE (its tables are no longer judged)."""
    with _client(target, token, ca, 30.0) as c:
        click.echo(_call(lambda: c.unset_conflict_rule(table)).message)


@conflicts.command("role")
@_target
@_token
@_ca
@click.argument("role", type=click.Choice(_ROLES, case_sensitive=False))
def conflicts_role(target: str, token: str | None, ca: str | None, role: str) -> None:
    """Set this cluster's role: PRIMARY (detects and realigns), SECONDARY, PASS or NONE."""
    with _client(target, token, ca, 30.0) as c:
        click.echo(_call(lambda: c.set_conflict_role(role.upper())).message)


@conflicts.command("rules")
@_target
@_token
@_ca
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def conflicts_rules(target: str, token: str | None, ca: str | None, fmt: str) -> None:
    """The role, then one line per rule, most specific first (the order they match in)."""
    with _client(target, token, ca, 10.0) as c:
        st = _call(lambda: c.status())
    rules = [(r.table, f"{r.function}({', '.join(r.args)})" if r.args else r.function)
             for r in st.conflict_rules]
    if fmt == "json":
        click.echo(json.dumps({"role": st.conflict_role or "NONE",
                               "rules": [{"table": t, "function": f} for t, f in rules]},
                              indent=2))
        return
    click.echo(f"role {st.conflict_role or 'NONE'}")
    if not rules:
        click.echo("no rules")
    for table, fn in rules:
        click.echo(f"{table}\t{fn}")
