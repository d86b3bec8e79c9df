"""The applier contract: what the dispatcher hands a store plugin and what it expects back.

An ``Applier`` receives batches of ``RowOp`` values (``gateway.core.rowops``); every operation
carries the GTID, log index, epoch, author and commit timestamp of the change it applies. The
dispatcher guarantees:

- operations on one row (table + key) arrive in log order, never concurrently;
- a batch never holds a barrier (SQL or MOVE) together with anything else, and a barrier is
  only handed over when every earlier operation has been applied and before any later one;
- at-least-once: after a crash, operations after the applier's durable position are handed
  over again (in order), so ``apply`` must be idempotent or declare ``idempotent=False``.

The applier promises:

- ``apply(ops)`` returns only when every operation of the batch is durable in the store, and
  raises otherwise. ``apply`` may be called from several worker threads at once with batches of
  disjoint rows, unless ``Capabilities.thread_safe`` is false (then calls are serialised).
- A non-idempotent applier applies a batch all or nothing (a failed call left no trace).
- It raises ``StoreUnavailableError`` (or ``ConnectionError``) when the store cannot be
  reached or cannot take writes at all -- not the batch's fault: the dispatcher retries it
  with backoff for as long as it lasts (never dead-lettering for it; the applier shows as
  failing on Status and metrics, its lag grows, and it catches up when the store returns);
  Out of space is such a condition too: ``OutOfSpaceError``, or any error caused by an
  ``OSError`` with ``ENOSPC``/``EDQUOT`` or by SQLite's ``SQLITE_FULL`` (`out_of_space`), is
  retried the same way and shows as ``out of space: <path>`` -- a full disk is not the
  batch's fault, and dead-lettering acknowledged rows for it loses them until a manual replay;
  ``TransientApplyError`` (or ``TimeoutError``) for other failures worth retrying,
  ``UnsupportedOperationError`` for an operation it can never apply, anything else for a
  permanent failure of the batch. The dispatcher retries transient failures with exponential
  backoff, isolates the failing operation, and sends it to the dead-letter log after the
  configured attempts.

Exceptions::

    ApplyError                   an applier could not apply a batch
    ├── TransientApplyError      worth retrying (a batch that may succeed later)
    │   └── StoreUnavailableError  the store is unreachable: retried until it returns
    │       └── OutOfSpaceError    the store's disk or quota is full (``path`` names it)
    └── UnsupportedOperationError  this applier never applies such an operation
    ApplierConfigError (ValueError)  bad options for an applier factory

Scope (``ApplierFactory.scope``, overridable per node with ``[appliers.NAME] scope``): in a
cluster, a ``node``-scoped applier runs on every node into that node's own target (the embedded
SQLite file); a ``cluster``-scoped one writes one shared external store and runs only on the
leader, from a position replicated through the Raft log (docs/node.md, "Appliers in a
cluster"). A factory that says nothing is ``cluster``-scoped: for an external store, applying
every change once per node is the wrong default.

Schema changes (issue 57): the log also carries schema events (``gateway.schema.SchemaEvent``:
a table created, a column added, dropped or renamed, a table dropped). The dispatcher hands
each one to an applier in log order -- after every earlier transaction was applied by that
applier, before any later one -- through the optional ``apply_schema(event)``, under the
applier's ``schema_policy`` (``apply`` by default, ``ignore`` or ``stop``; the option
``schema_policy`` of every applier, read by ``ApplierFactory.build``):

- ``apply``: ``apply_schema(event)`` is called (an applier without the method passes the
  event by: its rows keep their own shape, as before schema events existed); it returns when
  the change is durable in the store, and must be idempotent (a replay after a crash hands
  the event over again). It raises like ``apply``: ``StoreUnavailableError`` and transient
  errors are retried; ``UnsupportedOperationError`` means the store cannot make this change
  (a CQL rename of a regular column): reported as one warning line and passed by; anything
  else stops the applier (``SchemaStopError``) without moving its position past the event.
- ``ignore``: the event is passed by; rows keep arriving in the new shape.
- ``stop``: the applier stops at the event (``SchemaStopError`` naming table, version and
  change: the applier's status), its position right before it; a restart stops there again
  until the policy is changed.

An applier that keeps per-table versions (the RabbitMQ applier's header) may also define
``start_schema(versions: Mapping[str, int])``: at the start of a run the dispatcher hands it
each table's version as of its position, when the entry source can tell
(``EntrySource.schema_versions``).
"""

from __future__ import annotations

import errno
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.rowops import ColumnOps, OpKind, RowOp

__all__ = [
    "SCHEMA_APPLY",
    "SCHEMA_IGNORE",
    "SCHEMA_POLICIES",
    "SCHEMA_POLICY_OPTION",
    "SCHEMA_STOP",
    "SCOPES",
    "SCOPE_CLUSTER",
    "SCOPE_NODE",
    "Applier",
    "ApplierConfigError",
    "ApplierFactory",
    "ApplyError",
    "Capabilities",
    "ColumnsApplier",
    "OutOfSpaceError",
    "SchemaStopError",
    "StoreUnavailableError",
    "TransientApplyError",
    "UnsupportedOperationError",
    "is_transient",
    "is_unavailable",
    "out_of_space",
    "scope_of",
    "unavailable_text",
]


SCOPE_NODE = "node"
"""Every node of a cluster applies into its own local target; the position is the node's."""
SCOPE_CLUSTER = "cluster"
"""One shared target: only the leader applies; the position is replicated in the Raft log."""
SCOPES = (SCOPE_NODE, SCOPE_CLUSTER)

SCHEMA_APPLY = "apply"
"""Schema events go to the applier's ``apply_schema`` (the default)."""
SCHEMA_IGNORE = "ignore"
"""Schema events are passed by; the applier only sees rows."""
SCHEMA_STOP = "stop"
"""The applier stops at a schema event, its position right before it."""
SCHEMA_POLICIES = (SCHEMA_APPLY, SCHEMA_IGNORE, SCHEMA_STOP)
#: The option of every applier (``-o schema_policy=stop``, ``[appliers.NAME] schema_policy``)
#: that ``ApplierFactory.build`` takes for itself: never passed to ``create``.
SCHEMA_POLICY_OPTION = "schema_policy"


class ApplyError(Exception):
    """An applier could not apply a batch."""


class TransientApplyError(ApplyError):
    """A failure worth retrying: the same batch may succeed later."""


class StoreUnavailableError(TransientApplyError):
    """The store cannot be reached or cannot take writes at all (down, unreachable, refusing
    connections): retried until it returns, never dead-lettered. The message should name the
    endpoint and the error."""


class OutOfSpaceError(StoreUnavailableError):
    """The store cannot take writes because its disk (or the user's quota) is full: retried
    with backoff until space returns, never dead-lettered. ``path`` names the file or
    directory that could not grow; ``str()`` is ``out of space: <path>``."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"out of space: {path}")


#: ``errno`` values that mean "no space": the device is full, or the user's quota is.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13  # SQLite's primary result code for "database or disk is full"


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during (cause, then context)."""
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def out_of_space(exc: BaseException) -> str | None:
    """The path (or, when the error names none, the error's text) that ran out of space if
    ``exc`` -- or an exception it was raised from -- is an `OutOfSpaceError`, an ``OSError``
    with ``ENOSPC``/``EDQUOT``, or an ``sqlite3.Error`` with ``SQLITE_FULL``; None otherwise.
    """
    for e in _chain(exc):
        if isinstance(e, OutOfSpaceError):
            return e.path
        if isinstance(e, OSError) and e.errno in NO_SPACE_ERRNOS:
            return str(e.filename) if e.filename else (e.strerror or "no space left")
        if isinstance(e, sqlite3.Error) and \
                (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_FULL:
            return getattr(e, "gateway_path", "") or str(e)
    return None


def unavailable_text(exc: BaseException) -> str:
    """One line saying why the store is unavailable: ``out of space: <path>`` when it is
    full, else the error's class and message."""
    path = out_of_space(exc)
    if path is not None:
        return f"out of space: {path}"
    return " ".join(f"{type(exc).__name__}: {exc}".split())


class UnsupportedOperationError(ApplyError):
    """The applier can never apply this operation (e.g. SQL on a key-value store)."""


class SchemaStopError(ApplyError):
    """An applier stopped at a schema event: its policy is ``stop``, or ``apply_schema``
    failed for good. ``str()`` is one line naming the applier, table, version and change."""


class ApplierConfigError(ValueError):
    """Options given to an applier factory are missing or invalid; ``str()`` is one line."""


def is_transient(exc: BaseException) -> bool:
    """True for errors the dispatcher retries: ``TransientApplyError``, ``ConnectionError``,
    ``TimeoutError`` and out of space (`out_of_space`)."""
    return isinstance(exc, TransientApplyError | ConnectionError | TimeoutError) or \
        out_of_space(exc) is not None


def is_unavailable(exc: BaseException) -> bool:
    """True for errors that mean the store is unavailable rather than the batch at fault:
    ``StoreUnavailableError``, ``ConnectionError`` and out of space (`out_of_space`): retried
    without a limit."""
    return isinstance(exc, StoreUnavailableError | ConnectionError) or \
        out_of_space(exc) is not None


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What an applier can do; the dispatcher adapts to it.

    ``accepts_sql``: SQL operations are handed over; otherwise they are dead-lettered with
    ``UnsupportedOperationError`` (never dropped). ``idempotent``: applying an operation twice
    leaves the store as applying it once; if false the dispatcher saves its position after
    every completed transaction to keep replays after a crash to the operations in flight.
    ``max_batch``: the most operations per ``apply`` call (>= 1). ``thread_safe``: ``apply``
    may run concurrently on several threads. ``columns``: the applier has
    ``apply_columns(batches, gtids)`` (see ``SqliteApplier.apply_columns``), and the
    dispatcher hands it windows of plain inserts column by column
    (``gateway.core.insert_columns``) instead of row by row.
    """

    accepts_sql: bool = False
    idempotent: bool = True
    max_batch: int = 100
    thread_safe: bool = True
    columns: bool = False

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, not {self.max_batch}")

    def accepts(self, op: RowOp) -> bool:
        """True if an operation of this kind may be handed to the applier."""
        return self.accepts_sql or op.kind is not OpKind.SQL


class Applier(ABC):
    """A store the dispatcher applies operations to. Subclasses set ``name`` and
    ``capabilities`` and implement ``apply``; see the module docstring for the contract."""

    name: str = "applier"
    capabilities: Capabilities = Capabilities()
    #: What the dispatcher does with schema events (``SCHEMA_POLICIES``; module docstring).
    #: Set by ``ApplierFactory.build`` from the option ``schema_policy``. An applier may also
    #: define ``apply_schema(event: gateway.schema.SchemaEvent) -> None`` (optional, found
    #: by name like ``reset_target``).
    schema_policy: str = SCHEMA_APPLY

    @abstractmethod
    def apply(self, ops: Sequence[RowOp]) -> None:
        """Make every operation of ``ops`` durable in the store, in order, or raise."""

    def close(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Release connections and files. Called once, after the last ``apply``."""


class ColumnsApplier(Protocol):
    """An applier whose ``capabilities.columns`` is true: it also takes windows of plain
    inserts as columns (see ``SqliteApplier.apply_columns``)."""

    def apply_columns(self, batches: Iterable[ColumnOps],
                      gtids: Iterable[tuple[int, int]], ops: Sequence[RowOp] = ()) -> int: ...


@dataclass(frozen=True, slots=True)
class ApplierFactory:
    """How a plugin offers an applier: ``create(options)`` builds one from string options.

    ``options`` documents the accepted option names (name -> help text) for ``gateway
    plugins`` and ``gateway apply -o NAME=VALUE``; ``create`` raises ``ApplierConfigError``
    for bad ones. ``scope`` is where the applier runs in a cluster (``SCOPE_NODE`` or
    ``SCOPE_CLUSTER``; ``None``, the default, means ``SCOPE_CLUSTER``): see the module
    docstring and :func:`scope_of`.
    """

    name: str
    create: Callable[[Mapping[str, str]], Applier]
    description: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    scope: str | None = None

    def __post_init__(self) -> None:
        if self.scope is not None and self.scope not in SCOPES:
            raise ValueError(f"applier {self.name!r}: scope must be one of "
                             f"{', '.join(SCOPES)}, not {self.scope!r}")

    def build(self, options: Mapping[str, str] | None = None) -> Applier:
        """``create`` after checking that every option name is one the factory documents.

        ``schema_policy`` (``SCHEMA_POLICIES``) is every applier's option: taken here, never
        passed to ``create``, and set on the applier it built."""
        options = dict(options or {})
        policy = str(options.pop(SCHEMA_POLICY_OPTION, SCHEMA_APPLY)).strip().lower()
        if policy not in SCHEMA_POLICIES:
            raise ApplierConfigError(
                f"applier {self.name!r}: {SCHEMA_POLICY_OPTION} must be one of "
                f"{', '.join(SCHEMA_POLICIES)}, not {policy!r}")
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            known = ", ".join(sorted([*self.options, SCHEMA_POLICY_OPTION]))
            raise ApplierConfigError(
                f"applier {self.name!r}: unknown option {unknown[0]!r} (known: {known})")
        applier = self.create(options)
        applier.schema_policy = policy
        return applier


def scope_of(factory: object, override: str | None = None) -> str:
    """The scope an applier runs with: ``override`` (the node configuration's
    ``[appliers.NAME] scope``) if given, else the factory's ``scope`` attribute, else
    ``SCOPE_CLUSTER`` -- so a factory object from a plugin written before scopes existed (no
    such attribute) is treated as an external, shared store."""
    scope = override or getattr(factory, "scope", None) or SCOPE_CLUSTER
    if scope not in SCOPES:
        name = getattr(factory, "name", "?")
        raise ApplierConfigError(f"applier {name!r}: scope must be one of "
                                 f"{', '.join(SCOPES)}, not {scope!r}")
    return str(scope)
