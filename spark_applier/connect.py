"""Spark Connect (``sc://``): which sessions are Connect clients, and what they cannot do.

A Spark Connect client has no JVM and no ``SparkContext``: it sends plans to a server whose
driver runs them. Everything of ``spark_applier`` that builds DataFrames works through it -- the
``gateway_wal``/``gateway_store`` data sources (registered in the Connect session; their code
runs in the server's Python workers, which must import ``spark_applier``), the bulk reduce, the
SQLite target (both modes), the Cassandra target and the micro-batch runner. What calls the
driver's JVM is refused with one line (``ConnectUnsupported``): the Parquet target's commit
protocol (``commit.py``), which creates, lists and deletes files through Hadoop's
``FileSystem`` in the driver's JVM (``spark._jvm``).
"""

from __future__ import annotations

from typing import Any

from gateway import ApplyError

__all__ = ["ConnectUnsupported", "is_connect", "refuse_connect"]


class ConnectUnsupported(ApplyError):
    """Something that needs the driver's JVM was asked of a Spark Connect session."""


def is_connect(spark: Any) -> bool:
    """True if ``spark`` is a Spark Connect client session (``SparkSession.builder.remote``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def refuse_connect(spark: Any, what: str, needs: str) -> None:
    """Raise ``ConnectUnsupported`` (one line) if ``spark`` is a Connect session: ``what``
    cannot work through it because it ``needs`` the driver's JVM."""
    if is_connect(spark):
        raise ConnectUnsupported(
            f"{what} is not supported through Spark Connect (sc://): it {needs}, which a "
            f"Connect client does not have; run it with --master, or use the sqlite: or "
            f"cassandra:// target through Spark Connect")
