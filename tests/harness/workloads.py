"""Workloads for :class:`~tests.harness.clusters.MultiCluster`: one client thread per cluster
writing all through the fault schedule, each operation's outcome recorded.

A write is retried with the same idempotency key until it is acknowledged (applied once
however often it was sent) or the workload stops; one still failing then is *in doubt* (it may
or may not have been applied). Each workload has ``setup`` (before the faults), ``start`` /
``stop`` and ``check(images)`` (after heal: the invariants of its data on every cluster,
raising AssertionError with the cause).

- :class:`HotKeys`: every cluster updates the same few rows of ``fault.hot`` (the rule's
  function judges them: conflicts on every epoch that meets a concurrent change).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.client import GatewayClient, GatewayError, row_insert, row_update
from gateway.v1 import statement_pb2
from tests.harness.cluster import wait_until
from tests.harness.clusters import MultiCluster
from tests.harness.fingerprints import Image, store_image


@dataclass
class Outcomes:
    """What the clients of one workload saw: acknowledged writes and writes in doubt, each as
    ``(cluster, seq, payload)``."""

    acked: list[tuple[int, int, object]] = field(default_factory=list)
    doubt: list[tuple[int, int, object]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def summary(self) -> str:
        per: dict[int, int] = {}
        for cid, *_ in self.acked:
            per[cid] = per.get(cid, 0) + 1
        return (f"acknowledged {len(self.acked)} {dict(sorted(per.items()))}, in doubt "
                f"{len(self.doubt)}, client errors {len(self.errors)}"
                + (f" (last: {self.errors[-1]})" if self.errors else ""))


def write_until_done(client: GatewayClient, stmts: list[statement_pb2.Statement], key: str,
                     stop: threading.Event, errors: list[str]) -> bool:
    """Send one transaction until it is acknowledged (True) or ``stop`` is set while it still
    fails (False: in doubt). The same idempotency key every time: applied at most once."""
    while True:
        try:
            client.write(stmts, idempotency_key=key, timeout=20)
            return True
        except GatewayError as e:
            if len(errors) < 10000:
                errors.append(f"{e.code.name}: {e.details[:200]}")
            if stop.is_set():
                return False
            time.sleep(0.2)


class Workload:
    """The threads of a workload; subclasses give ``tables``, ``setup``, ``step`` and
    ``check``."""

    name = "workload"
    tables: tuple[str, ...] = ()
    key_columns: dict[str, list[str]] = {}

    def __init__(self, mc: MultiCluster, seed: int) -> None:
        self.mc = mc
        self.rng = random.Random(seed)
        self.out = Outcomes()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def setup(self) -> None:
        """Create the workload's rows before the faults (on every cluster once replicated)."""

    def step(self, cid: int, client: GatewayClient, seq: int, rng: random.Random) -> None:
        raise NotImplementedError

    def _loop(self, cid: int, seed: float) -> None:
        rng = random.Random(seed)
        seq = 0
        with self.mc.client(cid, timeout=20) as client:
            while not self._stop.is_set():
                seq += 1
                self.step(cid, client, seq, rng)
                time.sleep(rng.choice((0.02, 0.05, 0.1, 0.2)))

    def start(self) -> None:
        for cid in self.mc.topology.cids:
            t = threading.Thread(target=self._loop, args=(cid, self.rng.random()),
                                 name=f"{self.name}-c{cid}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)
            if t.is_alive():
                raise AssertionError(f"{t.name} did not stop within 120 s")

    def write(self, cid: int, client: GatewayClient, seq: int, payload: object,
              stmts: list[statement_pb2.Statement]) -> bool:
        ok = write_until_done(client, stmts, f"{self.name}-{cid}-{seq}", self._stop,
                              self.out.errors)
        with self.out.lock:
            (self.out.acked if ok else self.out.doubt).append((cid, seq, payload))
        return ok

    def check(self, images: dict[int, Image]) -> None:
        """The workload's invariants on the converged images (one per cluster)."""

    # helpers
    def seed_rows(self, stmts: list[statement_pb2.Statement], table: str, rows: int) -> None:
        """Write ``stmts`` on cluster 1 and wait until every cluster holds ``rows`` rows of
        ``table``."""
        with self.mc.client(1, timeout=60) as c:
            c.write(stmts, idempotency_key=f"{self.name}-seed", timeout=60)
        for cid in self.mc.topology.cids:
            api = self.mc.apis(cid)[0]
            wait_until(f"cluster {cid} holding the {rows} seeded rows of {table}",
                       lambda a=api: len(store_image(a, [table])[table]) == rows, 90, 0.2,
                       self.mc.describe)


class HotKeys(Workload):
    """Every cluster updates ``fault.hot`` rows ``0..keys-1`` (``v = c<cluster>.<seq>``).

    Check: every row holds a value some client wrote (nothing invented), and every cluster
    got writes acknowledged."""

    name = "hot"
    tables = ("fault.hot",)
    key_columns = {"fault.hot": ["id"]}

    def __init__(self, mc: MultiCluster, seed: int, keys: int = 4) -> None:
        super().__init__(mc, seed)
        self.keys = keys

    def setup(self) -> None:
        self.seed_rows([row_insert("fault.hot", {"id": k}, {"v": "init"})
                        for k in range(self.keys)], "fault.hot", self.keys)

    def step(self, cid: int, client: GatewayClient, seq: int, rng: random.Random) -> None:
        k = rng.randrange(self.keys)
        v = f"c{cid}.{seq}"
        self.write(cid, client, seq, (k, v), [row_update("fault.hot", {"id": k}, {"v": v})])

    def check(self, images: dict[int, Image]) -> None:
        written = {"init"} | {p[1] for _, _, p in self.out.acked + self.out.doubt}  # type: ignore[index]
        for cid, image in images.items():
            rows = image["fault.hot"]
            assert len(rows) == self.keys, f"cluster {cid} holds {len(rows)} hot rows"
            bad = {k: r.value("v") for k, r in rows.items() if r.value("v") not in written}
            assert not bad, f"cluster {cid} holds values no client wrote: {bad}"
        for cid in self.mc.topology.cids:
            assert any(c == cid for c, *_ in self.out.acked), (
                f"no write of cluster {cid} was acknowledged ({self.out.summary()})")


WORKLOADS: dict[str, Callable[[MultiCluster, int], Workload]] = {"hot": HotKeys}
