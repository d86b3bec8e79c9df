"""PySpark side of Gateway: read logs and stores in parallel, reduce and apply in bulk.

Modules, one job each:

- ``schema``: the row schema of the data source (one row per row operation, value cells);
- ``layout``: what a path holds (WAL segments, a log file) and its byte-range partitions;
- ``decode``: one byte range -> Arrow record batches, with a report of damaged records;
- ``datasource``: the ``gateway_wal`` PySpark data source (batch and streaming);
- ``store_source``: the ``gateway_store`` data source over LSM store snapshots;
- ``bulk``: the bulk reduce (final state of each row by log order) and the apply job;
- ``writers``: targets of the bulk apply (Parquet, Delta; re-exports the SQLite one);
- ``sqlite_target``: the SQLite target, reduced rows column by column into the applier;
- ``cassandra``: the Cassandra target;
- ``convert``: Spark rows and Arrow cell columns back to ``RowOp`` values;
- ``position``: the durable applied position of a bulk apply, so runs resume;
- ``plugin``/``cli``: the ``spark`` plugin (``gateway spark apply``, micro-batches).

See docs/spark.md. Importing this package does not import PySpark; the modules that need it
do.
"""

from __future__ import annotations

__all__: list[str] = []
