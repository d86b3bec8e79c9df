"""A console in this process (tests, benchmarks, notebooks): the same server ``gateway
console`` runs, on a thread, bound to a free loopback port unless told otherwise."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from gateway.client import GatewayClient

from .poller import Poller
from .server import Console, make_server


class LocalConsole:
    """Start with :meth:`start`, stop with :meth:`close` (or use it as a context manager).
    ``url`` is the page's address; ``console`` and ``poller`` are the live objects."""

    def __init__(self, targets: Sequence[str], *, token: str = "", admin_token: str = "",
                 root_certificates: bytes | None = None, conflict_tables: Sequence[str] = (),
                 interval: float = 2.0, listen: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        def one(address: str) -> GatewayClient:
            return GatewayClient(address, token=token, root_certificates=root_certificates,
                                 timeout=5.0)

        def cluster(addresses: Sequence[str], tok: str) -> GatewayClient:
            return GatewayClient(list(addresses), token=tok,
                                 root_certificates=root_certificates, timeout=10.0)

        self.poller = Poller(list(targets), one, interval=interval)
        self.console = Console(self.poller, cluster, token=token, admin_token=admin_token,
                               conflict_tables=conflict_tables)
        self.server = make_server(self.console, *listen)
        self.url = f"http://{listen[0]}:{self.server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self) -> LocalConsole:
        self.poller.start()
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="console-http")
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.poller.stop()
        self.console.close()

    def __enter__(self) -> LocalConsole:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
