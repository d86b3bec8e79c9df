"""The console's view of a deployment, refreshed in the background.

Contract: :class:`Poller` is given node addresses (one per cluster or more); every
``interval`` seconds it asks each known cluster's leader for its Status (it follows
``leader_api`` from whichever node answers), learns other clusters by following the source
addresses of every channel, and appends one :class:`Sample` per channel to that channel's
history (at most ``history_s`` seconds of them). Readers (the HTTP handlers) get immutable
snapshots under a lock; the poller never blocks them on the network.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gateway.client import GatewayClient, GatewayError
from gateway.v1 import gateway_pb2

#: Dead letters listed per cluster on the appliers view (the counts are whole).
DEAD_LETTERS_SHOWN = 50
#: How long one Status call may take before the node counts as unreachable this round.
STATUS_TIMEOUT = 3.0


@dataclass(frozen=True)
class Sample:
    """One poll's figures of one channel. ``throughput``: transactions applied per second
    since the previous sample (None for the first one, or after the runner restarted and its
    counter went back)."""

    t: float                      # unix seconds of the poll
    applied_epoch: int
    transactions_applied: int
    lag_epochs: int
    lag_seconds: float
    replicated_time_ns: int | None  # None until the node reports it
    throughput: float | None


@dataclass
class ClusterView:
    """What the console knows of one cluster: the addresses it reaches it by, the newest
    Status of its leader (or of the node that answered when there is none) and the error of
    the last round that failed."""

    cluster_id: int
    addresses: list[str]
    status: gateway_pb2.StatusResponse | None = None
    reached: str = ""             # the address that answered
    polled_at: float = 0.0
    error: str = ""               # "" after a round that reached it
    #: the open dead letters of the node that answered (its first page) and why not
    dead_letters: gateway_pb2.DeadLettersResponse | None = None
    dead_letters_error: str = ""


@dataclass
class Snapshot:
    """An immutable copy of the poller's state (the clusters by id, channel histories by
    (cluster, channel))."""

    clusters: dict[int, ClusterView]
    histories: dict[tuple[int, str], list[Sample]]
    unreachable: dict[str, str]   # addresses never reached: why
    interval: float
    taken_at: float = field(default_factory=time.time)


def field_or(msg: object, name: str, default: object) -> object:
    """``msg.<name>`` when the message type has that field (a newer node), else ``default``."""
    desc = getattr(msg, "DESCRIPTOR", None)
    if desc is not None and name in desc.fields_by_name:
        return getattr(msg, name)
    return default


class Poller:
    """Polls the clusters reachable from ``targets``; see the module docstring.
    ``client_factory(address)`` makes the client of one node (tokens and TLS live there)."""

    def __init__(self, targets: Sequence[str], client_factory: Callable[[str], GatewayClient],
                 *, interval: float = 2.0, history_s: float = 3600.0) -> None:
        if not targets:
            raise ValueError("at least one --target HOST:PORT is needed")
        self.targets = list(dict.fromkeys(targets))
        self.interval = interval
        self._maxlen = max(2, int(history_s / interval) + 1)
        self._factory = client_factory
        self._clients: dict[str, GatewayClient] = {}
        self._lock = threading.RLock()
        self._clusters: dict[int, ClusterView] = {}
        self._histories: dict[tuple[int, str], collections.deque[Sample]] = {}
        self._unreachable: dict[str, str] = {}
        self._known: dict[str, int] = {}  # address -> cluster id
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Poller:
        self.poll_once()
        self._thread = threading.Thread(target=self._run, name="console-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling in the background; what was polled stays readable, and
        :meth:`poll_once` still works (it opens its connections again)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=STATUS_TIMEOUT * 4)
            self._thread = None
        clients, self._clients = self._clients, {}
        for c in clients.values():
            c.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll_once()

    # ------------------------------------------------------------------ reading

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(
                clusters={cid: ClusterView(v.cluster_id, list(v.addresses), v.status,
                                           v.reached, v.polled_at, v.error, v.dead_letters,
                                           v.dead_letters_error)
                          for cid, v in self._clusters.items()},
                histories={k: list(d) for k, d in self._histories.items()},
                unreachable=dict(self._unreachable), interval=self.interval)

    def addresses(self, cluster_id: int) -> list[str]:
        """The addresses of cluster ``cluster_id``, its leader's first ([] if unknown)."""
        with self._lock:
            v = self._clusters.get(cluster_id)
            if v is None:
                return []
            lead = [v.status.leader_api] if v.status is not None and v.status.leader_api else []
            return list(dict.fromkeys(lead + ([v.reached] if v.reached else []) + v.addresses))

    # ------------------------------------------------------------------ polling

    def _client(self, address: str) -> GatewayClient:
        c = self._clients.get(address)
        if c is None:
            c = self._clients[address] = self._factory(address)
        return c

    def _status(self, address: str) -> gateway_pb2.StatusResponse:
        return self._client(address).status(timeout=STATUS_TIMEOUT)

    def _leader_status(self, addresses: Sequence[str]
                       ) -> tuple[gateway_pb2.StatusResponse | None, str, str]:
        """The Status of the leader reached from ``addresses`` (else of any node that
        answered), the address it came from, and the last error ("" if one answered)."""
        error = "no address"
        best: tuple[gateway_pb2.StatusResponse, str] | None = None
        for addr in addresses:
            try:
                st = self._status(addr)
            except GatewayError as exc:
                error = f"{addr}: {exc.code.name}: {exc.details}"
                continue
            if st.role == "leader":
                return st, addr, ""
            best = best or (st, addr)
            if st.leader_api and st.leader_api not in addresses:
                try:
                    lead = self._status(st.leader_api)
                except GatewayError as exc:
                    error = f"{st.leader_api}: {exc.code.name}: {exc.details}"
                    continue
                if lead.role == "leader":
                    return lead, st.leader_api, ""
        if best is not None:
            return best[0], best[1], ""
        return None, "", error

    def poll_once(self) -> None:
        """One round: every known cluster's leader, then any address not yet placed (the
        targets at first, then channel sources), each Status call bounded."""
        now = time.time()
        with self._lock:
            todo = [(cid, self.addresses(cid)) for cid in self._clusters] \
                if self._clusters else []
        for cid, addrs in todo:
            st, reached, err = self._leader_status(addrs)
            self._record(cid, st, reached, err, now)
            if st is not None:
                self._dead_letters(cid, reached)
        for addr in self._unplaced():
            st, reached, err = self._leader_status([addr])
            if st is None:
                with self._lock:
                    self._unreachable[addr] = err
                continue
            with self._lock:
                self._unreachable.pop(addr, None)
                self._known[addr] = st.cluster_id
                view = self._clusters.get(st.cluster_id)
                if view is None:
                    view = self._clusters[st.cluster_id] = ClusterView(st.cluster_id, [addr])
                elif addr not in view.addresses:
                    view.addresses.append(addr)
            self._record(st.cluster_id, st, reached, "", now)
        self.rounds += 1

    def _dead_letters(self, cid: int, address: str) -> None:
        """The open dead letters of the node at ``address`` (its first page)."""
        try:
            dl = self._client(address).dead_letters(limit=DEAD_LETTERS_SHOWN,
                                                    timeout=STATUS_TIMEOUT)
            err = ""
        except GatewayError as exc:
            dl, err = None, f"{address}: {exc.code.name}: {exc.details}"
        with self._lock:
            view = self._clusters[cid]
            view.dead_letters, view.dead_letters_error = dl, err

    def _unplaced(self) -> list[str]:
        with self._lock:
            out = [a for a in self.targets if a not in self._known]
            for v in self._clusters.values():
                if v.status is None:
                    continue
                for ch in v.status.channels:
                    out += [a for a in ch.sources if a not in self._known]
            return list(dict.fromkeys(out))

    def _record(self, cid: int, st: gateway_pb2.StatusResponse | None, reached: str,
                err: str, now: float) -> None:
        with self._lock:
            view = self._clusters[cid]
            view.polled_at = now
            view.error = err
            if st is None:
                return
            if st.cluster_id != cid:  # an address now serves another cluster: say so
                view.error = f"{reached} answers as cluster {st.cluster_id}, not {cid}"
                return
            view.status, view.reached = st, reached
            for m in st.members:
                if m.api_address and m.api_address not in view.addresses:
                    view.addresses.append(m.api_address)
                    self._known[m.api_address] = cid
            if st.role != "leader":  # a follower's channel figures are not the live ones
                return
            for ch in st.channels:
                hist = self._histories.setdefault(
                    (cid, ch.name), collections.deque(maxlen=self._maxlen))
                prev = hist[-1] if hist else None
                tput = None
                if prev is not None and now > prev.t \
                        and ch.transactions_applied >= prev.transactions_applied:
                    tput = (ch.transactions_applied - prev.transactions_applied) / (now - prev.t)
                rt = field_or(ch, "replicated_time_ns", None)
                hist.append(Sample(now, ch.applied_epoch, ch.transactions_applied,
                                   ch.lag_epochs, ch.lag_seconds,
                                   int(rt) if isinstance(rt, int) and rt else None, tput))
