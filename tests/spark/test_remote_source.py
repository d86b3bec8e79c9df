"""``gateway://HOST:PORT`` sources: the ``gateway_wal`` data source and ``gateway spark apply``
read a node's log over its ``LogRead`` RPC (``spark_applier.remote``) and get exactly what a
read of the files by path gets; failures are one line naming the node and what failed."""

from __future__ import annotations

import hashlib
import random
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.node.api.security import Tokens, _Token
from spark_applier import layout, remote
from spark_applier.decode import read_range
from tests.spark.log_server import serve_wal
from tests.spark.test_bulk import parquet_state
from tests.spark.workload import random_log, write_wal

_ORDER = ("log_index", "segment_id", "op_no", "op")


def _tokens() -> Tokens:
    return Tokens([_Token("reader", hashlib.sha256(b"r").digest(), frozenset({"read"})),
                   _Token("app", hashlib.sha256(b"w").digest(), frozenset({"write"}))])


@pytest.fixture(scope="module")
def served(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A WAL with multi-segment transactions, key changes, SQL and an uncommitted tail,
    served over ``LogRead`` with tokens."""
    wal = write_wal(tmp_path_factory.mktemp("remote") / "wal",
                    random_log(29, 160, moves=True, sql=True), segment_bytes=4096, commit=150)
    with serve_wal(str(wal), _tokens()) as uri:
        yield wal, uri


def _rows(df) -> list:  # type: ignore[no-untyped-def]
    return sorted(df.collect(), key=lambda r: tuple(r[k] for k in _ORDER))


def test_gateway_source_reads_the_rows_of_the_path_read_with_any_partition_size(
        spark, served) -> None:
    wal, uri = served
    want = _rows(spark.read.format("gateway_wal").load(str(wal)))
    assert len(want) > 150 and max(r.log_index for r in want) == 150
    rng = random.Random(5)
    for size in (rng.randint(1500, 4000), 1 << 20):  # small cuts: the test below
        df = (spark.read.format("gateway_wal").option("token", "r")
              .option("partition_bytes", size).load(uri))
        assert _rows(df) == want, size
    filtered = (spark.read.format("gateway_wal").option("token", "r")
                .option("partition_bytes", 3000).option("index_from", 40)
                .option("index_to", 90).option("gtids", "1:30-120").load(uri))
    path_filtered = (spark.read.format("gateway_wal").option("index_from", 40)
                     .option("index_to", 90).option("gtids", "1:30-120").load(str(wal)))
    assert _rows(filtered) == _rows(path_filtered) != []


def test_every_random_cut_of_a_remote_read_equals_the_file_read(served) -> None:
    wal, uri = served
    src = remote.RemoteSource.parse(uri, "r")

    def rows(ranges, source=None):  # type: ignore[no-untyped-def]
        return [r for rr in ranges for b in read_range(
            rr, buffer=remote.read_window(source, rr) if source else None)
            for r in b.to_pylist()]

    want = rows(layout.plan_ranges(layout.discover(wal), partition_bytes=1 << 30))
    lay = remote.fetch_layout(src)
    assert lay.commit == 150
    rng = random.Random(11)
    for _ in range(12):
        got = rows(remote.plan_ranges(lay, partition_bytes=rng.randint(64, 5000)), src)
        assert [(r["segment"], r["position"], r["op_no"]) for r in got] == \
            [(r["segment"], r["position"], r["op_no"]) for r in want]
        assert got == want


def test_streaming_from_a_gateway_source_equals_the_path_read(spark, served, tmp_path) -> None:
    wal, uri = served
    q = (spark.readStream.format("gateway_wal").option("token", "r")
         .option("partition_bytes", 8000).load(uri)
         .writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
         .start())
    q.awaitTermination(120)
    assert q.exception() is None
    got = _rows(spark.read.parquet(str(tmp_path / "out")))
    assert got == _rows(spark.read.format("gateway_wal").load(str(wal)))


def test_cli_applies_a_gateway_source_like_the_path(spark, tmp_path) -> None:
    wal = write_wal(tmp_path / "wal", random_log(31, 80), segment_bytes=4096,
                    commit=70)
    with serve_wal(str(wal), _tokens()) as uri:
        _apply_both(spark, wal, uri, tmp_path)


def _apply_both(spark, wal: Path, uri: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for source, extra, out in ((str(wal), [], "by-path"), (uri, ["--token", "r"], "remote")):
        result = CliRunner().invoke(main, [
            "spark", "apply", "--source", source, *extra, "--target",
            f"parquet:{tmp_path / out}", "--state-dir", str(tmp_path / f"{out}-state"),
            "--partition-bytes", "1500"])
        assert result.exit_code == 0, result.output
        assert "position 0 -> 70" in result.output
    assert parquet_state(spark, tmp_path / "remote") == parquet_state(spark, tmp_path / "by-path")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_node_or_a_wrong_token_is_one_line_naming_it(spark, served,
                                                                    tmp_path) -> None:
    _, uri = served
    port = _closed_port()
    cases = ((f"gateway://127.0.0.1:{port}", ["--token", "r"],
              f"gateway://127.0.0.1:{port}: cannot reach the node"),
             (uri, ["--token", "nope"], f"{uri}: Layout: UNAUTHENTICATED: unknown bearer token"),
             (uri, [], f"{uri}: Layout: UNAUTHENTICATED: missing bearer token"),
             (uri, ["--token", "w"], "lacks the read permission"))
    for source, extra, line in cases:
        result = CliRunner().invoke(main, [
            "spark", "apply", "--source", source, *extra, "--target",
            f"parquet:{tmp_path / 'out'}", "--state-dir", str(tmp_path / "state")])
        assert result.exit_code == 1, (source, extra, result.output)
        err = result.stderr.strip()
        assert len(err.splitlines()) == 1 and line in err, err
        assert "Traceback" not in result.output + err
    result = CliRunner().invoke(main, [
        "spark", "apply", "--source", uri, "--target", f"parquet:{tmp_path / 'out'}"])
    assert result.exit_code == 2 and "--state-dir is required" in result.stderr


def test_a_segment_compacted_between_plan_and_read_is_an_error_not_fewer_rows(
        tmp_path: Path) -> None:
    wal = write_wal(tmp_path / "wal", random_log(3, 60), segment_bytes=4096)
    with serve_wal(str(wal)) as uri:
        src = remote.RemoteSource.parse(uri)
        ranges = remote.plan_ranges(remote.fetch_layout(src), partition_bytes=1 << 20)
        first = ranges[0]
        name = first.file.path.rsplit("/", 1)[1]
        (wal / name).unlink()  # what compaction does to a segment below the snapshot
        with pytest.raises(remote.RemoteLogError) as ei:
            list(read_range(first, buffer=remote.read_window(src, first)))
        msg = str(ei.value)
        assert msg.startswith(f"{uri}: ReadRange of {name}") and "NOT_FOUND" in msg
        assert "compacted" in msg and "\n" not in msg
        assert len(ranges) > 1
        rest = [r for rr in ranges[1:] for b in read_range(rr, buffer=remote.read_window(
            src, rr)) for r in b.to_pylist()]
        assert rest  # the other segments still read
