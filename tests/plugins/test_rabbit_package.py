"""Collects the rabbit plugin's own (server-free) tests into the main run.

The plugin is a separate distribution (plugins/gateway-rabbit) that scripts/test.sh installs
with pip exactly as a third-party plugin would be. Its tests against a real broker live in
tests/integration/test_rabbit_applier.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = (Path(__file__).resolve().parents[2] / "plugins" / "gateway-rabbit" / "tests"
         / "test_rabbit_plugin.py")
_spec = importlib.util.spec_from_file_location("gateway_rabbit_plugin_tests", _PATH)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
globals().update({k: v for k, v in vars(_module).items() if k.startswith("test_")})
