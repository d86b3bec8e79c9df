"""The Spark bulk apply and the streaming dispatcher stamp a row's last change alike.

Both Cassandra paths write ``USING TIMESTAMP`` = ``cassandra_mapping.write_timestamp(commit
index, statement, sub)``; this checks, without Cassandra, that the Spark reduction hands its
target the same commit index and statement (continued across the segments of a transaction)
as the dispatcher hands the streaming applier for the last change of every row.
"""

from __future__ import annotations

from pathlib import Path

from gateway.appliers.cassandra_mapping import write_timestamp
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import LogFileSource
from spark_applier.bulk import read_log, reduce_log
from spark_applier.convert import op_of_row
from tests.appliers.fakes import ModelApplier
from tests.spark.workload import random_log, write_log_file


def test_spark_and_the_streaming_path_give_every_rows_last_change_one_timestamp(
        spark, tmp_path: Path) -> None:
    txns = random_log(31, 90, segments=True)
    assert any(not t.end_segment for t in txns)  # multi-segment transactions are in the log
    log = write_log_file(tmp_path / "log.bin", txns)

    streamed = ModelApplier()
    Dispatcher(streamed, LogFileSource(log), tmp_path / "state",
               config=DispatcherConfig(threads=1, reduce=False)).run()
    want = {row: write_timestamp(*h[-1]) for row, h in streamed.history.items()}

    reduced = reduce_log(read_log(spark, str(log)))
    assert reduced.units == 1
    got = {}
    for r in reduced.rows.collect():
        d = r.asDict(recursive=True)
        got[op_of_row(d).row_id] = write_timestamp(d["log_index"], d["statement"],
                                                   d["write_sub"])
    assert got == want
    assert len({ts for ts in got.values()}) > 20
