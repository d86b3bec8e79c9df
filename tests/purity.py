"""Checks that a package is pure: values in, values out -- no I/O, no clock, no threads or
asyncio, no process-wide random state. Shared by the ``test_no_io`` tests of the pure
packages (``gateway.conflict``, ``gateway.replication``; ``tests/raft/test_no_io.py`` is the
model)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

#: Modules a pure module may not import: I/O, clocks, concurrency, randomness, processes.
FORBIDDEN_MODULES = frozenset({
    "asyncio", "concurrent", "datetime", "grpc", "importlib", "io", "multiprocessing", "os",
    "pathlib", "random", "secrets", "selectors", "shutil", "socket", "sqlite3", "subprocess",
    "sys", "tempfile", "threading", "time", "uuid",
})
#: Built-ins a pure module may not call (files, the terminal, dynamic imports and code).
FORBIDDEN_CALLS = frozenset({"open", "input", "print", "__import__", "exec", "eval"})
#: The modules the runtime check looks for (those a bare interpreter does not preload).
LOADED_FORBIDDEN = ("asyncio", "grpc", "socket", "threading", "random", "selectors",
                    "subprocess", "concurrent", "multiprocessing", "sqlite3", "secrets",
                    "uuid", "tempfile")


def forbidden_uses(path: Path) -> list[str]:
    """What ``path`` imports or calls of the forbidden sets, as ``line N: name`` strings."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module.split(".")[0]]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names = [node.func.id] if node.func.id in FORBIDDEN_CALLS else []
        found += [f"line {node.lineno}: {n}" for n in names
                  if n in FORBIDDEN_MODULES or n in FORBIDDEN_CALLS]
    return found


def impure_modules(package_dir: Path) -> dict[str, list[str]]:
    """``forbidden_uses`` of every module under ``package_dir`` that has any."""
    out: dict[str, list[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        if bad := forbidden_uses(path):
            out[str(path.relative_to(package_dir))] = bad
    return out


def loaded_by_importing(package: str, preloaded: tuple[str, ...] = ()) -> list[str]:
    """The forbidden modules (``LOADED_FORBIDDEN``) that importing ``package`` loads in a
    fresh interpreter, beyond what importing ``preloaded`` (its allowed dependencies, e.g.
    the generated protobuf modules) already loaded."""
    code = (
        "import importlib, sys\n"
        f"for m in {preloaded!r}: importlib.import_module(m)\n"
        "before = set(sys.modules)\n"
        f"importlib.import_module({package!r})\n"
        "new = set(sys.modules) - before\n"
        f"print(','.join(sorted(m for m in new if m.split('.')[0] in {LOADED_FORBIDDEN!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return [m for m in out.stdout.strip().split(",") if m]
