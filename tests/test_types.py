"""The type checker's contract (pyproject.toml ``[tool.mypy]``; scripts/test.sh runs mypy over
all of gateway/): the pure core and the public face are checked strictly, with no override
loosening them."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Checked with ``strict = true`` and no per-module override.
STRICT = ("gateway.raft", "gateway.conflict", "gateway.replication", "gateway.core",
          "gateway.hookspecs", "gateway.plugins", "gateway.appliers", "gateway.cli",
          "gateway.testing")


def _config() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def test_no_override_loosens_the_strict_packages() -> None:
    config = _config()
    assert config["strict"] is True
    for override in config.get("overrides", []):
        for module in override["module"]:
            package = module.removesuffix(".*")
            assert package not in STRICT and not package.startswith(
                tuple(p + "." for p in STRICT)), f"override loosens {module}"


def test_the_pure_core_and_the_public_face_pass_mypy_strict() -> None:
    paths = ["gateway/raft", "gateway/conflict", "gateway/replication", "gateway/core",
             "gateway/__init__.py", "gateway/hookspecs.py", "gateway/plugins.py"]
    out = subprocess.run([sys.executable, "-m", "mypy", *paths], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
