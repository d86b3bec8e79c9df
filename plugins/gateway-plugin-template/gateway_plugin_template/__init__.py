"""A template Gateway plugin: a JSON-lines applier (with schema changes), a CLI command, a
metrics listener, a schema-event listener and a conflict function.

Everything here uses only the public API a third-party plugin has.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import click

from gateway import (
    APPLY,
    SCOPE_NODE,
    Applier,
    ApplierConfigError,
    ApplierFactory,
    Capabilities,
    Cause,
    Change,
    ConflictFunction,
    Context,
    OpType,
    RowOp,
    SchemaEvent,
    Stored,
    Verdict,
    hookimpl,
)
from gateway.fileio import FileSystem, append_synced

__all__ = ["LAST_METRICS", "SCHEMA_EVENTS", "JsonLinesApplier", "first_wins"]

#: The last metrics snapshot received per source (applier name).
LAST_METRICS: dict[str, dict[str, float]] = {}
#: ``(applier, table, version, kind, outcome)`` of every schema event an applier reached.
SCHEMA_EVENTS: list[tuple[str, str, int, str, str]] = []


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


class JsonLinesApplier(Applier):
    """Appends each operation as one JSON object per line to ``path`` (fsynced per batch).

    Idempotent it is not -- a replay appends again -- so it says so, and applies a batch with
    one write (all or nothing up to a torn last line). It writes through the product's file
    layer (``gateway.fileio``), as a plugin should: ``fs`` lets tests crash it.
    """

    def __init__(self, path: str, *, fs: FileSystem | None = None) -> None:
        self.name = "jsonl"
        self.path = path
        self.fs = fs
        self.capabilities = Capabilities(accepts_sql=True, idempotent=False, max_batch=256)
        self._lock = threading.Lock()

    def apply(self, ops: Sequence[RowOp]) -> None:
        lines = []
        for op in ops:
            lines.append(json.dumps({
                "kind": op.kind.name, "table": str(op.table),
                "row": {k: _plain(v) for k, v in op.row().items()},
                "sql": op.sql.query if op.sql else None,
                "gtid": [op.gtid.server_id, op.gtid.trans_id], "log_index": op.log_index,
                "epoch": op.epoch, "author": op.author, "commit_ts_ns": op.commit_ts_ns,
            }, sort_keys=True))
        data = ("\n".join(lines) + "\n").encode()
        with self._lock:
            append_synced(self.path, data, fs=self.fs)

    def apply_schema(self, event: SchemaEvent) -> None:
        """A schema change (``schema_policy = "apply"``, the default) as one line of its own,
        ``{"kind": "SCHEMA", ...}`` with the table's whole new definition, between the
        operations before it and those after it (the dispatcher's order). Lines carry no
        schema of their own, so nothing else changes; a store with tables would alter one
        here, and should be idempotent: a replay after a crash hands the event over again."""
        d = event.definition
        line = json.dumps({
            "kind": "SCHEMA", "table": event.table, "version": event.version,
            "change": event.kind, "column": event.column.name if event.column else None,
            "old_name": event.old_name or None, "new_name": event.new_name or None,
            "columns": [[c.name, c.type] for c in d.columns] if d is not None else None,
            "primary_key": list(d.primary_key) if d is not None else None,
        }, sort_keys=True)
        with self._lock:
            append_synced(self.path, (line + "\n").encode(), fs=self.fs)


def _create(options: Mapping[str, str]) -> JsonLinesApplier:
    if not options.get("path"):
        raise ApplierConfigError("applier 'jsonl': option 'path' is required")
    return JsonLinesApplier(options["path"])


@hookimpl
def gateway_register_appliers() -> list[ApplierFactory]:
    # A file on the node's own disk: in a gateway cluster every node appends to its own copy
    # (scope "node"). An applier writing one shared external store declares SCOPE_CLUSTER
    # (the default when scope is left out): only the leader then applies.
    return [ApplierFactory("jsonl", _create, "append operations to a JSON-lines file",
                           {"path": "the file to append to; required"}, scope=SCOPE_NODE)]


@click.command("template-info")
def template_info() -> None:
    """Say hello from the template plugin."""
    click.echo("gateway-plugin-template: appliers jsonl")


@hookimpl
def gateway_register_commands(cli: click.Group) -> None:
    cli.add_command(template_info)


@hookimpl
def gateway_publish_metrics(source: str, metrics: Mapping[str, float]) -> None:
    LAST_METRICS[source] = dict(metrics)


@hookimpl
def gateway_schema_event(applier: str, event: SchemaEvent, outcome: str) -> None:
    # Every applier's schema events, in log order, with what became of them ("applied",
    # "ignored", "unsupported"): a plugin could feed a schema registry or page someone here.
    SCHEMA_EVENTS.append((applier, event.table, event.version, event.kind, outcome))


def first_wins(change: Change, stored: Stored, ctx: Context) -> Verdict:
    """``TEMPLATE$FIRST_WINS``: a replicated insert over a row this cluster already holds is
    rejected (recorded in the exceptions table), every other change applied. Pure and
    deterministic, as every conflict function must be: each node judges alone."""
    if change.op is OpType.WRITE_ROW and stored.exists:
        return Verdict(False, Cause.ROW_ALREADY_EXISTS)
    return APPLY


@hookimpl
def gateway_register_conflict_functions() -> Mapping[str, ConflictFunction]:
    # A row function without argument; one taking a column (``NAME(col)``), an epoch-based
    # or a transactional one registers a ``gateway.FunctionSpec`` instead (docs/plugins.md).
    return {"TEMPLATE$FIRST_WINS": first_wins}
