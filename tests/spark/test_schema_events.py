"""Issue 57: the Spark bulk apply of a log that spans schema changes gives the same tables as
the streaming SQLite applier (CREATE, writes, ADD COLUMN, writes under the old and the new
version, RENAME, DROP COLUMN; the log of tests/appliers/schema_log.py, written with the
schema codec), and Parquet datasets evolve their schema and fit the rows of older versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import LogFileSource
from gateway.appliers.sqlite import SqliteApplier
from spark_applier.bulk import apply_log
from spark_applier.schema_events import schema_events
from spark_applier.sqlite_target import SqliteTarget
from tests.appliers.schema_log import FINAL, events, schema_log, write_log


def _tables(path: Path) -> dict[str, list[tuple]]:
    """Every user table of a SQLite file: its columns (name, declared type, default) and
    rows, in key order."""
    conn = sqlite3.connect(path)
    try:
        out = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                    "name NOT LIKE '\\_gateway\\_%' ESCAPE '\\' ORDER BY 1"):
            cols = [tuple(r[1:5]) for r in conn.execute(f'PRAGMA table_info("{name}")')]
            rows = conn.execute(f'SELECT * FROM "{name}" ORDER BY 1').fetchall()
            out[name] = [tuple(cols), *rows]
        return out
    finally:
        conn.close()


def _streamed(log: Path, db: Path) -> None:
    applier = SqliteApplier(db)
    try:
        Dispatcher(applier, LogFileSource(log), db.parent / "stream-state",
                   config=DispatcherConfig(threads=4, save_interval=0.0)).run()
    finally:
        applier.close()


def test_schema_events_are_found_in_log_order_across_partitions(spark, tmp_path):
    write_log(tmp_path / "log.bin", schema_log())
    got = schema_events(spark, str(tmp_path / "log.bin"), partition_bytes=128)
    assert [i for i, _ in got] == [1, 4, 8, 12]
    assert [e for _, e in got] == events()
    assert [i for i, _ in schema_events(spark, str(tmp_path / "log.bin"), index_from=5,
                                        index_to=11, partition_bytes=128)] == [8]


@pytest.mark.parametrize("partition_bytes", [None, 256])
def test_the_bulk_apply_of_a_log_spanning_schema_changes_equals_the_streaming_applier(
        spark, tmp_path, partition_bytes):
    log = tmp_path / "log.bin"
    write_log(log, schema_log())
    _streamed(log, tmp_path / "stream.db")
    report = apply_log(spark, str(log), SqliteTarget(str(tmp_path / "bulk.db")),
                       str(tmp_path / "state"), partition_bytes=partition_bytes)
    assert report.problems == 0 and report.end.log_index == len(schema_log())
    bulk, streamed = _tables(tmp_path / "bulk.db"), _tables(tmp_path / "stream.db")
    assert bulk == streamed
    assert [dict(zip(("id", "qty", "c"), r, strict=True)) for r in bulk["items"][1:]] == FINAL


def test_a_bulk_run_stopped_between_schema_changes_resumes_to_the_same_tables(spark, tmp_path):
    log = tmp_path / "log.bin"
    write_log(log, schema_log())
    _streamed(log, tmp_path / "stream.db")
    target, state = SqliteTarget(str(tmp_path / "bulk.db")), str(tmp_path / "state")
    first = apply_log(spark, str(log), target, state, index_to=9)  # after the rename's rows
    assert first.end.log_index == 9
    cols = [c[0] for c in _tables(tmp_path / "bulk.db")["items"][0]]
    assert cols == ["id", "qty", "b", "c"]
    apply_log(spark, str(log), target, state)
    assert _tables(tmp_path / "bulk.db") == _tables(tmp_path / "stream.db")


def test_a_target_with_policy_stop_stops_before_the_event_with_its_position_saved(spark,
                                                                                  tmp_path):
    from gateway import SchemaStopError
    from spark_applier.position import SparkPositionStore

    log = tmp_path / "log.bin"
    write_log(log, schema_log())
    target = SqliteTarget(str(tmp_path / "bulk.db"))
    target.schema_policy = "stop"
    with pytest.raises(SchemaStopError, match=r"log index 1, table s.items version 1 "
                                              r"\(create\): stopped by schema_policy 'stop'"):
        apply_log(spark, str(log), target, str(tmp_path / "state"))
    assert SparkPositionStore(str(tmp_path / "state"), "sqlite").load().log_index == 0


def test_parquet_datasets_evolve_and_fit_rows_of_older_versions_as_sqlite_does(spark,
                                                                               tmp_path):
    """The dataset evolves with ADD, RENAME and DROP COLUMN, and the rows written under
    older versions after the change that outdated them (no ``c`` after ADD COLUMN, ``a``
    after its RENAME, ``b`` after its DROP) are fitted to the table's definition
    (docs/spark.md, "Schema changes"): the dataset holds what the streaming SQLite applier
    holds."""
    from spark_applier.writers import ParquetTarget

    log = tmp_path / "log.bin"
    write_log(log, schema_log())
    _streamed(log, tmp_path / "stream.db")
    target = ParquetTarget(spark, str(tmp_path / "tables"))
    report = apply_log(spark, str(log), target, str(tmp_path / "state"))
    assert report.problems == 0
    df = target.read_table("s", "items")
    assert sorted(c for c in df.columns if not c.startswith("_")) == ["c", "id", "qty"]
    got = sorted(tuple(r) for r in df.select("id", "qty", "c").collect())
    streamed = _tables(tmp_path / "stream.db")["items"][1:]
    assert got == sorted(streamed) == [(r["id"], r["qty"], r["c"]) for r in FINAL]
    # a replay from the start over the same directory ends where it ended
    report = apply_log(spark, str(log), target, str(tmp_path / "state-again"))
    assert report.problems == 0
    again = target.read_table("s", "items")
    assert sorted(tuple(r) for r in again.select("id", "qty", "c").collect()) == got


def _schema_wal(directory: Path) -> Path:
    """The schema log as a node's WAL (one entry per item, small segments)."""
    from gateway.core import messages
    from gateway.core.wal import SegmentedWal, WalEntry, WalHardState, WalOptions
    from gateway.schema.codec import encode_event

    items = schema_log()
    wal = SegmentedWal(str(directory), options=WalOptions(max_segment_bytes=1024))
    try:
        for i, item in enumerate(items, 1):
            data = encode_event(item) if hasattr(item, "kind") else messages.pack(item)
            wal.append([WalEntry(i, 1, 0, data)])
        wal.save_hard_state(WalHardState(1, 0, len(items)))
    finally:
        wal.close()
    return directory


def test_a_gateway_source_spanning_schema_changes_applies_like_its_path(spark, tmp_path):
    from tests.spark.log_server import serve_wal
    from tests.spark.test_remote_source import _tokens

    wal = _schema_wal(tmp_path / "wal")
    with serve_wal(str(wal), _tokens()) as uri:
        assert [i for i, _ in schema_events(spark, uri, partition_bytes=256,
                                            read_options={"token": "r"})] == [1, 4, 8, 12]
        for source, name, opts in ((str(wal), "path", None), (uri, "remote", {"token": "r"})):
            report = apply_log(spark, source, SqliteTarget(str(tmp_path / f"{name}.db")),
                               str(tmp_path / f"{name}-state"), partition_bytes=256,
                               read_options=opts)
            assert report.problems == 0 and report.end.log_index == len(schema_log()), name
    remote_tables = _tables(tmp_path / "remote.db")
    assert remote_tables == _tables(tmp_path / "path.db")
    assert [dict(zip(("id", "qty", "c"), r, strict=True))
            for r in remote_tables["items"][1:]] == FINAL
