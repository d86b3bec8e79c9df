"""Client workloads against a :class:`~tests.harness.cluster.ProcessCluster` that record a
history for :mod:`gateway.raft.linearizability`.

Each client is a thread with its own channel to one node (clients are spread over the nodes, so
followers' forwarding is exercised); after a failed call it moves to the next node, like a
client that fails over. Every operation is recorded with its invocation and completion on one
global event counter (strictly increasing, shared by all threads) and an outcome:

* ``ok`` — the call returned;
* ``fail`` — the call was refused in a way that guarantees it had no effect (see
  :func:`tests.harness.api.write_definitely_failed`); reads that fail are always just dropped;
* ``unknown`` — anything else (deadline exceeded, connection lost, leader changed): a write may
  or may not have taken effect, at any point after its invocation (``ret=None`` for the
  checker).

Operations: puts of unique values on a few hot keys (register histories the checker can search),
reads of hot keys with each consistency, and puts of fresh write-once keys (a direct "no
acknowledged write is missing" check). Linearizable and lease reads go into the
linearizability check; stale reads promise only that what they return was written by someone.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc

from gateway.raft.linearizability import GET, PUT, CheckResult, Operation, check_history
from tests.harness.api import (
    CONSISTENCY_NAMES,
    LEASE,
    LINEARIZABLE,
    STALE,
    NodeApi,
    write_definitely_failed,
)

if TYPE_CHECKING:
    from tests.harness.cluster import ProcessCluster

OK = "ok"
FAIL = "fail"
UNKNOWN = "unknown"


@dataclass(slots=True)
class Event:
    """One client operation as observed by the client."""

    client: int
    kind: str  # "put" | "get"
    key: str
    node: int
    call: int
    value: str | None = None  # put: the value written
    consistency: str | None = None  # get: linearizable | lease | stale
    output: str | None = None  # get: the value read
    ret: int | None = None
    outcome: str = UNKNOWN
    error: str = ""
    t_call: float = 0.0
    t_ret: float | None = None

    def describe(self) -> str:
        body = (
            f"put({self.key}, {self.value!r})"
            if self.kind == PUT
            else f"get[{self.consistency}]({self.key}) -> {self.output!r}"
        )
        return f"client {self.client}@node{self.node}: {body} {self.outcome} {self.error}".rstrip()


class History:
    """A thread-safe log of :class:`Event` with one global, strictly increasing event clock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clock = itertools.count(1)
        self.events: list[Event] = []
        self.t0 = time.monotonic()

    def invoke(self, client: int, kind: str, key: str, node: int, **kw: object) -> Event:
        with self._lock:
            ev = Event(client, kind, key, node, next(self._clock), **kw)  # type: ignore[arg-type]
            ev.t_call = time.monotonic() - self.t0
            self.events.append(ev)
        return ev

    def complete(self, ev: Event, outcome: str, output: str | None = None, error: str = "") -> None:
        with self._lock:
            ev.outcome = outcome
            ev.output = output
            ev.error = error
            if outcome != UNKNOWN:
                ev.ret = next(self._clock)
            ev.t_ret = time.monotonic() - self.t0

    # ------------------------------------------------------------------ views

    def operations(self) -> list[Operation]:
        """The history in the checker's format: ok and unknown puts, ok linearizable and lease
        reads (stale reads and failed operations are left out)."""
        ops = []
        for e in self.events:
            if e.outcome == FAIL:
                continue
            if e.kind == PUT:
                ret = e.ret if e.outcome == OK else None
                ops.append(Operation(e.client, PUT, e.key, e.call, ret, value=e.value))
            elif e.consistency in ("linearizable", "lease") and e.outcome == OK:
                ops.append(Operation(e.client, GET, e.key, e.call, e.ret, output=e.output))
        return ops

    def check(self) -> CheckResult:
        return check_history(self.operations())

    def acknowledged_puts(self) -> list[Event]:
        return [e for e in self.events if e.kind == PUT and e.outcome == OK]

    def written_values(self) -> dict[str, set[str | None]]:
        """Every value some put (ok or unknown) tried to write, per key, plus None (absent)."""
        out: dict[str, set[str | None]] = defaultdict(lambda: {None})
        for e in self.events:
            if e.kind == PUT and e.outcome != FAIL:
                out[e.key].add(e.value)
        return out

    def counts(self) -> dict[str, int]:
        """``kind/outcome`` -> number of events, for reports."""
        c: dict[str, int] = defaultdict(int)
        for e in self.events:
            label = e.kind if e.kind == PUT else f"get-{e.consistency}"
            c[f"{label}/{e.outcome}"] += 1
        return dict(sorted(c.items()))


@dataclass
class WorkloadConfig:
    """Operation mix and pacing. Weights need not sum to 1."""

    clients: int = 4
    hot_keys: int = 6
    put: float = 0.45
    unique_put: float = 0.15
    get_linearizable: float = 0.2
    get_lease: float = 0.1
    get_stale: float = 0.1
    timeout: float = 1.5
    think: float = 0.005  # pause between a client's operations (seconds)
    seed: int = 1


@dataclass
class Workload:
    """Client threads running :class:`WorkloadConfig`'s mix against the nodes returned by
    ``targets`` (node id -> API address), recording into ``history``."""

    targets: Callable[[], dict[int, str]]
    config: WorkloadConfig = field(default_factory=WorkloadConfig)
    history: History = field(default_factory=History)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def hot_key(self, i: int) -> str:
        return f"h{i}"

    def start(self) -> Workload:
        for c in range(self.config.clients):
            t = threading.Thread(target=self._client, args=(c,), name=f"client-{c}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> History:
        """Stop the clients (each finishes its current call, bounded by the call timeout)."""
        self._stop.set()
        for t in self._threads:
            t.join(self.config.timeout + 5)
        if self.errors:
            raise AssertionError(f"workload client crashed: {self.errors[0]!r}") from self.errors[0]
        return self.history

    def run_for(self, seconds: float) -> None:
        """Let the workload run for ``seconds`` (an interruptible sleep)."""
        self._stop.wait(seconds)

    def acked(self, at_least: int, timeout: float = 10.0) -> None:
        """Wait until at least ``at_least`` puts were acknowledged in total."""
        deadline = time.monotonic() + timeout
        while len(self.history.acknowledged_puts()) < at_least:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"only {len(self.history.acknowledged_puts())} of {at_least} puts were "
                    f"acknowledged within {timeout}s; {self.history.counts()}"
                )
            time.sleep(0.05)

    # ------------------------------------------------------------------ one client

    def _client(self, c: int) -> None:
        try:
            self._client_loop(c)
        except BaseException as e:  # surfaced by stop()
            self.errors.append(e)

    def _client_loop(self, c: int) -> None:
        cfg = self.config
        rng = random.Random(cfg.seed * 1000 + c)
        weights = [cfg.put, cfg.unique_put, cfg.get_linearizable, cfg.get_lease, cfg.get_stale]
        kinds = ["put", "unique", LINEARIZABLE, LEASE, STALE]
        seq = 0
        apis: dict[int, NodeApi] = {}
        node: int | None = None
        try:
            while not self._stop.is_set():
                targets = self.targets()
                if not targets:
                    time.sleep(0.05)
                    continue
                ids = sorted(targets)
                if node not in targets:
                    node = ids[c % len(ids)]
                api = apis.get(node)
                if api is None or api.address != targets[node]:
                    api = apis[node] = NodeApi(targets[node])
                seq += 1
                kind = rng.choices(kinds, weights)[0]
                ok = self._one(c, seq, kind, node, api, rng)
                if not ok:  # fail over to the next node
                    node = ids[(ids.index(node) + 1) % len(ids)]
                if cfg.think:
                    time.sleep(cfg.think)
        finally:
            for a in apis.values():
                a.close()

    def _one(self, c: int, seq: int, kind: object, node: int, api: NodeApi, rng: random.Random) -> (
        bool
    ):
        cfg = self.config
        h = self.history
        if kind in ("put", "unique"):
            key = self.hot_key(rng.randrange(cfg.hot_keys)) if kind == "put" else f"u{c}-{seq}"
            value = f"c{c}-{seq}"
            ev = h.invoke(c, PUT, key, node, value=value)
            try:
                api.put(key, value, timeout=cfg.timeout, idempotency_key=f"w{c}-{seq}")
            except grpc.RpcError as e:
                outcome = FAIL if write_definitely_failed(e) else UNKNOWN
                h.complete(ev, outcome, error=f"{e.code().name}: {e.details()}")
                return False
            h.complete(ev, OK)
            return True
        consistency = int(kind)  # type: ignore[call-overload]
        key = self.hot_key(rng.randrange(cfg.hot_keys))
        ev = h.invoke(c, GET, key, node, consistency=CONSISTENCY_NAMES[consistency])
        try:
            out = api.get(key, consistency, timeout=cfg.timeout)
        except grpc.RpcError as e:
            h.complete(ev, FAIL, error=f"{e.code().name}: {e.details()}")
            return False
        h.complete(ev, OK, output=out)
        return True


def cluster_workload(cluster: ProcessCluster, **config: object) -> Workload:
    """Start a workload whose clients use every node ``cluster`` knows — down or paused ones
    included: their clients are refused or time out and fail over, as real clients would."""
    cfg = WorkloadConfig(**config)  # type: ignore[arg-type]
    return Workload(lambda: {i: n.api_address for i, n in cluster.nodes.items()}, cfg).start()
