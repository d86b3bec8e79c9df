"""Epoch-based conflict detection between replicating clusters (NDB$EPOCH style)."""
