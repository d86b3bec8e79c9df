"""``gateway conflicts``: the conflict rules and role of a cluster (docs/conflicts.md)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

import click

from gateway.v1 import gateway_pb2

from .node import _ca, _call, _client, _target, _token
from .plugins import BadInput

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


_PAGE = 1000  # rows per Scan


def _exception_rows(target: str, token: str | None, ca: str | None, table: str
                    ) -> list[Mapping[str, object]]:
    from gateway.client import python_row
    from gateway.v1 import value_pb2

    if table.count(".") != 1 or table.endswith("$EX"):
        raise BadInput(f"{table!r}: give the table as schema.table (its exceptions are in "
                       f"schema.table$EX)")
    out: list[Mapping[str, object]] = []
    with _client(target, token, ca, 30.0) as c:
        start = None
        while True:
            res = _call(functools.partial(c.scan, f"{table}$EX", start=start, limit=_PAGE))
            for row in res.rows:
                got = python_row(row)
                if [f.name for f in row.key_fields] != list(_KEY) \
                        or any(k not in got for k in _HEAD):
                    key = ", ".join(f"{f.name}={got.get(f.name)!r}" for f in row.key_fields)
                    raise BadInput(
                        f"{table}$EX: the row with key {key} was not written by conflict "
                        f"detection (an exceptions row has the key {'/'.join(_KEY)} and the "
                        f"columns {', '.join(_HEAD)}); the $EX suffix is reserved for "
                        f"exceptions tables")
                out.append(got)
            if not res.more or not res.rows:
                return out
            # the next page starts after the last row: its key with count + 1 (the last key
            # column), as the key values themselves (typed by the table's key columns)
            start = list(res.rows[-1].key_values)
            start[-1] = value_pb2.Value(uint_value=start[-1].uint_value + 1)


_KEY = ("server_id", "source_server_id", "source_epoch", "count")
_HEAD = ("NDB$OP_TYPE", "NDB$CFT_CAUSE", "NDB$ORIG_TRANSID")


def _row_key(row: gateway_pb2.Row) -> str:
    """The base table's key columns of an exception row, as ``name=value, ...``."""
    from gateway.client import python_row

    got = python_row(row)
    return ", ".join(f"{k}={got[k]!s}" for k in got if k not in _KEY and k not in _HEAD
                     and not k.endswith(("$OLD", "$NEW")))


@conflicts.command("list")
@_target
@_token
@_ca
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--limit", type=click.IntRange(0, 10000), default=100, show_default=True,
              help="Rows to print (0: only the counts).")
@click.option("--page-token", default="", help="Continue after a page (list prints it).")
@click.argument("table", required=False, default="")
def conflicts_list(target: str, token: str | None, ca: str | None, fmt: str, limit: int,
                   page_token: str, table: str) -> None:
    """The recorded conflicts of the tables matching TABLE (schema.table; * and ? wildcards;
    every table when left out): the counts per table and cause, then one line per rejected
    change -- table, SERVER/SOURCE/EPOCH/COUNT, operation, cause, origin GTID, row key, and
    what `conflicts replay` did with it (while the node keeps its record)."""
    with _client(target, token, ca, 30.0) as c:
        res = _call(lambda: c.conflicts_list(table, limit=limit or 1, page_token=page_token,
                                             counts_only=limit == 0))
    rows = list(res.rows)[:limit] if limit else []
    if fmt == "json":
        from gateway.client import python_row

        click.echo(json.dumps({
            "counts": [{"table": n.table, "cause": n.cause, "count": n.count}
                       for n in res.counts],
            "rows": [{"table": r.table, "id": r.id, "replayed": r.replayed,
                      **python_row(r.row)} for r in rows],
            "next_page_token": res.next_page_token if limit else ""},
            indent=2, default=str))
        return
    if not res.counts:
        click.echo(f"no conflicts recorded{f' for {table}' if table else ''}")
        return
    total = sum(n.count for n in res.counts)
    for n in res.counts:
        click.echo(f"{n.table}\t{n.cause}\t{n.count}")
    click.echo(f"{total} conflict(s) in {len({n.table for n in res.counts})} table(s)")
    if rows:
        click.echo("")
    for r in rows:
        click.echo(f"{r.table}\t{r.id}\t{r.op_type}\t{r.cause}\t{r.orig_transid}\t"
                   f"{_row_key(r.row)}" + (f"\treplayed: {r.replayed}" if r.replayed else ""))
    if limit and res.next_page_token:
        click.echo(f"more: --page-token '{res.next_page_token}'")


@conflicts.command("replay")
@_target
@_token
@_ca
@click.option("--all", "every", is_flag=True,
              help="Every recorded conflict of the tables TABLE matches (with --cause: of "
                   "that cause).")
@click.option("--cause", default="", help="Only conflicts with this cause.")
@click.option("--dry-run", is_flag=True, help="Say what would be written; write nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.argument("table")
@click.argument("ids", nargs=-1, metavar="[SERVER/SOURCE/EPOCH/COUNT...]")
def conflicts_replay(target: str, token: str | None, ca: str | None, every: bool, cause: str,
                     dry_run: bool, fmt: str, table: str, ids: tuple[str, ...]) -> None:
    """Write rejected changes of TABLE again as new writes of this cluster, in per-key
    order, each only if its row is still as the conflict found it: a row changed since is
    reported (changed-since), never overwritten, and a second run writes nothing
    (already-applied). Needs a token with the admin permission."""
    if not ids and not every:
        raise BadInput("name the conflicts (SERVER/SOURCE/EPOCH/COUNT as list prints them) "
                       "or pass --all")
    if ids and every:
        raise BadInput("give conflict ids or --all, not both")
    with _client(target, token, ca, 120.0) as c:
        res = _call(lambda: c.conflicts_replay(table, ids, cause=cause, dry_run=dry_run,
                                               timeout=120.0))
    if fmt == "json":
        click.echo(json.dumps({"applied": res.applied, "skipped": res.skipped, "outcomes": [
            {"table": o.table, "id": o.id, "outcome": o.outcome, "detail": o.detail}
            for o in res.outcomes]}, indent=2))
        return
    for o in res.outcomes:
        click.echo(f"{o.table}\t{o.id}\t{o.outcome}" + (f"\t{o.detail}" if o.detail else ""))
    click.echo(f"{res.applied} applied, {res.skipped} not applied"
               + (" (dry run)" if dry_run else ""))


@conflicts.command("show")
@_target
@_token
@_ca
@click.argument("table")
@click.argument("conflict", metavar="SERVER/SOURCE/EPOCH/COUNT")
def conflicts_show(target: str, token: str | None, ca: str | None, table: str,
                   conflict: str) -> None:
    """One recorded conflict of TABLE with the row's values here (old) and in the rejected
    change (new); CONFLICT as `gateway conflicts list` prints it."""
    try:
        want = tuple(int(p) for p in conflict.split("/"))
    except ValueError:
        want = ()
    if len(want) != 4:
        raise BadInput(f"{conflict!r}: give SERVER/SOURCE/EPOCH/COUNT as list prints it")
    for r in _exception_rows(target, token, ca, table):
        if tuple(int(r[k]) for k in _KEY) == want:  # type: ignore[call-overload]
            for k in _HEAD:
                click.echo(f"{k}: {r[k]}")
            for k in r:
                if k not in _KEY and k not in _HEAD and not k.endswith(("$OLD", "$NEW")):
                    click.echo(f"key {k}: {r[k]}")
            for k in sorted(k[:-4] for k in r if k.endswith("$OLD")):
                click.echo(f"{k}: {r[k + '$OLD']!r} here, {r[k + '$NEW']!r} in the change")
            return
    raise BadInput(f"no conflict {conflict} recorded for {table}")


@conflicts.command("clear")
@_target
@_token
@_ca
@click.argument("table")
@click.argument("conflicts_", nargs=-1, required=True, metavar="SERVER/SOURCE/EPOCH/COUNT...")
def conflicts_clear(target: str, token: str | None, ca: str | None, table: str,
                    conflicts_: tuple[str, ...]) -> None:
    """Delete handled conflicts of TABLE (schema.table) from its exceptions table, each given
    as `gateway conflicts list` prints it. Needs a token with the admin permission (and write):
    only the gateway writes schema.table$EX, and an operator may only delete from it."""
    from gateway.v1 import statement_pb2, value_pb2

    if table.count(".") != 1 or table.endswith("$EX"):
        raise BadInput(f"{table!r}: give the table as schema.table (its exceptions are in "
                       f"schema.table$EX)")
    keys = []
    for text in conflicts_:
        parts = text.split("/")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            raise BadInput(f"{text!r}: give SERVER/SOURCE/EPOCH/COUNT as list prints it")
        keys.append([value_pb2.Value(uint_value=int(p)) for p in parts])
    schema, name = table.split(".")
    unsigned = value_pb2.FieldType.FIELD_TYPE_UNSIGNED
    delete = statement_pb2.DeleteStatement(
        table=statement_pb2.TableMetadata(schema_name=schema, table_name=f"{name}$EX"),
        key_fields=[statement_pb2.FieldMetadata(name=k, type=unsigned) for k in _KEY],
        records=[statement_pb2.DeleteRecord(key_values=k) for k in keys])
    with _client(target, token, ca, 30.0) as c:
        _call(lambda: c.write([statement_pb2.Statement(delete=delete)]))
    click.echo(f"deleted {len(keys)} conflict(s) of {table} from {table}$EX")
