"""``gateway run --plugins``: which appliers run, their options (-o, GATEWAY_<APPLIER>_<KEY>,
the file) and defaults; failed starts that leave nothing behind; and a store that is down
does not stop the node: its applier retries, shows as failing, and catches up."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path

import click
import pluggy
import pytest
from click.testing import CliRunner

from gateway import hookimpl, hookspecs
from gateway.appliers.contract import (
    Applier,
    ApplierFactory,
    Capabilities,
    StoreUnavailableError,
)
from gateway.cli import main
from gateway.cli.node import _choose_appliers
from gateway.client import AsyncGatewayClient, row_insert
from gateway.core.rowops import RowOp
from gateway.node.base.config import load_config
from gateway.node.server import GatewayNode, NodeStartError

from .conftest import leader_of, node_configs, run, running, wait_for


def _choose(tmp_path: Path, run_plugins: str | None, options: Sequence[str] = (),
            toml: str = "", root_plugins: str | None = None):
    path = tmp_path / "node.toml"
    path.write_text(f'data_dir = "{tmp_path}/d"\n' + toml)
    cfg = load_config(str(path), env={})
    args = ["--plugins", root_plugins, "run"] if root_plugins is not None else ["run"]
    with main.make_context("gateway", args) as ctx:
        return _choose_appliers(ctx, cfg, run_plugins, tuple(options))[0].appliers


def test_plugins_choose_the_appliers_unless_appliers_are_named(tmp_path, monkeypatch):
    monkeypatch.delenv("GATEWAY_PLUGINS", raising=False)
    assert _choose(tmp_path, None) == {"sqlite": {}}  # the embedded default
    assert _choose(tmp_path, "cassandra,rabbit") == {"cassandra": {}, "rabbit": {}}
    assert _choose(tmp_path, None, root_plugins="rabbit") == {"rabbit": {}}
    assert _choose(tmp_path, "sqlite,rabbit") == {"sqlite": {}, "rabbit": {}}
    assert _choose(tmp_path, None, toml='plugins = ["cassandra"]\n') == {"cassandra": {}}
    # named appliers win: the plugins are only loaded
    assert _choose(tmp_path, "cassandra,rabbit",
                   toml='[appliers.rabbit]\nurl = "amqp://u:p@h:1/"\n') == {
        "rabbit": {"url": "amqp://u:p@h:1/"}}


def test_applier_options_come_from_the_file_the_environment_and_o(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_CASSANDRA_CONTACT", "10.0.0.1:9042")
    monkeypatch.setenv("GATEWAY_CASSANDRA_CONSISTENCY", "ONE")
    got = _choose(tmp_path, "cassandra,rabbit", ["cassandra.contact=10.0.0.2:9042",
                                                  "rabbit.url=amqp://u:p@h:5672/"])
    assert got == {"cassandra": {"contact": "10.0.0.2:9042", "consistency": "ONE"},
                   "rabbit": {"url": "amqp://u:p@h:5672/"}}
    with pytest.raises(click.ClickException, match="applier 'cassandra' does not run "
                                                   r"\(running: sqlite\)"):
        _choose(tmp_path, None, ["cassandra.contact=x"])
    with pytest.raises(click.ClickException, match=r"expected APPLIER\.KEY=VALUE"):
        _choose(tmp_path, "cassandra", ["contact=x"])


def test_a_failed_start_is_one_line_and_leaves_no_data_directory(tmp_path):
    d = tmp_path / "data"
    res = CliRunner().invoke(main, ["run", "--plugins", "nope", "--data-dir", str(d)])
    assert res.exit_code == 2 and "unknown plugin 'nope' (installed:" in res.output
    assert "Traceback" not in res.output and not d.exists()
    res = CliRunner().invoke(main, ["run", "--data-dir", str(d), "-o", "sqlite.colour=red"])
    assert res.exit_code == 1 and "unknown option 'colour'" in res.output, res.output
    assert "Traceback" not in res.output and not d.exists()  # it bootstrapped, then removed
    mounted = tmp_path / "volume"
    mounted.mkdir()
    res = CliRunner().invoke(main, ["run", "--data-dir", str(mounted), "-o",
                                    "sqlite.colour=red"])
    assert res.exit_code == 1 and mounted.is_dir() and not any(mounted.iterdir())


def test_a_failed_start_of_a_used_data_directory_keeps_it(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    async def go():
        async with running(cfg) as nodes:
            await leader_of(nodes)
        held = sorted(p.name for p in Path(cfg.data_dir).iterdir())
        bad = dataclasses.replace(cfg, appliers={"nope": {}})
        with pytest.raises(NodeStartError, match="unknown applier 'nope'"):
            await GatewayNode(bad).start()
        assert sorted(p.name for p in Path(cfg.data_dir).iterdir()) == held

    run(go(), 60)


class _Flaky(Applier):
    """A store that is down until ``up`` is set; then it records what it applies."""

    def __init__(self, up: threading.Event, rows: list) -> None:
        self.name = "flaky"
        self.capabilities = Capabilities()
        self.up, self.rows = up, rows

    def apply(self, ops: Sequence[RowOp]) -> None:
        if not self.up.is_set():
            raise StoreUnavailableError("cannot connect to flaky://10.9.9.9:1: refused")
        self.rows.extend(op.key for op in ops)


def test_a_store_that_is_down_does_not_stop_the_node_and_is_caught_up(tmp_path):
    up = threading.Event()
    rows: list = []

    class Plugin:
        @hookimpl
        def gateway_register_appliers(self) -> list[ApplierFactory]:
            return [ApplierFactory("flaky", lambda _o: _Flaky(up, rows), "test store")]

    def pm() -> pluggy.PluginManager:
        m = pluggy.PluginManager(hookspecs.PROJECT)
        m.add_hookspecs(hookspecs)
        m.register(Plugin(), name="flaky")
        return m

    cfg = dataclasses.replace(node_configs(tmp_path, 1)[0], appliers={"flaky": {}})

    async def go():
        async with running(cfg, plugins=pm) as nodes:
            node = await leader_of(nodes)
            async with AsyncGatewayClient(cfg.api) as c:
                for i in range(5):
                    await c.write([row_insert("s.t", {"id": i}, {"v": "x"})])

            def failing() -> bool:
                a = next(a for a in node.applier_status() if a.name == "flaky")
                return a.running and "store unavailable" in a.error and a.lag_entries >= 5

            await wait_for(failing, 20, "the applier shows its store unavailable")
            a = next(a for a in node.applier_status() if a.name == "flaky")
            assert "flaky://10.9.9.9:1" in a.error and a.dead_letters == 0
            await asyncio.sleep(0.5)
            assert node.driver.sm.applied_index > 0  # the node kept serving
            up.set()

            def caught_up() -> bool:
                a = next(a for a in node.applier_status() if a.name == "flaky")
                return a.lag_entries == 0 and not a.error

            await wait_for(caught_up, 20, "caught up once the store returned")
            assert sorted(rows) == [(i,) for i in range(5)]

    run(go(), 60)
