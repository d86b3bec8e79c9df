"""Gateway for application test suites (docs/testing.md).

Two backends behind one interface -- ``start()``, ``api`` (``HOST:PORT``), ``client()`` (a
connected ``gateway.client.GatewayClient``), ``stop()``, and use as a context manager:

- ``GatewayContainer``: the gateway image in Docker (testcontainers), waited on through its
  gRPC health check;
- ``LocalGateway``: ``gateway run`` as a local process, for machines without Docker.

The same for clusters: ``GatewayCluster`` (containers on a private Docker network) and
``LocalGatewayCluster`` (processes behind loopback proxies), with ``leader()``, ``kill(n)``,
``restart(n)``, ``partition(n)``, ``heal()``; ``cluster_for_tests()`` picks one.

Every local process -- of ``LocalGateway``, ``LocalGatewayCluster``, the project's own fault
harness and the client suites' cluster -- is started by ``Launcher`` (``gateway.testing.launcher``):
ports below the kernel's ephemeral range, nodes that die with the launching process.

``gateway_for_tests()`` picks one (``GATEWAY_TEST_BACKEND``: ``auto`` -- the container when a
Docker engine runs and the image exists, else the local process --, ``docker`` or ``local``).
The pytest plugin (``gateway.testing.pytest_plugin``, registered as ``pytest11``) gives the
``gateway`` and ``gateway_cluster`` fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .launcher import Launcher, LaunchError
from .local import LocalGateway
from .local_cluster import LocalGatewayCluster

if TYPE_CHECKING:  # imported when first used (``__getattr__``): testcontainers, docker
    from .cluster import GatewayCluster
    from .container import GatewayContainer

__all__ = ["DEFAULT_IMAGE", "GatewayCluster", "GatewayContainer", "LaunchError", "Launcher",
           "LocalGateway", "LocalGatewayCluster", "cluster_for_tests", "docker_usable",
           "gateway_for_tests"]

#: The image ``GatewayContainer`` runs unless told (``GATEWAY_TEST_IMAGE`` overrides).
DEFAULT_IMAGE = "gateway:dev"


def __getattr__(name: str) -> type:
    if name == "GatewayContainer":  # testcontainers is imported only when used
        from .container import GatewayContainer

        return GatewayContainer
    if name == "GatewayCluster":
        from .cluster import GatewayCluster

        return GatewayCluster
    raise AttributeError(name)


def docker_usable(image: str | None = None) -> str | None:
    """None when a Docker engine answers and ``image`` exists locally (no registry is
    assumed), else why not."""
    try:
        import docker  # testcontainers' dependency
    except ImportError:
        return "the docker package is not installed (pip install 'gateway[testing]')"
    try:
        client = docker.from_env()
        client.ping()
        client.images.get(image or os.environ.get("GATEWAY_TEST_IMAGE", DEFAULT_IMAGE))
    except Exception as exc:  # no engine, no image: the caller says which
        return f"{type(exc).__name__}: {exc}"
    return None


def gateway_for_tests(*, plugins: Sequence[str] = (), options: Mapping[str, str] | None = None,
                      env: Mapping[str, str] | None = None, backend: str | None = None
                      ) -> LocalGateway | GatewayContainer:
    """A not yet started gateway on the chosen backend (see the module docstring)."""
    if _use_docker(backend):
        from .container import GatewayContainer

        return GatewayContainer(os.environ.get("GATEWAY_TEST_IMAGE", DEFAULT_IMAGE),
                                plugins=plugins, options=options, env=env)
    return LocalGateway(plugins=plugins, options=options, env=env)


def _use_docker(backend: str | None) -> bool:
    backend = backend or os.environ.get("GATEWAY_TEST_BACKEND", "auto")
    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"GATEWAY_TEST_BACKEND={backend!r}: expected auto, docker or local")
    image = os.environ.get("GATEWAY_TEST_IMAGE", DEFAULT_IMAGE)
    return backend == "docker" or (backend == "auto" and docker_usable(image) is None)


def cluster_for_tests(size: int = 3, *, plugins: Sequence[str] = (),
                      options: Mapping[str, str] | None = None,
                      env: Mapping[str, str] | None = None, backend: str | None = None
                      ) -> LocalGatewayCluster | GatewayCluster:
    """A not yet started cluster on the chosen backend (as ``gateway_for_tests``)."""
    if _use_docker(backend):
        from .cluster import GatewayCluster

        return GatewayCluster(size, os.environ.get("GATEWAY_TEST_IMAGE", DEFAULT_IMAGE),
                              plugins=plugins, options=options, env=env)
    return LocalGatewayCluster(size, plugins=plugins, options=options, env=env)
