"""The stores of the container tests, each a container of an image scripts/build_images.sh
builds (no registry): ``gateway-cassandra:dev`` (Cassandra 5.0 from the Maven Central jars on
Java 17) and ``gateway-rabbitmq:dev`` (Debian's rabbitmq-server).

``store_network()`` is a private Docker network; ``StoreContainer`` runs one store on it under
an alias the gateway containers use (``cassandra:9042``, ``rabbitmq:5672``) and publishes its
port on a free loopback port for the test process. Both remove what they made on exit, also
when the test fails."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from gateway.testing._docker import wait_healthy

CASSANDRA_IMAGE = "gateway-cassandra:dev"
RABBITMQ_IMAGE = "gateway-rabbitmq:dev"


@contextlib.contextmanager
def store_network(prefix: str = "gateway-stores") -> Iterator[str]:
    """A new bridge network's name; the network is removed on exit."""
    import docker

    net = docker.from_env().networks.create(f"{prefix}-{uuid.uuid4().hex[:8]}", driver="bridge")
    try:
        yield net.name
    finally:
        with contextlib.suppress(Exception):
            net.remove()


class StoreContainer:
    """``image`` on ``network`` as ``alias``, its ``port`` published on 127.0.0.1. ``start()``
    returns once Docker reports it healthy (the image's health check); ``stop()`` removes it
    with its volumes."""

    def __init__(self, image: str, network: str, alias: str, port: int, *,
                 start_timeout: float = 180.0) -> None:
        import docker

        self.image, self.network, self.alias, self.port = image, network, alias, port
        self.start_timeout = start_timeout
        self._docker = docker.from_env()
        self.container: Any = None

    def run(self) -> StoreContainer:
        """Create and start the container without waiting for it (see ``wait``)."""
        from docker.types import EndpointConfig

        endpoint = EndpointConfig(self._docker.api._version, aliases=[self.alias])
        self.container = self._docker.containers.run(
            self.image, name=f"{self.network}-{self.alias}", detach=True,
            network=self.network, networking_config={self.network: endpoint},
            ports={f"{self.port}/tcp": ("127.0.0.1", None)})
        return self

    def wait(self) -> StoreContainer:
        try:
            wait_healthy(self.container, self.start_timeout, f"{self.alias} ({self.image})")
        except BaseException:
            self.stop()
            raise
        return self

    def start(self) -> StoreContainer:
        return self.run().wait()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` where the test process reaches the store."""
        self.container.reload()
        bound = self.container.attrs["NetworkSettings"]["Ports"][f"{self.port}/tcp"]
        return "127.0.0.1", int(bound[0]["HostPort"])

    def stop(self) -> None:
        if self.container is not None:
            with contextlib.suppress(Exception):
                self.container.remove(force=True, v=True)
            self.container = None

    def __enter__(self) -> StoreContainer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
