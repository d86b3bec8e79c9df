"""gateway-cassandra: the ``cassandra`` applier, materialising the log's tables in Cassandra.

A Gateway plugin shipped as its own distribution and found through the ``gateway`` entry-point
group like any third-party plugin; it uses only Gateway's public API. Modules: ``schema``
(table mapping, CQL types, statement text), ``clock`` (write timestamps from log positions) and
``applier`` (``CassandraApplier``: prepared statements, token-aware ``execute_concurrent``
rounds, apply-status table). See README.md for the options and the timestamp rule.

Exceptions::

    ApplyError (gateway.appliers.contract)
    ├── TransientApplyError
    │   └── CassandraUnavailableError   no host, timeout, overload: retried
    ├── CqlRejectedError                the statement was refused: dead-lettered
    └── UnsupportedOperationError       a name or type Cassandra cannot hold, SQL
    ApplierConfigError (ValueError)     bad ``-o`` options
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

from gateway import (
    SCOPE_CLUSTER,
    ApplierConfigError,
    ApplierFactory,
    hookimpl,
)

from .clock import MAX_LOG_INDEX, RowClock, write_timestamp
from .schema import CQL_TYPES, STATUS_TABLE, TableMapping, parse_clustering

if TYPE_CHECKING:
    from .applier import (
        CassandraApplier,
        CassandraSettings,
        CassandraUnavailableError,
        CqlRejectedError,
        classify,
    )

#: Names of ``applier`` (which imports the Cassandra driver) exported here, imported on first
#: use: every ``gateway run`` loads the installed plugins, and a node that runs no cassandra
#: applier should not hold the driver (and numpy, which it imports) in memory
#: (docs/benchmarks.md, "Memory per node").
_LAZY = frozenset({"CassandraApplier", "CassandraSettings", "CassandraUnavailableError",
                   "CqlRejectedError", "classify"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(".applier", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "CASSANDRA_FACTORY",
    "CQL_TYPES",
    "MAX_LOG_INDEX",
    "OPTIONS",
    "STATUS_TABLE",
    "CassandraApplier",
    "CassandraSettings",
    "CassandraUnavailableError",
    "CqlRejectedError",
    "RowClock",
    "TableMapping",
    "classify",
    "parse_options",
    "write_timestamp",
]

OPTIONS: dict[str, str] = {
    "contact": "contact points, host[:port][,host[:port]...] [127.0.0.1:9042]",
    "port": "CQL port for contact points without one [9042]",
    "local_dc": "the local datacenter for DCAwareRoundRobinPolicy [datacenter1]",
    "consistency": "write consistency level [LOCAL_QUORUM]",
    "create": "create keyspaces, tables and new columns from the operations (true/false) "
              "[true]",
    "replication_factor": "SimpleStrategy replication factor of created keyspaces [1]",
    "clustering": "key columns mapped to clustering columns: schema.table=c1,c2;... []",
    "default_keyspace": "keyspace for tables without a schema [gateway]",
    "status_keyspace": "keyspace of the gateway_apply_status table [gateway]",
    "concurrency": "requests in flight per apply round (execute_concurrent) [64]",
    "max_batch": "operations per apply round [200]",
    "request_timeout": "seconds per request [10]",
    "reconnect_timeout": "seconds apply waits for a host to come back up [30]",
    "protocol_version": "native protocol version (default: negotiated)",
}


#: Where the applier looks for Cassandra unless told (a local server).
DEFAULT_CONTACT = "127.0.0.1:9042"


def _fail(message: str) -> ApplierConfigError:
    return ApplierConfigError(f"applier 'cassandra': {message}")


def _int(options: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    text = options.get(name) or ""
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise _fail(f"option {name}={text!r} is not an integer") from None
    if value < minimum:
        raise _fail(f"option {name} must be >= {minimum}")
    return value


def _seconds(options: Mapping[str, str], name: str, default: float) -> float:
    text = options.get(name) or ""
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise _fail(f"option {name}={text!r} is not a number") from None
    if value <= 0:
        raise _fail(f"option {name} must be > 0")
    return value


def _contacts(text: str, port: int) -> tuple[tuple[str, ...], int]:
    hosts, ports = [], set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, p = item.rpartition(":")
        if sep and p.isdigit() and "]" not in p:
            hosts.append(host.strip("[]"))
            ports.add(int(p))
        else:
            hosts.append(item.strip("[]"))
            ports.add(port)
    if not hosts:
        raise _fail("option 'contact' names no host (e.g. -o contact=127.0.0.1:9042)")
    if len(ports) > 1:
        raise _fail(f"contact points use different ports {sorted(ports)}; the driver takes one")
    return tuple(hosts), ports.pop()


def parse_options(options: Mapping[str, str]) -> CassandraSettings:
    """``CassandraSettings`` from ``-o`` options; raises ``ApplierConfigError`` (one line)."""
    hosts, port = _contacts(options.get("contact") or DEFAULT_CONTACT,
                            _int(options, "port", 9042))
    from cassandra import ConsistencyLevel

    from .applier import CassandraSettings

    consistency = (options.get("consistency") or "LOCAL_QUORUM").upper()
    if consistency not in ConsistencyLevel.name_to_value:
        raise _fail(f"unknown consistency {consistency!r}")
    create = (options.get("create") or "true").strip().lower()
    if create not in ("true", "false", "1", "0", "yes", "no"):
        raise _fail(f"option create={create!r} is not true or false")
    protocol = options.get("protocol_version") or ""
    return CassandraSettings(
        hosts=hosts, port=port, local_dc=options.get("local_dc") or "datacenter1",
        consistency=consistency, create=create in ("true", "1", "yes"),
        replication_factor=_int(options, "replication_factor", 1),
        clustering=parse_clustering(options.get("clustering", "")),
        default_keyspace=options.get("default_keyspace") or "gateway",
        status_keyspace=options.get("status_keyspace") or "gateway",
        concurrency=_int(options, "concurrency", 64),
        max_batch=_int(options, "max_batch", 200),
        request_timeout=_seconds(options, "request_timeout", 10.0),
        reconnect_timeout=_seconds(options, "reconnect_timeout", 30.0),
        protocol_version=_int(options, "protocol_version", 0) if protocol else None)


def _create(options: Mapping[str, str]) -> CassandraApplier:
    from .applier import CassandraApplier

    return CassandraApplier(parse_options(options))


#: One shared keyspace: in a gateway cluster only the leader writes (scope ``cluster``), so
#: each row is written once, not once per node.
CASSANDRA_FACTORY = ApplierFactory(
    "cassandra", _create, "materialise tables in Apache Cassandra (timestamped, idempotent)",
    OPTIONS, scope=SCOPE_CLUSTER)


@hookimpl
def gateway_register_appliers() -> list[ApplierFactory]:
    return [CASSANDRA_FACTORY]
