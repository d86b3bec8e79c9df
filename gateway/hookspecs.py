"""Hook specifications of the ``gateway`` pluggy project.

A plugin is a module (or object) with functions named after these hooks and decorated with
``gateway.hookimpl``; it is found through the ``gateway`` entry-point group (see
``gateway.plugins`` and docs/plugins.md, which documents every hook here). Built-in plugins
(the SQLite applier) use exactly the same hooks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

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


@hookspec
def gateway_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``gateway`` command line: ``cli.add_command(...)``.

    Called once per process when the plugins are loaded, after ``--plugins`` was parsed.
    """


@hookspec
def gateway_register_conflict_functions() -> Mapping[str, Any]:
    """Return conflict functions by name (e.g. ``{"NDB$EPOCH": fn}``).

    A conflict function is called with keyword arguments ``row_epoch``, ``row_author``,
    ``change_epoch``, ``change_author`` and ``max_replicated_epoch`` and returns true when the
    change conflicts with the stored row. Names must be unique across loaded plugins.

    Provisional: kept for the multi-master conflict functions (issue 15), which will call the
    registered functions per replicated row change; the arguments may grow (the row's GTID,
    the change's origin) until that lands, and docs/plugins.md will say when it is final.
    """


@hookspec
def gateway_publish_metrics(source: str, metrics: Mapping[str, float]) -> None:
    """Receive a snapshot of metrics: ``source`` names what they describe (an applier's
    name), ``metrics`` maps metric names to values (see docs/appliers.md).

    Called from the dispatcher thread about once per second and at the end of a run; must
    return quickly and must not raise.
    """


@hookspec
def gateway_dead_letter(applier: str, letter_id: int, item: Any, error: BaseException) -> None:
    """Be told that ``applier`` sent ``item`` (a ``RowOp``, or a ``Transaction`` the reducer
    rejected) to its dead-letter log as letter ``letter_id`` after ``error``.

    For alerting; called from a worker thread; must not raise.
    """
