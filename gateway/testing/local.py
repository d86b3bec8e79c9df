"""``LocalGateway``: a single-node gateway as a local ``gateway run`` process."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.client import GatewayClient

from .launcher import Launcher

__all__ = ["LocalGateway"]


def node_args(plugins: Sequence[str], options: Mapping[str, str]) -> list[str]:
    """The ``gateway run`` options of a test gateway: no fsync, then ``--plugins`` and one
    ``-o KEY=VALUE`` per option."""
    args = ["--no-fsync"]
    if plugins:
        args += ["--plugins", ",".join(plugins)]
    for key, value in options.items():
        args += ["-o", f"{key}={value}"]
    return args


class LocalGateway:
    """``gateway run`` on free loopback ports (below the ephemeral range) with a temporary
    data directory (removed by ``stop``), started by :class:`~gateway.testing.launcher.Launcher`:
    the process dies with the test process. ``plugins`` / ``options``
    (``{"cassandra.contact": "h:9042"}``) / ``env`` are passed to ``gateway run`` as
    ``--plugins``, ``-o`` and the environment; it runs in the caller's working directory."""

    def __init__(self, *, plugins: Sequence[str] = (), options: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, start_timeout: float = 60.0) -> None:
        self.plugins = tuple(plugins)
        self.options = dict(options or {})
        self.env = dict(env or {})
        self.start_timeout = start_timeout
        self.api = ""
        self._node: Launcher | None = None
        self._dir: str | None = None

    def start(self) -> LocalGateway:
        """Start the node and wait until it serves as its own leader; on failure raise
        ``RuntimeError`` with its output, leaving nothing running."""
        try:
            self._dir = tempfile.mkdtemp(prefix="gateway-test-")
            self._node = Launcher(self._dir, 1, node_args=node_args(self.plugins, self.options),
                                  env=self.env, proxied=False, start_timeout=self.start_timeout,
                                  cwd=os.getcwd())
            self.api = self._node.nodes[1].api_address
            self._node.start(wait_leader=False)
            self._node.wait_for_leader(timeout=self.start_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    # Any: ``GatewayClient``'s keyword options, passed through as it takes them
    def client(self, **kw: Any) -> GatewayClient:
        """A client of this gateway (close it, or use it in a ``with`` block)."""
        return GatewayClient(self.api, **kw)

    def logs(self) -> str:
        """The node's output so far."""
        return self._node.log_text(1) if self._node is not None and self._dir else ""

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 20 s) and remove the data directory."""
        if self._node is not None:
            self._node.close(term_timeout=20)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> LocalGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
