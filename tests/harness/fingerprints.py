"""What a cluster holds, in a form that compares across clusters, nodes and sinks.

- :func:`store_image`: every row of some tables on one node (a stale ``Scan``), as
  ``{table: {key: RowImage}}``; a row's image is its values plus the origin author and GTID
  (the same in every cluster holding that version of the row), never its epoch or log index
  (each cluster's own);
- :func:`sqlite_image`: the same tables in one node's SQLite applier database, values only;
- :func:`fingerprint`: one short digest of an image, for the failure report and the restart
  check;
- :func:`diff`: the keys that differ between two images, for failure messages;
- :func:`exception_count` / :func:`counted_exceptions`: exception rows this cluster recorded
  against what its channels' conflict counters say it recorded.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.client import GatewayClient, GatewayError, from_value
from gateway.v1 import gateway_pb2

Key = tuple[Any, ...]


@dataclass(frozen=True)
class RowImage:
    """One stored row: its non-key columns, the origin author and GTID of its last change."""

    values: tuple[tuple[str, Any], ...]
    author: int
    gtid: tuple[int, int]

    def value(self, column: str) -> Any:
        return dict(self.values).get(column)


Image = dict[str, dict[Key, RowImage]]


def scan_rows(api: str, table: str) -> list[gateway_pb2.Row]:
    """Every row of ``table`` on the node at ``api`` (stale read: what that node holds), paging
    from the last key seen; an unknown table has none."""
    out: list[gateway_pb2.Row] = []
    start: list | None = None
    with GatewayClient(api, timeout=15, attempt_timeout=10) as c:
        while True:
            try:
                resp = c.scan(table, start=start, limit=10000, consistency="stale")
            except GatewayError as e:
                if e.code.name == "NOT_FOUND":
                    return out
                raise
            rows = list(resp.rows)
            if start is not None and rows and list(rows[0].key_values) == start:
                rows = rows[1:]  # the start key is inclusive: already taken
            out += rows
            if not resp.more or not rows:
                return out
            start = list(rows[-1].key_values)


def row_image(row: gateway_pb2.Row) -> tuple[Key, RowImage]:
    key = tuple(from_value(v) for v in row.key_values)
    values = tuple(sorted((f.name, from_value(v)) for f, v in zip(row.fields, row.values,
                                                                   strict=True)))
    return key, RowImage(values, row.author, (row.gtid.server_id, row.gtid.trans_id))


def store_image(api: str, tables: Iterable[str]) -> Image:
    """Every row of ``tables`` on the node at ``api``."""
    return {t: dict(row_image(r) for r in scan_rows(api, t)) for t in tables}


def fingerprint(image: Image) -> str:
    """A digest of ``image`` (table by table, key order), with each table's row count."""
    h = hashlib.sha256()
    for table in sorted(image):
        for key in sorted(image[table], key=repr):
            h.update(repr((table, key, image[table][key])).encode())
    counts = ",".join(f"{t}={len(rows)}" for t, rows in sorted(image.items()))
    return f"{h.hexdigest()[:16]} ({counts})"


def diff(a: Image, b: Image, limit: int = 8) -> str:
    """The rows that differ between ``a`` and ``b``, ``limit`` per table."""
    lines = []
    for table in sorted(set(a) | set(b)):
        ra, rb = a.get(table, {}), b.get(table, {})
        keys = sorted((k for k in ra.keys() | rb.keys() if ra.get(k) != rb.get(k)), key=repr)
        if keys:
            lines.append(f"  {table}: {len(ra)} vs {len(rb)} rows, {len(keys)} differ")
            lines += [f"    {k}: {ra.get(k)} | {rb.get(k)}" for k in keys[:limit]]
    return "\n".join(lines) or "  (equal)"


# ---------------------------------------------------------------------------- SQLite sinks


def sqlite_image(db: Path, key_columns: Mapping[str, list[str]]) -> dict[str, dict[Key, dict]]:
    """The rows of each table of ``key_columns`` (``schema.table`` -> its key column names) in
    the SQLite database ``db``: ``{table: {key: {column: value}}}`` without the key columns.
    A table the applier has not created yet has no rows."""
    out: dict[str, dict[Key, dict]] = {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        for table, keys in key_columns.items():
            name = table.partition(".")[2]
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                  "name = ?", (name,)).fetchone()
            rows: dict[Key, dict] = {}
            if exists:
                cur = conn.execute(f'SELECT * FROM "{name.replace(chr(34), chr(34) * 2)}"')
                cols = [d[0] for d in cur.description]
                for rec in cur.fetchall():
                    row = dict(zip(cols, rec, strict=True))
                    rows[tuple(row.pop(k) for k in keys)] = row
            out[table] = rows
    finally:
        conn.close()
    return out


def sink_differences(store: Image, sink: dict[str, dict[Key, dict]], limit: int = 5) -> list[str]:
    """Where a node's SQLite sink differs from its store: a key only in one of them, or a
    column of the store's row holding another value in the sink (columns the store's row does
    not name must be NULL in the sink)."""
    out = []
    for table, rows in store.items():
        srows = sink.get(table, {})
        for key in sorted(rows.keys() | srows.keys(), key=repr):
            if key not in srows:
                out.append(f"{table} {key}: in the store, not in SQLite")
            elif key not in rows:
                out.append(f"{table} {key}: in SQLite {srows[key]}, not in the store")
            else:
                want = dict(rows[key].values)
                got = srows[key]
                bad = {c: (want.get(c), got.get(c)) for c in set(want) | set(got)
                       if want.get(c) != got.get(c)}
                if bad:
                    out.append(f"{table} {key}: store | SQLite differ in {bad}")
            if len(out) >= limit:
                return out
    return out


# ---------------------------------------------------------------------------- conflicts

#: The per-function counters of functions that record each conflicting row on its own; a
#: ``_TRANS`` function's rejected rows (in conflict or rejected with their transaction) are
#: ``trans_row_reject_count``.
ROW_COUNTERS = ("conflict_fn_epoch", "conflict_fn_epoch2", "conflict_fn_max", "conflict_fn_old",
                "conflict_fn_max_del_win", "conflict_fn_max_ins", "conflict_fn_max_del_win_ins",
                "conflict_fn_lww", "conflict_fn_other")


def counted_exceptions_of(channel: gateway_pb2.ChannelStatus) -> int:
    """How many exception rows one channel's counters say it recorded."""
    return (channel.conflicts.get("trans_row_reject_count", 0)
            + sum(channel.conflicts.get(c, 0) for c in ROW_COUNTERS))


def counted_exceptions(status: gateway_pb2.StatusResponse) -> int:
    """How many exception rows this cluster's channels' counters say it recorded."""
    return sum(counted_exceptions_of(ch) for ch in status.channels)


def exception_count(image: Image, cid: int) -> int:
    """Exception rows in ``image`` recorded by cluster ``cid``: key ``(server_id,
    source_server_id, source_epoch, count)`` with ``server_id = cid`` (a row of another shape
    is not one the product wrote)."""
    return sum(1 for table, rows in image.items() if table.endswith("$EX")
               for key in rows if len(key) == 4 and key[0] == cid)


def exception_causes(image: Image) -> list[str]:
    """The ``NDB$CFT_CAUSE`` of every exception row in ``image`` ('' where it has none)."""
    return [str(r.value("NDB$CFT_CAUSE") or "") for table, rows in image.items()
            if table.endswith("$EX") for r in rows.values()]
