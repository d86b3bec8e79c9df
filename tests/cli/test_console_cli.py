"""``gateway console``'s command line refuses bad input in one line (exit 2), and the page's
files are package data that the wheel ships (pyproject's package-data covers them)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from click.testing import CliRunner

from gateway.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_console_refuses_a_bad_listen_address_table_or_interval():
    for args, what in ((["--listen", "nowhere"], "--listen 'nowhere': expected HOST:PORT"),
                       (["--conflict-table", "items"], "--conflict-table: 'items': give"),
                       (["--interval", "0"], "--interval 0.0: must be positive")):
        res = CliRunner().invoke(main, ["console", "--target", "127.0.0.1:1", *args])
        assert res.exit_code == 2, res.output
        assert what in res.output and "Traceback" not in res.output


def test_the_console_page_files_are_package_data():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["gateway"]
    files = sorted(p.relative_to(ROOT / "gateway").as_posix()
                   for p in (ROOT / "gateway" / "console" / "static").iterdir())
    assert files == ["console/static/console.css", "console/static/console.js",
                     "console/static/index.html"]
    assert all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files), patterns
