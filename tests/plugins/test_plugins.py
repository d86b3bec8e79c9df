"""The plugin manager and its documentation: every hook documented, exact --plugins loading,
the built-in SQLite applier registered through the same entry-point mechanism."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pluggy
import pytest
from click.testing import CliRunner

import gateway
from gateway import hookspecs, plugins
from gateway.cli import main

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def _hooks() -> list[str]:
    return sorted(n for n in dir(hookspecs) if n.startswith("gateway_"))


def test_every_hook_is_documented_in_docs_plugins_md():
    text = DOCS.read_text()
    documented = set(re.findall(r"^### `(gateway_\w+)", text, re.M))
    missing = sorted(set(_hooks()) - documented)
    assert not missing, f"hooks missing from docs/plugins.md: {missing}"
    assert not documented - set(_hooks()), "docs/plugins.md documents hooks that do not exist"


def test_every_hook_is_named_gateway_and_has_a_contract():
    for name in _hooks():
        assert getattr(hookspecs, name).__doc__, name


def test_hookimpl_is_importable_from_the_package_root():
    assert gateway.hookimpl is hookspecs.hookimpl and "hookimpl" in gateway.__all__


def test_the_builtin_sqlite_applier_is_an_entry_point_of_the_gateway_distribution():
    (sqlite,) = [p for p in plugins.installed_plugins() if p.name == "sqlite"]
    assert sqlite.distribution == "gateway" and sqlite.value == "gateway.appliers.sqlite"
    assert "sqlite" in plugins.applier_factories(plugins.load_plugins(["sqlite"]))


def test_plugins_option_loads_exactly_the_named_plugins():
    pm = plugins.load_plugins(["sqlite"])
    assert [name for name, _ in pm.list_name_plugin()] == ["sqlite"]
    assert plugins.applier_factories(plugins.load_plugins([])) == {}


def test_an_unknown_plugin_is_a_one_line_error_listing_the_installed_ones():
    with pytest.raises(plugins.UnknownPluginError) as info:
        plugins.load_plugins(["sqlite", "nope"])
    installed = ", ".join(p.name for p in plugins.installed_plugins())
    assert str(info.value) == f"unknown plugin 'nope' (installed: {installed})"


def _pm_with(*modules: types.ModuleType) -> pluggy.PluginManager:
    pm = plugins.load_plugins([])
    for m in modules:
        pm.register(m, name=m.__name__)
    return pm


def _module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(m, k, gateway.hookimpl(v))
    return m


def test_two_plugins_offering_one_name_is_an_error():
    from gateway.appliers.sqlite import SQLITE_FACTORY

    a = _module("a", gateway_register_appliers=lambda: [SQLITE_FACTORY])
    b = _module("b", gateway_register_appliers=lambda: [SQLITE_FACTORY])
    with pytest.raises(plugins.DuplicateNameError, match="'sqlite' is offered by plugins"):
        plugins.applier_factories(_pm_with(a, b))


def test_conflict_functions_and_metrics_reach_plugins():
    from gateway.conflict import APPLY, Cause, Change, Context, OpType, Stored, Verdict

    seen = []

    def first_wins(change, stored, ctx):
        return Verdict(False, Cause.ROW_ALREADY_EXISTS) if stored.exists else APPLY

    m = _module("c", gateway_register_conflict_functions=lambda: {"MY$FIRST_WINS": first_wins},
                gateway_publish_metrics=lambda source, metrics: seen.append((source, metrics)))
    pm = _pm_with(m)
    fn = plugins.conflict_functions(pm)["MY$FIRST_WINS"]
    change = Change(OpType.WRITE_ROW, 2, 1, 10, {"v": 1})
    assert fn(change, Stored(True), Context(1)).cause is Cause.ROW_ALREADY_EXISTS
    assert fn(change, Stored.absent(), Context(1)).apply
    plugins.publish_metrics(pm)("sqlite", {"applied_ops": 3})
    assert seen == [("sqlite", {"applied_ops": 3})]


def test_gateway_plugins_lists_name_distribution_version_and_hooks():
    result = CliRunner().invoke(main, ["plugins"])
    assert result.exit_code == 0
    line = next(ln for ln in result.output.splitlines() if ln.startswith("sqlite "))
    assert "gateway 0.1.0" in line and "loaded" in line and "gateway_register_appliers" in line
    assert line.endswith("applier sqlite (node)")
    rows = {r["name"]: r for r in json.loads(
        CliRunner().invoke(main, ["plugins", "--format", "json"]).output)}
    assert rows["sqlite"]["appliers"] == {"sqlite": "node"}
    assert rows["spark"]["appliers"] == {}
    result = CliRunner().invoke(main, ["--plugins", "", "plugins"])
    line = next(ln for ln in result.output.splitlines() if ln.startswith("sqlite "))
    assert "not loaded" in line


def _install_broken_plugin(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An installed plugin ``broken`` whose module does not exist."""
    from importlib import metadata

    broken = metadata.EntryPoint("broken", "gateway_no_such_module", "gateway")
    real = metadata.entry_points
    monkeypatch.setattr(plugins, "entry_points",
                        lambda group: [*real(group=group), broken])


def test_a_broken_plugin_is_a_one_line_load_error(monkeypatch):
    _install_broken_plugin(monkeypatch)
    with pytest.raises(plugins.PluginLoadError, match=r"plugin 'broken'.*cannot be loaded"):
        plugins.load_plugins(["broken"])
    assert "gateway_no_such_module" not in sys.modules
    result = CliRunner().invoke(main, ["--plugins", "sqlite,broken", "plugins"])
    assert result.exit_code == 2
    assert "plugin 'broken' (gateway_no_such_module) cannot be loaded" in result.output


def test_a_broken_plugin_nobody_names_is_left_out_with_a_warning(monkeypatch):
    # Every command loads the installed plugins; one that cannot be imported must not stop
    # the commands (and the node) that never use it.
    _install_broken_plugin(monkeypatch)
    pm = plugins.load_plugins(None)
    assert pm.get_plugin("sqlite") is not None and pm.get_plugin("broken") is None
    assert "ModuleNotFoundError" in plugins.load_failures(pm)["broken"]
    assert plugins.load_failures(plugins.load_plugins(["sqlite"])) == {}
    result = CliRunner().invoke(main, ["plugins"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("warning: plugin 'broken'") == 1
    assert "left out (name it with --plugins to require it)" in result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("broken "))
    assert "broken" in line.split()[2:] and "cannot be loaded" in line
    assert any(ln.startswith("sqlite ") and " loaded " in ln for ln in result.stdout.splitlines())
    rows = {r["name"]: r for r in json.loads(
        CliRunner().invoke(main, ["plugins", "--format", "json"]).stdout)}
    assert rows["broken"]["loaded"] is False and "cannot be loaded" in rows["broken"]["error"]
    assert rows["sqlite"]["error"] is None


def test_an_applier_no_loaded_plugin_offers_names_the_plugins_left_out(monkeypatch, tmp_path):
    _install_broken_plugin(monkeypatch)
    pm = plugins.load_plugins(None)
    message = plugins.missing_applier(pm, "mystore", list(plugins.applier_factories(pm)))
    assert message.startswith("unknown applier 'mystore' (available: ")
    assert "sqlite" in message and "not loaded: plugin 'broken'" in message
    log = tmp_path / "log.bin"
    log.write_bytes(b"")
    result = CliRunner().invoke(main, ["apply", str(log), "--applier", "mystore"])
    assert result.exit_code == 2
    assert "unknown applier 'mystore'" in result.output and "plugin 'broken'" in result.output
