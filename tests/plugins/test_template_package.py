"""Collects the template plugin's own tests into the main run.

The template is a separate distribution (plugins/gateway-plugin-template) that scripts/test.sh
installs with pip exactly as a third-party plugin would be; its tests then prove the whole
third-party path: entry point found, plugin loaded, hooks called, applier used.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = (Path(__file__).resolve().parents[2] / "plugins" / "gateway-plugin-template" / "tests"
         / "test_template_plugin.py")
_spec = importlib.util.spec_from_file_location("gateway_plugin_template_tests", _PATH)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
globals().update({k: v for k, v in vars(_module).items() if k.startswith("test_")})
