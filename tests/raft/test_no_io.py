"""The core is pure: no module of gateway.raft imports I/O, clocks, threads or ``random``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import gateway.raft

FORBIDDEN = {"asyncio", "grpc", "socket", "time", "os", "threading", "random", "subprocess",
             "selectors", "multiprocessing", "datetime"}
PACKAGE = Path(gateway.raft.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
            names.add("__import__")
    return names


def test_no_module_imports_io_clock_threads_or_random() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 10
    for path in files:
        bad = _imports(path) & (FORBIDDEN | {"__import__"})
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_importing_the_package_loads_no_forbidden_module() -> None:
    # Only modules that a bare interpreter does not already load can be checked this way
    # (os and time are preloaded by CPython's startup itself); the AST test covers those.
    code = (
        "import sys; before = set(sys.modules); import gateway.raft, gateway.raft.sim, "
        "gateway.raft.linearizability; new = set(sys.modules) - before; "
        "print(','.join(sorted(m for m in new if m.split('.')[0] in "
        "{'asyncio','grpc','socket','threading','random','selectors','subprocess'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
