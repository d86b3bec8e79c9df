"""Raft as a pure, deterministic state machine (no I/O, no clocks, no global randomness)."""
