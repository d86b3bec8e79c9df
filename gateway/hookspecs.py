"""Hook specifications of the ``gateway`` pluggy project.

A plugin is a module (or object) with functions named after these hooks and decorated with
``gateway.hookimpl``; it is found through the ``gateway`` entry-point group (see
``gateway.plugins`` and docs/plugins.md, which documents every hook here). Built-in plugins
(the SQLite applier) use exactly the same hooks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    import click

    from gateway.appliers.contract import ApplierFactory

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "gateway"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def gateway_register_appliers() -> Sequence[ApplierFactory]:
    """Return the applier factories this plugin offers (``ApplierFactory`` values).

    Factory names must be unique across loaded plugins; ``gateway apply --applier NAME``
    and the node's configuration select one by name.
    """
    raise NotImplementedError  # a specification: pluggy calls the plugins' implementations


@hookspec
def gateway_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``gateway`` command line: ``cli.add_command(...)``.

    Called once per process when the plugins are loaded, after ``--plugins`` was parsed.
    """


@hookspec
def gateway_register_conflict_functions() -> Mapping[str, object]:
    """Return conflict functions by name, e.g. ``{"MY$FIRST_WINS": fn}`` (docs/conflicts.md).

    A value is a function ``fn(change, stored, ctx) -> Verdict`` with the built-ins' contract
    (``gateway.conflict``: the replicated ``Change``, the row as this cluster ``Stored`` it,
    the ``Context`` of this cluster; a ``Verdict`` back), judged per row, or a
    ``gateway.conflict.FunctionSpec`` for a function with a resolution column argument, an
    epoch-based or a transactional one. It must be pure and deterministic (values in, verdict
    out): every node of a cluster judges each replicated epoch itself and must decide the
    same. Names are upper case (letters, digits, ``_``, ``$``), unique across plugins and
    distinct from the built-ins. Loaded when a rule first names a function no built-in has;
    every node of the cluster must load the plugin (a node without it stops rather than judge
    differently).

    The values are typed ``object`` here because this module may not import
    ``gateway.conflict`` (tests/test_architecture.py); ``gateway.conflict.with_plugins``
    checks each one.
    """
    raise NotImplementedError  # a specification: pluggy calls the plugins' implementations


@hookspec
def gateway_publish_metrics(source: str, metrics: Mapping[str, float]) -> None:
    """Receive a snapshot of metrics: ``source`` names what they describe (an applier's
    name), ``metrics`` maps metric names to values (see docs/appliers.md).

    Called from the dispatcher thread about once per second and at the end of a run; must
    return quickly and must not raise.
    """


@hookspec
def gateway_dead_letter(applier: str, letter_id: int, item: object, error: BaseException
                        ) -> None:
    """Be told that ``applier`` sent ``item`` (a ``RowOp``, or a ``Transaction`` the reducer
    rejected) to its dead-letter log as letter ``letter_id`` after ``error``.

    For alerting; called from a worker thread; must not raise.
    """


@hookspec
def gateway_schema_event(applier: str, event: object, outcome: str) -> None:
    """Be told that ``applier`` reached schema event ``event`` (a
    ``gateway.schema.SchemaEvent``: table, version, kind, the column or names it changes and
    the whole definition after it) in log order -- after every earlier transaction was
    applied by it, before any later one -- and what became of it: ``outcome`` is
    ``applied`` (its ``apply_schema`` made the change), ``ignored`` (its ``schema_policy`` is
    ``ignore``, or it has no ``apply_schema``) or ``unsupported`` (the store cannot make
    that change: reported, passed by). An applier whose policy is ``stop`` stops before the
    event: no call.

    For a third-party applier that keeps its own catalog, a schema registry or alerting.
    Called from the dispatcher's thread while the applier waits; must return quickly and
    must not raise. ``event`` is typed ``object`` because this module may not import
    ``gateway.schema`` (tests/test_architecture.py).
    """
