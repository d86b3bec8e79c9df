"""The Ready loop: the driver that moves Ready between Raft, storage, transport and the state
machine (``driver``), the leader's pure bookkeeping (``sequencer``), the write it takes
(``write_proposal``), commit batching (``commit_linger``), epoch sealing (``epoch_seal``),
background snapshots (``snapshot_taker``) and the collector policy (``gc_policy``). Imports
``base``, ``storage`` and ``state``."""
