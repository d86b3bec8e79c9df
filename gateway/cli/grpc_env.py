"""gRPC core settings of a ``gateway`` process, fixed before grpcio loads.

grpcio reads ``GRPC_EXPERIMENTS`` once, when ``grpc`` is first imported, so this module runs
before anything in the ``gateway`` command imports it (``gateway.cli`` imports it first).

What it sets: ``GRPC_EXPERIMENTS=-event_engine_listener``. With grpcio 1.85's default (the
experiment on), a server's accepted connections are served by EventEngine threads: each call
wakes one of them, which hands the call to the ``grpc.aio`` poller thread, which wakes the
event loop -- two thread hand-overs before the node sees a byte. With the experiment off, the
poller thread reads and writes those connections itself. Measured on a 3-node cluster of the
default configuration (docs/benchmarks.md, "gRPC's listener threads"): the leader's CPU per
call 5-12 % lower in most 10 B cells of ``bench_node.py`` side by side (64 clients' rate
1.01-1.05x there, 10-20 % higher in a first probe), one client's p50 a few percent lower.
Client channels (the product's outbound gRPC: channels' ``Subscribe`` streams) keep grpcio's
default.

Contract: nothing is changed when ``GRPC_EXPERIMENTS`` is already set (even empty: a user's
own choice, and the way to keep grpcio's defaults), when ``grpc`` is already imported (too
late to take effect), or when the installed grpcio is not a version this was measured on
(``MEASURED``): an experiment a later grpcio no longer knows is only an error line on every
start, and what it buys must be measured again there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from importlib import metadata

__all__ = ["EXPERIMENTS", "MEASURED", "apply", "experiments_for"]

#: The setting, in ``GRPC_EXPERIMENTS``'s syntax (a leading ``-`` turns an experiment off).
EXPERIMENTS = "-event_engine_listener"

#: The grpcio (major, minor) versions it was measured on.
MEASURED = frozenset({(1, 85)})


def experiments_for(version: str | None) -> str | None:
    """``EXPERIMENTS`` when grpcio ``version`` (``"1.85.3"``; None: not installed) is one of
    ``MEASURED``, else None."""
    if not version:
        return None
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None
    return EXPERIMENTS if (major, minor) in MEASURED else None


def _grpcio_version() -> str | None:
    try:
        return metadata.version("grpcio")
    except metadata.PackageNotFoundError:
        return None


def apply(environ: MutableMapping[str, str] | None = None,
          version: str | None = None, loaded: bool | None = None) -> str | None:
    """Set ``GRPC_EXPERIMENTS`` in ``environ`` (default: this process's) under the module's
    contract; returns the value set, or None when nothing was changed. ``version`` and
    ``loaded`` default to the installed grpcio's version and whether ``grpc`` is imported."""
    env = os.environ if environ is None else environ
    if "GRPC_EXPERIMENTS" in env:
        return None
    if ("grpc" in sys.modules) if loaded is None else loaded:
        return None
    value = experiments_for(_grpcio_version() if version is None else version)
    if value is not None:
        env["GRPC_EXPERIMENTS"] = value
    return value


apply()
