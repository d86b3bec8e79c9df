"""Gateway: a multi-master replication gateway for heterogeneous stores.

Package layout (see docs/ and ../shared/DESIGN.md):

- ``gateway.core``      formats and storage: stuffed record stream, transport frame, WAL
- ``gateway.raft``      Raft as a pure, deterministic state machine
- ``gateway.appliers``  dispatcher and built-in appliers
- ``gateway.conflict``  epoch-based conflict detection
- ``gateway.hookspecs`` / ``gateway.plugins``  pluggy hooks (``hookimpl`` is re-exported here so
  plugins write ``from gateway import hookimpl``) and the plugin manager
"""

from __future__ import annotations

from gateway.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]
