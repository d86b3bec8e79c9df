"""``deploy/compose.yaml`` as a user runs it: three nodes come up healthy from the built image,
a write through one node is read back through another, and ``down -v`` leaves nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from pathlib import Path

from tests.containers.conftest import compose_command

COMPOSE_FILE = Path(__file__).resolve().parents[2] / "deploy" / "compose.yaml"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _project_objects(project: str) -> list[str]:
    """Containers, networks and volumes Compose made for ``project``."""
    label = f"label=com.docker.compose.project={project}"
    out = []
    for kind in (["ps", "-aq"], ["network", "ls", "-q"], ["volume", "ls", "-q"]):
        out += subprocess.run(["docker", *kind, "--filter", label], capture_output=True,
                              text=True, check=True).stdout.split()
    return out


def test_the_compose_file_brings_up_a_cluster_that_answers_writes():
    import docker

    from gateway.client import GatewayClient, row_insert
    from gateway.testing._docker import wait_healthy

    project = f"gwcompose{uuid.uuid4().hex[:8]}"
    ports = _free_ports(6)
    # Debian's docker-compose is a script of the system Python: keep this Python's paths from it.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    for n in (1, 2, 3):
        env[f"GATEWAY_COMPOSE_API_{n}"] = str(ports[n - 1])
        env[f"GATEWAY_COMPOSE_METRICS_{n}"] = str(ports[n + 2])
    compose = [*compose_command(), "-p", project, "-f", str(COMPOSE_FILE)]
    try:
        up = subprocess.run([*compose, "up", "-d", "--no-build"], env=env, text=True,
                            capture_output=True, timeout=300)
        assert up.returncode == 0, up.stderr
        engine = docker.from_env()
        nodes = engine.containers.list(
            all=True, filters={"label": f"com.docker.compose.project={project}"})
        assert len(nodes) == 3
        for c in nodes:
            wait_healthy(c, 120, c.name)
        with GatewayClient(f"127.0.0.1:{ports[0]}", timeout=30) as c:
            c.write([row_insert("shop.items", {"id": 1}, {"name": "a"})])
        with GatewayClient(f"127.0.0.1:{ports[2]}", timeout=30) as c:
            rows = c.scan("shop.items").rows  # linearizable: through the leader's view
        assert [r.key_values[0].int_value for r in rows] == [1]
    finally:
        subprocess.run([*compose, "down", "-v", "--remove-orphans"], env=env,
                       capture_output=True, timeout=300)
    assert _project_objects(project) == []
