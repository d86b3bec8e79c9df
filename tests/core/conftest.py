"""Shared fixtures for the core format tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def reference_vectors() -> dict[str, Any]:
    """Vectors produced by Backtrace's reference C implementation (see the file's "source")."""
    return json.loads((DATA / "reference_vectors.json").read_text())


def spec_bytes(spec: list[list[Any]]) -> bytes:
    """Expand a ``[[hex_unit, repeat], ...]`` input spec from the vectors file."""
    return b"".join(bytes.fromhex(unit) * count for unit, count in spec)
