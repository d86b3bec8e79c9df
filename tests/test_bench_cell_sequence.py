"""benchmarks/bench_cell_sequence.py reads its cell list strictly and refuses a bad one before
any cluster starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness.benchmarks import BENCHMARKS, load_benchmark

_SCRIPT = BENCHMARKS / "bench_cell_sequence.py"


def _parse(spec: str):  # type: ignore[no-untyped-def]
    return load_benchmark("bench_cell_sequence").parse_cells(spec)


def test_cells_are_kind_size_seconds_and_an_optional_repeat():
    assert _parse("batch:10B:3,big:1KiB:2.5:4,go-stream:1KiB:1") == [
        ("batch", "10 B", 3.0, 1), ("big", "1 KiB", 2.5, 4), ("go-stream", "1 KiB", 1.0, 1)]


@pytest.mark.parametrize("spec", ["batch:10B", "bulk:10B:3", "batch:1MiB:3", "batch:10B:0",
                                  "batch:10B:nan", "batch:10B:3:0", "batch:10B:3:x",
                                  "batch:10B:3:1:1", "batch:10B:3,,big:1KiB:3"])
def test_a_bad_cell_is_refused_before_anything_starts(spec):
    with pytest.raises(ValueError, match="is not KIND:SIZE:SECONDS"):
        _parse(spec)
    done = subprocess.run([sys.executable, str(_SCRIPT), "--cells", spec],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--cells:" in done.stderr and "Traceback" not in done.stderr
