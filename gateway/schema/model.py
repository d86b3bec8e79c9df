"""The values of the schema model: a column, a table's definition at one version, and one
change (a schema event). Pure: no I/O.

A table's version is 1 for its first definition and grows by one per event; an event carries
the version after it and the id of the event it was made on (``parent``), so concurrent
changes made on the same version on two clusters are recognisable (same parent) and one of
them wins by :func:`gateway.schema.history.winner`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KINDS", "Column", "InvalidChange", "RefusedChange", "SchemaError", "SchemaEvent",
           "TableDef"]

#: The kinds of schema events, in the order of ``gateway.v1.SchemaChangeKind`` (1-based).
KINDS = ("create", "add_column", "drop_column", "rename_column", "drop_table")


class SchemaError(ValueError):
    """A schema change or event that cannot be used; ``str()`` names the table and column."""


class InvalidChange(SchemaError):
    """The change is malformed (bad name, type, default): the API answers INVALID_ARGUMENT."""


class RefusedChange(SchemaError):
    """The change is well formed but cannot be applied everywhere (a primary-key change, a
    type change, dropping a key column, a column that exists): FAILED_PRECONDITION."""


@dataclass(frozen=True)
class Column:
    """One column. ``type`` is a ``FieldType`` name without its prefix (``"INTEGER"``);
    ``default`` is the Python value of the log's ``Value`` in the case the type uses (a
    DECIMAL's text, a TIMESTAMP's nanoseconds), None for NULL."""

    name: str
    type: str
    default: object = None
    nullable: bool = True


@dataclass(frozen=True)
class TableDef:
    """A table's definition at ``version``: its columns in order, the primary key's first."""

    table: str
    version: int
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]

    def column(self, name: str) -> Column | None:
        """The column named ``name`` (names compare without case), or None."""
        folded = name.casefold()
        for c in self.columns:
            if c.name.casefold() == folded:
                return c
        return None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class SchemaEvent:
    """One committed change of one table (see the module docstring).

    ``column``: the new column of ``add_column``, the dropped one of ``drop_column``;
    ``old_name``/``new_name``: ``rename_column``; ``definition``: the whole definition after
    the event (None after ``drop_table``); ``origin``: the cluster that made it; ``implicit``:
    the first write's shape of an undeclared table; ``parent``: the id
    (:func:`gateway.schema.codec.event_id`) of the event it was made on, empty at version 1.
    """

    table: str
    version: int
    kind: str
    column: Column | None = None
    old_name: str = ""
    new_name: str = ""
    definition: TableDef | None = None
    origin: str = ""
    implicit: bool = False
    parent: bytes = b""
