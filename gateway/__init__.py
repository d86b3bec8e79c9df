"""Gateway: a multi-master replication gateway for heterogeneous stores.

This module is the **public API for plugin authors**: every name in ``__all__`` is stable
(changed only with a deprecation period and a note in docs/plugins.md); everything else under
``gateway.*`` is internal and may change in any release. docs/plugins.md documents each name.
Names are loaded on first use (PEP 562), so ``import gateway`` stays cheap.

What a plugin needs:

- ``hookimpl``: the marker for hook implementations (``gateway.hookspecs`` has the specs);
- the row-operation model an applier receives: ``RowOp`` (one operation on one row),
  ``OpKind``, ``Column``, ``TableRef``, ``Gtid``, ``SqlText``, ``Variable``, the column types
  ``FieldType``, ``python_value`` (a protobuf ``Value`` as a Python value) and the wire form of
  an operation ``RowOperation`` with ``op_to_proto`` / ``op_from_proto``; ``APPLY_STATUS_TABLE``
  names the table of apply-status rows;
- the applier contract: ``Applier`` (base class), ``ApplierFactory``, ``Capabilities``,
  the scopes ``SCOPE_NODE`` / ``SCOPE_CLUSTER`` / ``SCOPES``, ``is_transient``; for bulk
  appliers ``ColumnOps`` (a column-wise batch) and the embedded default ``SqliteApplier``;
- an applier's own bookkeeping when it runs outside the node (the Spark bulk applier):
  ``ApplierPosition``, ``GtidSet``, ``PositionStore`` (``PositionStoreError``) and
  ``DeadLetterLog``;
- the transport frame (``length | tag | message | CRC``) for byte streams and queues:
  ``encode_frame``, ``decode_frame`` and the message tags ``TypeTag``;
- conflict functions (``gateway_register_conflict_functions``): a ``ConflictFunction``
  takes the replicated ``Change``, the ``Stored`` row and the ``Context`` (this cluster, its
  ``Role``) and returns a ``Verdict`` (``APPLY``, or a rejection with a ``Cause``; ``OpType``
  names operations); ``FunctionSpec`` registers one with a column, epoch-based or
  transactional.

Exceptions a plugin raises or catches::

    Exception
    ├── ApplyError                     apply() failed for a batch (permanent unless below)
    │   ├── TransientApplyError        worth retrying: the dispatcher backs off and retries
    │   │   └── StoreUnavailableError  the store cannot be reached: retried until it returns,
    │   │       │                      never dead-lettered (ConnectionError is taken alike)
    │   │       └── OutOfSpaceError    the store's disk is full (OSError ENOSPC/EDQUOT and
    │   │                              SQLite's SQLITE_FULL are taken alike)
    │   └── UnsupportedOperationError  this applier can never apply the operation: it is
    │                                  dead-lettered at once (also SQL without accepts_sql)
    ├── PositionStoreError             a position file cannot be read or written (one line
    │                                  naming the file)
    └── ValueError
        ├── ApplierConfigError         an applier factory got bad options (from build());
        │                              the node prints it in one line and does not start
        ├── MalformedTransactionError  a transaction or RowOperation does not follow the
        │                              log model (op_from_proto, the reducer)
        └── FrameError                 decode_frame: the bytes are not a valid frame
            ├── TruncatedFrameError    the buffer ends inside the frame
            ├── LengthOverflowError    the length field is too long or too large
            └── ChecksumMismatchError  the CRC does not match (never returns the message)

``ConnectionError`` and ``TimeoutError`` raised by ``apply()`` count as transient too
(``is_transient``).

Package layout (internal; see docs/ and ../shared/DESIGN.md): ``gateway.core`` formats and
storage, ``gateway.raft`` Raft as a pure state machine, ``gateway.node`` the node,
``gateway.appliers`` the dispatcher and built-in appliers, ``gateway.conflict`` epoch-based
conflict detection, ``gateway.hookspecs`` / ``gateway.plugins`` the hooks and plugin manager.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from gateway.hookspecs import hookimpl

__version__ = "0.1.0"

#: Public name -> ``(module, attribute)`` it is loaded from on first use.
_EXPORTS: dict[str, tuple[str, str]] = {
    # the row-operation model
    "APPLY_STATUS_TABLE": ("gateway.core.rowops", "APPLY_STATUS_TABLE"),
    "CASE_OF_TYPE": ("gateway.core.rowops", "CASE_OF_TYPE"),
    "TYPE_OF_CASE": ("gateway.core.rowops", "TYPE_OF_CASE"),
    "Column": ("gateway.core.rowops", "Column"),
    "ColumnOps": ("gateway.core.rowops", "ColumnOps"),
    "Gtid": ("gateway.core.rowops", "Gtid"),
    "MalformedTransactionError": ("gateway.core.rowops", "MalformedTransactionError"),
    "OpKind": ("gateway.core.rowops", "OpKind"),
    "RowOp": ("gateway.core.rowops", "RowOp"),
    "SqlText": ("gateway.core.rowops", "SqlText"),
    "TableRef": ("gateway.core.rowops", "TableRef"),
    "Variable": ("gateway.core.rowops", "Variable"),
    "op_from_proto": ("gateway.core.rowops", "op_from_proto"),
    "op_to_proto": ("gateway.core.rowops", "op_to_proto"),
    "python_value": ("gateway.core.rowops", "python_value"),
    "FieldType": ("gateway.v1.value_pb2", "FieldType"),
    "RowOperation": ("gateway.v1.applier_pb2", "RowOperation"),
    # the applier contract
    "SCOPES": ("gateway.appliers.contract", "SCOPES"),
    "SCOPE_CLUSTER": ("gateway.appliers.contract", "SCOPE_CLUSTER"),
    "SCOPE_NODE": ("gateway.appliers.contract", "SCOPE_NODE"),
    "Applier": ("gateway.appliers.contract", "Applier"),
    "ApplierConfigError": ("gateway.appliers.contract", "ApplierConfigError"),
    "ApplierFactory": ("gateway.appliers.contract", "ApplierFactory"),
    "ApplyError": ("gateway.appliers.contract", "ApplyError"),
    "Capabilities": ("gateway.appliers.contract", "Capabilities"),
    "TransientApplyError": ("gateway.appliers.contract", "TransientApplyError"),
    "StoreUnavailableError": ("gateway.appliers.contract", "StoreUnavailableError"),
    "OutOfSpaceError": ("gateway.appliers.contract", "OutOfSpaceError"),
    "UnsupportedOperationError": ("gateway.appliers.contract", "UnsupportedOperationError"),
    "is_transient": ("gateway.appliers.contract", "is_transient"),
    # schema events (apply_schema, schema_policy, the gateway_schema_event hook)
    "SCHEMA_APPLY": ("gateway.appliers.contract", "SCHEMA_APPLY"),
    "SCHEMA_IGNORE": ("gateway.appliers.contract", "SCHEMA_IGNORE"),
    "SCHEMA_STOP": ("gateway.appliers.contract", "SCHEMA_STOP"),
    "SchemaStopError": ("gateway.appliers.contract", "SchemaStopError"),
    "SchemaEvent": ("gateway.schema.model", "SchemaEvent"),
    "TableDef": ("gateway.schema.model", "TableDef"),
    "SchemaColumn": ("gateway.schema.model", "Column"),
    "encode_schema_event": ("gateway.schema.codec", "encode_event"),
    "decode_schema_event": ("gateway.schema.codec", "decode_event"),
    # an applier's own bookkeeping: positions and dead letters
    "ApplierPosition": ("gateway.appliers.position", "ApplierPosition"),
    "GtidSet": ("gateway.appliers.position", "GtidSet"),
    "PositionStore": ("gateway.appliers.position", "PositionStore"),
    "PositionStoreError": ("gateway.appliers.position", "PositionStoreError"),
    "DeadLetterLog": ("gateway.appliers.deadletter", "DeadLetterLog"),
    # the embedded default applier
    "SqliteApplier": ("gateway.appliers.sqlite", "SqliteApplier"),
    # the transport frame
    "ChecksumMismatchError": ("gateway.core.frame", "ChecksumMismatchError"),
    "FrameError": ("gateway.core.frame", "FrameError"),
    "LengthOverflowError": ("gateway.core.frame", "LengthOverflowError"),
    "TruncatedFrameError": ("gateway.core.frame", "TruncatedFrameError"),
    "decode_frame": ("gateway.core.frame", "decode_frame"),
    "encode_frame": ("gateway.core.frame", "encode_frame"),
    "TypeTag": ("gateway.core.messages", "TypeTag"),
    # conflict functions (the gateway_register_conflict_functions hook)
    "APPLY": ("gateway.conflict.model", "APPLY"),
    "Cause": ("gateway.conflict.model", "Cause"),
    "Change": ("gateway.conflict.model", "Change"),
    "Context": ("gateway.conflict.model", "Context"),
    "OpType": ("gateway.conflict.model", "OpType"),
    "Role": ("gateway.conflict.model", "Role"),
    "Stored": ("gateway.conflict.model", "Stored"),
    "Verdict": ("gateway.conflict.model", "Verdict"),
    "ConflictFunction": ("gateway.conflict.functions", "ConflictFunction"),
    "FunctionSpec": ("gateway.conflict.functions", "FunctionSpec"),
}

__all__ = [
    "APPLY",
    "APPLY_STATUS_TABLE",
    "CASE_OF_TYPE",
    "SCHEMA_APPLY",
    "SCHEMA_IGNORE",
    "SCHEMA_STOP",
    "SCOPES",
    "SCOPE_CLUSTER",
    "SCOPE_NODE",
    "TYPE_OF_CASE",
    "Applier",
    "ApplierConfigError",
    "ApplierFactory",
    "ApplierPosition",
    "ApplyError",
    "Capabilities",
    "Cause",
    "Change",
    "ChecksumMismatchError",
    "Column",
    "ColumnOps",
    "ConflictFunction",
    "Context",
    "DeadLetterLog",
    "FieldType",
    "FrameError",
    "FunctionSpec",
    "Gtid",
    "GtidSet",
    "LengthOverflowError",
    "MalformedTransactionError",
    "OpKind",
    "OpType",
    "OutOfSpaceError",
    "PositionStore",
    "PositionStoreError",
    "Role",
    "RowOp",
    "RowOperation",
    "SchemaColumn",
    "SchemaEvent",
    "SchemaStopError",
    "SqlText",
    "SqliteApplier",
    "StoreUnavailableError",
    "Stored",
    "TableDef",
    "TableRef",
    "TransientApplyError",
    "TruncatedFrameError",
    "TypeTag",
    "UnsupportedOperationError",
    "Variable",
    "Verdict",
    "__version__",
    "decode_frame",
    "decode_schema_event",
    "encode_frame",
    "encode_schema_event",
    "hookimpl",
    "is_transient",
    "op_from_proto",
    "op_to_proto",
    "python_value",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562) and cache it in the module."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'gateway' has no attribute {name!r}") from None
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # static analysers see the names without loading them at run time
    from gateway.appliers.contract import (
        SCHEMA_APPLY,
        SCHEMA_IGNORE,
        SCHEMA_STOP,
        SCOPE_CLUSTER,
        SCOPE_NODE,
        SCOPES,
        Applier,
        ApplierConfigError,
        ApplierFactory,
        ApplyError,
        Capabilities,
        OutOfSpaceError,
        SchemaStopError,
        StoreUnavailableError,
        TransientApplyError,
        UnsupportedOperationError,
        is_transient,
    )
    from gateway.appliers.deadletter import DeadLetterLog
    from gateway.appliers.position import (
        ApplierPosition,
        GtidSet,
        PositionStore,
        PositionStoreError,
    )
    from gateway.appliers.sqlite import SqliteApplier
    from gateway.conflict.functions import ConflictFunction, FunctionSpec
    from gateway.conflict.model import (
        APPLY,
        Cause,
        Change,
        Context,
        OpType,
        Role,
        Stored,
        Verdict,
    )
    from gateway.core.frame import (
        ChecksumMismatchError,
        FrameError,
        LengthOverflowError,
        TruncatedFrameError,
        decode_frame,
        encode_frame,
    )
    from gateway.core.messages import TypeTag
    from gateway.core.rowops import (
        APPLY_STATUS_TABLE,
        CASE_OF_TYPE,
        TYPE_OF_CASE,
        Column,
        ColumnOps,
        Gtid,
        MalformedTransactionError,
        OpKind,
        RowOp,
        SqlText,
        TableRef,
        Variable,
        op_from_proto,
        op_to_proto,
        python_value,
    )
    from gateway.schema.codec import decode_event as decode_schema_event
    from gateway.schema.codec import encode_event as encode_schema_event
    from gateway.schema.model import Column as SchemaColumn
    from gateway.schema.model import SchemaEvent, TableDef
    from gateway.v1.applier_pb2 import RowOperation
    from gateway.v1.value_pb2 import FieldType
