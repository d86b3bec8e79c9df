"""The console's exception rows (``/api/v1/conflicts/<cluster>/<table>``) are read from the
cluster at most once per fresh period however many requests ask, say how old they are, are
replaced in the background when older, read on the request when too old, and read again
after an action on the table (gateway/console/rows_cache.py)."""

from __future__ import annotations

from gateway.console.rows_cache import RowsCache
from gateway.console.server import Console
from gateway.v1 import gateway_pb2


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_rows_are_served_fresh_then_stale_while_one_background_read_replaces_them():
    reads: list[tuple[int, str]] = []
    later: list = []

    def load(cid: int, table: str) -> list[dict]:
        reads.append((cid, table))
        return [{"n": len(reads)}]

    clock = _Clock()
    cache = RowsCache(load, fresh=2.0, stale=30.0, clock=clock, spawn=later.append)
    rows, first_ns = cache.get(1, "shop.items")
    assert rows == [{"n": 1}] and len(reads) == 1
    clock.t += 1.9
    assert cache.get(1, "shop.items") == (rows, first_ns) and len(reads) == 1
    clock.t += 0.2  # older than fresh: served as it is, one read started in the background
    assert cache.get(1, "shop.items")[0] == [{"n": 1}]
    assert cache.get(1, "shop.items")[0] == [{"n": 1}] and len(later) == 1 and len(reads) == 1
    later.pop()()
    assert cache.get(1, "shop.items")[0] == [{"n": 2}]
    clock.t += 31  # too old: read on the request
    assert cache.get(1, "shop.items")[0] == [{"n": 3}] and not later
    cache.drop(1, "shop.items")  # an action changed them
    assert cache.get(1, "shop.items")[0] == [{"n": 4}]
    assert cache.get(2, "shop.items")[0] == [{"n": 5}] and reads[-1] == (2, "shop.items")


def test_a_read_begun_before_an_action_is_not_kept_after_it():
    gate: list = []

    def load(cid: int, table: str) -> list[dict]:
        return [{"before": True}] if not gate else [{"after": True}]

    clock = _Clock()
    later: list = []
    cache = RowsCache(load, clock=clock, spawn=later.append)
    cache.get(1, "t.a")
    clock.t += 3
    cache.get(1, "t.a")  # a background read is due ...
    cache.drop(1, "t.a")  # ... an action happens before it runs
    later.pop()()
    gate.append(1)
    assert cache.get(1, "t.a")[0] == [{"after": True}]


class _Poller:
    def addresses(self, cluster_id: int) -> list[str]:
        return ["node:1"]


class _Client:
    def __init__(self) -> None:
        self.calls = 0

    def conflicts_list(self, pattern: str = "", **kw) -> gateway_pb2.ConflictsListResponse:
        self.calls += 1
        return gateway_pb2.ConflictsListResponse()


def test_console_requests_for_rows_share_one_conflicts_list_and_say_how_old_it_is():
    client = _Client()
    con = Console(_Poller(), lambda addrs, token: client)  # type: ignore[arg-type]
    docs = [con.conflict_rows(1, "shop.items", {}) for _ in range(20)]
    assert client.calls == 1
    assert all(d["read_at_ns"] == docs[0]["read_at_ns"] for d in docs)
    assert all(0 <= d["age_seconds"] < 2 for d in docs) and docs[0]["total"] == 0
