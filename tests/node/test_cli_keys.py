"""Keys on the command line (issue 52, item 12): ``gateway get TABLE -1`` reads key -1 (no
``--`` needed), and a NULL key in ``gateway sql`` is named as such."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.cli.sql import SqlError, sql_to_statements

from .conftest import leader_of, node_configs, run, running


def test_negative_keys_are_positional_arguments(tmp_path):
    cfg = node_configs(tmp_path, 1)[0]

    def cli(*args: str):
        return CliRunner().invoke(main, list(args))

    async def go() -> None:
        async with running(cfg) as (node,):
            await leader_of([node])
            w = await asyncio.to_thread(
                cli, "sql", "--target", cfg.api,
                "INSERT INTO shop.items (id, name) VALUES (-1, 'minus one')")
            assert w.exit_code == 0, w.output
            for args in (("shop.items", "-1"), ("--consistency", "stale", "shop.items", "-1"),
                         ("shop.items", "-1", "--consistency", "lease"),
                         ("shop.items", "--", "-1")):
                g = await asyncio.to_thread(cli, "get", "--target", cfg.api, *args)
                assert g.exit_code == 0, (args, g.output)
                assert json.loads(g.output) == {"id": -1, "name": "minus one"}
            bad = await asyncio.to_thread(cli, "get", "--target", cfg.api, "shop.items", "-1",
                                          "--bogus")
            assert bad.exit_code == 2 and "No such option '--bogus'" in bad.output

    run(go(), 60)


@pytest.mark.parametrize(("text", "message"), [
    ("INSERT INTO shop.items (id, name) VALUES (NULL, 'x')",
     "INSERT row 1: key column 'id' is NULL"),
    ("INSERT INTO shop.items (id, name) VALUES (1, 'a'), (NULL, 'x')",
     "INSERT row 2: key column 'id' is NULL"),
    ("UPDATE shop.items SET name = 'a' WHERE id = NULL", "WHERE: key column 'id' is NULL"),
    ("DELETE FROM shop.items WHERE id = NULL", "WHERE: key column 'id' is NULL"),
])
def test_a_null_key_in_gateway_sql_is_named(text, message):
    with pytest.raises(SqlError) as ei:
        sql_to_statements(text)
    assert str(ei.value).startswith(message)
