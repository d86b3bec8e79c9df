"""The node's disk: Raft storage over the WAL (``storage``), its damage reports
(``storage_errors``, ``refused_start``) and the snapshot file format (``snapshot_files``).
Imports only ``base``."""
