"""``gateway.conflict`` is pure: every node of a cluster judges each replicated epoch itself
and must decide the same, so its modules touch no I/O, clock, thread, event loop or random
state (docs/conflicts.md)."""

from __future__ import annotations

from pathlib import Path

import gateway.conflict
from tests.purity import impure_modules, loaded_by_importing

PACKAGE = Path(gateway.conflict.__file__).parent
ALLOWED_DEPENDENCIES = ("gateway.v1.statement_pb2", "gateway.v1.value_pb2",
                        "gateway.v1.replication_pb2")


def test_no_module_uses_io_clock_threads_or_random() -> None:
    assert len(list(PACKAGE.rglob("*.py"))) >= 4
    assert impure_modules(PACKAGE) == {}


def test_importing_the_package_loads_no_forbidden_module() -> None:
    assert loaded_by_importing("gateway.conflict", ALLOWED_DEPENDENCIES) == []


def test_the_check_sees_a_clock_read_and_a_file_opened(tmp_path: Path) -> None:
    (tmp_path / "judge.py").write_text(
        "from time import monotonic\n\ndef judge(p):\n    return open(p).read(), monotonic()\n")
    assert impure_modules(tmp_path) == {"judge.py": ["line 1: time", "line 4: open"]}
