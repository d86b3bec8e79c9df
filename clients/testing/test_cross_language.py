"""Cross-language checks of the Go, Java and TypeScript clients against one live cluster.

A Go writer, a Java reader and a TypeScript subscriber must see the same rows with the same
GTIDs and log indices in the same order; every language's example program must write a row,
read it back and see its change event. Run by ``clients/test.sh`` (not part of the default
``pytest`` run: it needs the Go, Java and Node toolchains); it builds what it runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CLIENTS = Path(__file__).resolve().parent.parent
GO, JAVA, TS = CLIENTS / "go", CLIENTS / "java", CLIENTS / "typescript"
ROWS = 25


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (f"{' '.join(cmd)} (in {cwd}) exited {proc.returncode}\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict]:
    """A plaintext 3-node cluster from clients/testing/cluster.py (stopped afterwards, also
    when a test fails: the launcher kills its nodes when its stdin closes)."""
    proc = subprocess.Popen([sys.executable, str(CLIENTS / "testing" / "cluster.py"), "--nodes",
                             "3"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line, "the cluster launcher exited before the cluster was up (see stderr)"
        info = json.loads(line)
        info["targets"] = ",".join(n["api"] for n in info["nodes"])
        yield info
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the launcher stops its nodes at the end of its input
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def java_classpath() -> str:
    """target/classes + test-classes + the runtime dependencies (built here)."""
    _run(["mvn", "-B", "-q", "-DskipTests", "test-compile"], JAVA, timeout=600)
    deps = (JAVA / "target" / "classpath.txt").read_text().strip()
    return os.pathsep.join([str(JAVA / "target" / "classes"),
                            str(JAVA / "target" / "test-classes"), deps])


@pytest.fixture(scope="module")
def ts_built() -> None:
    if not (TS / "node_modules" / "@grpc" / "grpc-js").is_dir():
        _run(["npm", "ci", "--no-audit", "--no-fund"], TS, timeout=600)
    _run(["npm", "run", "build"], TS)


def _log_position(targets: str) -> int:
    from gateway.client import GatewayClient

    with GatewayClient(targets.split(",")) as c:
        return int(c.status().last_index) + 1


def test_go_writer_java_reader_and_ts_subscriber_see_the_same_rows_and_gtids(
        cluster: dict, java_classpath: str, ts_built: None) -> None:
    table = f"interop.rows_{time.time_ns()}"
    start = _log_position(cluster["targets"])
    subscriber = subprocess.Popen(
        ["node", "dist/test/interop/subscriber.js", cluster["targets"], str(start), table,
         str(ROWS)], cwd=TS, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        written = _json_lines(_run(["go", "run", "./internal/interop/writer", "-targets",
                                    cluster["targets"], "-table", table, "-count", str(ROWS)],
                                   GO))
        read = _json_lines(_run(["java", "-cp", java_classpath,
                                 "io.gateway.client.interop.InteropReader", cluster["targets"],
                                 table, str(ROWS)], JAVA))
        out, err = subscriber.communicate(timeout=120)
    finally:
        if subscriber.poll() is None:
            subscriber.kill()
            subscriber.wait()
    assert subscriber.returncode == 0, f"TypeScript subscriber failed: {err}"
    followed = _json_lines(out)

    assert [w["id"] for w in written] == list(range(ROWS))
    indices = [w["log_index"] for w in written]
    assert indices == sorted(indices) and len(set(indices)) == ROWS, indices
    assert all(r.pop("found") for r in read), read
    assert read == written, "the Java reader saw other rows or GTIDs than the Go writer wrote"
    assert followed == written, "the TypeScript subscriber saw other rows, GTIDs or order"


def _check_example(output: str) -> None:
    assert "wrote id" in output and "read back" in output and "widget" in output, output
    assert "event: log index" in output, output


def test_go_example_writes_reads_and_follows(cluster: dict) -> None:
    _check_example(_run(["go", "run", "./examples/quickstart", "-targets", cluster["targets"],
                         "-events", "1"], GO))


def test_java_example_writes_reads_and_follows(cluster: dict, java_classpath: str) -> None:
    _check_example(_run(["java", "-cp", java_classpath, "examples/Quickstart.java",
                         cluster["targets"], "1"], JAVA))


def test_typescript_example_writes_reads_and_follows(cluster: dict, ts_built: None) -> None:
    _check_example(_run(["node", "dist/examples/quickstart.js", cluster["targets"], "1"], TS))
