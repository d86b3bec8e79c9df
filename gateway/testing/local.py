"""``LocalGateway``: a single-node gateway as a local ``gateway run`` process."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.client import GatewayClient, GatewayError

__all__ = ["LocalGateway"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalGateway:
    """``gateway run`` on free loopback ports with a temporary data directory (removed by
    ``stop``). ``plugins`` / ``options`` (``{"cassandra.contact": "h:9042"}``) / ``env`` are
    passed to ``gateway run`` as ``--plugins``, ``-o`` and the environment."""

    def __init__(self, *, plugins: Sequence[str] = (), options: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, start_timeout: float = 60.0) -> None:
        self.plugins = tuple(plugins)
        self.options = dict(options or {})
        self.env = dict(env or {})
        self.start_timeout = start_timeout
        self.api = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None

    def start(self) -> LocalGateway:
        self._dir = tempfile.mkdtemp(prefix="gateway-test-")
        self.api = f"127.0.0.1:{_free_port()}"
        cmd = [sys.executable, "-m", "gateway.cli", "run", "--api", self.api,
               "--listen", f"127.0.0.1:{_free_port()}", "--data-dir",
               os.path.join(self._dir, "data"), "--no-fsync"]
        if self.plugins:
            cmd += ["--plugins", ",".join(self.plugins)]
        for key, value in self.options.items():
            cmd += ["-o", f"{key}={value}"]
        log = open(os.path.join(self._dir, "node.log"), "wb")  # noqa: SIM115
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=log,
                                      env={**os.environ, **self.env})
        log.close()
        deadline = time.monotonic() + self.start_timeout
        with GatewayClient(self.api, timeout=5) as c:
            while True:
                if self._proc.poll() is not None:
                    tail = self.logs()[-2000:]
                    self.stop()
                    raise RuntimeError(f"gateway run exited with {self._proc.returncode}: {tail}")
                try:
                    if c.status(timeout=1).leader_id:
                        return self
                except GatewayError:
                    pass
                if time.monotonic() > deadline:
                    tail = self.logs()[-2000:]
                    self.stop()
                    raise RuntimeError(f"gateway did not serve within {self.start_timeout}s: "
                                       f"{tail}")
                time.sleep(0.1)

    def client(self, **kw: Any) -> GatewayClient:
        """A client of this gateway (close it, or use it in a ``with`` block)."""
        return GatewayClient(self.api, **kw)

    def logs(self) -> str:
        """The node's output so far."""
        if self._dir is None:
            return ""
        try:
            with open(os.path.join(self._dir, "node.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 20 s) and remove the data directory."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> LocalGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
