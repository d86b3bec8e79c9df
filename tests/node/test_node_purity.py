"""The node's pure cores stay pure: ``sequencer`` (the leader's bookkeeping) imports no I/O,
clock, thread, event loop or randomness -- time is passed in (as ``tests/raft/test_no_io.py``
keeps ``gateway.raft`` pure)."""

from __future__ import annotations

import ast
from pathlib import Path

import gateway.node

FORBIDDEN = {"asyncio", "grpc", "socket", "time", "os", "threading", "random", "subprocess",
             "selectors", "multiprocessing", "datetime", "concurrent", "logging"}
PURE = ["loop/sequencer.py", "loop/write_proposal.py"]
PACKAGE = Path(gateway.node.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0] if node.level == 0 else f".{node.module}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
            names.add("__import__")
    return names


def test_the_sequencer_imports_no_io_clock_threads_or_random() -> None:
    for name in PURE:
        bad = _imports(PACKAGE / name) & (FORBIDDEN | {"__import__"})
        assert not bad, f"gateway/node/{name} imports {sorted(bad)}"


def _run_time_imports(path: Path) -> set[str]:
    """Top-level modules imported outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            return  # hints only
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or "").split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def test_the_sequencer_imports_only_the_standard_librarys_value_types_at_run_time() -> None:
    # Node modules (validation, replication) only for type hints: the sequencer decides
    # from values and never reaches into the driver, the state machine or the store.
    allowed = {"__future__", "collections", "dataclasses", "typing"}
    for name in PURE:
        extra = _run_time_imports(PACKAGE / name) - allowed
        assert not extra, f"gateway/node/{name} imports {sorted(extra)} at run time"
