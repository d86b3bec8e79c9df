"""``gateway run``, ``sql``, ``get``, ``status``, ``cluster``, ``certs``: the node and its
clients on the command line. The contract (flags, output, exit codes) is in docs/node.md.

Exit codes: 0 success; 1 the call failed (unavailable, timeout, refused); 2 bad input or
configuration (one line on stderr, never a traceback).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gateway.cli.plugins import BadInput, plugin_manager, plugin_names

if TYPE_CHECKING:
    import pluggy

    from gateway.cli.sql import SelectQuery
    from gateway.client import GatewayClient
    from gateway.node.base.config import NodeConfig
    from gateway.node.server import GatewayNode
    from gateway.v1 import gateway_pb2

T = TypeVar("T")

__all__ = ["attach"]


class _Failed(click.ClickException):
    exit_code = 1


def read_ca(ca: str | None) -> bytes | None:
    """The PEM bytes of the ``--ca`` file (None without one); `BadInput` naming the file when
    it cannot be read."""
    if not ca:
        return None
    try:
        with open(ca, "rb") as f:
            return f.read()
    except OSError as exc:
        raise BadInput(f"--ca: cannot read {ca}: {exc.strerror}") from None


def _client(target: str, token: str | None, ca: str | None, timeout: float
            ) -> GatewayClient:
    from gateway.client import GatewayClient

    return GatewayClient(target, token=token or "", root_certificates=read_ca(ca),
                         timeout=timeout)


def _call(fn: Callable[[], T]) -> T:
    from gateway.client import GatewayError

    try:
        return fn()
    except GatewayError as exc:
        where = f" ({exc.field})" if exc.field and exc.field not in exc.details else ""
        msg = f"{exc.code.name}: {exc.details}{where}"
        if exc.code.name == "INVALID_ARGUMENT":
            raise BadInput(msg) from None
        raise _Failed(msg) from None


_target = click.option("--target", "-t", default="127.0.0.1:7070", show_default=True,
                       envvar="GATEWAY_TARGET", help="API address of any node (HOST:PORT).")
_token = click.option("--token", envvar="GATEWAY_TOKEN", default=None,
                      help="Bearer token (also GATEWAY_TOKEN).")
_ca = click.option("--ca", envvar="GATEWAY_CA", default=None,
                   type=click.Path(dir_okay=False), help="CA certificate for a TLS API.")
_timeout = click.option("--timeout", type=float, default=30.0, show_default=True,
                        help="Overall deadline in seconds (retries included).")


@click.command("run")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              envvar="GATEWAY_CONFIG", help="TOML configuration file.")
@click.option("--node-id", type=int, default=None, help="This node's id (default 1).")
@click.option("--cluster-id", type=int, default=None, help="Cluster id = GTID server_id.")
@click.option("--listen", default=None, help="Peer address HOST:PORT (default 127.0.0.1:7100).")
@click.option("--api", default=None, help="API address HOST:PORT (default 127.0.0.1:7070).")
@click.option("--peers", default=None, metavar="ID=HOST:PORT,...",
              help="Initial members and their peer addresses (default: this node alone).")
@click.option("--data-dir", default=None, help="Data directory (default ./gateway-data).")
@click.option("--join", is_flag=True, default=None,
              help="Start empty and wait to be added (`gateway cluster add`).")
@click.option("--metrics", default=None, metavar="HOST:PORT",
              help="Serve Prometheus metrics on HOST:PORT.")
@click.option("--plugins", "run_plugins", default=None, metavar="A,B",
              help="Load exactly these plugins and run their appliers (e.g. cassandra,rabbit; "
                   "the same as `gateway --plugins A,B run`).")
@click.option("--appliers", default=None, metavar="A,B",
              help="Run exactly these appliers ('' for none); see below.")
@click.option("-o", "--option", "options", multiple=True, metavar="APPLIER.KEY=VALUE",
              help="An applier option, e.g. -o cassandra.contact=10.0.0.5:9042 (repeatable; "
                   "wins over GATEWAY_<APPLIER>_<KEY> and the file's [appliers.APPLIER]).")
@click.option("--no-fsync", "fsync", flag_value=False, default=None,
              help="Do not fsync the Raft log (tests and benchmarks only).")
@click.option("--tick-ms", type=int, default=None, help="Raft tick in ms (default 50).")
@click.option("--insecure-peer", is_flag=True, default=None,
              help="Serve the peer port without mutual TLS on a non-loopback --listen (a "
                   "network you trust); without it such a node refuses to start.")
@click.pass_context
def run_command(ctx: click.Context, /, config_path: str | None, run_plugins: str | None,
                options: tuple[str, ...], **flags: Any) -> None:
    """Run a gateway node until SIGTERM/SIGINT.

    With no options: a single-node gateway with data in ./gateway-data, the gRPC API on
    127.0.0.1:7070 and the embedded SQLite applier (DATA/sqlite/gateway.db). A cluster:

        gateway run --node-id 1 --listen 127.0.0.1:7101 --api 127.0.0.1:7071
            --peers 1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103 --data-dir d1

    \b
    Which appliers run:
    1. --appliers A,B, GATEWAY_APPLIERS or the file's [appliers.*]: exactly those;
    2. else, with plugins named (--plugins A,B here or before `run`, GATEWAY_PLUGINS, the
       file's plugins = [...]): the appliers those plugins register -- the embedded SQLite
       applier is the plugin `sqlite`: --plugins sqlite,cassandra keeps it;
    3. else the embedded SQLite applier alone.
    The cassandra applier reaches 127.0.0.1:9042 and the rabbit one
    amqp://guest:guest@127.0.0.1:5672/ unless told otherwise (-o, GATEWAY_CASSANDRA_CONTACT,
    GATEWAY_RABBIT_URL, [appliers.NAME]). A store that is down does not stop the node: its
    applier retries until it returns (status says FAILING with the error).
    """
    from gateway.node.api.metrics import configure_logging
    from gateway.node.base.config import ConfigError, load_config
    from gateway.node.loop import memory_report

    memory_report.maybe_trace()  # GATEWAY_MEMORY_TRACE: from here on (benchmarks only)
    if flags.get("appliers") is not None and flags["appliers"] == "":
        flags["appliers"] = {}
    try:
        cfg = load_config(config_path, flags)
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    cfg, pm = _choose_appliers(ctx, cfg, run_plugins, options)
    configure_logging(cfg.log_level, cfg.log_format)
    try:
        asyncio.run(_serve(cfg, pm))
    except _StartFailed as exc:
        raise _Failed(str(exc)) from None


class _StartFailed(Exception):
    pass


def _choose_appliers(ctx: click.Context, cfg: NodeConfig, run_plugins: str | None,
                     options: tuple[str, ...]) -> tuple[NodeConfig, pluggy.PluginManager]:
    """The plugin manager and the config with the appliers ``gateway run`` runs and their
    options (see ``run_command``'s help); bad input is a ``BadInput`` naming it."""
    import dataclasses
    import os

    from gateway import plugins
    from gateway.node.base.config import ConfigError

    names = plugin_names(ctx)
    pm = None
    if run_plugins is not None:
        names = plugins.parse_plugin_names(run_plugins)
    elif names is None and cfg.plugins is not None:
        names = list(cfg.plugins)
    if names is not None and names != plugin_names(ctx):
        try:
            pm = plugins.load_plugins(names)
        except plugins.PluginError as exc:
            raise BadInput(str(exc)) from None
    else:
        pm = plugin_manager(ctx)
    appliers = {n: dict(o) for n, o in cfg.appliers.items()}
    if names is not None and not cfg.appliers_set:
        by_plugin = plugins.appliers_by_plugin(pm)
        appliers = {f.name: {} for n in names for f in by_plugin.get(n, [])}
    for name, opts in appliers.items():  # GATEWAY_<APPLIER>_<KEY>
        prefix = f"GATEWAY_{name.upper().replace('-', '_')}_"
        for var, value in os.environ.items():
            if var.startswith(prefix) and len(var) > len(prefix):
                opts[var[len(prefix):].lower()] = value
    for text in options:
        target, eq, value = text.partition("=")
        name, dot, key = target.partition(".")
        if not (eq and dot and name and key):
            raise BadInput(f"-o {text}: expected APPLIER.KEY=VALUE (e.g. "
                           f"-o cassandra.contact=127.0.0.1:9042)")
        if name not in appliers:
            running = ", ".join(sorted(appliers)) or "none"
            raise BadInput(f"-o {text}: applier {name!r} does not run (running: {running})")
        appliers[name][key] = value
    try:
        cfg = dataclasses.replace(cfg, appliers=appliers).validate()
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    return cfg, pm


def _report_memory(node: GatewayNode) -> None:
    """``GATEWAY_MEMORY_REPORT``: start the node's memory report (gateway.node.loop.
    memory_report; benchmarks/bench_memory.py reads it)."""
    from gateway.node.loop import memory_report

    def components() -> dict[str, int]:
        st = node.sm.store.stats()
        return {"memtable": st["memtable_bytes"], "immutable_memtables": st["immutable_bytes"],
                "block_cache": st["cache_bytes"],
                "raft_entry_cache": node.storage.cached_bytes,
                "log_file_reads": node.storage.file_reads}

    memory_report.start(node.config.node_id, components, node.sm.path)


async def _serve(cfg: NodeConfig, pm: pluggy.PluginManager) -> None:
    from gateway.appliers.contract import ApplierConfigError
    from gateway.node.base.config import ConfigError
    from gateway.node.loop import gc_policy
    from gateway.node.loop.malloc_arenas import limit_arenas
    from gateway.node.loop.malloc_trim import MallocTrimmer
    from gateway.node.server import GatewayNode, NodeStartError
    from gateway.plugins import PluginError

    limit_arenas(cfg.malloc_arena_max)  # before the node's threads allocate (docs/node.md)
    node = GatewayNode(cfg, pm)
    try:
        await node.start()
    except (NodeStartError, ConfigError, PluginError, ApplierConfigError, OSError) as exc:
        raise _StartFailed(str(exc)) from None
    gc_policy.settle()  # start-up's objects are never traced again (gateway.node.loop.gc_policy)
    sweeper = gc_policy.YoungSweeper()  # cycles freed within seconds, load or not
    sweeper.start()
    trimmer = MallocTrimmer(cfg.malloc_trim_ms / 1000)  # freed memory back to the OS
    trimmer.start()
    _report_memory(node)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"gateway node {cfg.node_id} serving on {cfg.api} (data {cfg.data_dir})",
          file=sys.stderr, flush=True)
    # Run until a signal, or until the node stops itself (it applied its own removal): both
    # are clean stops, exit status 0.
    # A node that failed (its Raft loop died) stopped itself too: exit 1 with the reason.
    waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(node.wait_stopped())}
    _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for w in pending:
        w.cancel()
    await node.stop()
    trimmer.stop()
    sweeper.stop()
    if node.failure:
        raise _StartFailed(f"node {cfg.node_id} stopped: {node.failure}")


@click.command("sql")
@_target
@_token
@_ca
@_timeout
@click.option("--key", default="", metavar="COL[,COL]",
              help="Primary-key columns of INSERTs (default: id, else the first column).")
@click.option("--consistency", type=click.Choice(["linearizable", "lease", "stale"]),
              default="linearizable", show_default=True, help="For SELECT.")
@click.argument("text")
def sql_command(target: str, token: str | None, ca: str | None, timeout: float, key: str,
                consistency: str, text: str) -> None:
    """Run simple INSERT/UPDATE/DELETE (and SET @var) as one transaction and print its GTID,
    or answer a SELECT by primary key or key range. Anything that cannot be translated
    exactly is refused (exit 2).

    \b
        gateway sql "INSERT INTO shop.items (id, name) VALUES (1, 'a')"
        gateway sql "SELECT * FROM shop.items WHERE id = 1"
        gateway sql "SELECT id, name FROM shop.items WHERE id BETWEEN 1 AND 10 LIMIT 5"
        gateway sql "ALTER TABLE shop.items ADD COLUMN c INT DEFAULT 0"
    """
    from gateway.cli.sql import SqlError, is_select, parse_select, sql_to_write
    from gateway.cli.sql_ddl import is_ddl, parse_ddl

    try:
        if is_ddl(text):  # CREATE/ALTER/DROP TABLE: a schema change (docs/schema.md)
            req = parse_ddl(text)
            with _client(target, token, ca, timeout) as c:
                got = _call(lambda: c.change_schema(req, timeout=timeout))
            click.echo(f"{req.table} version {got.version}")
            click.echo(f"log_index {got.log_index}", err=True)
            return
        if is_select(text):
            _select(target, token, ca, timeout, parse_select(text), consistency)
            return
    except SqlError as exc:
        raise BadInput(str(exc)) from None
    with _client(target, token, ca, timeout) as c:
        known: dict[str, list[str] | None] = {}

        def key_of(table: str) -> list[str] | None:
            """The key columns of ``table`` as its rows carry them (None: no row yet)."""
            if table not in known:
                rows = _call(lambda: c.scan(table, limit=1)).rows
                known[table] = [f.name for f in rows[0].key_fields] if rows else None
            return known[table]

        try:
            stmts, conds = sql_to_write(text, [k.strip() for k in key.split(",") if k.strip()],
                                        key_of)
        except SqlError as exc:
            raise BadInput(str(exc)) from None
        res = _call(lambda: c.write(stmts, conditions=conds))
    click.echo(f"{res.gtid.server_id}:{res.gtid.trans_id}")
    click.echo(f"epoch {res.epoch} log_index {res.log_index} commit_ts {res.commit_timestamp_ns}"
               + (" (duplicate)" if res.duplicate else ""), err=True)


def _select(target: str, token: str | None, ca: str | None, timeout: float, query: SelectQuery,
            consistency: str) -> None:
    """Print the rows answering ``query`` as an aligned table (count on stderr)."""
    from gateway.cli.sql_select import run_select
    from gateway.core.rowops import python_value

    with _client(target, token, ca, timeout) as c:
        names, rows = _call(lambda: run_select(c, query, consistency))
    table: list[list[str]] = []
    for row in rows:
        cells = {f.name: python_value(v, f.type) for f, v in zip(
            list(row.key_fields) + list(row.fields), list(row.key_values) + list(row.values),
            strict=True)}
        table.append(["NULL" if cells.get(n) is None else str(cells.get(n)) for n in names])
    if names and table:
        widths = [max(len(n), *(len(r[i]) for r in table)) for i, n in enumerate(names)]
        click.echo("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip())
        for r in table:
            click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    click.echo(f"{len(table)} row{'s' if len(table) != 1 else ''}", err=True)


_NEGATIVE_NUMBER = re.compile(r"-(?:[0-9]|\.[0-9])[0-9.eE+-]*")


class _NegativeArguments(click.Command):
    """A command whose positional arguments may be negative numbers (``gateway get t -1``):
    click would take ``-1`` for an option. Such a token that is not an option's value is
    moved, in order with the other positional arguments, after a ``--``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        valued = {name for p in self.params if isinstance(p, click.Option) and not p.is_flag
                  for name in (*p.opts, *p.secondary_opts)}
        opts: list[str] = []
        pos: list[str] = []
        i = 0
        while i < len(args):
            tok = args[i]
            if tok == "--":
                pos += args[i + 1:]
                break
            if tok.startswith("-") and not _NEGATIVE_NUMBER.fullmatch(tok):
                opts.append(tok)
                if tok in valued and i + 1 < len(args):
                    opts.append(args[i + 1])
                    i += 1
            else:
                pos.append(tok)
            i += 1
        return super().parse_args(ctx, [*opts, "--", *pos] if pos else opts)


@click.command("get", cls=_NegativeArguments)
@_target
@_token
@_ca
@_timeout
@click.option("--consistency", type=click.Choice(["linearizable", "lease", "stale"]),
              default="linearizable", show_default=True)
@click.option("--meta", is_flag=True, help="Include epoch, author, GTID, commit ts, log index.")
@click.argument("table")
@click.argument("key", nargs=-1, required=True)
def get_command(target: str, token: str | None, ca: str | None, timeout: float,
                consistency: str, meta: bool, table: str, key: tuple[str, ...]) -> None:
    """Print one row as JSON (exit 1 if it does not exist).

        gateway get shop.items 1
    """
    from gateway.client import python_row

    with _client(target, token, ca, timeout) as c:
        resp = _call(lambda: c.read(table, list(key), consistency))
    if not resp.found:
        raise _Failed(f"{table} {' '.join(key)}: no such row")
    doc: dict[str, object] = {k: (v.hex() if isinstance(v, bytes) else v)
                              for k, v in python_row(resp.row).items()}
    if meta:
        r = resp.row
        doc = {"row": doc, "epoch": r.epoch, "author": r.author,
               "gtid": f"{r.gtid.server_id}:{r.gtid.trans_id}",
               "commit_timestamp_ns": r.commit_timestamp_ns, "log_index": r.log_index}
    click.echo(json.dumps(doc, sort_keys=False, default=str))


@click.command("status")
@_target
@_token
@_ca
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def status_command(target: str, token: str | None, ca: str | None, fmt: str) -> None:
    """Role, term, leader, indexes, members and applier lag of one node."""
    from google.protobuf import json_format

    with _client(target, token, ca, 10.0) as c:
        st = _call(lambda: c.status())
    if fmt == "json":
        click.echo(json_format.MessageToJson(st, always_print_fields_with_no_presence=True,
                                             preserving_proto_field_name=True))
        return
    click.echo(f"node {st.node_id} ({st.role}) term {st.term} leader {st.leader_id} "
               f"{st.leader_api}".rstrip())
    click.echo(f"log first {st.first_index} last {st.last_index} commit {st.commit_index} "
               f"applied {st.applied_index} last_trans_id {st.last_trans_id}")
    for alarm in st.alarms:  # writes are refused while any is raised
        click.echo(f"  ALARM NOSPACE node {alarm.node_id}: {alarm.path or '.'} has "
                   f"{alarm.free_bytes} bytes free, min_free_bytes {alarm.min_free_bytes}: "
                   f"writes refused (gateway alarm list)")
    for m in st.members:
        click.echo(f"  member {m.node_id} {m.role} peer {m.peer_address or '-'} api "
                   f"{m.api_address or '-'} match {m.match_index}")
    for a in st.appliers:
        where = ""
        if a.scope:
            where = f" [{a.scope}, {'running' if a.running else 'idle'} here"
            where += f", replicated {a.replicated_position}]" if a.scope == "cluster" else "]"
        click.echo(f"  applier {a.name} position {a.position} lag {a.lag_entries} entries "
                   f"({a.lag_seconds:.3f}s) dead letters {a.dead_letters}{where}")
        if a.backfill_state == "running":
            click.echo(f"    backfill from the store at log index {a.backfill_index}: "
                       f"{a.backfill_rows} rows delivered, last key {a.backfill_last_key or '-'}"
                       + (f", resumed {a.backfill_resumes}x" if a.backfill_resumes else ""))
        elif a.backfill_state == "done":
            click.echo(f"    backfilled {a.backfill_rows} rows from the store at log index "
                       f"{a.backfill_index}")
        if a.schema:  # its schema position: each table's version as of its position
            click.echo("    schema " + ", ".join(
                f"{t.table} v{t.version}" + (" (dropped)" if t.dropped else "")
                for t in a.schema))
        if a.error:  # running: its store is unavailable and it retries
            click.echo(f"    {'FAILING' if a.running else 'STOPPED'}: {a.error}")
    for line in channel_lines(st.channels) + peer_lines(st.peers):
        click.echo(line)
    for sl in st.slots:  # other clusters' channels reading this log (channel slots)
        click.echo(f"  slot {sl.slot.reader_cluster_id}/{sl.slot.channel} acked epoch "
                   f"{sl.slot.acked_epoch}, holds {sl.held_entries} entries"
                   + (f", LOST: {sl.slot.lost_reason}" if sl.slot.lost else ""))
    if st.slots:
        click.echo(f"  log from index {st.retention.first_index}, next compaction held by "
                   f"{st.retention.held_by or '-'}")
    if st.conflict_rules or st.conflict_role not in ("", "NONE"):
        click.echo(f"  conflicts role {st.conflict_role or 'NONE'}, "
                   f"{len(st.conflict_rules)} rule(s) (gateway conflicts rules)")
    for t in st.tables:  # schema versions (gateway schema show|history)
        click.echo(f"  table {t.table} version {t.version}"
                   + (" (dropped)" if t.dropped else " (implicit)" if t.implicit else ""))


def channel_lines(chans: Iterable[gateway_pb2.ChannelStatus]) -> list[str]:
    """Text lines for ``ChannelStatus`` messages (also used by ``gateway status``)."""
    out = []
    now = time.time_ns()
    for ch in chans:
        lag = (f" lag {ch.lag_epochs} epochs ({ch.lag_seconds:.3f}s)"
               if not ch.state.startswith("on the leader") else "")
        if lag and ch.since_last_heard:  # grown from what was known then: may be more
            lag += (f" since last heard {(now - ch.last_heard_ns) / 1e9:.1f}s ago"
                    if ch.last_heard_ns else " (source never heard from)")
        out.append(f"  channel {ch.name} from {','.join(ch.sources)} (cluster "
                   f"{ch.source_id or '?'}) {ch.state}"
                   + (f" via {ch.connected}" if ch.connected else "")
                   + f" applied epoch {ch.applied_epoch}{lag}"
                   + (f" (from leader {ch.leader_id})" if ch.leader_id else ""))
        out.append("    replicated time " + (_utc(ch.replicated_time_ns)
                                             if ch.replicated_time_ns else "none yet"))
        if ch.seed:
            out.append(f"    {ch.seed}")
        out.extend(conflict_lines(ch))
        if ch.last_error.startswith("warning: "):  # the channel runs; something to fix
            out.append(f"    {ch.last_error}")
        elif ch.last_error:
            out.append(f"    last error: {ch.last_error}")
    return out


def _utc(ns: int) -> str:
    """``ns`` (Unix nanoseconds) as an ISO 8601 UTC time to the millisecond."""
    t = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def conflict_lines(ch: gateway_pb2.ChannelStatus) -> list[str]:
    """The channel's conflict counters that are not 0 (``conflicts: none`` when the cluster
    has rules and nothing was counted; nothing without rules)."""
    if not ch.conflicts:
        return []
    counted = [f"{k} {v}" for k, v in sorted(ch.conflicts.items()) if v]
    return [f"    conflicts: {', '.join(counted) or 'none'}"]


def peer_lines(peers: Iterable[gateway_pb2.PeerStatus]) -> list[str]:
    return [f"  peer cluster {p.cluster_id}: max replicated epoch {p.max_replicated_epoch}, "
            f"held epoch {p.held_epoch}" for p in peers]


@click.group("cluster")
def cluster() -> None:
    """Membership: add, remove, transfer leadership, snapshot."""


@cluster.command("add")
@_target
@_token
@_ca
@click.option("--api-address", default="", help="The new node's API address (for redirects).")
@click.option("--learner", is_flag=True, help="Stay a learner (no vote).")
@click.option("--timeout", type=float, default=120.0, show_default=True)
@click.argument("member", metavar="ID=HOST:PORT")
def cluster_add(target: str, token: str | None, ca: str | None, api_address: str,
                learner: bool, timeout: float, member: str) -> None:
    """Add a node (started with `gateway run --join`): learner, catch up, then voter."""
    nid, sep, addr = member.partition("=")
    if not sep or not nid.isdigit():
        raise BadInput(f"member {member!r} is not ID=HOST:PORT")
    with _client(target, token, ca, timeout) as c:
        res = _call(lambda: c.add_node(int(nid), addr, api_address, learner=learner,
                                       timeout=timeout))
    click.echo(res.message)


@cluster.command("remove")
@_target
@_token
@_ca
@click.argument("node_id", type=int)
def cluster_remove(target: str, token: str | None, ca: str | None, node_id: int) -> None:
    """Remove a node from the cluster."""
    with _client(target, token, ca, 60.0) as c:
        click.echo(_call(lambda: c.remove_node(node_id)).message)


@cluster.command("transfer")
@_target
@_token
@_ca
@click.argument("node_id", type=int)
def cluster_transfer(target: str, token: str | None, ca: str | None, node_id: int) -> None:
    """Move leadership to NODE_ID."""
    with _client(target, token, ca, 60.0) as c:
        click.echo(_call(lambda: c.transfer_leader(node_id)).message)


@cluster.command("snapshot")
@_target
@_token
@_ca
def cluster_snapshot(target: str, token: str | None, ca: str | None) -> None:
    """Take a snapshot on the target node now (and compact its log)."""
    with _client(target, token, ca, 120.0) as c:
        click.echo(_call(lambda: c.snapshot()).message)


@click.group("certs")
def certs() -> None:
    """Certificates for TLS and mutual TLS."""


@certs.command("make-test-ca")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--host", "hosts", multiple=True,
              help="Name or IP the certificates are valid for (repeatable; default "
                   "localhost and 127.0.0.1).")
@click.option("--name", "names", multiple=True,
              help="Certificate to issue (repeatable; default node and client).")
def make_test_ca_command(directory: str, hosts: tuple[str, ...], names: tuple[str, ...]) -> None:
    """Create a throw-away CA and certificates in DIRECTORY (tests, local clusters)."""
    from gateway.node.api.security import make_test_ca

    paths = make_test_ca(directory, hosts or ("localhost", "127.0.0.1"),
                         names or ("node", "client"))
    for k, v in paths.items():
        click.echo(f"{k}: {v}")


def attach(main: click.Group) -> None:
    """Add the node commands to the root group ``main``."""
    for cmd in (run_command, sql_command, get_command, status_command, cluster, certs):
        main.add_command(cmd)
