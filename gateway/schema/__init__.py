"""Table definitions as replicated, versioned log events (issue 57, docs/schema.md).

Pure like :mod:`gateway.conflict`: no node, no I/O. ``model`` holds the values, ``apply``
turns a change into an event and an event into the next definition, ``upcast`` maps a row
written under one version onto another, ``history`` keeps every event a cluster has seen of
one table and picks the deterministic winner of concurrent changes, and ``codec`` converts
events to and from the log's tagged ``gateway.v1.SchemaEvent``.
"""

from __future__ import annotations

from gateway.schema.model import (
    KINDS,
    Column,
    InvalidChange,
    RefusedChange,
    SchemaError,
    SchemaEvent,
    TableDef,
)

__all__ = ["KINDS", "Column", "InvalidChange", "RefusedChange", "SchemaError", "SchemaEvent",
           "TableDef"]
