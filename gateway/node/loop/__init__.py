"""The Ready loop: the driver that moves Ready between Raft, storage, transport and the state
machine (``driver``), the leader's pure bookkeeping (``sequencer``), the write it takes
(``write_proposal``), commit batching (``commit_linger``), epoch sealing (``epoch_seal``),
background snapshots (``snapshot_taker``), the collector policy (``gc_policy``), giving freed
memory back (``malloc_trim``), the small periodic threads those two run (``periodic``) and
the memory report of benchmarks (``memory_report``). Imports
``base``, ``storage`` and ``state``."""
