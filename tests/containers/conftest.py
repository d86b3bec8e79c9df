"""Container tests: the images scripts/build_images.sh builds, run with Docker.

Without a Docker engine (or without the images) they are skipped -- except when
``GATEWAY_REQUIRE_DOCKER=1`` (CI, after building the images), where that is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

IMAGE = "gateway:dev"


def docker_ready() -> str | None:
    """None when Docker runs and the gateway image exists, else why not."""
    if shutil.which("docker") is None:
        return "no docker command"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no Docker engine running"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True
                      ).returncode != 0:
        return f"no {IMAGE} image (scripts/build_images.sh builds it)"
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
