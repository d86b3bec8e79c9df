"""Write timestamps: every Cassandra write carries one derived from the log, never the clock.

The formula, its bit budget and ``RowClock`` live in ``gateway.appliers.cassandra_mapping``,
shared with the Spark bulk apply's Cassandra target, so that both paths order every change of
the log on one clock (a Spark backfill followed by streaming converges; a stale write from
either never wins). This module re-exports them under the plugin's historical names.
"""

from __future__ import annotations

from gateway.appliers.cassandra_mapping import MAX_LOG_INDEX, RowClock, write_timestamp

__all__ = ["MAX_LOG_INDEX", "RowClock", "write_timestamp"]
