"""The shared test-cluster launcher (clients/testing/cluster.py) answers its commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
