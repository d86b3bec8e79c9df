"""The plugin manager: finds plugins through entry points and loads the chosen ones.

Plugins are entry points in the ``gateway`` group; the entry point's name is the plugin's name
and its value a module (or object) holding ``@hookimpl`` functions::

    [project.entry-points.gateway]
    sqlite = "gateway.appliers.sqlite"

``load_plugins(None)`` loads every installed plugin that can be loaded: one whose module fails
to import or register is left out and recorded (``load_failures``), so a broken third-party
plugin that nothing asked for does not stop the gateway -- naming an applier it would offer
says why it is missing (``missing_applier``). ``load_plugins(["a", "b"])`` loads exactly those
(``--plugins a,b``) and raises ``UnknownPluginError`` -- whose message lists the installed
plugins -- for a name that is not installed, ``PluginLoadError`` for one that cannot be loaded.

Errors (one line each)::

    PluginError
    ├── UnknownPluginError    a requested plugin is not installed
    ├── PluginLoadError       a plugin's module failed to import or register
    └── DuplicateNameError    two plugins offer an applier or conflict function of one name
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, TypeVar

import pluggy

from gateway import hookspecs
from gateway.appliers.contract import ApplierFactory

__all__ = [
    "ENTRY_POINT_GROUP",
    "DuplicateNameError",
    "InstalledPlugin",
    "PluginError",
    "PluginLoadError",
    "UnknownPluginError",
    "applier_factories",
    "conflict_functions",
    "dead_letter_notifier",
    "hooks_of",
    "installed_plugins",
    "load_failures",
    "load_plugins",
    "missing_applier",
    "parse_plugin_names",
    "publish_metrics",
    "schema_notifier",
]

ENTRY_POINT_GROUP = "gateway"
#: Attribute of a plugin manager holding the plugins ``load_plugins(None)`` left out.
_FAILURES_ATTR = "_gateway_load_failures"


class PluginError(Exception):
    """A plugin problem; ``str()`` is one line."""


class UnknownPluginError(PluginError):
    """A requested plugin is not installed."""


class PluginLoadError(PluginError):
    """A plugin's entry point could not be imported or registered."""


class DuplicateNameError(PluginError):
    """Two loaded plugins offer the same applier or conflict-function name."""


@dataclass(frozen=True, slots=True)
class InstalledPlugin:
    """An entry point of the ``gateway`` group and the distribution that ships it."""

    name: str
    value: str
    distribution: str
    version: str


_T = TypeVar("_T")

def installed_plugins() -> list[InstalledPlugin]:
    """Every plugin installed in this environment, by name."""
    found: dict[str, InstalledPlugin] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        found.setdefault(ep.name, InstalledPlugin(
            ep.name, ep.value, dist.metadata["Name"] if dist else "?",
            dist.version if dist else "?"))
    return [found[n] for n in sorted(found)]


def parse_plugin_names(text: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; empty items are ignored."""
    return [n.strip() for n in text.split(",") if n.strip()]


def load_plugins(names: Sequence[str] | None = None) -> pluggy.PluginManager:
    """A plugin manager with the hook specs and the chosen plugins registered.

    ``names=None`` loads every installed plugin that loads; each that does not is left out and
    its error kept (:func:`load_failures`). A list loads exactly those (an empty list loads
    none) and raises ``UnknownPluginError`` or ``PluginLoadError``.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    eps = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    wanted = sorted(eps) if names is None else list(dict.fromkeys(names))
    for name in wanted:
        if name not in eps:
            installed = ", ".join(sorted(eps)) or "none"
            raise UnknownPluginError(f"unknown plugin {name!r} (installed: {installed})")
    failures: dict[str, str] = {}
    for name in wanted:
        try:
            plugin = eps[name].load()
            pm.register(plugin, name=name)
        except Exception as exc:
            message = (f"plugin {name!r} ({eps[name].value}) cannot be loaded: "
                       f"{type(exc).__name__}: {exc}")
            if names is not None:
                raise PluginLoadError(message) from None
            failures[name] = message
    setattr(pm, _FAILURES_ATTR, failures)
    return pm


def load_failures(pm: pluggy.PluginManager) -> dict[str, str]:
    """Plugin name -> why it was left out, for every installed plugin :func:`load_plugins`
    could not load when asked for all of them (empty otherwise)."""
    return dict(getattr(pm, _FAILURES_ATTR, {}))


def missing_applier(pm: pluggy.PluginManager, name: str, available: Sequence[str]) -> str:
    """The one-line error for applier ``name``, which no loaded plugin offers: the appliers
    that are offered, and each plugin that could not be loaded (it may be the one)."""
    known = ", ".join(sorted(available)) or "none"
    message = f"unknown applier {name!r} (available: {known})"
    failures = load_failures(pm)
    if failures:
        message += "; not loaded: " + "; ".join(failures[n] for n in sorted(failures))
    return message


def hooks_of(pm: pluggy.PluginManager, name: str) -> list[str]:
    """Names of the hooks the loaded plugin ``name`` implements."""
    plugin = pm.get_plugin(name)
    if plugin is None:
        return []
    return sorted(caller.name for caller in pm.get_hookcallers(plugin) or [])


def _merged(pm: pluggy.PluginManager, results: list[tuple[str, tuple[str, _T]]], what: str
            ) -> dict[str, tuple[str, _T]]:
    out: dict[str, tuple[str, _T]] = {}
    for plugin, (name, value) in results:
        if name in out:
            raise DuplicateNameError(f"{what} {name!r} is offered by plugins "
                                     f"{out[name][0]!r} and {plugin!r}")
        out[name] = (plugin, value)
    return out


def _per_plugin(pm: pluggy.PluginManager, hook: str) -> list[tuple[str, Any]]:
    """Call ``hook`` on each plugin separately, so results can be attributed. The results are
    what plugins returned, unchecked (``Any``: each caller checks its hook's contract)."""
    out = []
    for impl in getattr(pm.hook, hook).get_hookimpls():
        result = impl.function()
        if result:
            out.append((impl.plugin_name, result))
    return out


def appliers_by_plugin(pm: pluggy.PluginManager) -> dict[str, list[ApplierFactory]]:
    """The applier factories each loaded plugin registers (plugin name -> factories)."""
    return {plugin: list(fs) for plugin, fs in _per_plugin(pm, "gateway_register_appliers")}


def applier_factories(pm: pluggy.PluginManager) -> dict[str, ApplierFactory]:
    """Applier factories of the loaded plugins by name; raises ``DuplicateNameError``."""
    pairs = [(plugin, (f.name, f)) for plugin, fs in _per_plugin(pm, "gateway_register_appliers")
             for f in fs]
    return {n: f for n, (_, f) in _merged(pm, pairs, "applier").items()}


def conflict_functions(pm: pluggy.PluginManager) -> dict[str, object]:
    """Conflict functions of the loaded plugins by name; raises ``DuplicateNameError``."""
    pairs = [(plugin, item) for plugin, fns in
             _per_plugin(pm, "gateway_register_conflict_functions")
             for item in dict(fns).items()]
    return {n: f for n, (_, f) in _merged(pm, pairs, "conflict function").items()}


def publish_metrics(pm: pluggy.PluginManager) -> Callable[[str, Mapping[str, float]], None]:
    """A ``(source, metrics)`` callable that fans out to ``gateway_publish_metrics``."""

    def publish(source: str, metrics: Mapping[str, float]) -> None:
        pm.hook.gateway_publish_metrics(source=source, metrics=metrics)

    return publish


def dead_letter_notifier(pm: pluggy.PluginManager
                         ) -> Callable[[str, int, object, BaseException], None]:
    """A callable that fans a new dead letter out to ``gateway_dead_letter``."""

    def notify(applier: str, letter_id: int, item: object, error: BaseException) -> None:
        pm.hook.gateway_dead_letter(applier=applier, letter_id=letter_id, item=item,
                                    error=error)

    return notify


def schema_notifier(pm: pluggy.PluginManager) -> Callable[[str, object, str], None]:
    """A callable that fans a schema event an applier reached out to
    ``gateway_schema_event``."""

    def notify(applier: str, event: object, outcome: str) -> None:
        pm.hook.gateway_schema_event(applier=applier, event=event, outcome=outcome)

    return notify
