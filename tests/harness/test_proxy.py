"""The fault-injecting proxy on its own, against a plain threaded echo server: no node needed."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gateway.testing.proxy import LinkProxy, ProxyError, ProxyNetwork


class EchoServer:
    """A loopback TCP server that echoes every byte back and counts what it received."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.received = 0
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self._conns.append(c)
            threading.Thread(target=self._echo, args=(c,), daemon=True).start()

    def _echo(self, c: socket.socket) -> None:
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    return
                self.received += len(data)
                c.sendall(data)
        except OSError:
            return
        finally:
            c.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def net() -> Iterator[ProxyNetwork]:
    network = ProxyNetwork()
    yield network
    network.close()


def connect(port: int, timeout: float = 2.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def roundtrip(s: socket.socket, payload: bytes) -> bytes:
    s.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def closed_by_peer(s: socket.socket, within: float = 2.0) -> bool:
    """True if the peer closed/reset ``s`` within ``within`` seconds."""
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_forwards_bytes_both_ways(net: ProxyNetwork, echo: EchoServer) -> None:
    port = net.add_link(1, 2, echo.port)
    with connect(port) as s:
        payload = bytes(range(256)) * 1000
        assert roundtrip(s, payload) == payload
    up, down = net.stats()[(1, 2)]
    assert up.forwarded == len(payload)
    assert down.forwarded == len(payload)


def test_proxy_listens_on_loopback_only(net: ProxyNetwork, echo: EchoServer) -> None:
    net.add_link(1, 2, echo.port)
    link = net.link(1, 2)
    assert link._server is not None
    hosts = {sock.getsockname()[0] for sock in link._server.sockets}
    assert hosts == {"127.0.0.1"}


def test_non_loopback_target_is_refused() -> None:
    with pytest.raises(ProxyError, match=r"is not 127\.0\.0\.1"):
        LinkProxy("x", 80, target_host="10.0.0.1")


def test_delay_applies_to_the_delayed_direction_only(net: ProxyNetwork, echo: EchoServer) -> None:
    port = net.add_link(1, 2, echo.port)
    with connect(port) as s:
        t0 = time.monotonic()
        roundtrip(s, b"x")
        fast = time.monotonic() - t0
        net.delay(1, 2, 0.3)
        t0 = time.monotonic()
        assert roundtrip(s, b"y") == b"y"
        slow = time.monotonic() - t0
    assert fast < 0.2
    assert 0.3 <= slow < 1.5


def test_delay_keeps_byte_order(net: ProxyNetwork, echo: EchoServer) -> None:
    port = net.add_link(1, 2, echo.port)
    net.delay(1, 2, 0.01, jitter=0.02)
    with connect(port) as s:
        for i in range(20):
            s.sendall(bytes([i]) * 100)
        got = b""
        while len(got) < 2000:
            got += s.recv(65536)
    assert got == b"".join(bytes([i]) * 100 for i in range(20))


def test_blackhole_keeps_connections_open_but_silent(net: ProxyNetwork, echo: EchoServer) -> None:
    port = net.add_link(1, 2, echo.port)
    with connect(port) as s:
        assert roundtrip(s, b"before") == b"before"
        net.block(1, 2)
        s.sendall(b"lost")
        assert not closed_by_peer(s, within=0.5)  # no reply, no close
    assert echo.received == len(b"before")
    assert net.stats()[(1, 2)][0].discarded == len(b"lost")


def test_new_connection_during_blackhole_is_accepted_but_never_reaches_target(
    net: ProxyNetwork, echo: EchoServer
) -> None:
    port = net.add_link(1, 2, echo.port)
    net.block(1, 2)
    with connect(port) as s:
        s.sendall(b"hello")
        assert not closed_by_peer(s, within=0.3)
    assert echo.accepted == 0


def test_one_way_block_cuts_only_that_flow(net: ProxyNetwork, echo: EchoServer) -> None:
    port_12 = net.add_link(1, 2, echo.port)
    port_21 = net.add_link(2, 1, echo.port)
    net.block(2, 1)  # bytes from 2 to 1: upstream of 2->1, downstream of 1->2
    with connect(port_12) as s:
        s.sendall(b"ping")
        assert not closed_by_peer(s, within=0.3)  # reached the target, the echo was lost
    time.sleep(0.1)
    assert echo.received == 4
    with connect(port_21) as s:
        s.sendall(b"ping")
        assert not closed_by_peer(s, within=0.3)
    assert echo.received == 4  # 2's bytes never arrived
    assert echo.accepted == 1


def test_heal_closes_connections_that_lost_bytes(net: ProxyNetwork, echo: EchoServer) -> None:
    port = net.add_link(1, 2, echo.port)
    with connect(port) as clean, connect(port) as lossy:
        assert roundtrip(clean, b"a") == b"a"
        net.block(1, 2)
        lossy.sendall(b"gone")
        time.sleep(0.1)
        net.heal()
        assert closed_by_peer(lossy)
        assert roundtrip(clean, b"still") == b"still"
    with connect(port) as fresh:
        assert roundtrip(fresh, b"new") == b"new"


def test_unblock_restores_one_flow_and_resets_lossy_connections(
    net: ProxyNetwork, echo: EchoServer
) -> None:
    port = net.add_link(1, 2, echo.port)
    net.block(1, 2)
    with connect(port) as s:
        s.sendall(b"x")
        time.sleep(0.1)
        net.unblock(1, 2)
        assert closed_by_peer(s)
    with connect(port) as s:
        assert roundtrip(s, b"ok") == b"ok"


def test_drop_closes_current_connections_and_allows_new_ones(
    net: ProxyNetwork, echo: EchoServer
) -> None:
    port = net.add_link(1, 2, echo.port)
    with connect(port) as s:
        assert roundtrip(s, b"a") == b"a"
        assert net.drop(1, 2) == 1
        assert closed_by_peer(s)
    with connect(port) as s:
        assert roundtrip(s, b"b") == b"b"


def test_refuse_closes_new_connections_until_healed(net: ProxyNetwork, echo: EchoServer) -> None:
    port = net.add_link(1, 2, echo.port)
    net.refuse(1, 2)
    with connect(port) as s:
        assert closed_by_peer(s)
    net.heal()
    with connect(port) as s:
        assert roundtrip(s, b"back") == b"back"


def test_dead_target_closes_the_client_connection(net: ProxyNetwork) -> None:
    with socket.socket() as tmp:
        tmp.bind(("127.0.0.1", 0))
        dead_port = int(tmp.getsockname()[1])
    port = net.add_link(1, 2, dead_port)
    with connect(port) as s:
        assert closed_by_peer(s)


def test_retargeting_a_link_keeps_its_port(net: ProxyNetwork, echo: EchoServer) -> None:
    other = EchoServer()
    try:
        port = net.add_link(1, 2, echo.port)
        assert net.add_link(1, 2, other.port) == port
        with connect(port) as s:
            assert roundtrip(s, b"z") == b"z"
        assert other.received == 1
        assert echo.received == 0
    finally:
        other.close()


def test_connection_count_is_bounded(echo: EchoServer) -> None:
    with ProxyNetwork(max_connections=2) as net:
        port = net.add_link(1, 2, echo.port)
        a, b = connect(port), connect(port)
        try:
            assert roundtrip(a, b"1") == b"1"
            assert roundtrip(b, b"2") == b"2"
            with connect(port) as c:
                assert closed_by_peer(c)
            assert net.link(1, 2).rejected == 1
        finally:
            a.close()
            b.close()


def test_partition_cuts_between_groups_and_keeps_inside_groups(
    net: ProxyNetwork, echo: EchoServer
) -> None:
    for a in (1, 2, 3):
        for b in (1, 2, 3):
            if a != b:
                net.add_link(a, b, echo.port)
    net.partition({1}, {2, 3})
    links = {k: net.link(*k) for k in [(1, 2), (2, 1), (2, 3), (3, 2), (1, 3), (3, 1)]}
    assert links[(1, 2)].up.blackhole and links[(1, 2)].down.blackhole
    assert links[(3, 1)].up.blackhole
    assert not links[(2, 3)].up.blackhole and not links[(3, 2)].down.blackhole


def test_bridge_leaves_the_bridge_connected_to_both_sides(
    net: ProxyNetwork, echo: EchoServer
) -> None:
    nodes = (1, 2, 3, 4, 5)
    for a in nodes:
        for b in nodes:
            if a != b:
                net.add_link(a, b, echo.port)
    net.bridge({1, 2}, 3, {4, 5})
    for a in nodes:
        for b in nodes:
            if a == b:
                continue
            cut = {a, b} <= {1, 2, 4, 5} and (a in {1, 2}) != (b in {1, 2})
            assert net.link(a, b).up.blackhole == cut, (a, b)


def test_close_releases_every_port(echo: EchoServer) -> None:
    net = ProxyNetwork()
    port = net.add_link(1, 2, echo.port)
    net.close()
    with pytest.raises(OSError):
        connect(port, timeout=0.5)
    with pytest.raises(ProxyError):
        net.add_link(2, 1, echo.port)
