"""Node configuration: defaults, a TOML file, ``GATEWAY_*`` environment variables, flags.

Precedence, lowest first: the defaults of :class:`NodeConfig`, the TOML file (``--config``),
environment variables, command-line flags. ``gateway run`` with nothing set is a single-node
gateway with data in ``./gateway-data``, the API on 127.0.0.1:7070 and the embedded SQLite
applier. The reference of every key is in docs/node.md ("Configuration").

``load_config`` returns a validated config or raises :class:`ConfigError` whose one-line
message names the key (``tls.peer_key: ...``).
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from gateway.appliers.contract import SCOPES
from gateway.conflict import BUILTIN, ConflictConfigError, ConflictRule, Role
from gateway.conflict.rules import RuleSet, parse_function
from gateway.node.base.addresses import is_loopback

__all__ = ["ConfigError", "NodeConfig", "RetentionConfig", "TlsConfig", "address_problem",
           "load_config", "parse_address", "parse_peers", "peer_port_problem"]

#: Bounds of ``max_request_bytes``: a forwarded request and the log entry made of it must fit
#: in the peer channels' 64 MiB messages with room to spare.
MIN_REQUEST_BYTES, MAX_REQUEST_BYTES = 1 << 10, 32 << 20
#: The smallest ``memtable_bytes``: below it every few writes would freeze a memtable.
MIN_MEMTABLE_BYTES = 1 << 20


#: A replication channel's name (``[[channels]]``, ``gateway channel add``).
CHANNEL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class ConfigError(ValueError):
    """The configuration is invalid; ``str()`` is one line naming the key."""


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """Certificate files (PEM). The API uses ``api_cert``/``api_key`` (and, when set,
    ``api_client_ca`` to require client certificates); peers use mutual TLS with
    ``peer_cert``/``peer_key`` and trust only ``peer_ca``."""

    api_cert: str = ""
    api_key: str = ""
    api_client_ca: str = ""
    peer_cert: str = ""
    peer_key: str = ""
    peer_ca: str = ""

    @property
    def api_enabled(self) -> bool:
        return bool(self.api_cert or self.api_key)

    @property
    def peer_enabled(self) -> bool:
        return bool(self.peer_cert or self.peer_key or self.peer_ca)


@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """``[retention]``: how much of its log a node keeps for the channels of other clusters
    reading it (their slots; docs/replication.md, "Log retention for channels"). A slot that
    would keep more than any bound (0: that bound is off) no longer holds compaction back;
    once the log is compacted past it, it is lost and its reader must resync."""

    max_entries: int = 0
    max_bytes: int = 1 << 30
    max_age_s: int = 24 * 3600


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """One ``[[channels]]`` table: this cluster replicates from the cluster at ``sources``
    (docs/replication.md). ``token``: a read token of the source; ``ca``: the file of the CA
    that signed the source's API certificate (TLS to the source)."""

    name: str
    sources: tuple[str, ...]
    source_id: int = 0
    token: str = ""
    ca: str = ""


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Everything a node needs. ``peers`` maps node id -> peer address (``--listen`` of that
    node); empty means a single-node cluster of this node alone."""

    node_id: int = 1
    cluster_id: int = 1
    listen: str = "127.0.0.1:7100"
    api: str = "127.0.0.1:7070"
    peers: Mapping[int, str] = field(default_factory=dict)
    data_dir: str = "gateway-data"
    join: bool = False
    plugins: tuple[str, ...] | None = None
    appliers: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: {"sqlite": {}})
    #: ``appliers`` was set (file, environment or flag) rather than left at its default: then
    #: ``gateway run --plugins`` does not choose the appliers (docs/node.md).
    appliers_set: bool = False
    tick_ms: int = 50
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    epoch_ms: int = 100
    #: How long a leader holds an append that only tells a caught-up follower a new commit
    #: index, for the next append to carry it (0: sent at once); docs/node.md, "The Ready loop".
    commit_linger_ms: int = 5
    fsync: bool = True
    snapshot_entries: int = 20000
    #: A snapshot also waits until the log grew by this share (%) of the newest snapshot's
    #: size since it (0: ``snapshot_entries`` alone decides); docs/node.md, "Snapshots".
    snapshot_log_percent: int = 100
    max_request_bytes: int = 4 << 20
    #: Memory bounds (docs/node.md, "Memory"): the store's active memtable (bytes of CPython
    #: memory, approximate; up to ``1 + max_immutable_memtables`` of them are held while
    #: flushes run), the store's block cache and the Raft log's in-memory tail of recent
    #: entries (the entries' data bytes; older entries are read from the log files).
    memtable_bytes: int = 32 << 20
    max_immutable_memtables: int = 2
    block_cache_bytes: int = 32 << 20
    log_cache_bytes: int = 32 << 20
    #: How often ``gateway run`` gives the memory glibc's allocator keeps after ``free`` back
    #: to the OS (``gateway.node.loop.malloc_trim``; 0: never, the default until a run on an
    #: idle machine shows it costs no write throughput: docs/benchmarks.md, "Memory per node").
    malloc_trim_ms: int = 0
    #: The most malloc arenas ``gateway run`` lets glibc create (``gateway.node.loop.
    #: malloc_arenas``; 0: glibc's default of eight per core). An operator's
    #: ``MALLOC_ARENA_MAX`` in the environment stands instead.
    malloc_arena_max: int = 2
    #: The NOSPACE alarm (docs/node.md, "Disk full and fsync failure"): raised, for the whole
    #: cluster, when the file system of this node's log has less than this many bytes free
    #: (0: never), checked every ``space_check_ms``.
    min_free_bytes: int = 64 << 20
    space_check_ms: int = 1000
    metrics: str = ""
    tokens_file: str = ""
    #: Serve the peer port without mutual TLS on a non-loopback address (a trusted network);
    #: without it such a node refuses to start (``exposure.peer_port_problem``).
    insecure_peer: bool = False
    log_level: str = "info"
    log_format: str = "json"
    tls: TlsConfig = field(default_factory=TlsConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    channels: tuple[ChannelConfig, ...] = ()
    #: This cluster's conflict role (PRIMARY, SECONDARY, PASS, NONE; "" = leave the
    #: replicated one as it is) and ``[[conflicts]]`` rules (docs/conflicts.md).
    conflict_role: str = ""
    conflicts: tuple[ConflictRule, ...] = ()

    def peer_map(self) -> dict[int, str]:
        """The initial members: ``peers``, or this node alone."""
        return dict(self.peers) if self.peers else {self.node_id: self.listen}

    def applier_settings(self, name: str) -> tuple[str | None, dict[str, str]]:
        """``(scope override or None, the applier's own options)`` of applier ``name``: the
        keys ``scope`` and ``backfill_chunk_rows`` of ``[appliers.NAME]`` are the node's
        (``backfill_chunk_rows``: see :meth:`backfill_chunk_rows`), not passed to the
        factory."""
        opts = dict(self.appliers.get(name, {}))
        opts.pop("backfill_chunk_rows", None)
        return opts.pop("scope", None), opts

    def backfill_chunk_rows(self, name: str) -> int | None:
        """``[appliers.NAME] backfill_chunk_rows``: rows per chunk of a new applier's
        backfill from the store (docs/appliers.md); None: the default."""
        chunk = self.appliers.get(name, {}).get("backfill_chunk_rows")
        return int(str(chunk)) if chunk is not None else None

    def validate(self) -> NodeConfig:
        """Return ``self`` or raise ``ConfigError`` naming the first bad key."""
        if self.node_id <= 0:
            raise ConfigError("node_id: must be a positive integer")
        if not 0 < self.cluster_id < 1 << 32:
            raise ConfigError("cluster_id: must be between 1 and 2^32-1")
        parse_address(self.listen, "listen")
        parse_address(self.api, "api")
        if self.metrics:
            parse_address(self.metrics, "metrics")
        for nid, addr in self.peers.items():
            parse_address(addr, f"peers.{nid}")
        if self.peers and self.node_id not in self.peers and not self.join:
            raise ConfigError(f"peers: does not name this node ({self.node_id}); "
                              f"add {self.node_id}=HOST:PORT or start with --join")
        if self.tick_ms <= 0 or self.epoch_ms <= 0:
            raise ConfigError("tick_ms/epoch_ms: must be positive")
        if not 0 <= self.commit_linger_ms <= self.tick_ms * self.heartbeat_ticks:
            raise ConfigError(f"commit_linger_ms: must be between 0 and one heartbeat "
                              f"({self.tick_ms * self.heartbeat_ticks} ms), not "
                              f"{self.commit_linger_ms}")
        if self.election_ticks <= self.heartbeat_ticks or self.heartbeat_ticks <= 0:
            raise ConfigError("election_ticks: must exceed heartbeat_ticks (> 0)")
        if self.snapshot_entries < 10:
            raise ConfigError("snapshot_entries: must be at least 10")
        if self.snapshot_log_percent < 0:
            raise ConfigError("snapshot_log_percent: must be 0 or more")
        if not MIN_REQUEST_BYTES <= self.max_request_bytes <= MAX_REQUEST_BYTES:
            raise ConfigError(f"max_request_bytes: must be between {MIN_REQUEST_BYTES} and "
                              f"{MAX_REQUEST_BYTES} (32 MiB), not {self.max_request_bytes}")
        for key, low in (("memtable_bytes", MIN_MEMTABLE_BYTES), ("block_cache_bytes", 0),
                         ("log_cache_bytes", 0), ("max_immutable_memtables", 1),
                         ("malloc_trim_ms", 0), ("malloc_arena_max", 0)):
            if getattr(self, key) < low:
                raise ConfigError(f"{key}: must be at least {low}, not {getattr(self, key)}")
        if self.min_free_bytes < 0:
            raise ConfigError(f"min_free_bytes: must be 0 (no alarm) or more, not "
                              f"{self.min_free_bytes}")
        if self.space_check_ms <= 0:
            raise ConfigError(f"space_check_ms: must be positive, not {self.space_check_ms}")
        for name, opts in self.appliers.items():
            scope = opts.get("scope")
            if scope is not None and scope not in SCOPES:
                raise ConfigError(f"appliers.{name}.scope: must be one of "
                                  f"{' or '.join(SCOPES)}, not {scope!r}")
            chunk = opts.get("backfill_chunk_rows")
            if chunk is not None and not (str(chunk).isdigit() and int(str(chunk)) > 0):
                raise ConfigError(f"appliers.{name}.backfill_chunk_rows: must be a positive "
                                  f"integer (rows per chunk of a new applier's backfill), "
                                  f"not {chunk!r}")
        if self.log_format not in ("json", "text"):
            raise ConfigError("log_format: must be json or text")
        t = self.tls
        if t.api_enabled and not (t.api_cert and t.api_key):
            missing = "tls.api_key" if t.api_cert else "tls.api_cert"
            raise ConfigError(f"{missing}: TLS on the API is half-configured (need both "
                              f"api_cert and api_key)")
        if t.api_client_ca and not t.api_enabled:
            raise ConfigError("tls.api_client_ca: needs tls.api_cert and tls.api_key")
        if t.peer_enabled and not (t.peer_cert and t.peer_key and t.peer_ca):
            missing = next(k for k in ("peer_cert", "peer_key", "peer_ca") if not getattr(t, k))
            raise ConfigError(f"tls.{missing}: mutual TLS between peers is half-configured "
                              f"(need peer_cert, peer_key and peer_ca)")
        for key in ("api_cert", "api_key", "api_client_ca", "peer_cert", "peer_key", "peer_ca"):
            path = getattr(t, key)
            if path and not os.path.isfile(path):
                raise ConfigError(f"tls.{key}: no such file: {path}")
        reason = peer_port_problem(self)
        if reason is not None:
            raise ConfigError(reason)
        names: set[str] = set()
        for i, ch in enumerate(self.channels):
            where = f"channels[{i}]"
            if not CHANNEL_NAME.fullmatch(ch.name):
                raise ConfigError(f"{where}.name: {ch.name!r} is not a channel name "
                                  f"([A-Za-z0-9_.-], 1 to 64 characters)")
            if ch.name in names:
                raise ConfigError(f"{where}.name: channel {ch.name!r} is defined twice")
            names.add(ch.name)
            if not ch.sources:
                raise ConfigError(f"{where}.sources: give at least one HOST:PORT")
            for addr in ch.sources:
                parse_address(addr, f"{where}.sources")
            if not 0 <= ch.source_id < 1 << 32 or ch.source_id == self.cluster_id:
                raise ConfigError(f"{where}.source_id: must be another cluster's id "
                                  f"(1 to 2^32-1, not this cluster's {self.cluster_id})")
            if ch.ca and not os.path.isfile(ch.ca):
                raise ConfigError(f"{where}.ca: no such file: {ch.ca}")
        for key in ("max_entries", "max_bytes", "max_age_s"):
            if getattr(self.retention, key) < 0:
                raise ConfigError(f"retention.{key}: must be 0 (no bound) or more, not "
                                  f"{getattr(self.retention, key)}")
        if self.tokens_file and not os.path.isfile(self.tokens_file):
            raise ConfigError(f"tokens_file: no such file: {self.tokens_file}")
        if self.conflict_role and self.conflict_role not in {r.value for r in Role}:
            raise ConfigError(f"conflict_role: {self.conflict_role!r} is not a role "
                              f"({', '.join(r.value for r in Role)})")
        patterns: set[str] = set()
        for i, rule in enumerate(self.conflicts):
            if rule.pattern in patterns:
                raise ConfigError(f"conflicts[{i}].table: {rule.pattern!r} has two rules")
            patterns.add(rule.pattern)
            try:  # a function no built-in has is a plugin's: checked once they are loaded
                if rule.function in BUILTIN:
                    RuleSet(checked=False).check(rule)
                else:
                    RuleSet.check_pattern(rule)
            except ConflictConfigError as exc:
                raise ConfigError(f"conflicts[{i}]: {exc}") from None
        return self


def peer_port_problem(cfg: NodeConfig) -> str | None:
    """Why the node must not start with its peer port as configured, or None: a peer port on
    a non-loopback address needs mutual TLS (``tls.peer_*``), or ``insecure_peer`` set to say
    that the network itself is trusted. The peer port carries Raft messages and snapshots,
    which no token protects: whoever reaches it can rewrite the log. One line, naming the
    key."""
    if is_loopback(cfg.listen) or cfg.tls.peer_enabled or cfg.insecure_peer:
        return None
    return (f"listen: {cfg.listen} is reachable from other hosts and the peer port has no "
            f"mutual TLS (anyone who reaches it could inject Raft messages and snapshots); "
            f"set tls.peer_cert, tls.peer_key and tls.peer_ca, or insecure_peer = true "
            f"(--insecure-peer, GATEWAY_INSECURE_PEER=true) on a network you trust")


_HOST_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def address_problem(text: str, *, any_port: bool = False) -> str | None:
    """Why ``text`` is not ``HOST:PORT``, or None. HOST is a host name (DNS labels of letters,
    digits, ``-`` and ``_``), an IPv4 address or a bracketed IPv6 address (``[::1]``); PORT is
    1 to 65535, or 0 too with ``any_port`` (a listening address: any free port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        return "not HOST:PORT"
    low = 0 if any_port else 1
    if not (port.isascii() and port.isdigit()) or len(port) > 5 or \
            not low <= int(port) <= 65535:
        return f"port {port!r} is not a number from {low} to 65535"
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"{host} is not an IPv6 address"
        return None
    if ":" in host:
        return "an IPv6 host needs brackets ([::1]:7100)"
    if host.isascii() and host.replace(".", "").isdigit():
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return f"{host!r} is not an IPv4 address"
        return None
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in host.split(".")):
        return f"{host!r} is not a host name or IP address"
    return None


def parse_address(text: str, key: str) -> tuple[str, int]:
    """``host:port`` -> ``(host, port)`` of an address to listen on or connect to (port 0
    allowed: see :func:`address_problem`); raises ``ConfigError`` naming ``key``."""
    reason = address_problem(text, any_port=True)
    if reason is not None:
        raise ConfigError(f"{key}: {text!r} is not HOST:PORT ({reason})")
    host, _, port = text.rpartition(":")
    return host, int(port)


def parse_peers(text: str) -> dict[int, str]:
    """``"1=h:p,2=h:p"`` -> ``{1: "h:p", 2: "h:p"}``; raises ``ConfigError``."""
    out: dict[int, str] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        nid, sep, addr = item.partition("=")
        if not sep or not nid.strip().isdigit() or int(nid) <= 0:
            raise ConfigError(f"peers: {item!r} is not ID=HOST:PORT")
        parse_address(addr.strip(), f"peers.{nid.strip()}")
        out[int(nid)] = addr.strip()
    return out


_INT_KEYS = {"node_id", "cluster_id", "tick_ms", "election_ticks", "heartbeat_ticks", "epoch_ms",
             "commit_linger_ms", "snapshot_entries", "snapshot_log_percent", "max_request_bytes",
             "min_free_bytes", "space_check_ms", "memtable_bytes", "max_immutable_memtables",
             "block_cache_bytes", "log_cache_bytes", "malloc_trim_ms", "malloc_arena_max"}
_STR_KEYS = {"listen", "api", "data_dir", "metrics", "tokens_file", "log_level", "log_format",
             "conflict_role"}
_BOOL_KEYS = {"join", "fsync", "insecure_peer"}
_TLS_KEYS = {f.name for f in fields(TlsConfig)}
_RETENTION_KEYS = {f.name for f in fields(RetentionConfig)}


# Any (value in, value out): a raw TOML, environment or flag value, checked and converted
# here to the type of the NodeConfig field ``key`` names -- a different type per key, which
# ``_apply`` hands to ``dataclasses.replace`` by name.
def _coerce(key: str, value: Any, source: str) -> Any:
    where = f"{key} ({source})"
    if key in _INT_KEYS:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected an integer")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected an integer, not {value!r}") from None
    if key in _BOOL_KEYS:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where}: expected true or false, not {value!r}")
    if key in _STR_KEYS:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string")
        return value
    if key == "peers":
        if isinstance(value, str):
            return parse_peers(value)
        if isinstance(value, Mapping):
            return parse_peers(",".join(f"{k}={v}" for k, v in value.items()))
        raise ConfigError(f"{where}: expected ID=HOST:PORT,... or a table")
    if key == "plugins":
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise ConfigError(f"{where}: expected a list of plugin names")
        return tuple(str(p).strip() for p in items if str(p).strip())
    if key == "channels":
        return _channels(value, source)
    if key == "conflicts":
        return _conflicts(value, source)
    if key == "appliers":
        if isinstance(value, str):
            return {n.strip(): {} for n in value.split(",") if n.strip()}
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a table of applier options")
        return {str(n): {str(k): str(v) for k, v in dict(opts).items()}
                for n, opts in value.items()}
    raise ConfigError(f"{key} ({source}): unknown configuration key")


_CHANNEL_KEYS = {"name", "sources", "source_id", "token", "ca"}
_CONFLICT_KEYS = {"table", "function"}


def _tables(value: object, source: str, name: str, known: set[str]
            ) -> Iterator[tuple[str, Mapping[str, object]]]:
    """``(where, table)`` for each ``[[name]]`` table of ``value``, checked to be tables with
    only the ``known`` keys."""
    if not isinstance(value, list):
        raise ConfigError(f"{name} ({source}): expected [[{name}]] tables")
    for i, t in enumerate(value):
        where = f"{name}[{i}] ({source})"
        if not isinstance(t, Mapping):
            raise ConfigError(f"{where}: expected a table")
        for k in t:
            if k not in known:
                raise ConfigError(f"{where}.{k}: unknown key (known: "
                                  f"{', '.join(sorted(known))})")
        yield where, t


def _channels(value: object, source: str) -> tuple[ChannelConfig, ...]:
    out = []
    for where, t in _tables(value, source, "channels", _CHANNEL_KEYS):
        sources = t.get("sources", [])
        if isinstance(sources, str):
            sources = [a.strip() for a in sources.split(",") if a.strip()]
        if not isinstance(sources, list) or not all(isinstance(a, str) for a in sources):
            raise ConfigError(f"{where}.sources: expected a list of HOST:PORT strings")
        sid = t.get("source_id", 0)
        if isinstance(sid, bool) or not isinstance(sid, int):
            raise ConfigError(f"{where}.source_id: expected an integer")
        for k in ("name", "token", "ca"):
            if not isinstance(t.get(k, ""), str):
                raise ConfigError(f"{where}.{k}: expected a string")
        out.append(ChannelConfig(str(t.get("name", "")), tuple(sources), sid,
                                 str(t.get("token", "")), str(t.get("ca", ""))))
    return tuple(out)


def _retention(current: RetentionConfig, value: object, source: str) -> RetentionConfig:
    if not isinstance(value, Mapping):
        raise ConfigError(f"retention ({source}): expected a table")
    changes: dict[str, int] = {}
    for k, v in value.items():
        if k not in _RETENTION_KEYS:
            raise ConfigError(f"retention.{k} ({source}): unknown key (known: "
                              f"{', '.join(sorted(_RETENTION_KEYS))})")
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"retention.{k} ({source}): expected an integer, not {v!r}")
        changes[k] = v
    return replace(current, **changes)


def _conflicts(value: object, source: str) -> tuple[ConflictRule, ...]:
    out = []
    for where, t in _tables(value, source, "conflicts", _CONFLICT_KEYS):
        table, text = t.get("table"), t.get("function")
        if not isinstance(table, str) or not isinstance(text, str):
            raise ConfigError(f"{where}: give table = \"schema.table\" and function = "
                              f"\"NAME(args)\" as strings")
        try:
            name, args = parse_function(text)
        except ConflictConfigError as exc:
            raise ConfigError(f"{where}.function: {exc}") from None
        out.append(ConflictRule(table, name, args))
    return tuple(out)


def _apply(cfg: NodeConfig, values: Mapping[str, object], source: str) -> NodeConfig:
    changes: dict[str, Any] = {}  # Any: ``_coerce``'s
    tls_changes: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        if key == "tls":
            if not isinstance(value, Mapping):
                raise ConfigError(f"tls ({source}): expected a table")
            for tk, tv in value.items():
                if tk not in _TLS_KEYS:
                    raise ConfigError(f"tls.{tk} ({source}): unknown configuration key")
                tls_changes[tk] = str(tv)
        elif key == "retention":
            changes["retention"] = _retention(cfg.retention, value, source)
        elif key.startswith("tls_") and key[4:] in _TLS_KEYS:
            tls_changes[key[4:]] = str(value)
        else:
            changes[key] = _coerce(key, value, source)
            if key == "appliers":
                changes["appliers_set"] = True
    if tls_changes:
        changes["tls"] = replace(cfg.tls, **tls_changes)
    return replace(cfg, **changes)


def _env_values(env: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    keys = _INT_KEYS | _STR_KEYS | _BOOL_KEYS | {"peers", "appliers"}
    for key in keys:
        name = f"GATEWAY_{key.upper()}"
        if name in env:
            out[key] = env[name]
    for key in _TLS_KEYS:
        name = f"GATEWAY_TLS_{key.upper()}"
        if name in env:
            out[f"tls_{key}"] = env[name]
    return out


def load_config(path: str | None = None, flags: Mapping[str, object] | None = None,
                env: Mapping[str, str] | None = None) -> NodeConfig:
    """Build the config from the TOML file at ``path`` (optional), the environment (``env``,
    default ``os.environ``; ``GATEWAY_PLUGINS`` is the root ``--plugins`` option's and is not
    read here) and ``flags`` (``None`` values are unset), then validate it."""
    cfg = NodeConfig()
    if path:
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except OSError as exc:
            raise ConfigError(f"config: cannot read {path}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config: {path}: {exc}") from None
        cfg = _apply(cfg, data, path)
    cfg = _apply(cfg, _env_values(os.environ if env is None else env), "environment")
    if flags:
        cfg = _apply(cfg, flags, "flag")
    return cfg.validate()
