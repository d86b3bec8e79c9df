"""A Parquet table's declared definition, and a unit's rows fitted to it (the upcast of
docs/schema.md for the Parquet target).

Once a schema event has reached a table (``ParquetTarget.apply_schema``), the table is
*declared*: its definition after the event and the renames made so far are kept beside its
versions (``TableCommits.declare``), and every later unit's rows are fitted to it before the
merge, as the SQLite applier fits them (``gateway.appliers.sqlite_schema.Declared``):

- a value column the definition has keeps its name;
- a column renamed since the row was written takes its current name (a row naming both, the
  old and the current name, keeps the value given under the current one);
- a column the definition does not have (dropped since, or a losing branch's) is left out;
- an INSERT or UPSERT -- the row holds exactly its columns afterwards -- takes a column's
  default for a column it does not name, as ``INSERT OR REPLACE`` does in SQLite; an UPDATE
  leaves such a column as it was.

Rows of older versions reach a target after the change that outdated them when they were
written on another cluster before it saw the change. Names compare without case, as in the
definitions. Key columns are taken as the rows name them (a key change is refused before it
commits; a key column's rename is not fitted here).

Pure but for the ``DataFrame`` expressions: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from gateway import SchemaEvent
from gateway.v1.value_pb2 import FieldType

from .schema import quoted, spark_type_of

__all__ = ["Declared", "declared_after", "fit_ops"]

#: ``(name, FieldType)`` of a unit's key or value columns (``writers.Columns``).
_Cols = list[tuple[str, int]]


@dataclass(frozen=True)
class Declared:
    """A table's definition after its last schema event: ``columns`` as ``(name, type
    name without its FieldType prefix, default)`` in order, the ``primary_key`` names, and
    ``renames`` (a folded old name -> the current name)."""

    version: int
    columns: tuple[tuple[str, str, Any], ...]
    primary_key: tuple[str, ...]
    renames: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON document (a BLOB or UUID default as ``{"hex": ...}``)."""
        return {"version": self.version,
                "columns": [[n, t, _to_json(d)] for n, t, d in self.columns],
                "primary_key": list(self.primary_key), "renames": dict(self.renames)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Declared:
        """The declared definition ``to_json`` wrote; ``ValueError`` if it is not one."""
        try:
            return cls(int(doc["version"]),
                       tuple((str(n), str(t), _from_json(d)) for n, t, d in doc["columns"]),
                       tuple(str(k) for k in doc["primary_key"]),
                       {str(k): str(v) for k, v in dict(doc["renames"]).items()})
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a declared table definition: {exc}") from None


def declared_after(before: Declared | None, event: SchemaEvent) -> Declared | None:
    """The declared definition after ``event`` (None: the table is gone). An event without
    a definition leaves ``before``."""
    if event.kind == "drop_table":
        return None
    d = event.definition
    if d is None:
        return before
    renames = dict(before.renames) if before is not None else {}
    if event.kind == "rename_column" and event.old_name and event.new_name:
        old, new = event.old_name.casefold(), event.new_name
        renames = {k: new if v.casefold() == old else v for k, v in renames.items()}
        renames[old] = new
    names = {c.name.casefold() for c in d.columns}
    # a name in use again (a column added under an old name) is that column, not a rename
    renames = {k: v for k, v in renames.items() if k not in names}
    return Declared(d.version, tuple((c.name, c.type, c.default) for c in d.columns),
                    tuple(d.primary_key), renames)


def fit_ops(ops: DataFrame, keys: _Cols, values: _Cols, meta: list[str], declared: Declared
            ) -> tuple[DataFrame, _Cols]:
    """``ops`` (``writers._typed_ops``: ``op``, the key columns, each value column with its
    ``__has_<c>`` flag, the ``meta`` columns) with its value columns fitted to ``declared``
    (module docstring), and the fitted value columns as ``(name, FieldType)``."""
    current = {n.casefold(): n for n, _, _ in declared.columns}
    key_names = {k.casefold() for k in declared.primary_key} | {n.casefold() for n, _ in keys}
    exact: dict[str, list[str]] = {}
    renamed: dict[str, list[str]] = {}
    for n, _ in values:
        folded = n.casefold()
        if folded in current:
            exact.setdefault(current[folded], []).append(n)
            continue
        target = current.get(declared.renames.get(folded, "").casefold())
        if target is not None:
            renamed.setdefault(target, []).append(n)
    replacing = F.col("op").isin("INSERT", "UPSERT")
    out: list[SparkColumn] = []
    fitted: _Cols = []
    for name, type_name, default in declared.columns:
        if name.casefold() in key_names:
            continue
        field_type = FieldType.Value("FIELD_TYPE_" + type_name)
        spark_type = spark_type_of(field_type)
        value: SparkColumn | None = None
        has: SparkColumn | None = None
        for s in [*exact.get(name, []), *renamed.get(name, [])]:  # the current name first
            given = F.col(quoted(f"__has_{s}"))
            typed = F.col(quoted(s)).cast(spark_type)
            value = F.when(given, typed) if value is None else value.when(given, typed)
            has = given if has is None else has | given
        if default is not None:
            fallback = F.lit(default).cast(spark_type)
            value = fallback if value is None else value.otherwise(fallback)
            has = replacing if has is None else has | replacing
        if value is None or has is None:
            continue  # neither named nor defaulted: the merge leaves it as for any column
        out += [value.alias(name), has.alias(f"__has_{name}")]
        fitted.append((name, field_type))
    return (ops.select(F.col("op"), *[F.col(quoted(n)) for n, _ in keys], *out,
                       *[F.col(quoted(m)) for m in meta]),
            fitted)


def _to_json(value: Any) -> Any:
    return {"hex": bytes(value).hex()} if isinstance(value, bytes | bytearray) else value


def _from_json(value: Any) -> Any:
    return bytes.fromhex(value["hex"]) if isinstance(value, dict) else value
