"""docs/replication.md's walk-throughs, run as written (with ``gateway`` from this tree)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "replication.md"


def _blocks(section: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {section}")
    end = text.find("\n## ", start + 1)
    body = text[start:end if end != -1 else None]
    return "\n".join(re.findall(r"```sh\n(.*?)```", body, re.S))


def _run(tmp_path: Path, section: str) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "gateway"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m gateway.cli \"$@\"\n")
    shim.chmod(0o755)
    script = ("set -e\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n"
              "export GATEWAY_LOG_FORMAT=text\n" + _blocks(section))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"{section} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _docs(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_the_two_cluster_walkthrough_runs_as_written(tmp_path):
    out = _run(tmp_path, "Walk-through: two clusters")
    rows = _docs(out)
    assert [(r["row"]["id"], r["author"], r["gtid"]) for r in rows] == [(1, 1, "1:1"),
                                                                         (2, 2, "2:1")]
    assert "channel fromB" in out and "running" in out
    assert re.search(r"peer cluster 2: max replicated epoch [1-9]", out)


def test_the_ring_and_failover_walkthrough_runs_as_written(tmp_path):
    out = _run(tmp_path, "Walk-through: a ring of three")
    rows = _docs(out)
    assert [(r["row"]["id"], r["author"], r["gtid"]) for r in rows] == [
        (10, 1, "1:1"), (30, 3, "3:1"), (11, 1, "1:2")]
    assert "channel from1" in out and "running" in out
