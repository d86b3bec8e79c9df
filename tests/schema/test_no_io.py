"""``gateway.schema`` is pure: every node applies schema events itself and must reach the same
definitions, so its modules touch no I/O, clock, thread or random state (docs/schema.md)."""

from __future__ import annotations

from pathlib import Path

import gateway.schema
from tests.purity import impure_modules, loaded_by_importing

PACKAGE = Path(gateway.schema.__file__).parent


def test_no_module_uses_io_clock_threads_or_random() -> None:
    assert len(list(PACKAGE.rglob("*.py"))) >= 5
    assert impure_modules(PACKAGE) == {}


def test_importing_the_package_loads_no_forbidden_module() -> None:
    assert loaded_by_importing("gateway.schema", ()) == []
