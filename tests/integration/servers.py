"""Real RabbitMQ and Cassandra servers for integration tests.

A server handle hides where the server comes from:

* ``external``: an already-running server named by an environment variable; it cannot be restarted;
* ``testcontainers``: a Docker container (``RabbitMqContainer`` / ``CassandraContainer``);
* ``local``: the launchers in ``deploy/local/`` on loopback with free ports and a private data
  directory, so parallel runs on one machine do not meet.

Handles expose the endpoint as properties that are read again after ``restart()`` (a container may
come back on a different host port), and ``stop()`` / ``start()`` for tests that need the server
down for a while.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

REPO = Path(__file__).resolve().parents[2]
DEPLOY_LOCAL = REPO / "deploy" / "local"
RABBITMQ_SCRIPT = DEPLOY_LOCAL / "rabbitmq.sh"
CASSANDRA_SCRIPT = DEPLOY_LOCAL / "cassandra" / "cassandra.sh"
CASSANDRA_LOCAL_DATACENTER = "datacenter1"

ENV_RABBITMQ_URL = "GATEWAY_TEST_RABBITMQ_URL"
ENV_CASSANDRA = "GATEWAY_TEST_CASSANDRA"
ENV_MODE = "GATEWAY_TEST_SERVERS"  # auto (default) | local | testcontainers

INSTALL_TIMEOUT = 30 * 60  # first Maven download or apt-get install on a fresh machine
START_TIMEOUT = 240
STOP_TIMEOUT = 120


class ServerError(RuntimeError):
    """A test server could not be installed, started, stopped or reached."""


class RestartUnsupported(ServerError):
    """The server was started by someone else (environment variable): tests cannot restart it."""


# --------------------------------------------------------------------------------------------
# probes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def amqp_answers(host: str, port: int, timeout: float = 3.0) -> bool:
    """True when an AMQP 0-9-1 broker answers the protocol header with a method frame."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"AMQP\x00\x00\x09\x01")
            head = s.recv(7)
    except OSError:
        return False
    return len(head) == 7 and head[0] == 1


def _load_cql_ping() -> ModuleType:
    path = DEPLOY_LOCAL / "cassandra" / "cql_ping.py"
    spec = importlib.util.spec_from_file_location("gateway_deploy_cql_ping", path)
    if spec is None or spec.loader is None:
        raise ServerError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cql_release_version(host: str, port: int, timeout: float = 5.0) -> str | None:
    """The node's release_version via a real CQL query, or None when it does not answer."""
    ping = _load_cql_ping()
    try:
        return str(ping.release_version(host, port, timeout))
    except (OSError, ping.CqlError):
        return None


def wait_until(probe: Callable[[], bool], timeout: float, what: str, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() >= deadline:
            raise ServerError(f"{what} did not answer within {timeout:.0f}s")
        time.sleep(interval)


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def testcontainers_available() -> bool:
    return importlib.util.find_spec("testcontainers") is not None


def choose_mode(external_env: str) -> str:
    """external, testcontainers or local, following GATEWAY_TEST_SERVERS and the environment."""
    if os.environ.get(external_env):
        return "external"
    mode = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if mode not in ("auto", "local", "testcontainers"):
        raise ServerError(f"{ENV_MODE}={mode!r}: expected auto, local or testcontainers")
    if mode in ("local", "auto"):  # auto: no image registry is assumed reachable
        return "local"
    if not (testcontainers_available() and docker_available()):
        raise ServerError(
            f"{ENV_MODE}=testcontainers but testcontainers is not installed or `docker info` fails"
        )
    return "testcontainers"


# --------------------------------------------------------------------------------------------
# backends: where a server comes from


class Backend(Protocol):
    description: str
    restartable: bool

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def endpoint(self) -> tuple[str, int]: ...
    def close(self) -> None: ...


@dataclass
class ExternalBackend:
    host: str
    port: int
    description: str = "external"
    restartable: bool = False

    def start(self) -> None:
        raise RestartUnsupported(f"{self.description} server is not managed by the tests")

    def stop(self) -> None:
        raise RestartUnsupported(f"{self.description} server is not managed by the tests")

    def endpoint(self) -> tuple[str, int]:
        return self.host, self.port

    def close(self) -> None:
        pass


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


@dataclass
class ScriptBackend:
    """A server run by one of the deploy/local launchers ({install|start|stop|status})."""

    script: Path
    env: dict[str, str]
    host: str
    port: int
    description: str
    restartable: bool = True
    running: bool = field(default=False, init=False)

    def _run(self, action: str, timeout: float) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                ["bash", str(self.script), action],
                # The launchers stop the server by themselves if this process dies first.
                env={**os.environ, **self.env, "GATEWAY_SERVER_OWNER_PID": str(os.getpid())},
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout
            err = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else exc.stderr
            raise ServerError(
                f"{self.script.name} {action} ({self.description}) timed out after {timeout:.0f}s\n"
                f"{_tail((out or '') + (err or ''))}"
            ) from exc
        if done.returncode != 0:
            raise ServerError(
                f"{self.script.name} {action} ({self.description}) failed with exit status "
                f"{done.returncode}:\n{_tail(done.stdout + done.stderr)}"
            )
        return done

    def install(self) -> None:
        self._run("install", INSTALL_TIMEOUT)

    def start(self) -> None:
        self.running = True  # even a failed start may leave a process for stop() to end
        self._run("start", START_TIMEOUT)

    def stop(self) -> None:
        self._run("stop", STOP_TIMEOUT)
        self.running = False

    def endpoint(self) -> tuple[str, int]:
        return self.host, self.port

    def close(self) -> None:
        if self.running:
            self.stop()


@dataclass
class ContainerBackend:
    """A testcontainers container; restart() keeps the container, re-reads the mapped port."""

    container: Any
    internal_port: int
    description: str
    restartable: bool = True

    def start(self) -> None:
        self.container.get_wrapped_container().start()
        self.container.get_wrapped_container().reload()

    def stop(self) -> None:
        self.container.get_wrapped_container().stop(timeout=60)

    def endpoint(self) -> tuple[str, int]:
        host = self.container.get_container_host_ip()
        return str(host), int(self.container.get_exposed_port(self.internal_port))

    def close(self) -> None:
        self.container.stop()


# --------------------------------------------------------------------------------------------
# server handles


@dataclass
class _Server:
    backend: Backend
    ready_timeout: float = START_TIMEOUT

    @property
    def kind(self) -> str:
        return self.backend.description

    @property
    def restartable(self) -> bool:
        return self.backend.restartable

    @property
    def host(self) -> str:
        return self.backend.endpoint()[0]

    @property
    def port(self) -> int:
        return self.backend.endpoint()[1]

    def answers(self) -> bool:
        raise NotImplementedError

    def wait_ready(self, timeout: float | None = None) -> None:
        wait_until(self.answers, self.ready_timeout if timeout is None else timeout, str(self))

    def stop(self) -> None:
        """Take the server down (the data stays)."""
        self.backend.stop()

    def start(self) -> None:
        """Bring a stopped server back and wait until it answers."""
        self.backend.start()
        self.wait_ready()

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.backend.close()


@dataclass
class RabbitMQServer(_Server):
    url_override: str | None = None
    username: str = "guest"
    password: str = "guest"

    @property
    def url(self) -> str:
        if self.url_override is not None:
            return self.url_override
        user = urllib.parse.quote(self.username, safe="")
        password = urllib.parse.quote(self.password, safe="")
        return f"amqp://{user}:{password}@{self.host}:{self.port}/"

    def answers(self) -> bool:
        return amqp_answers(self.host, self.port)

    def __str__(self) -> str:
        return f"RabbitMQ ({self.kind}) at {self.host}:{self.port}"


@dataclass
class CassandraServer(_Server):
    local_datacenter: str = CASSANDRA_LOCAL_DATACENTER

    @property
    def contact(self) -> tuple[str, int]:
        return self.backend.endpoint()

    def release_version(self) -> str | None:
        return cql_release_version(self.host, self.port)

    def answers(self) -> bool:
        return self.release_version() is not None

    def cluster(self, **kwargs: Any) -> Any:
        """A cassandra-driver Cluster for this node that reconnects quickly after a restart."""
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import (
            ConstantReconnectionPolicy,
            DCAwareRoundRobinPolicy,
            TokenAwarePolicy,
        )

        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(
                DCAwareRoundRobinPolicy(local_dc=self.local_datacenter)
            ),
            request_timeout=30,
        )
        options: dict[str, Any] = {
            "contact_points": [self.host],
            "port": self.port,
            "execution_profiles": {EXEC_PROFILE_DEFAULT: profile},
            "reconnection_policy": ConstantReconnectionPolicy(delay=0.5, max_attempts=None),
            "protocol_version": 5,
            "connect_timeout": 10,
        }
        options.update(kwargs)
        return Cluster(**options)

    def __str__(self) -> str:
        return f"Cassandra ({self.kind}) at {self.host}:{self.port}"


# --------------------------------------------------------------------------------------------
# factories


def _split_host_port(value: str, name: str, default_port: int) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    if not sep:
        return value.strip(), default_port
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise ServerError(f"{name}={value!r}: expected host:port") from None


def _container_module(name: str) -> ModuleType:
    with contextlib.suppress(ImportError):
        return importlib.import_module(f"testcontainers.community.{name}")
    return importlib.import_module(f"testcontainers.{name}")


def start_rabbitmq(data_dir: Path) -> RabbitMQServer:
    """Start (or find) a RabbitMQ broker for this test session."""
    mode = choose_mode(ENV_RABBITMQ_URL)
    if mode == "external":
        url = os.environ[ENV_RABBITMQ_URL]
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("amqp", "amqps") or not parsed.hostname:
            raise ServerError(f"{ENV_RABBITMQ_URL}={url!r}: expected amqp://user:pass@host:port/")
        default_port = 5671 if parsed.scheme == "amqps" else 5672
        backend = ExternalBackend(parsed.hostname, parsed.port or default_port)
        server = RabbitMQServer(backend, url_override=url)
        server.wait_ready(30)
        return server
    if mode == "testcontainers":
        image = os.environ.get("GATEWAY_TEST_RABBITMQ_IMAGE", "rabbitmq:3.13")
        try:
            container = _container_module("rabbitmq").RabbitMqContainer(image)
            container.start()
        except Exception as exc:
            raise ServerError(f"testcontainers could not start {image}: {exc!r}") from exc
        server = RabbitMQServer(ContainerBackend(container, container.port, "testcontainers"))
        server.wait_ready()
        return server
    port = free_port()
    env = {
        "GATEWAY_RABBITMQ_PORT": str(port),
        "GATEWAY_RABBITMQ_DIST_PORT": str(free_port()),
        "ERL_EPMD_PORT": str(free_port()),  # a private epmd: nothing shared with other runs
        "GATEWAY_RABBITMQ_DATA_DIR": str(data_dir),
        "GATEWAY_RABBITMQ_START_TIMEOUT": str(START_TIMEOUT - 30),
    }
    backend = ScriptBackend(RABBITMQ_SCRIPT, env, "127.0.0.1", port, "local")
    backend.install()
    server = RabbitMQServer(backend)
    try:
        server.start()
    except BaseException:
        with contextlib.suppress(ServerError):
            backend.close()
        raise
    return server


def start_cassandra(data_dir: Path) -> CassandraServer:
    """Start (or find) a Cassandra node for this test session."""
    mode = choose_mode(ENV_CASSANDRA)
    if mode == "external":
        host, port = _split_host_port(os.environ[ENV_CASSANDRA], ENV_CASSANDRA, 9042)
        server = CassandraServer(ExternalBackend(host, port))
        server.wait_ready(30)
        return server
    if mode == "testcontainers":
        image = os.environ.get("GATEWAY_TEST_CASSANDRA_IMAGE", "cassandra:5.0")
        module = _container_module("cassandra")
        try:
            container = module.CassandraContainer(image)
            container.start()
        except Exception as exc:
            raise ServerError(f"testcontainers could not start {image}: {exc!r}") from exc
        backend = ContainerBackend(container, module.CassandraContainer.CQL_PORT, "testcontainers")
        server = CassandraServer(backend, local_datacenter=container.get_local_datacenter())
        server.wait_ready()
        return server
    port = free_port()
    env = {
        "GATEWAY_CASSANDRA_NATIVE_PORT": str(port),
        "GATEWAY_CASSANDRA_STORAGE_PORT": str(free_port()),
        "GATEWAY_CASSANDRA_DATA_DIR": str(data_dir),
        "GATEWAY_CASSANDRA_START_TIMEOUT": str(START_TIMEOUT - 30),
    }
    backend = ScriptBackend(CASSANDRA_SCRIPT, env, "127.0.0.1", port, "local")
    backend.install()
    server = CassandraServer(backend)
    try:
        server.start()
    except BaseException:
        with contextlib.suppress(ServerError):
            backend.close()
        raise
    return server


def require_module(name: str, pip_name: str) -> None:
    """Fail (never skip) when a client library the integration tests need is missing."""
    if importlib.util.find_spec(name) is None:
        import pytest

        pytest.fail(f"the integration tests need {pip_name}: pip install {pip_name}", pytrace=False)
