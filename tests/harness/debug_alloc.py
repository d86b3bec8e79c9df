"""Running a snippet under CPython's debug allocator, for the accelerators' use-after-free
tests: freed memory is overwritten there, so C code that reads an object after Python code it
called has freed it crashes instead of reading stale bytes."""

from __future__ import annotations

import os
import subprocess
import sys


def run_under_debug_allocator(code: str) -> str:
    """Run ``code`` in a child ``python -X dev`` with ``PYTHONMALLOC=debug``; returns what it
    printed. Fails the test, with the child's stderr, when it did not exit with 0 (a crash
    is a negative return code)."""
    got = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONMALLOC": "debug"})
    assert got.returncode == 0, got.stderr[-2000:]
    return got.stdout
