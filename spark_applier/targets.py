"""``--target`` specs of ``gateway spark apply``: ``KIND:WHERE`` -> a bulk-apply target.

=========================================  ===================================================
spec                                       target
=========================================  ===================================================
``parquet:DIR``                            ``writers.ParquetTarget`` (datasets per table)
``sqlite:FILE``                            ``sqlite_target.SqliteTarget`` (the built-in applier)
``cassandra://HOST:PORT/KEYSPACE``         ``cassandra.CassandraTarget``
``delta:DIR``                              ``writers.DeltaTarget`` (needs delta-spark)
=========================================  ===================================================
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import SparkSession

__all__ = ["TargetSpecError", "make_target"]


class TargetSpecError(ValueError):
    """A ``--target`` spec that names no target; ``str()`` is one line."""


def make_target(spark: SparkSession, spec: str) -> Any:
    """The target ``spec`` names; ``TargetSpecError`` for a bad spec."""
    m = re.fullmatch(r"cassandra://([^:/]+):(\d+)/(\w+)", spec)
    if m:
        from .cassandra import CassandraTarget

        return CassandraTarget((m.group(1), int(m.group(2))), m.group(3))
    kind, sep, where = spec.partition(":")
    if not sep or not where:
        raise TargetSpecError(f"invalid target {spec!r}: expected parquet:DIR, sqlite:FILE, "
                              f"delta:DIR or cassandra://HOST:PORT/KEYSPACE")
    from .writers import DeltaTarget, ParquetTarget, SqliteTarget

    if kind == "parquet":
        return ParquetTarget(spark, where)
    if kind == "sqlite":
        return SqliteTarget(where)
    if kind == "delta":
        return DeltaTarget(spark, where)
    raise TargetSpecError(f"unknown target kind {kind!r} in {spec!r} (parquet, sqlite, delta, "
                          f"cassandra)")
