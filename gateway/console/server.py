"""The console's HTTP server: the page, its JSON API and the admin actions.

Contract (docs/console.md): every ``GET /api/v1/...`` answers JSON from the poller's newest
round (conflict rows are read from the cluster on request, at most once per
``rows_cache.RowsCache``'s fresh period, and say when they were read); errors are JSON
``{"error": "..."}`` with 400 (bad input), 403 (not allowed), 404 (unknown path or object)
or 502 (the cluster refused or could not be reached). An action is a ``POST`` that needs all
of: an admin token given to the console (else 403, and the page shows no buttons), the
``X-CSRF-Token`` header with this process's random token (sent to the page by
``/api/v1/session``), an ``Origin`` (when the browser sends one) equal to the console's own,
and ``"confirm": true`` in the JSON body. A request whose ``Host`` is not the console's own
address is refused (403) unless the console listens on a wildcard address: that stops a
DNS-rebinding page from reading the API through a victim's browser.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from gateway.client import GatewayClient, GatewayError, python_row

from . import exceptions, views
from .poller import Poller
from .rows_cache import RowsCache

_STATIC = {"index.html": "text/html; charset=utf-8",
           "console.js": "text/javascript; charset=utf-8",
           "console.css": "text/css; charset=utf-8"}
_WILDCARD = {"0.0.0.0", "::", ""}
#: A conflicts overview older than this is read again (the rows can be many).
_COUNTS_TTL = 2.0
_MAX_BODY = 1 << 20
#: Exception rows read for one table view (filtered on the console's side).
_MAX_ROWS = 100_000


class ApiError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class Console:
    """What the handlers share: the poller, the tokens, the conflict tables to count, the
    CSRF token. ``client_factory(addresses, token)`` makes a client of one cluster."""

    def __init__(self, poller: Poller,
                 client_factory: Callable[[Sequence[str], str], GatewayClient], *,
                 token: str = "", admin_token: str = "",
                 conflict_tables: Sequence[str] = ()) -> None:
        self.poller = poller
        self.client_factory = client_factory
        self.token = token
        self.admin_token = admin_token
        self.conflict_tables = [exceptions.check_table(t) for t in conflict_tables]
        self.csrf = secrets.token_urlsafe(24)
        self._counts: dict[int, tuple[float, list[dict[str, Any]]]] = {}
        self._counts_lock = threading.Lock()
        self._clients: dict[tuple[tuple[str, ...], str], GatewayClient] = {}
        self._clients_lock = threading.Lock()
        self.rows_cache = RowsCache(self._rows)

    @property
    def admin(self) -> bool:
        return bool(self.admin_token)

    # ------------------------------------------------------------------ reads

    def client(self, cluster_id: int, admin: bool = False) -> GatewayClient:
        addrs = self.poller.addresses(cluster_id)
        if not addrs:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no cluster {cluster_id} known")
        return self._cached(addrs, self.admin_token if admin else self.token)

    def tables_of(self, cluster_id: int) -> list[str]:
        """The tables whose exceptions the console counts on ``cluster_id``: the configured
        ones and every rule that names one table (no wildcard)."""
        st = self.poller.snapshot().clusters.get(cluster_id)
        rules = [r.table for r in st.status.conflict_rules] \
            if st is not None and st.status is not None else []
        exact = [t for t in rules if not any(c in t for c in "*?[") and t.count(".") == 1]
        return list(dict.fromkeys(self.conflict_tables + exact))

    def conflicts(self) -> dict[str, Any]:
        snap = self.poller.snapshot()
        out = []
        for cid, v in sorted(snap.clusters.items()):
            chans = [{"name": ch.name, "source_id": ch.source_id,
                      "counters": {k: str(n) for k, n in sorted(ch.conflicts.items())}}
                     for ch in (v.status.channels if v.status is not None else [])]
            out.append({"cluster_id": cid, "channels": chans, "tables": self._tables(cid)})
        return {"clusters": out}

    def _tables(self, cid: int) -> list[dict[str, Any]]:
        """Counts per table and cause of cluster ``cid``: every table with conflicts (the
        node's ``ConflictsList``), plus the configured ones at 0; a node without that RPC
        has the configured and rule-named tables' ``$EX`` rows scanned instead."""
        with self._counts_lock:
            hit = self._counts.get(cid)
            if hit is not None and time.monotonic() - hit[0] < _COUNTS_TTL:
                return hit[1]
        try:
            c = self.client(cid)
            res = c.conflicts_list("", counts_only=True)
            by_table: dict[str, dict[str, Any]] = {
                t: {"table": t, "total": 0, "causes": {}, "error": ""}
                for t in self.conflict_tables}
            for n in res.counts:
                doc = by_table.setdefault(n.table, {"table": n.table, "total": 0,
                                                    "causes": {}, "error": ""})
                doc["total"] += n.count
                doc["causes"][n.cause] = n.count
            tables = [by_table[t] for t in sorted(by_table)]
        except GatewayError as exc:
            if exc.code.name != "UNIMPLEMENTED":
                return [{"table": "*", "total": 0, "causes": {}, "error": _message(exc)}]
            tables = self._scanned_tables(cid)
        with self._counts_lock:
            self._counts[cid] = (time.monotonic(), tables)
        return tables

    def _scanned_tables(self, cid: int) -> list[dict[str, Any]]:
        tables = []
        for table in self.tables_of(cid):
            doc: dict[str, Any] = {"table": table, "total": 0, "causes": {}, "error": ""}
            try:
                c = self.client(cid)
                rows = exceptions.read_rows(c, table)
                doc.update(total=len(rows), causes=exceptions.counts(rows))
            except (GatewayError, exceptions.ExceptionsError) as exc:
                doc["error"] = _message(exc)
            tables.append(doc)
        return tables

    def _rows(self, cid: int, table: str) -> list[dict[str, Any]]:
        """Every exceptions row of ``table`` on ``cid`` (``ConflictsList`` page by page; the
        ``$EX`` table scanned on a node without it)."""
        out: list[dict[str, Any]] = []
        c = self.client(cid)
        token = ""
        try:
            while True:
                res = c.conflicts_list(table, limit=exceptions.PAGE, page_token=token)
                for r in res.rows:
                    if r.table != table:
                        continue
                    doc = exceptions.shape(table, python_row(r.row))
                    doc["replayed"] = r.replayed
                    out.append(doc)
                token = res.next_page_token
                if not token or len(out) >= _MAX_ROWS:
                    return out
        except GatewayError as exc:
            if exc.code.name != "UNIMPLEMENTED":
                raise
            return exceptions.read_rows(c, table)

    def conflict_rows(self, cid: int, table: str, query: dict[str, list[str]]
                      ) -> dict[str, Any]:
        cause = query.get("cause", [""])[0]
        key = query.get("key", [""])[0]
        try:
            limit = int(query.get("limit", ["100"])[0])
        except ValueError:
            raise ApiError(HTTPStatus.BAD_REQUEST, "limit: give a whole number") from None
        if not 0 < limit <= 10000:
            raise ApiError(HTTPStatus.BAD_REQUEST, "limit: between 1 and 10000")
        rows, read_ns = self.rows_cache.get(cid, table)
        hits = [r for r in rows if exceptions.matches(r, cause, key)]
        return {"cluster_id": cid, "table": table, "total": len(rows), "matched": len(hits),
                "causes": exceptions.counts(rows), "rows": hits[:limit],
                "read_at_ns": str(read_ns),
                "age_seconds": round(max(0, time.time_ns() - read_ns) / 1e9, 3)}

    def node_client(self, cid: int, node: str, admin: bool = False) -> GatewayClient:
        """A client of one node of ``cid`` (``node``: its id; "" = the one the poller
        reached, the leader when there is one): dead letters are kept per node."""
        v = self.poller.snapshot().clusters.get(cid)
        if v is None or v.status is None:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no cluster {cid} known")
        addr = v.reached
        if node:
            found = [m.api_address for m in v.status.members if str(m.node_id) == node]
            if not found or not found[0]:
                raise ApiError(HTTPStatus.NOT_FOUND, f"no node {node} with an API address "
                               f"in cluster {cid}")
            addr = found[0]
        return self._cached([addr], self.admin_token if admin else self.token)

    def _cached(self, addrs: Sequence[str], token: str) -> GatewayClient:
        """One client per (addresses, token), kept: a new gRPC channel per request would cost
        more than the request (clients are shared by the handler threads)."""
        key = (tuple(addrs), token)
        with self._clients_lock:
            c = self._clients.get(key)
            if c is None:
                c = self._clients[key] = self.client_factory(addrs, token)
            return c

    def close(self) -> None:
        with self._clients_lock:
            clients, self._clients = self._clients, {}
        for c in clients.values():
            c.close()

    def dead_letters(self, cid: int, query: dict[str, list[str]]) -> dict[str, Any]:
        applier = query.get("applier", [""])[0]
        try:
            after = int(query.get("after_id", ["0"])[0])
            limit = int(query.get("limit", ["100"])[0])
        except ValueError:
            raise ApiError(HTTPStatus.BAD_REQUEST, "after_id, limit: whole numbers") from None
        c = self.node_client(cid, query.get("node", [""])[0])
        res = c.dead_letters(applier, include_closed=bool(query.get("closed")),
                             after_id=after, limit=limit)
        return {"cluster_id": cid, "counts": [views.as_json(n) for n in res.counts],
                "letters": [views.dead_letter(d) for d in res.letters],
                "next_after_id": str(res.next_after_id)}

    # ------------------------------------------------------------------ actions

    def act(self, parts: list[str], body: dict[str, Any]) -> dict[str, Any]:
        if body.get("confirm") is not True:
            raise ApiError(HTTPStatus.BAD_REQUEST,
                           'confirm: an action needs "confirm": true in its JSON body')
        if len(parts) == 4 and parts[0] == "channels" and parts[3] in ("pause", "resume"):
            cid = _cluster_id(parts[1])
            c = self.client(cid, admin=True)
            msg = c.channel_action(parts[2], parts[3]).message
            return {"ok": True, "message": msg}
        if len(parts) == 4 and parts[0] == "conflicts" and parts[3] == "delete":
            cid = _cluster_id(parts[1])
            ids = body.get("ids")
            if not isinstance(ids, list):
                raise ApiError(HTTPStatus.BAD_REQUEST, "ids: a list of SERVER/SOURCE/EPOCH/COUNT")
            c = self.client(cid, admin=True)
            n = exceptions.delete_rows(c, parts[2], ids)
            with self._counts_lock:
                self._counts.pop(cid, None)
            self.rows_cache.drop(cid, parts[2])
            return {"ok": True, "message": f"deleted {n} exception row(s) of {parts[2]}"}
        if len(parts) == 4 and parts[0] == "conflicts" and parts[3] == "replay":
            cid = _cluster_id(parts[1])
            ids = body.get("ids")
            if not isinstance(ids, list) or not ids:
                raise ApiError(HTTPStatus.BAD_REQUEST, "ids: a list of SERVER/SOURCE/EPOCH/COUNT")
            exceptions.parse_ids(ids)
            c = self.client(cid, admin=True)
            res = c.conflicts_replay(exceptions.check_table(parts[2]),
                                     [str(i) for i in ids])
            with self._counts_lock:
                self._counts.pop(cid, None)
            self.rows_cache.drop(cid, parts[2])
            return {"ok": True, "message": f"replayed {res.applied}, skipped {res.skipped}",
                    "outcomes": [views.as_json(o) for o in res.outcomes]}
        if len(parts) == 4 and parts[0] == "deadletters" and parts[3] in ("replay", "discard"):
            cid = _cluster_id(parts[1])
            ids = body.get("ids")
            if not isinstance(ids, list) or not ids or not all(
                    isinstance(i, (int, str)) and str(i).isdigit() for i in ids):
                raise ApiError(HTTPStatus.BAD_REQUEST, "ids: a list of dead letter ids")
            c = self.node_client(cid, str(body.get("node", "")), admin=True)
            out = c.dead_letter_action(parts[2], parts[3], [int(i) for i in ids],
                                       note=str(body.get("note", "")))
            outcomes = [views.as_json(o) for o in out.outcomes]
            done = sum(o.outcome in ("replayed", "discarded") for o in out.outcomes)
            return {"ok": True, "message": f"{parts[3]}: {done} of {len(ids)} letter(s) done",
                    "outcomes": outcomes}
        raise ApiError(HTTPStatus.NOT_FOUND, f"no action /api/v1/{'/'.join(parts)}")


def _cluster_id(text: str) -> int:
    if not text.isdigit():
        raise ApiError(HTTPStatus.BAD_REQUEST, f"cluster {text!r}: give the cluster id")
    return int(text)


def _message(exc: Exception) -> str:
    if isinstance(exc, GatewayError):
        return f"{exc.code.name}: {exc.details}"
    return str(exc)


def _handler(console: Console, allowed_hosts: set[str] | None
             ) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "gateway-console"
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the CLI's stderr
            pass

        def _send(self, status: HTTPStatus, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Content-Security-Policy",
                             "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: HTTPStatus, doc: object) -> None:
            self._send(status, json.dumps(doc).encode(), "application/json")

        def _host_ok(self) -> bool:
            return allowed_hosts is None or self.headers.get("Host", "") in allowed_hosts

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            try:
                if not self._host_ok():
                    raise ApiError(HTTPStatus.FORBIDDEN, "Host is not this console's address")
                if url.path in ("/", "/index.html"):
                    self._static("index.html")
                elif url.path.startswith("/static/"):
                    self._static(url.path[len("/static/"):])
                elif url.path.startswith("/api/v1/"):
                    self._json(HTTPStatus.OK, self._get(url.path[len("/api/v1/"):].split("/"),
                                                        urllib.parse.parse_qs(url.query)))
                else:
                    raise ApiError(HTTPStatus.NOT_FOUND, f"no page {url.path}")
            except ApiError as exc:
                self._json(exc.status, {"error": str(exc)})
            except exceptions.ExceptionsError as exc:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            except GatewayError as exc:
                self._json(HTTPStatus.BAD_GATEWAY, {"error": _message(exc)})

        def _static(self, name: str) -> None:
            if name not in _STATIC:
                raise ApiError(HTTPStatus.NOT_FOUND, f"no file {name}")
            body = resources.files("gateway.console").joinpath("static", name).read_bytes()
            self._send(HTTPStatus.OK, body, _STATIC[name])

        def _get(self, parts: list[str], query: dict[str, list[str]]) -> object:
            snap = console.poller.snapshot()
            if parts == ["session"]:
                return {"admin": console.admin, "csrf": console.csrf if console.admin else "",
                        "interval": snap.interval}
            if parts == ["topology"]:
                return views.topology(snap)
            if parts == ["appliers"]:
                return views.appliers(snap)
            if parts == ["conflicts"]:
                return console.conflicts()
            if len(parts) == 4 and parts[0] == "channels" and parts[3] == "history":
                doc = views.history(snap, _cluster_id(parts[1]), parts[2])
                if doc is None:
                    raise ApiError(HTTPStatus.NOT_FOUND,
                                   f"no channel {parts[2]!r} on cluster {parts[1]}")
                return doc
            if len(parts) == 2 and parts[0] == "deadletters":
                return console.dead_letters(_cluster_id(parts[1]), query)
            if len(parts) == 3 and parts[0] == "conflicts":
                return console.conflict_rows(_cluster_id(parts[1]),
                                             exceptions.check_table(parts[2]), query)
            raise ApiError(HTTPStatus.NOT_FOUND, f"no API /api/v1/{'/'.join(parts)}")

        def do_POST(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            try:
                if not self._host_ok():
                    raise ApiError(HTTPStatus.FORBIDDEN, "Host is not this console's address")
                if not console.admin:
                    raise ApiError(HTTPStatus.FORBIDDEN, "read-only console: actions need "
                                   "gateway console --admin-token")
                origin = self.headers.get("Origin")
                if origin is not None and origin != f"http://{self.headers.get('Host', '')}":
                    raise ApiError(HTTPStatus.FORBIDDEN, f"Origin {origin} is not this console")
                if not secrets.compare_digest(self.headers.get("X-CSRF-Token", ""),
                                              console.csrf):
                    raise ApiError(HTTPStatus.FORBIDDEN, "X-CSRF-Token missing or wrong "
                                   "(GET /api/v1/session gives it)")
                if not url.path.startswith("/api/v1/"):
                    raise ApiError(HTTPStatus.NOT_FOUND, f"no action {url.path}")
                length = int(self.headers.get("Content-Length") or 0)
                if length > _MAX_BODY:
                    raise ApiError(HTTPStatus.BAD_REQUEST, "body too large")
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError as exc:
                    raise ApiError(HTTPStatus.BAD_REQUEST, f"body: not JSON ({exc})") from None
                if not isinstance(body, dict):
                    raise ApiError(HTTPStatus.BAD_REQUEST, "body: a JSON object is needed")
                self._json(HTTPStatus.OK, console.act(url.path[len("/api/v1/"):].split("/"),
                                                      body))
            except ApiError as exc:
                self._json(exc.status, {"error": str(exc)})
            except exceptions.ExceptionsError as exc:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            except GatewayError as exc:
                self._json(HTTPStatus.BAD_GATEWAY, {"error": _message(exc)})

    return Handler


def make_server(console: Console, host: str, port: int) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0: any free one); ``serve_forever`` it."""
    server = ThreadingHTTPServer((host, port), _handler(console, None))
    server.daemon_threads = True
    bound = server.server_address[1]
    if host not in _WILDCARD:
        names = {host, "localhost", "127.0.0.1", "[::1]"} if host in (
            "127.0.0.1", "localhost", "::1") else {host}
        allowed = {f"{n}:{bound}" for n in names}
        server.RequestHandlerClass = _handler(console, allowed)
    return server
