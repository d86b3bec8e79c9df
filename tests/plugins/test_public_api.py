"""The package face for plugin authors (issue 13): ``gateway.__all__`` and ``gateway.formats``
are the public names, loaded lazily, every one documented in docs/plugins.md; the built-in
plugins import nothing else from ``gateway``; the Spark bulk applier reads the formats through
``gateway.formats`` and reaches into no applier, node or store internals."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import gateway
import gateway.fileio
import gateway.formats

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "plugins.md"


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of a ``gateway`` module in ``path`` (any depth)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [node.module]
        elif isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        else:
            continue
        out += [(node.lineno, m) for m in mods if m == "gateway" or m.startswith("gateway.")]
    return out


def test_every_public_name_loads_and_all_matches_the_export_table():
    assert set(gateway.__all__) == {"__version__", "hookimpl", *gateway._EXPORTS}
    assert len(gateway.__all__) == len(set(gateway.__all__))
    for name in gateway.__all__:
        assert getattr(gateway, name) is not None
    assert set(gateway.__all__) <= set(dir(gateway))
    for name in gateway.formats.__all__:
        assert getattr(gateway.formats, name) is not None


def test_an_unknown_name_is_an_attribute_error():
    try:
        gateway.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("gateway.NoSuchThing resolved")


def test_import_gateway_loads_neither_grpc_nor_protobuf_nor_internals():
    code = ("import gateway, sys; print(' '.join(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('grpc', 'google', 'gateway'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert loaded == ["gateway", "gateway.hookspecs"]


def test_built_in_plugins_import_only_the_package_root():
    bad = []
    for path in sorted(ROOT.glob("plugins/*/gateway_*/**/*.py")):
        bad += [f"{path.relative_to(ROOT)}:{line}: {mod}" for line, mod in _imports(path)
                if mod not in ("gateway", "gateway.fileio")]
    assert sorted(ROOT.glob("plugins/*/gateway_*/**/*.py")), "no plugin sources found"
    assert not bad, "plugins must import only from `gateway` (and `gateway.fileio`):\n" + \
        "\n".join(bad)


def test_spark_applier_imports_only_public_modules():
    public = ("gateway", "gateway.fileio", "gateway.formats", "gateway.v1")
    bad = []
    for path in sorted(ROOT.glob("spark_applier/**/*.py")):
        bad += [f"{path.relative_to(ROOT)}:{line}: {mod}" for line, mod in _imports(path)
                if mod not in public and not mod.startswith("gateway.v1.")]
    assert not bad, "spark_applier reaches into internals:\n" + "\n".join(bad)


def test_every_public_name_is_documented_in_docs_plugins_md():
    text = DOCS.read_text()
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", text))
    missing = [n for n in [*gateway.__all__, *gateway.formats.__all__,
                           *gateway.fileio.__all__] if n not in documented]
    assert not missing, f"public names missing from docs/plugins.md: {missing}"


def test_the_conflict_function_types_are_public_and_are_the_internal_ones():
    import gateway.conflict as internal
    from gateway.conflict.functions import ConflictFunction

    names = ["APPLY", "Cause", "Change", "ConflictFunction", "Context", "FunctionSpec",
             "OpType", "Role", "Stored", "Verdict"]
    assert set(names) <= set(gateway.__all__)
    for name in names:
        expected = ConflictFunction if name == "ConflictFunction" else getattr(internal, name)
        assert getattr(gateway, name) is expected, name


def test_docs_tell_conflict_plugins_to_import_from_the_package_root():
    text = DOCS.read_text()
    section = text[text.index("### `gateway_register_conflict_functions"):]
    section = section[:section.index("\n### ")]
    assert "gateway.conflict" not in section
    assert "from gateway import" in section
