"""Deterministic cluster simulator: virtual clock, simulated network and disks, a replicated
key-value store, fault injection, invariant checks and a linearizability check of the client
history. ``python -m gateway.raft.sim --help``."""

from __future__ import annotations

from .cluster import ALL_FAULTS, SimConfig, SimResult, Simulation, run_seed

__all__ = ["ALL_FAULTS", "SimConfig", "SimResult", "Simulation", "run_seed"]
