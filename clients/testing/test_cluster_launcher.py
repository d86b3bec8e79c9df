"""The shared test-cluster launcher (clients/testing/cluster.py) answers its commands, and
its nodes die with it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

LAUNCHER = Path(__file__).resolve().parent / "cluster.py"


def test_launcher_serves_a_node_answers_commands_and_cleans_up() -> None:
    proc = subprocess.Popen([sys.executable, str(LAUNCHER), "--nodes", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(line: str) -> dict:
        proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(proc.stdout.readline())  # type: ignore[union-attr]

    try:
        info = json.loads(proc.stdout.readline())
        assert info["leader"] == 1 and info["ca"] is None and info["tokens"] == {}
        first_pid = info["nodes"][0]["pid"]
        assert ask("bogus") == {"ok": False, "error": "unknown command 'bogus' (leader, kill ID, "
                                                      "restart ID, status, stop)"}
        assert ask("kill 7") == {"ok": False, "error": "kill: no node 7"}
        assert ask("kill 1") == {"ok": True, "killed": 1}
        assert ask("status")["nodes"][0]["pid"] == 0
        restarted = ask("restart 1")
        assert restarted["ok"] and restarted["pid"] != first_pid
        assert ask("leader") == {"ok": True, "leader": 1}
        assert ask("stop") == {"ok": True}
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not os.path.exists(info["dir"]), "the temporary directory was left behind"
    assert not os.path.exists(f"/proc/{restarted['pid']}") or \
        Path(f"/proc/{restarted['pid']}/stat").read_text().split()[2] == "Z"


def test_the_nodes_die_when_the_launcher_is_sigkilled() -> None:
    # no cleanup code runs in a SIGKILLed launcher: only the kernel can take the nodes down
    proc = subprocess.Popen([sys.executable, str(LAUNCHER), "--nodes", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pids: list[int] = []
    info: dict = {}
    try:
        info = json.loads(proc.stdout.readline())
        pids = [n["pid"] for n in info["nodes"]]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids), "nodes outlived the SIGKILLed launcher"
    finally:
        proc.kill()
        proc.wait()
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        if proc.stdin is not None:
            proc.stdin.close()
        if info:
            shutil.rmtree(info["dir"], ignore_errors=True)


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
