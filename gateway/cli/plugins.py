"""``gateway --plugins a,b`` and ``gateway plugins``: choosing and listing plugins.

``attach(main)`` adds to the root command group an eager ``--plugins`` option (also read from
``GATEWAY_PLUGINS``) that loads exactly the named plugins -- all installed ones when absent --
and lets them add subcommands (``gateway_register_commands``), plus the ``plugins`` command.
Commands get the loaded plugin manager with ``plugin_manager(ctx)``. A named plugin that is
not installed or cannot be loaded is a one-line error (exit code 2) listing the installed
plugins; with none named, one that cannot be loaded is left out with a one-line warning on
stderr (every command would otherwise fail for a plugin it never uses), and ``gateway plugins``
shows why.
"""

from __future__ import annotations

import json
from typing import Any

import click
import pluggy

from gateway import plugins
from gateway.appliers.contract import ApplierConfigError, ApplierFactory, scope_of
from gateway.plugins import PluginError

__all__ = ["BadInput", "attach", "plugin_manager", "plugin_names"]

_META_KEY = "gateway.plugin_manager"
_NAMES_KEY = "gateway.plugin_names"
_ADDED_ATTR = "_gateway_plugin_commands"


class BadInput(click.ClickException):
    """Bad input: printed as ``Error: <message>`` on one line, exit code 2."""

    exit_code = 2


def plugin_manager(ctx: click.Context) -> pluggy.PluginManager:
    """The plugin manager the ``--plugins`` option loaded (all plugins if it did not run)."""
    root = ctx.find_root()
    pm = root.meta.get(_META_KEY)
    if pm is None:
        pm = _load_plugins(None)
        root.meta[_META_KEY] = pm
    return pm


def _load_plugins(names: list[str] | None) -> pluggy.PluginManager:
    """``plugins.load_plugins(names)``, its errors as ``BadInput``, a warning per plugin it
    left out."""
    try:
        pm = plugins.load_plugins(names)
    except PluginError as exc:
        raise BadInput(str(exc)) from None
    for message in plugins.load_failures(pm).values():
        click.echo(f"warning: {message}; left out (name it with --plugins to require it)",
                   err=True)
    return pm


def plugin_names(ctx: click.Context) -> list[str] | None:
    """The plugins ``--plugins`` / ``GATEWAY_PLUGINS`` named, or None when they named none
    (every installed plugin is loaded then)."""
    return ctx.find_root().meta.get(_NAMES_KEY)


def _load(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    names = None if value is None else plugins.parse_plugin_names(value)
    pm = _load_plugins(names)
    ctx.meta[_META_KEY] = pm
    ctx.meta[_NAMES_KEY] = names
    group = ctx.command
    assert isinstance(group, click.Group)
    # The group object lives as long as the process: drop commands a previous invocation's
    # plugins added, so only the plugins loaded now contribute commands.
    for name in getattr(group, _ADDED_ATTR, ()):
        group.commands.pop(name, None)
    before = set(group.commands)
    pm.hook.gateway_register_commands(cli=group)
    setattr(group, _ADDED_ATTR, sorted(set(group.commands) - before))


def _scope(factory: ApplierFactory) -> str:
    try:
        return scope_of(factory)
    except ApplierConfigError:
        return f"invalid scope {getattr(factory, 'scope', None)!r}"


@click.command("plugins")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.pass_context
def plugins_command(ctx: click.Context, fmt: str) -> None:
    """List installed plugins: name, distribution, version, loaded or not, hooks, and the
    appliers each registers with their default scope (``node``: every node applies into its
    own target; ``cluster``: only the leader applies into a shared one)."""
    pm = plugin_manager(ctx)
    try:
        appliers = plugins.appliers_by_plugin(pm)
    except Exception as exc:  # a plugin whose hook fails must not break the listing
        click.echo(f"warning: cannot list appliers: {exc}", err=True)
        appliers = {}
    failures = plugins.load_failures(pm)
    rows: list[dict[str, Any]] = []
    for p in plugins.installed_plugins():
        loaded = pm.get_plugin(p.name) is not None
        rows.append({"name": p.name, "distribution": p.distribution, "version": p.version,
                     "loaded": loaded, "hooks": plugins.hooks_of(pm, p.name),
                     "appliers": {f.name: _scope(f) for f in appliers.get(p.name, [])},
                     "error": failures.get(p.name)})
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no plugins installed")
        return
    width = max(len(r["name"]) for r in rows)
    dist_width = max(len(f"{r['distribution']} {r['version']}") for r in rows)
    for r in rows:
        dist = f"{r['distribution']} {r['version']}"
        state = "loaded" if r["loaded"] else "broken" if r["error"] else "not loaded"
        hooks = r["error"] or ", ".join(r["hooks"]) or "-"
        scopes = "".join(f"; applier {n} ({scope})" for n, scope in r["appliers"].items())
        click.echo(f"{r['name']:<{width}}  {dist:<{dist_width}}  {state:<10}  {hooks}{scopes}")


def attach(main: click.Group) -> None:
    """Add ``--plugins`` and the ``plugins`` command to the root group ``main``."""
    main.params.append(click.Option(
        ["--plugins", "plugin_names"], metavar="A,B", envvar="GATEWAY_PLUGINS",
        is_eager=True, expose_value=False, callback=_load,
        help="Load exactly these plugins (comma-separated). [default: all installed]"))
    main.add_command(plugins_command)
