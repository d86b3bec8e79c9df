"""Loading a script of ``benchmarks/`` as a module, for tests of its parts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: The repository's ``benchmarks`` directory.
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` executed as a new module named ``name``, with ``benchmarks/`` on
    ``sys.path`` while it runs (the scripts import each other by name). The module is in
    ``sys.modules`` under ``name`` from before it runs (a dataclass looks its module up there),
    and is taken out again if running it fails."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module
