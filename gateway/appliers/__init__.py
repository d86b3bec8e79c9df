"""The dispatcher and the built-in appliers: how committed transactions leave Gateway.

Modules: ``contract`` (the applier interface and its errors), ``source`` (committed entries),
``position`` (durable positions, GTID sets), ``progress`` (the CutHead watermark), ``workers``
(partition threads, retries), ``deadletter`` (the dead-letter log), ``metrics``,
``dispatcher`` (the loop tying them together) and ``sqlite`` (the embedded default applier).
See docs/appliers.md and, for plugin authors, docs/plugins.md.

Exceptions::

    ApplyError                      an applier could not apply a batch
    ├── TransientApplyError         worth retrying
    └── UnsupportedOperationError   never applicable by this applier
    ApplierConfigError (ValueError) bad applier options
    DispatcherError                 the dispatcher stopped on a failure
    EntrySourceError                committed entries cannot be read (missing, damaged)
    PositionStoreError              a position file cannot be read or written
    DeadLetterError                 the dead-letter log cannot be read or written
"""

from __future__ import annotations

from gateway.appliers.contract import (
    SCOPE_CLUSTER,
    SCOPE_NODE,
    SCOPES,
    Applier,
    ApplierConfigError,
    ApplierFactory,
    ApplyError,
    Capabilities,
    TransientApplyError,
    UnsupportedOperationError,
    scope_of,
)
from gateway.appliers.deadletter import DeadLetterError, DeadLetterLog
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig, DispatcherError
from gateway.appliers.position import ApplierPosition, GtidSet, PositionStore, PositionStoreError
from gateway.appliers.source import (
    CommittedEntry,
    EntrySource,
    EntrySourceError,
    LogFileSource,
    MemorySource,
)
from gateway.appliers.workers import RetryPolicy

__all__ = [
    "SCOPES",
    "SCOPE_CLUSTER",
    "SCOPE_NODE",
    "Applier",
    "ApplierConfigError",
    "ApplierFactory",
    "ApplierPosition",
    "ApplyError",
    "Capabilities",
    "CommittedEntry",
    "DeadLetterError",
    "DeadLetterLog",
    "Dispatcher",
    "DispatcherConfig",
    "DispatcherError",
    "EntrySource",
    "EntrySourceError",
    "GtidSet",
    "LogFileSource",
    "MemorySource",
    "PositionStore",
    "PositionStoreError",
    "RetryPolicy",
    "TransientApplyError",
    "UnsupportedOperationError",
    "scope_of",
]
