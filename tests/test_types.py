"""The type checker's contract (pyproject.toml ``[tool.mypy]``; scripts/test.sh runs mypy over
all of gateway/): the pure core and the public face are checked strictly, with no override
loosening them."""

from __future__ import annotations

import fnmatch
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


#: Modules of ``gateway/node/`` already clean under ``strict`` while the rest of the node is
#: still checked with the relaxed ``gateway.node.*`` override: the API room (``api/``), the
#: composition root and the wire paths. Pinned here so that they stay clean.
NODE_STRICT = ("gateway.node.api", "gateway.node.server", "gateway.node.state.wire")
NODE_STRICT_PATHS = ("gateway/node/api", "gateway/node/server.py", "gateway/node/state/wire.py")


def _ini_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _covers(pattern: str, module: str) -> bool:
    return fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module + ".x", pattern)


def _config_strict_for(modules: tuple[str, ...], out: Path) -> Path:
    """pyproject.toml's mypy configuration as a mypy.ini, plus sections for ``modules`` (and
    their submodules) that undo every override loosening them: each check turned off is
    turned on again, each disabled error code enabled again."""
    config = _config()
    lines = ["[mypy]"]
    lines += [f"{k} = {_ini_value(v)}" for k, v in config.items() if k != "overrides"]
    undo: dict[str, object] = {}
    for override in config.get("overrides", []):
        patterns = override["module"]
        for pattern in patterns:
            lines += ["", f"[mypy-{pattern}]"]
            lines += [f"{k} = {_ini_value(v)}" for k, v in override.items() if k != "module"]
        if any(_covers(p, m) for p in patterns for m in modules):
            for key, value in override.items():
                if key == "disable_error_code":
                    undo["enable_error_code"] = list(value)
                elif value is False:
                    undo[key] = True
                elif key != "module":
                    raise AssertionError(f"override of {patterns} sets {key} = {value!r}: "
                                         "say here how to undo it")
    for module in modules:
        for section in (module, module + ".*"):
            lines += ["", f"[mypy-{section}]"]
            lines += [f"{k} = {_ini_value(v)}" for k, v in undo.items()]
    out.write_text("\n".join(lines) + "\n")
    return out


def test_the_node_api_server_and_wire_pass_mypy_strict(tmp_path: Path) -> None:
    """The API room, ``server`` and ``state/wire`` pass ``strict`` even where the relaxed
    override of the rest of ``gateway/node/`` applies."""
    ini = _config_strict_for(NODE_STRICT, tmp_path / "mypy.ini")
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ini),
                          "--cache-dir", str(tmp_path / "cache"), *NODE_STRICT_PATHS],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
