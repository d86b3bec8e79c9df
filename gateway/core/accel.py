"""Loading the optional C accelerators.

Each accelerator (``gateway.core._recordstream``, ``gateway.core._columns``,
``gateway.core.lsm._bloom``, ``gateway.core.lsm._block``, ``gateway.core.lsm._memsort``,
``gateway.node._wire``, ``gateway.node._peer_codec``,
``gateway.node._judge``, ``gateway.node.api._read_wire``, ``gateway.appliers._sqlite_bind``,
``spark_applier._txndecode``) speeds up code whose pure-Python version is the specification
and the fallback (one C file per Python module it mirrors). ``load(name)`` returns the
extension module, or None when it was not built (no compiler at install time) or
``GATEWAY_PURE_PYTHON`` is set (to run and test the Python code alone). Whether a missing
accelerator fails a test run is the tests' business (``GATEWAY_REQUIRE_ACCEL=1``), not the
importer's.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["load"]


def load(name: str) -> ModuleType | None:
    """The C accelerator module ``name`` (dotted), or None; see the module docstring."""
    if os.environ.get("GATEWAY_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
