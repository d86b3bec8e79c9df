"""A cluster's conflict configuration is replicated state: rules and role set through the admin
API, the CLI or the TOML file, checked on the way in (naming table, function and column),
the same on every node, kept across restarts, and shown by Status."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.client import AsyncGatewayClient, GatewayClient, GatewayError, row_insert
from gateway.conflict import ConflictRule
from gateway.node.base.config import ConfigError

from .conftest import leader_of, node_configs, run, running, started, wait_for


def _rules(node) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.table, r.function, tuple(r.args)) for r in node.status().conflict_rules]


def test_rules_and_role_are_replicated_checked_and_kept(tmp_path):
    cfgs = node_configs(tmp_path, 3, cluster_id=1)

    async def go():
        async with running(*cfgs) as nodes:
            await leader_of(nodes)
            async with AsyncGatewayClient([c.api for c in cfgs]) as c:
                await c.write([row_insert("shop.items", {"id": 1}, {"ts": 5, "name": "x"})])

            def admin():
                with GatewayClient([c.api for c in cfgs], timeout=20) as c:
                    errors = []
                    try:  # the epoch functions need a role first
                        c.set_conflict_rule("shop.*", "NDB$EPOCH2")
                    except GatewayError as exc:
                        errors.append((exc.code.name, exc.details))
                    c.set_conflict_role("PRIMARY")
                    c.set_conflict_rule("shop.*", "NDB$EPOCH2")
                    c.set_conflict_rule("shop.items", "ndb$max(ts)")
                    c.set_conflict_rule("*", "LWW")
                    for table, fn in (("shop.items", "NDB$MAX(id)"),  # the key
                                      ("shop.items", "NDB$MAX(name)"),  # a VARCHAR column
                                      ("shop.*", "NDB$OLD(nope)"),  # matches shop.items
                                      ("shop.items", "NDB$NOPE(ts)"),
                                      ("shop.items", "NDB$EPOCH(ts)"),
                                      ("shop", "LWW"),
                                      ("shop.items", "NDB$MAX(")):
                        try:
                            c.set_conflict_rule(table, fn)
                        except GatewayError as exc:
                            errors.append((exc.code.name, exc.details))
                    for bad in (lambda: c.set_conflict_role("BOSS"),
                                lambda: c.unset_conflict_rule("crm.*")):
                        try:
                            bad()
                        except GatewayError as exc:
                            errors.append((exc.code.name, exc.details))
                    return errors

            errors = await asyncio.to_thread(admin)
            assert [code for code, _ in errors] == ["INVALID_ARGUMENT"] * 10
            assert "NDB$EPOCH2 needs this cluster's role" in errors.pop(0)[1]
            assert "column 'id' is part of the primary key" in errors.pop(0)[1]
            msgs = [m for _, m in errors]
            assert "table shop.items: NDB$MAX(name): column 'name' is FIELD_TYPE_VARCHAR" \
                in msgs[0]
            assert "table shop.items (matched by shop.*): NDB$OLD(nope): the table has no " \
                "column 'nope'" in msgs[1]
            assert "unknown conflict function 'NDB$NOPE'" in msgs[2]
            assert "NDB$EPOCH takes no argument" in msgs[3]
            assert "table 'shop': not schema.table" in msgs[4]
            assert "is not a conflict function" in msgs[5]
            assert "'BOSS' is not a role" in msgs[6]
            assert "no conflict rule for 'crm.*'" in msgs[7]
            want = [("shop.items", "NDB$MAX", ("ts",)), ("shop.*", "NDB$EPOCH2", ()),
                    ("*", "LWW", ())]
            await wait_for(lambda: all(_rules(n) == want for n in nodes), 10,
                           "every node holds the rules")
            assert {n.status().conflict_role for n in nodes} == {"PRIMARY"}
            await asyncio.to_thread(
                lambda: GatewayClient(cfgs[0].api, timeout=20).unset_conflict_rule("*"))
            await wait_for(lambda: all(_rules(n) == want[:2] for n in nodes), 10, "unset")
            # kept across a restart of a follower
            lead = (await leader_of(nodes)).config.node_id
            i = next(i for i, c in enumerate(cfgs) if c.node_id != lead)
            await nodes[i].stop()
            nodes[i] = await started(cfgs[i])
            assert _rules(nodes[i]) == want[:2]
            assert nodes[i].status().conflict_role == "PRIMARY"

    run(go(), 90)


def test_the_configuration_file_sets_role_and_rules_and_wins_for_what_it_names(tmp_path):
    cfg = node_configs(tmp_path, 1, cluster_id=2)[0]
    cfg = dataclasses.replace(cfg, conflict_role="SECONDARY", conflicts=(
        ConflictRule("shop.*", "NDB$EPOCH2"), ConflictRule("crm.people", "NDB$MAX", ("ts",))))

    async def go():
        async with running(cfg) as (node,):
            await leader_of([node])
            await wait_for(lambda: len(_rules(node)) == 2, 10, "rules from the file")
            assert node.status().conflict_role == "SECONDARY"
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "conflicts", "set", "--target", cfg.api, "--role", "pass", "*", "LWW"]))
            assert res.exit_code == 0, res.output
            assert "role PASS set" in res.output and "rule * -> LWW set" in res.output
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "conflicts", "rules", "--target", cfg.api]))
            assert res.output.splitlines() == ["role PASS", "crm.people\tNDB$MAX(ts)",
                                               "shop.*\tNDB$EPOCH2", "*\tLWW"]
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "conflicts", "set", "--target", cfg.api, "shop.items", "NDB$MAX"]))
            assert res.exit_code == 2 and "NDB$MAX takes one argument" in res.output
            res = await asyncio.to_thread(lambda: CliRunner().invoke(main, [
                "conflicts", "unset", "--target", cfg.api, "*"]))
            assert res.exit_code == 0 and "rule * unset" in res.output

    run(go(), 60)


@pytest.mark.parametrize("text, message", [
    ('conflict_role = "BOSS"\n', "conflict_role: 'BOSS' is not a role"),
    ('[[conflicts]]\ntable = "shop.*"\nfunction = "NDB$MAX("\n',
     "conflicts[0] (file).function: 'NDB$MAX(' is not a conflict function"),
    ('[[conflicts]]\ntable = "shop"\nfunction = "LWW"\n', "conflicts[0]: table 'shop'"),
    ('[[conflicts]]\ntable = "s.t"\nfunction = "LWW"\n[[conflicts]]\ntable = "s.t"\n'
     'function = "NDB$EPOCH"\n', "conflicts[1].table: 's.t' has two rules"),
    ('[[conflicts]]\ntable = "s.t"\nfunction = "NDB$MAX(ts)"\ncolumn = "x"\n',
     "conflicts[0] (file).column: unknown key"),
])
def test_bad_conflict_configuration_is_a_clear_error(tmp_path, text, message):
    from gateway.node.base.config import load_config

    path = tmp_path / "node.toml"
    path.write_text(f'data_dir = "{tmp_path}/d"\n' + text)
    with pytest.raises(ConfigError) as ei:
        load_config(str(path), env={})
    assert message in str(ei.value).replace(f"{path}", "file")
