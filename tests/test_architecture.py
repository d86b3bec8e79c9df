"""The package map of docs/architecture.md, enforced: every import in ``gateway/`` (at any
depth, TYPE_CHECKING included) stays inside what its package may import."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What any part of the node may import from outside ``gateway/node/``.
_NODE_OUTSIDE = {"gateway.core", "gateway.core.wal", "gateway.core.lsm", "gateway.raft",
                 "gateway.conflict", "gateway.schema", "gateway.replication", "gateway.appliers",
                 "gateway.hookspecs", "gateway.plugins", "gateway.v1"}

#: The sub-packages of ``gateway/node/`` (docs/architecture.md, "The node's rooms").
NODE_ROOMS = tuple(f"gateway.node.{room}" for room in (
    "base", "storage", "state", "loop", "peers", "replication", "appliers", "api"))

#: Lines a module of ``gateway/node/`` may have without saying at its top why it is larger.
NODE_MODULE_LINES = 600

#: package -> the gateway packages it may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "gateway.v1": set(),
    "gateway.core": {"gateway.v1"},
    "gateway.core.wal": {"gateway.core", "gateway.v1"},
    "gateway.core.lsm": {"gateway.core", "gateway.v1"},
    "gateway.raft": set(),
    "gateway.conflict": {"gateway.core", "gateway.v1"},
    # Table definitions as versioned events (issue 57): pure like gateway.conflict.
    "gateway.schema": {"gateway.core", "gateway.v1"},
    "gateway.replication": {"gateway.v1"},
    "gateway.appliers": {"gateway.core", "gateway.hookspecs", "gateway.schema", "gateway.v1"},
    "gateway.hookspecs": {"gateway.appliers", "gateway.schema"},
    "gateway.plugins": {"gateway.appliers", "gateway.hookspecs"},
    "gateway.client": {"gateway.v1"},
    "gateway.testing": {"gateway.client", "gateway.v1"},
    "gateway.console": {"gateway.client", "gateway.v1"},
    "gateway.formats": {"gateway.core", "gateway.core.wal", "gateway.core.lsm"},
    # The public shape of the file layer for plugin packages (gateway.core.fileio).
    "gateway.fileio": {"gateway.core"},
    # The one Cassandra mapping (names, types, write clock) of the streaming plugin and the
    # Spark target: public to both, like gateway.fileio.
    "gateway.cassandra_mapping": {"gateway.appliers", "gateway.core", "gateway.schema",
                                  "gateway.v1"},
    # The node: its rooms (sub-packages, layered bottom up) and the top, ``gateway.node``
    # (``server``, the composition root that starts every room together).
    "gateway.node.base": _NODE_OUTSIDE,
    "gateway.node.storage": _NODE_OUTSIDE | {"gateway.node.base"},
    "gateway.node.state": _NODE_OUTSIDE | {"gateway.node.base", "gateway.node.storage"},
    "gateway.node.loop": _NODE_OUTSIDE | {"gateway.node.base", "gateway.node.storage",
                                          "gateway.node.state"},
    "gateway.node.peers": _NODE_OUTSIDE | {"gateway.node.base"},
    "gateway.node.replication": _NODE_OUTSIDE | {"gateway.node.base", "gateway.node.state",
                                                 "gateway.node.loop"},
    "gateway.node.appliers": _NODE_OUTSIDE | {"gateway.node.base", "gateway.node.storage",
                                              "gateway.node.state", "gateway.node.loop"},
    # The API room takes the node it serves as a Protocol (``api.served_node``), naming the
    # rooms below it for types; it never imports ``gateway.node`` (the composition root).
    "gateway.node.api": _NODE_OUTSIDE | {"gateway.node.base", "gateway.node.storage",
                                         "gateway.node.state", "gateway.node.loop",
                                         "gateway.node.peers", "gateway.node.replication",
                                         "gateway.node.appliers"},
    "gateway.node": _NODE_OUTSIDE | set(NODE_ROOMS),
    "gateway.cli": {"*"},
    "gateway": {"gateway.hookspecs", "gateway.core", "gateway.appliers", "gateway.conflict",
                "gateway.schema", "gateway.v1"},
}


def _unit(module: str) -> str:
    """The package of ``module`` in the table above."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "core" and parts[2] in ("wal", "lsm"):
        return ".".join(parts[:3])
    if len(parts) >= 3 and ".".join(parts[:3]) in NODE_ROOMS:
        return ".".join(parts[:3])
    if len(parts) >= 2:
        return ".".join(parts[:2])
    return "gateway"


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _targets(path: Path, module: str) -> list[tuple[int, str]]:
    out = []
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] if node.module or node.level else []
            if target == "gateway":  # ``from gateway import plugins``: the submodules named
                names = [f"gateway.{a.name}" for a in node.names]
            out += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, t) for line, t in out if t == "gateway" or t.startswith("gateway.")]


def test_every_package_imports_only_what_the_map_allows():
    bad = []
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        module = _module_of(path)
        src = _unit(module)
        allowed = ALLOWED.get(src)
        assert allowed is not None, f"{module}: package {src} is not in the map"
        for line, target in _targets(path, module):
            dst = _unit(target)
            if target == "gateway" or dst == src or "*" in allowed:
                continue
            if dst not in allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {src} imports {target}")
    assert not bad, "imports outside docs/architecture.md's map:\n" + "\n".join(bad)


def test_the_map_in_the_docs_names_every_package():
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = [p for p in ALLOWED if p != "gateway" and f"`{p}`" not in text]
    assert not missing, missing


#: Type-only back references (``if TYPE_CHECKING:``) that close a cycle, each a deliberate
#: "callee knows its caller's type" link: the Raft role step functions take the ``Raft`` they
#: run in (etcd's layout). Nothing else may close a cycle, at runtime or in types (the node's
#: API takes the node it serves as a Protocol, ``api.served_node``).
TYPE_ONLY_BACK_REFERENCES = {
    ("gateway.raft.roles", "gateway.raft.core"),
}


def _type_checking_lines(path: Path) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def _import_graph(unit=lambda module: module) -> dict[str, set[str]]:
    """``unit(module)`` -> the units it imports: the modules of ``gateway/`` (or what ``unit``
    groups them into), imports under TYPE_CHECKING included except the listed back
    references. Package ``__init__`` re-exports are left out (a package may re-export its own
    modules)."""
    modules = {}
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        modules[_module_of(path)] = path
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        typing_only = _type_checking_lines(path)
        deps = graph.setdefault(unit(module), set())
        for line, target in _targets(path, module):
            if target not in modules or target == module:
                continue
            if line in typing_only and (module, target) in TYPE_ONLY_BACK_REFERENCES:
                continue
            if unit(target) != unit(module):
                deps.add(unit(target))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    cycles = []
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycles.append(" -> ".join([*stack[stack.index(d):], d]))
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return cycles


def test_no_module_import_cycles():
    """No two modules of ``gateway/`` import each other, directly or through others. Imports
    under TYPE_CHECKING count too, except the listed back references."""
    cycles = _cycles(_import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_import_cycle_among_node_modules_even_for_types():
    """No module of ``gateway/node/`` imports, directly or through other modules of the node,
    a module that imports it: module-level imports, imports inside functions and imports under
    TYPE_CHECKING all count, with no exception (the API takes the node it serves as a
    Protocol instead of importing ``server``)."""
    graph = _import_graph()
    node = {m: {d for d in deps if d.startswith("gateway.node")}
            for m, deps in graph.items() if m.startswith("gateway.node")}
    for module in node:
        path = ROOT / (module.replace(".", "/") + ".py")
        typing_only = _type_checking_lines(path)
        node[module] |= {t for line, t in _targets(path, module)
                         if line in typing_only and t in node and t != module}
    cycles = _cycles(node)
    assert not cycles, "import cycles among gateway/node/ modules:\n" + "\n".join(cycles)


def test_the_node_rooms_import_each_other_without_cycles():
    """The sub-packages of ``gateway/node/`` (and its top, ``server``) form layers: no room
    imports, directly or through others, a room that imports it, not even for types."""
    graph = _import_graph(lambda m: _unit(m) if m.startswith("gateway.node") else "outside")
    graph = {m: deps - {"outside"} for m, deps in graph.items() if m != "outside"}
    assert set(NODE_ROOMS) <= set(graph), sorted(set(NODE_ROOMS) - set(graph))
    cycles = _cycles(graph)
    assert not cycles, "import cycles between the node's rooms:\n" + "\n".join(cycles)


def test_every_node_module_sits_in_a_room():
    """Only the top (``__init__``, ``server``) lives directly in ``gateway/node/``; every other
    module is in the sub-package named for its subsystem."""
    flat = sorted(p.name for p in (ROOT / "gateway" / "node").glob("*.py"))
    assert flat == ["__init__.py", "server.py"], flat
    rooms = sorted(p.name for p in (ROOT / "gateway" / "node").iterdir()
                   if (p / "__init__.py").exists())
    assert sorted(f"gateway.node.{r}" for r in rooms) == sorted(NODE_ROOMS)


def test_no_node_module_is_large_without_a_reason_at_its_top():
    """A module of ``gateway/node/`` above NODE_MODULE_LINES lines says why in its module
    docstring, on a line starting ``Size:`` (what keeps it together, what would split it)."""
    bad = []
    for path in sorted((ROOT / "gateway" / "node").rglob("*.py")):
        text = path.read_text()
        lines = text.count("\n")
        if lines <= NODE_MODULE_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text, str(path))) or ""
        if not any(line.startswith("Size:") for line in doc.splitlines()):
            bad.append(f"{path.relative_to(ROOT)}: {lines} lines, no 'Size:' line in its "
                       "docstring")
    assert not bad, "\n".join(bad)
