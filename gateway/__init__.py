"""Gateway: a multi-master replication gateway for heterogeneous stores.

Package layout (see docs/ and ../shared/DESIGN.md):

- ``gateway.core``      formats and storage: stuffed record stream, transport frame, WAL
- ``gateway.raft``      Raft as a pure, deterministic state machine
- ``gateway.appliers``  dispatcher and built-in appliers
- ``gateway.conflict``  epoch-based conflict detection
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
