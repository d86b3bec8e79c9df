"""``GatewayContainer``: the gateway image in Docker, through testcontainers.

No image registry is assumed: the image must exist locally (scripts/build_images.sh builds
``gateway:dev``). Testcontainers' reaper (Ryuk) is an image pulled from a registry, so it is
disabled here (``TESTCONTAINERS_RYUK_DISABLED``): ``stop()`` -- called by the context manager
and the pytest fixture, also when a test fails -- removes the container.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

from testcontainers.core.container import DockerContainer

from gateway.client import GatewayClient

from ._docker import wait_healthy

__all__ = ["GatewayContainer"]

API_PORT = 7070


class GatewayContainer(DockerContainer):
    """The gateway image running ``gateway run`` (``plugins`` / ``options`` become
    ``--plugins`` and ``-o``; ``env`` the container's environment), ready when Docker reports
    it healthy (the image's gRPC health check: a leader is known)."""

    def __init__(self, image: str = "gateway:dev", *, plugins: Sequence[str] = (),
                 options: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
                 start_timeout: float = 90.0, **kw: Any) -> None:
        # (Any: ``DockerContainer``'s keyword options, passed through as it takes them)
        super().__init__(image, **kw)
        self.with_exposed_ports(API_PORT)
        args: list[str] = []
        if plugins:
            args += ["--plugins", ",".join(plugins)]
        for key, value in (options or {}).items():
            args += ["-o", f"{key}={value}"]
        if args:
            self.with_command(args)
        for key, value in (env or {}).items():
            self.with_env(key, value)
        self.start_timeout = start_timeout

    def start(self) -> GatewayContainer:
        super().start()
        try:
            wait_healthy(self.get_wrapped_container(), self.start_timeout,
                         "the gateway container")
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def api(self) -> str:
        """``HOST:PORT`` of the API as the test process reaches it."""
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(API_PORT)}"

    # Any: ``GatewayClient``'s keyword options, passed through as it takes them
    def client(self, **kw: Any) -> GatewayClient:
        """A client of this gateway (close it, or use it in a ``with`` block)."""
        return GatewayClient(self.api, **kw)

    def logs_text(self) -> str:
        out, err = self.get_logs()
        return (out + err).decode(errors="replace")

    def __enter__(self) -> GatewayContainer:
        return self.start()
