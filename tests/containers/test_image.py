"""The gateway image: ``docker run gateway:dev`` with no arguments serves the README's main job
(a single node on its embedded SQLite applier), reports healthy through the gRPC health
service, runs as a non-root user, stops cleanly on SIGTERM, and a bad start is one line."""

from __future__ import annotations

import json
import subprocess
import time

from gateway.client import GatewayClient, row_insert

from .conftest import IMAGE


def _docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check,
                          timeout=timeout)


def test_the_image_with_no_arguments_serves_a_healthy_node_with_sqlite():
    cid = _docker("run", "-d", "-p", "127.0.0.1::7070", IMAGE).stdout.strip()
    try:
        deadline = time.monotonic() + 90
        health = ""
        while time.monotonic() < deadline:
            state = json.loads(_docker("inspect", cid).stdout)[0]["State"]
            health = state.get("Health", {}).get("Status", "")
            if health == "healthy" or not state["Running"]:
                break
            time.sleep(0.5)
        assert health == "healthy", _docker("logs", cid, check=False).stderr[-2000:]
        port = _docker("port", cid, "7070/tcp").stdout.split(":")[-1].strip()
        with GatewayClient(f"127.0.0.1:{port}", timeout=30) as c:
            c.write([row_insert("shop.items", {"id": 1}, {"name": "in a container"})])
            assert c.get("shop.items", 1) == {"id": 1, "name": "in a container"}
            st = c.status()
        assert [a.name for a in st.appliers] == ["sqlite"] and st.appliers[0].running
        user = _docker("exec", cid, "id", "-u").stdout.strip()
        assert user == "10001"  # not root
        _docker("stop", "-t", "20", cid)
        state = json.loads(_docker("inspect", cid).stdout)[0]["State"]
        assert state["ExitCode"] == 0  # SIGTERM: a clean stop
        assert "node 1 stopped" in _docker("logs", cid).stderr
    finally:
        _docker("rm", "-f", cid, check=False)


def test_a_bad_start_in_the_image_is_one_line_and_exit_2():
    res = _docker("run", "--rm", IMAGE, "--plugins", "nope", check=False)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "Error: unknown plugin 'nope' (installed: cassandra, rabbit, spark, sqlite)"]
