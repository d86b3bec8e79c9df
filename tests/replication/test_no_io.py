"""``gateway.replication`` is pure: the epoch and channel bookkeeping is values in, decisions
out (the node does the I/O around it), so its modules touch no I/O, clock, thread, event loop
or random state."""

from __future__ import annotations

from pathlib import Path

import gateway.replication
from tests.purity import impure_modules, loaded_by_importing

PACKAGE = Path(gateway.replication.__file__).parent
ALLOWED_DEPENDENCIES = ("gateway.v1.replication_pb2", "gateway.v1.epoch_pb2",
                        "gateway.v1.gtid_pb2", "gateway.v1.transaction_pb2")


def test_no_module_uses_io_clock_threads_or_random() -> None:
    assert len(list(PACKAGE.rglob("*.py"))) >= 4
    assert impure_modules(PACKAGE) == {}


def test_importing_the_package_loads_no_forbidden_module() -> None:
    assert loaded_by_importing("gateway.replication", ALLOWED_DEPENDENCIES) == []


def test_the_check_sees_random_state_and_an_event_loop(tmp_path: Path) -> None:
    (tmp_path / "units.py").write_text(
        "import random\nimport asyncio.tasks\n\ndef pick(xs):\n    return random.choice(xs)\n")
    assert impure_modules(tmp_path) == {"units.py": ["line 1: random", "line 2: asyncio"]}
