"""Workloads for :class:`~tests.harness.clusters.MultiCluster`: one client thread per cluster
writing all through the fault schedule, each operation's outcome recorded.

A write is retried with the same idempotency key until it is acknowledged (applied once
however often it was sent) or the workload stops; one still failing then is *in doubt* (it may
or may not have been applied). Each workload has ``setup`` (before the faults), ``start`` /
``stop`` and ``check(images)`` (after heal: the invariants of its data on every cluster,
raising AssertionError with the cause).

- :class:`HotKeys`: every cluster updates the same few rows of ``fault.hot`` (the rule's
  function judges them: conflicts on every epoch that meets a concurrent change).
- :class:`Bank`: transfers between the accounts of ``fault.bank`` on every cluster, each a
  conditional write of the two balances it read (so no transfer of one cluster is lost to
  another of the same cluster); the total holds at every epoch of the PRIMARY's log and on
  every cluster after heal.
- :class:`ListAppend`: every cluster appends unique elements to a few lists (``fault.append``,
  a conditional write of the list it read); after heal every acknowledged element is in its
  list exactly once, the lists are equal everywhere, or the element's change is in
  ``fault.append$EX`` with a cause.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gateway.client import (
    Condition,
    GatewayClient,
    GatewayError,
    PreconditionFailed,
    from_value,
    row_insert,
    row_update,
)
from gateway.v1 import gateway_pb2, statement_pb2, transaction_pb2
from tests.harness.cluster import wait_until
from tests.harness.clusters import MultiCluster
from tests.harness.fingerprints import Image, store_image


@dataclass
class Outcomes:
    """What the clients of one workload saw: acknowledged writes and writes in doubt, each as
    ``(cluster, seq, payload)``."""

    acked: list[tuple[int, int, object]] = field(default_factory=list)
    doubt: list[tuple[int, int, object]] = field(default_factory=list)
    refused: int = 0  # conditional writes refused (FAILED_PRECONDITION): not applied
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def summary(self) -> str:
        per: dict[int, int] = {}
        for cid, *_ in self.acked:
            per[cid] = per.get(cid, 0) + 1
        return (f"acknowledged {len(self.acked)} {dict(sorted(per.items()))}, in doubt "
                f"{len(self.doubt)}, refused {self.refused}, client errors {len(self.errors)}"
                + (f" (last: {self.errors[-1]})" if self.errors else ""))


ACKED, REFUSED, DOUBT = "acked", "refused", "doubt"


def write_until_done(client: GatewayClient, stmts: list[statement_pb2.Statement], key: str,
                     stop: threading.Event, errors: list[str],
                     conditions: list[transaction_pb2.Condition] | None = None) -> str:
    """Send one transaction until it is acknowledged (``ACKED``), refused by its conditions
    (``REFUSED``: nothing applied) or ``stop`` is set while it still fails (``DOUBT``). The
    same idempotency key every time: applied at most once, and a retry of a refused write is
    refused again."""
    while True:
        try:
            client.write(stmts, idempotency_key=key, timeout=20, conditions=conditions or ())
            return ACKED
        except PreconditionFailed:
            return REFUSED
        except GatewayError as e:
            if len(errors) < 10000:
                errors.append(f"{e.code.name}: {e.details[:200]}")
            if stop.is_set():
                return DOUBT
            time.sleep(0.2)


class Workload:
    """The threads of a workload; subclasses give ``tables``, ``setup``, ``step`` and
    ``check``."""

    name = "workload"
    tables: tuple[str, ...] = ()
    key_columns: dict[str, list[str]] = {}
    #: the pause after each operation of a client, drawn from these (seconds)
    pauses: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2)

    def __init__(self, mc: MultiCluster, seed: int, clients: int = 2) -> None:
        self.mc = mc
        self.clients = clients
        self.rng = random.Random(seed)
        self.out = Outcomes()
        self._stop = threading.Event()
        self._held: set[int] = set()  # clusters whose clients start no operation now
        self._busy: dict[int, int] = {}  # operations under way per cluster
        self._busy_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.notes: list[str] = []  # what the checks looked at, for the run's log

    def setup(self) -> None:
        """Create the workload's rows before the faults (on every cluster once replicated)."""

    def step(self, cid: int, client: GatewayClient, seq: int, rng: random.Random) -> None:
        raise NotImplementedError

    def _loop(self, cid: int, index: int, seed: float) -> None:
        """Client ``index`` of cluster ``cid``: its operations' ``seq`` are ``index + 1``,
        ``index + 1 + clients``, ... (unique in the cluster)."""
        rng = random.Random(seed)
        seq = index + 1
        with self.mc.client(cid, timeout=20) as client:
            while not self._stop.is_set():
                with self._busy_lock:
                    go = cid not in self._held
                    if go:
                        self._busy[cid] = self._busy.get(cid, 0) + 1
                if not go:
                    time.sleep(0.1)
                    continue
                try:
                    self.step(cid, client, seq, rng)
                finally:
                    with self._busy_lock:
                        self._busy[cid] -= 1
                seq += self.clients
                pause = rng.choice(self.pauses)
                if pause:
                    time.sleep(pause)

    def start(self) -> None:
        """``clients`` threads per cluster: two clients of one cluster race each other (a
        read-modify-write without its conditions loses updates), as well as the clusters."""
        for cid in self.mc.topology.cids:
            for index in range(self.clients):
                t = threading.Thread(target=self._loop, args=(cid, index, self.rng.random()),
                                     name=f"{self.name}-c{cid}-{index}", daemon=True)
                t.start()
                self._threads.append(t)

    def add_clients(self, cid: int) -> None:
        """Start ``clients`` threads on cluster ``cid`` too (a cluster added at run time)."""
        for index in range(self.clients):
            t = threading.Thread(target=self._loop, args=(cid, index, self.rng.random()),
                                 name=f"{self.name}-c{cid}-{index}", daemon=True)
            t.start()
            self._threads.append(t)

    def hold(self, cids: list[int] | None = None) -> None:
        """Let no client of the clusters ``cids`` (default: all) start another operation until
        :meth:`release`; waits for the operations under way to finish."""
        cids = self.mc.topology.cids if cids is None else cids
        with self._busy_lock:
            self._held.update(cids)
        wait_until(f"{self.name}'s operations under way on clusters {cids} finishing",
                   lambda: not any(self._busy.get(c, 0) for c in cids), 120, 0.05)

    def release(self, cids: list[int] | None = None) -> None:
        with self._busy_lock:
            self._held.difference_update(self.mc.topology.cids if cids is None else cids)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)
            if t.is_alive():
                raise AssertionError(f"{t.name} did not stop within 120 s")

    def write(self, cid: int, client: GatewayClient, seq: int, payload: object,
              stmts: list[statement_pb2.Statement],
              conditions: list[transaction_pb2.Condition] | None = None,
              attempt: int = 0) -> str:
        """One write with its outcome recorded (a refused one is only counted)."""
        got = write_until_done(client, stmts, f"{self.name}-{cid}-{seq}-{attempt}", self._stop,
                               self.out.errors, conditions)
        with self.out.lock:
            if got == ACKED:
                self.out.acked.append((cid, seq, payload))
            elif got == DOUBT:
                self.out.doubt.append((cid, seq, payload))
            else:
                self.out.refused += 1
        return got

    def read(self, client: GatewayClient, table: str, key: int) -> gateway_pb2.Row | None:
        """The row of ``table`` with ``key`` read linearizably on the client's cluster (None
        when the read failed: the caller skips this operation)."""
        try:
            resp = client.read(table, key, timeout=10)
        except GatewayError as e:
            if len(self.out.errors) < 10000:
                self.out.errors.append(f"read: {e.code.name}: {e.details[:200]}")
            time.sleep(0.2)
            return None
        return resp.row if resp.found else None

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


def _column(row: gateway_pb2.Row, name: str) -> object:
    for f, v in zip(row.fields, row.values, strict=True):
        if f.name == name:
            return from_value(v)
    return None


class Bank(Workload):
    """Accounts ``fault.bank`` rows ``0..accounts-1`` (``bal``, 100 each). A transfer reads two
    balances and writes both, on condition that neither changed since (their GTIDs).

    Checks: the total is ``100 * accounts`` on every cluster, and after every epoch of the
    PRIMARY's log (its change stream replayed from the start: every transaction it applied,
    local or replicated, conflicts' refreshes included)."""

    name = "bank"
    tables = ("fault.bank",)
    key_columns = {"fault.bank": ["id"]}
    TABLE = "fault.bank"

    def __init__(self, mc: MultiCluster, seed: int, accounts: int = 6) -> None:
        super().__init__(mc, seed)
        self.accounts = accounts
        self.total = 100 * accounts
        self.epochs_checked = 0

    def setup(self) -> None:
        self.seed_rows([row_insert(self.TABLE, {"id": k}, {"bal": 100})
                        for k in range(self.accounts)], self.TABLE, self.accounts)

    def step(self, cid: int, client: GatewayClient, seq: int, rng: random.Random) -> None:
        a, b = rng.sample(range(self.accounts), 2)
        ra, rb = self.read(client, self.TABLE, a), self.read(client, self.TABLE, b)
        if ra is None or rb is None:
            return
        amount = rng.randint(1, 5)
        bal_a, bal_b = _column(ra, "bal"), _column(rb, "bal")
        assert isinstance(bal_a, int) and isinstance(bal_b, int), (bal_a, bal_b)
        self.write(cid, client, seq, (a, b, amount), [
            row_update(self.TABLE, {"id": a}, {"bal": bal_a - amount}),
            row_update(self.TABLE, {"id": b}, {"bal": bal_b + amount})],
            [Condition.gtid(self.TABLE, a, ra.gtid), Condition.gtid(self.TABLE, b, rb.gtid)])

    def check(self, images: dict[int, Image]) -> None:
        for cid, image in images.items():
            bal: dict[object, int] = {k: r.value("bal") for k, r in image[self.TABLE].items()}
            assert len(bal) == self.accounts, f"cluster {cid} holds {len(bal)} accounts"
            assert sum(bal.values()) == self.total, (
                f"cluster {cid}: the accounts total {sum(bal.values())}, not {self.total}: "
                f"{dict(sorted(bal.items()))}")
        primary = self.mc.primary
        if primary is not None:
            self.epochs_checked = check_total_by_epoch(self.mc, primary, self.TABLE,
                                                       self.accounts, self.total,
                                                       self.mc.primary_since)
            self.notes.append(f"total checked after {self.epochs_checked} epochs of cluster "
                              f"{primary}'s log")
        assert self.out.acked, f"no transfer acknowledged: {self.out.summary()}"


def check_total_by_epoch(mc: MultiCluster, cid: int, table: str, accounts: int,
                         total: int, since: int = 0) -> int:
    """Replay cluster ``cid``'s change stream from its first entry up to what its leader has
    applied; after every epoch that ends past log index ``since`` (and at the end) the
    accounts of ``table`` must add up to ``total``. Returns how many epochs were checked."""
    schema, _, name = table.partition(".")
    bal: dict[object, int] = {}
    checked = 0
    epoch = None
    for ev in change_stream(mc, cid):
        if (epoch is not None and ev.epoch != epoch and len(bal) == accounts
                and ev.log_index > since):
            got = sum(bal.values())
            assert got == total, (
                f"cluster {cid}'s accounts total {got}, not {total}, after its epoch "
                f"{epoch} (log index < {ev.log_index}): {dict(sorted(bal.items()))}")
            checked += 1
        epoch = ev.epoch
        if ev.HasField("transaction"):
            _replay(ev.transaction, schema, name, bal)
    assert len(bal) == accounts and sum(bal.values()) == total, (
        f"cluster {cid}'s change stream ends with accounts {dict(sorted(bal.items()))}")
    return checked + 1


class Inserts(Workload):
    """Rows ``fault.fill``: ``rows`` of them written on cluster 1 at setup (what a seed copies
    in many chunks), then every client inserts new ones without a pause (key
    ``cid * 10**7 + seq``, one transaction each: no two writes touch one key, so no
    conflict).

    Check: every cluster holds every acknowledged row with its value and only rows some
    client wrote."""

    name = "inserts"
    pauses = (0.0,)  # as fast as the clients go: the volume of the run
    tables = ("fault.fill",)
    key_columns = {"fault.fill": ["id"]}
    TABLE = "fault.fill"

    def __init__(self, mc: MultiCluster, seed: int, rows: int = 4000, clients: int = 4
                 ) -> None:
        super().__init__(mc, seed, clients)
        self.rows = rows

    def setup(self) -> None:
        self.seed_rows([row_insert(self.TABLE, {"id": k}, {"v": f"init{k}"})
                        for k in range(self.rows)], self.TABLE, self.rows)

    def step(self, cid: int, client: GatewayClient, seq: int, rng: random.Random) -> None:
        key = cid * 10**7 + seq
        self.write(cid, client, seq, (key, f"c{cid}.{seq}"),
                   [row_insert(self.TABLE, {"id": key}, {"v": f"c{cid}.{seq}"})])

    def check(self, images: dict[int, Image]) -> None:
        acked = {p[0]: p[1] for _, _, p in self.out.acked}  # type: ignore[index]
        maybe = {p[0]: p[1] for _, _, p in self.out.doubt}  # type: ignore[index]
        for cid, image in images.items():
            rows = {k[0]: r.value("v") for k, r in image[self.TABLE].items()}
            missing = sorted(k for k, v in acked.items() if rows.get(k) != v)
            assert not missing, (
                f"cluster {cid}: {len(missing)} acknowledged insert(s) missing or different: "
                f"{[(k, acked[k], rows.get(k)) for k in missing[:10]]}")
            alien = sorted(k for k, v in rows.items() if k >= self.rows
                           and acked.get(k, maybe.get(k)) != v)
            assert not alien, f"cluster {cid} holds rows no client wrote: {alien[:10]}"
        self.notes.append(f"{len(acked)} acknowledged inserts on every cluster")


def check_each_origin_once(mc: MultiCluster, cid: int) -> int:
    """Cluster ``cid``'s change stream holds each origin transaction (origin GTID) at most
    once, and each origin's in increasing order; returns how many it holds."""
    last: dict[int, int] = {}
    seen = 0
    for ev in change_stream(mc, cid):
        if not ev.HasField("transaction") or ev.transaction.gtid.server_id == 0:
            continue
        g = ev.transaction.gtid
        prev = last.get(g.server_id, 0)
        assert g.trans_id > prev, (
            f"cluster {cid}'s log holds origin transaction {g.server_id}:{g.trans_id} after "
            f"{g.server_id}:{prev} (index {ev.log_index}): applied twice or out of order")
        last[g.server_id] = g.trans_id
        seen += 1
    return seen


def change_stream(mc: MultiCluster, cid: int) -> Iterator[gateway_pb2.ChangeEvent]:
    """Cluster ``cid``'s change stream (its leader's) from its first entry up to now: a write
    of another table (``harness.sentinel``) marks where to stop, as the stream never ends."""
    lead = mc.leader(cid)
    with GatewayClient(mc.clusters[cid].nodes[lead].api_address, timeout=60) as c:
        target = c.write([row_insert("harness.sentinel", {"id": 1}, {"at": time.time_ns()})],
                         timeout=60).log_index
        events = c.subscribe(from_log_index=1, timeout=120)
        try:
            for ev in events:
                yield ev
                if ev.log_index >= target:
                    return
        finally:
            events.cancel()


def trace_elements(mc: MultiCluster, cid: int, table: str, column: str,
                   elements: set[str]) -> list[str]:
    """Where each of ``elements`` came into and went out of a list (``column`` of ``table``,
    joined by ``,``) in cluster ``cid``'s change stream: log index, GTID and author of each
    transaction that did it -- what a failure of :class:`ListAppend` needs to be understood."""
    schema, _, name = table.partition(".")
    lists: dict[object, list[str]] = {}
    out: list[str] = []
    for ev in change_stream(mc, cid):
        if not ev.HasField("transaction"):
            continue
        t = ev.transaction
        for st in t.statements:
            kind = st.WhichOneof("kind")
            if kind not in ("insert", "update"):
                continue
            body = getattr(st, kind)
            if (body.table.schema_name, body.table.table_name) != (schema, name):
                continue
            names = [f.name for f in (body.fields if kind == "insert" else body.set_fields)]
            if column not in names:
                continue
            for r in body.records:
                key = from_value(r.key_values[0])
                new = str(from_value(r.after_values[names.index(column)]) or "").split(",")
                old = lists.get(key, [])
                for e in elements:
                    if (e in new) != (e in old):
                        out.append(f"cluster {cid} index {ev.log_index}: {e} "
                                   f"{'in' if e in new else 'OUT'} (list {key}) by "
                                   f"{t.gtid.server_id}:{t.gtid.trans_id} author {t.author}, "
                                   f"list ends {new[-3:]}")
                lists[key] = new
    return out


def _replay(txn: transaction_pb2.Transaction, schema: str, table: str,
            bal: dict[object, int]) -> None:
    """Apply ``txn``'s changes of ``schema.table`` to ``bal`` (key -> balance)."""
    for st in txn.statements:
        kind = st.WhichOneof("kind")
        body = getattr(st, kind)
        t = getattr(body, "table", None)
        if t is None or (t.schema_name, t.table_name) != (schema, table):
            assert kind != "sql", f"an SQL statement touched {schema}.{table}: cannot replay"
            continue
        if kind == "insert":
            names = [f.name for f in body.fields]
            for r in body.records:
                key = from_value(r.key_values[0])
                bal[key] = from_value(r.after_values[names.index("bal")])
        elif kind == "update":
            names = [f.name for f in body.set_fields]
            for r in body.records:
                if "bal" in names:
                    key = from_value(r.key_values[0])
                    bal[key] = from_value(r.after_values[names.index("bal")])
        elif kind == "delete":
            for r in body.records:
                bal.pop(from_value(r.key_values[0]), None)


class ListAppend(Workload):
    """Lists ``fault.append`` rows ``0..keys-1`` (``v``: elements joined by ``,``). An append
    reads the list and writes it with one more element (``c<cluster>.<seq>``), on condition
    that the row did not change since (its GTID); refused, it reads again (a few times).

    Checks, on every cluster: each list holds no element twice and only elements some client
    appended; every acknowledged element is in its list, or the change that appended it is in
    ``fault.append$EX`` (its ``v$NEW`` ends with the element) with a cause."""

    name = "append"
    tables = ("fault.append",)
    key_columns = {"fault.append": ["id"]}
    TABLE = "fault.append"

    def __init__(self, mc: MultiCluster, seed: int, keys: int = 3) -> None:
        super().__init__(mc, seed)
        self.keys = keys

    def setup(self) -> None:
        self.seed_rows([row_insert(self.TABLE, {"id": k}, {"v": ""}) for k in range(self.keys)],
                       self.TABLE, self.keys)

    def step(self, cid: int, client: GatewayClient, seq: int, rng: random.Random) -> None:
        k = rng.randrange(self.keys)
        elem = f"c{cid}.{seq}"
        for attempt in range(5):
            row = self.read(client, self.TABLE, k)
            if row is None:
                continue
            v = _column(row, "v") or ""
            got = self.write(cid, client, seq, (k, elem),
                             [row_update(self.TABLE, {"id": k},
                                         {"v": f"{v},{elem}" if v else elem})],
                             [Condition.gtid(self.TABLE, k, row.gtid)], attempt)
            if got != REFUSED:
                return

    def check(self, images: dict[int, Image]) -> None:
        written = {p[1] for _, _, p in self.out.acked + self.out.doubt}  # type: ignore[index]
        for cid, image in images.items():
            lists = {k[0]: (str(r.value("v") or "").split(",") if r.value("v") else [])
                     for k, r in image[self.TABLE].items()}
            assert len(lists) == self.keys, f"cluster {cid} holds {len(lists)} lists"
            for k, items in lists.items():
                twice = sorted({e for e in items if items.count(e) > 1})
                assert not twice, f"cluster {cid}: list {k} holds {twice} more than once"
                alien = sorted(set(items) - written)
                assert not alien, f"cluster {cid}: list {k} holds {alien}, never appended"
            recorded: dict[tuple[object, str], str] = {}
            for r in image[f"{self.TABLE}$EX"].values():
                new = str(r.value("v$NEW") or "")
                if new:
                    recorded[(r.value("id"), new.split(",")[-1])] = str(
                        r.value("NDB$CFT_CAUSE") or "")
            lost = []
            lost_elements: set[str] = set()
            for c, _seq, p in self.out.acked:
                k, elem = p  # type: ignore[misc]
                if elem in lists.get(k, []):
                    continue
                if recorded.get((k, elem)):
                    continue
                lost.append(f"{elem} (list {k}, cluster {c})")
                lost_elements.add(elem)
            if lost:
                trace = self._trace(lost_elements, images)
                raise AssertionError(
                    f"cluster {cid}: acknowledged appends neither in their list nor recorded in "
                    f"{self.TABLE}$EX with a cause: {lost[:10]} ({len(lost)} in all)\n"
                    + "\n".join(trace))

    def _trace(self, elements: set[str], images: dict[int, Image]) -> list[str]:
        """Each lost element's way through every cluster's log and exceptions table."""
        out = []
        for cid in self.mc.topology.cids:
            try:
                out += trace_elements(self.mc, cid, self.TABLE, "v", elements)
            except Exception as e:  # a courtesy for the report: never hide the failure
                out.append(f"cluster {cid}: no trace ({e!r})")
        ex = images[self.mc.topology.cids[0]][f"{self.TABLE}$EX"]
        for key, r in sorted(ex.items(), key=repr):
            new, old = str(r.value("v$NEW") or ""), str(r.value("v$OLD") or "")
            hit = sorted(e for e in elements if e in new.split(",") or e in old.split(","))
            if hit:
                out.append(f"exception {key} {r.value('NDB$CFT_CAUSE')} orig "
                           f"{r.value('NDB$ORIG_TRANSID')} holds {hit}: NEW ends "
                           f"{new.split(',')[-3:]}, OLD ends {old.split(',')[-3:]}")
        return out


WORKLOADS: dict[str, Callable[[MultiCluster, int], Workload]] = {
    "hot": HotKeys, "bank": Bank, "append": ListAppend, "inserts": Inserts}
