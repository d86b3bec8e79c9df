"""Container tests: the images scripts/build_images.sh builds, run with Docker (and Compose).

Without a Docker engine, the images or a Compose command they are skipped -- except when
``GATEWAY_REQUIRE_DOCKER=1`` (CI, after building the images), where that is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

IMAGE = "gateway:dev"
IMAGES = (IMAGE, "gateway-cassandra:dev", "gateway-rabbitmq:dev")


def compose_command() -> list[str]:
    """``docker compose`` (the v2 plugin) when it works, else ``docker-compose`` (Debian's
    v1.29), else ``[]``."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return []


def docker_ready() -> str | None:
    """None when Docker runs, the images exist and Compose is there, else why not."""
    if shutil.which("docker") is None:
        return "no docker command"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no Docker engine running"
    for image in IMAGES:
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True
                          ).returncode != 0:
            return f"no {image} image (scripts/build_images.sh builds it)"
    if not compose_command():
        return "no docker compose / docker-compose (scripts/build_images.sh installs it)"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = docker_ready()
    if reason is None:
        return
    if os.environ.get("GATEWAY_REQUIRE_DOCKER") == "1":
        raise pytest.UsageError(f"GATEWAY_REQUIRE_DOCKER=1 but {reason}")
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=reason))
