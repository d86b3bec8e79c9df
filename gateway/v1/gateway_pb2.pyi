from gateway.v1 import epoch_pb2 as _epoch_pb2
from gateway.v1 import gtid_pb2 as _gtid_pb2
from gateway.v1 import replication_pb2 as _replication_pb2
from gateway.v1 import schema_pb2 as _schema_pb2
from gateway.v1 import statement_pb2 as _statement_pb2
from gateway.v1 import transaction_pb2 as _transaction_pb2
from gateway.v1 import value_pb2 as _value_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Consistency(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSISTENCY_LINEARIZABLE: _ClassVar[Consistency]
    CONSISTENCY_LEASE: _ClassVar[Consistency]
    CONSISTENCY_STALE: _ClassVar[Consistency]
CONSISTENCY_LINEARIZABLE: Consistency
CONSISTENCY_LEASE: Consistency
CONSISTENCY_STALE: Consistency

class WriteRequest(_message.Message):
    __slots__ = ("statements", "idempotency_key", "conditions")
    STATEMENTS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    statements: _containers.RepeatedCompositeFieldContainer[_statement_pb2.Statement]
    idempotency_key: str
    conditions: _containers.RepeatedCompositeFieldContainer[_transaction_pb2.Condition]
    def __init__(self, statements: _Optional[_Iterable[_Union[_statement_pb2.Statement, _Mapping]]] = ..., idempotency_key: _Optional[str] = ..., conditions: _Optional[_Iterable[_Union[_transaction_pb2.Condition, _Mapping]]] = ...) -> None: ...

class WriteResult(_message.Message):
    __slots__ = ("gtid", "epoch", "commit_timestamp_ns", "log_index", "duplicate")
    GTID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    gtid: _gtid_pb2.Gtid
    epoch: int
    commit_timestamp_ns: int
    log_index: int
    duplicate: bool
    def __init__(self, gtid: _Optional[_Union[_gtid_pb2.Gtid, _Mapping]] = ..., epoch: _Optional[int] = ..., commit_timestamp_ns: _Optional[int] = ..., log_index: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class WriteBatchRequest(_message.Message):
    __slots__ = ("writes",)
    WRITES_FIELD_NUMBER: _ClassVar[int]
    writes: _containers.RepeatedCompositeFieldContainer[WriteRequest]
    def __init__(self, writes: _Optional[_Iterable[_Union[WriteRequest, _Mapping]]] = ...) -> None: ...

class WriteBatchResponse(_message.Message):
    __slots__ = ("results", "errors")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[WriteResult]
    errors: _containers.RepeatedCompositeFieldContainer[WriteError]
    def __init__(self, results: _Optional[_Iterable[_Union[WriteResult, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[WriteError, _Mapping]]] = ...) -> None: ...

class WriteError(_message.Message):
    __slots__ = ("index", "code", "error", "field")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    index: int
    code: int
    error: str
    field: str
    def __init__(self, index: _Optional[int] = ..., code: _Optional[int] = ..., error: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class StreamWriteRequest(_message.Message):
    __slots__ = ("seq", "writes")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    WRITES_FIELD_NUMBER: _ClassVar[int]
    seq: int
    writes: _containers.RepeatedCompositeFieldContainer[WriteRequest]
    def __init__(self, seq: _Optional[int] = ..., writes: _Optional[_Iterable[_Union[WriteRequest, _Mapping]]] = ...) -> None: ...

class StreamWriteAck(_message.Message):
    __slots__ = ("seq", "result", "code", "error", "field")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    seq: int
    result: WriteResult
    code: int
    error: str
    field: str
    def __init__(self, seq: _Optional[int] = ..., result: _Optional[_Union[WriteResult, _Mapping]] = ..., code: _Optional[int] = ..., error: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class StreamWriteResponse(_message.Message):
    __slots__ = ("acks",)
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[StreamWriteAck]
    def __init__(self, acks: _Optional[_Iterable[_Union[StreamWriteAck, _Mapping]]] = ...) -> None: ...

class Row(_message.Message):
    __slots__ = ("table", "key_fields", "key_values", "fields", "values", "epoch", "author", "gtid", "commit_timestamp_ns", "log_index")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    GTID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    table: _statement_pb2.TableMetadata
    key_fields: _containers.RepeatedCompositeFieldContainer[_statement_pb2.FieldMetadata]
    key_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    fields: _containers.RepeatedCompositeFieldContainer[_statement_pb2.FieldMetadata]
    values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    epoch: int
    author: int
    gtid: _gtid_pb2.Gtid
    commit_timestamp_ns: int
    log_index: int
    def __init__(self, table: _Optional[_Union[_statement_pb2.TableMetadata, _Mapping]] = ..., key_fields: _Optional[_Iterable[_Union[_statement_pb2.FieldMetadata, _Mapping]]] = ..., key_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., fields: _Optional[_Iterable[_Union[_statement_pb2.FieldMetadata, _Mapping]]] = ..., values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., epoch: _Optional[int] = ..., author: _Optional[int] = ..., gtid: _Optional[_Union[_gtid_pb2.Gtid, _Mapping]] = ..., commit_timestamp_ns: _Optional[int] = ..., log_index: _Optional[int] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("table", "key", "consistency")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    table: str
    key: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    consistency: Consistency
    def __init__(self, table: _Optional[str] = ..., key: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., consistency: _Optional[_Union[Consistency, str]] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("found", "row", "applied_index")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    found: bool
    row: Row
    applied_index: int
    def __init__(self, found: _Optional[bool] = ..., row: _Optional[_Union[Row, _Mapping]] = ..., applied_index: _Optional[int] = ...) -> None: ...

class ScanRequest(_message.Message):
    __slots__ = ("table", "start_key", "end_key", "limit", "consistency", "shared_shape", "start_after")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    START_KEY_FIELD_NUMBER: _ClassVar[int]
    END_KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    SHARED_SHAPE_FIELD_NUMBER: _ClassVar[int]
    START_AFTER_FIELD_NUMBER: _ClassVar[int]
    table: str
    start_key: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    end_key: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    limit: int
    consistency: Consistency
    shared_shape: bool
    start_after: bool
    def __init__(self, table: _Optional[str] = ..., start_key: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., end_key: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., limit: _Optional[int] = ..., consistency: _Optional[_Union[Consistency, str]] = ..., shared_shape: _Optional[bool] = ..., start_after: _Optional[bool] = ...) -> None: ...

class RowShape(_message.Message):
    __slots__ = ("table", "key_fields", "fields")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    table: _statement_pb2.TableMetadata
    key_fields: _containers.RepeatedCompositeFieldContainer[_statement_pb2.FieldMetadata]
    fields: _containers.RepeatedCompositeFieldContainer[_statement_pb2.FieldMetadata]
    def __init__(self, table: _Optional[_Union[_statement_pb2.TableMetadata, _Mapping]] = ..., key_fields: _Optional[_Iterable[_Union[_statement_pb2.FieldMetadata, _Mapping]]] = ..., fields: _Optional[_Iterable[_Union[_statement_pb2.FieldMetadata, _Mapping]]] = ...) -> None: ...

class ScanResponse(_message.Message):
    __slots__ = ("rows", "more", "applied_index", "shape")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[Row]
    more: bool
    applied_index: int
    shape: RowShape
    def __init__(self, rows: _Optional[_Iterable[_Union[Row, _Mapping]]] = ..., more: _Optional[bool] = ..., applied_index: _Optional[int] = ..., shape: _Optional[_Union[RowShape, _Mapping]] = ...) -> None: ...

class EpochPosition(_message.Message):
    __slots__ = ("server_id", "epoch")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    epoch: int
    def __init__(self, server_id: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("from_log_index", "after_gtid", "after_epoch", "ignore_origins", "log_records")
    FROM_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    AFTER_GTID_FIELD_NUMBER: _ClassVar[int]
    AFTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IGNORE_ORIGINS_FIELD_NUMBER: _ClassVar[int]
    LOG_RECORDS_FIELD_NUMBER: _ClassVar[int]
    from_log_index: int
    after_gtid: _gtid_pb2.Gtid
    after_epoch: EpochPosition
    ignore_origins: _containers.RepeatedScalarFieldContainer[int]
    log_records: bool
    def __init__(self, from_log_index: _Optional[int] = ..., after_gtid: _Optional[_Union[_gtid_pb2.Gtid, _Mapping]] = ..., after_epoch: _Optional[_Union[EpochPosition, _Mapping]] = ..., ignore_origins: _Optional[_Iterable[int]] = ..., log_records: _Optional[bool] = ...) -> None: ...

class ChangeEvent(_message.Message):
    __slots__ = ("log_index", "transaction", "epoch_marker", "apply_status", "epoch", "entry_end", "sealed_at_ns", "schema_event")
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_MARKER_FIELD_NUMBER: _ClassVar[int]
    APPLY_STATUS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENTRY_END_FIELD_NUMBER: _ClassVar[int]
    SEALED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_EVENT_FIELD_NUMBER: _ClassVar[int]
    log_index: int
    transaction: _transaction_pb2.Transaction
    epoch_marker: _epoch_pb2.EpochMarker
    apply_status: _epoch_pb2.ApplyStatus
    epoch: int
    entry_end: bool
    sealed_at_ns: int
    schema_event: _schema_pb2.SchemaEvent
    def __init__(self, log_index: _Optional[int] = ..., transaction: _Optional[_Union[_transaction_pb2.Transaction, _Mapping]] = ..., epoch_marker: _Optional[_Union[_epoch_pb2.EpochMarker, _Mapping]] = ..., apply_status: _Optional[_Union[_epoch_pb2.ApplyStatus, _Mapping]] = ..., epoch: _Optional[int] = ..., entry_end: _Optional[bool] = ..., sealed_at_ns: _Optional[int] = ..., schema_event: _Optional[_Union[_schema_pb2.SchemaEvent, _Mapping]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Member(_message.Message):
    __slots__ = ("node_id", "peer_address", "api_address", "role", "match_index")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    API_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    peer_address: str
    api_address: str
    role: str
    match_index: int
    def __init__(self, node_id: _Optional[int] = ..., peer_address: _Optional[str] = ..., api_address: _Optional[str] = ..., role: _Optional[str] = ..., match_index: _Optional[int] = ...) -> None: ...

class ApplierStatus(_message.Message):
    __slots__ = ("name", "position", "lag_entries", "lag_seconds", "dead_letters", "scope", "running", "replicated_position", "error", "backfill_state", "backfill_index", "backfill_rows", "backfill_resumes", "backfill_last_key", "schema")
    NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    LAG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_POSITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_STATE_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_INDEX_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_ROWS_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_RESUMES_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_LAST_KEY_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    name: str
    position: int
    lag_entries: int
    lag_seconds: float
    dead_letters: int
    scope: str
    running: bool
    replicated_position: int
    error: str
    backfill_state: str
    backfill_index: int
    backfill_rows: int
    backfill_resumes: int
    backfill_last_key: str
    schema: _containers.RepeatedCompositeFieldContainer[_schema_pb2.TableVersion]
    def __init__(self, name: _Optional[str] = ..., position: _Optional[int] = ..., lag_entries: _Optional[int] = ..., lag_seconds: _Optional[float] = ..., dead_letters: _Optional[int] = ..., scope: _Optional[str] = ..., running: _Optional[bool] = ..., replicated_position: _Optional[int] = ..., error: _Optional[str] = ..., backfill_state: _Optional[str] = ..., backfill_index: _Optional[int] = ..., backfill_rows: _Optional[int] = ..., backfill_resumes: _Optional[int] = ..., backfill_last_key: _Optional[str] = ..., schema: _Optional[_Iterable[_Union[_schema_pb2.TableVersion, _Mapping]]] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("node_id", "cluster_id", "role", "term", "leader_id", "leader_api", "commit_index", "applied_index", "last_index", "first_index", "members", "appliers", "last_trans_id", "epoch", "channels", "peers", "conflict_rules", "conflict_role", "alarms", "slots", "retention", "sealed_epoch", "sealed_at_ns", "tables")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_API_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    APPLIERS_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANS_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_RULES_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_ROLE_FIELD_NUMBER: _ClassVar[int]
    ALARMS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    SEALED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEALED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    cluster_id: int
    role: str
    term: int
    leader_id: int
    leader_api: str
    commit_index: int
    applied_index: int
    last_index: int
    first_index: int
    members: _containers.RepeatedCompositeFieldContainer[Member]
    appliers: _containers.RepeatedCompositeFieldContainer[ApplierStatus]
    last_trans_id: int
    epoch: int
    channels: _containers.RepeatedCompositeFieldContainer[ChannelStatus]
    peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    conflict_rules: _containers.RepeatedCompositeFieldContainer[_replication_pb2.ConflictRule]
    conflict_role: str
    alarms: _containers.RepeatedCompositeFieldContainer[_replication_pb2.SpaceAlarm]
    slots: _containers.RepeatedCompositeFieldContainer[SlotStatus]
    retention: LogRetention
    sealed_epoch: int
    sealed_at_ns: int
    tables: _containers.RepeatedCompositeFieldContainer[_schema_pb2.TableVersion]
    def __init__(self, node_id: _Optional[int] = ..., cluster_id: _Optional[int] = ..., role: _Optional[str] = ..., term: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_api: _Optional[str] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., last_index: _Optional[int] = ..., first_index: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., appliers: _Optional[_Iterable[_Union[ApplierStatus, _Mapping]]] = ..., last_trans_id: _Optional[int] = ..., epoch: _Optional[int] = ..., channels: _Optional[_Iterable[_Union[ChannelStatus, _Mapping]]] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ..., conflict_rules: _Optional[_Iterable[_Union[_replication_pb2.ConflictRule, _Mapping]]] = ..., conflict_role: _Optional[str] = ..., alarms: _Optional[_Iterable[_Union[_replication_pb2.SpaceAlarm, _Mapping]]] = ..., slots: _Optional[_Iterable[_Union[SlotStatus, _Mapping]]] = ..., retention: _Optional[_Union[LogRetention, _Mapping]] = ..., sealed_epoch: _Optional[int] = ..., sealed_at_ns: _Optional[int] = ..., tables: _Optional[_Iterable[_Union[_schema_pb2.TableVersion, _Mapping]]] = ...) -> None: ...

class SlotStatus(_message.Message):
    __slots__ = ("slot", "held_entries", "held_bytes", "holds_log")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    HELD_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HELD_BYTES_FIELD_NUMBER: _ClassVar[int]
    HOLDS_LOG_FIELD_NUMBER: _ClassVar[int]
    slot: _replication_pb2.ChannelSlot
    held_entries: int
    held_bytes: int
    holds_log: bool
    def __init__(self, slot: _Optional[_Union[_replication_pb2.ChannelSlot, _Mapping]] = ..., held_entries: _Optional[int] = ..., held_bytes: _Optional[int] = ..., holds_log: _Optional[bool] = ...) -> None: ...

class LogRetention(_message.Message):
    __slots__ = ("first_index", "first_epoch", "held_by", "max_entries", "max_bytes", "max_age_s")
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    FIRST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HELD_BY_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_S_FIELD_NUMBER: _ClassVar[int]
    first_index: int
    first_epoch: int
    held_by: str
    max_entries: int
    max_bytes: int
    max_age_s: int
    def __init__(self, first_index: _Optional[int] = ..., first_epoch: _Optional[int] = ..., held_by: _Optional[str] = ..., max_entries: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_age_s: _Optional[int] = ...) -> None: ...

class ChannelStatus(_message.Message):
    __slots__ = ("name", "sources", "source_id", "state", "connected", "applied_epoch", "lag_epochs", "lag_seconds", "last_error", "epochs_applied", "transactions_applied", "paused", "conflicts", "seed", "source_epoch", "source_sealed_at_ns", "last_heard_ns", "replicated_time_ns", "since_last_heard", "leader_id")
    class ConflictsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    APPLIED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAG_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_APPLIED_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONS_APPLIED_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SEALED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARD_NS_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    SINCE_LAST_HEARD_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    sources: _containers.RepeatedScalarFieldContainer[str]
    source_id: int
    state: str
    connected: str
    applied_epoch: int
    lag_epochs: int
    lag_seconds: float
    last_error: str
    epochs_applied: int
    transactions_applied: int
    paused: bool
    conflicts: _containers.ScalarMap[str, int]
    seed: str
    source_epoch: int
    source_sealed_at_ns: int
    last_heard_ns: int
    replicated_time_ns: int
    since_last_heard: bool
    leader_id: int
    def __init__(self, name: _Optional[str] = ..., sources: _Optional[_Iterable[str]] = ..., source_id: _Optional[int] = ..., state: _Optional[str] = ..., connected: _Optional[str] = ..., applied_epoch: _Optional[int] = ..., lag_epochs: _Optional[int] = ..., lag_seconds: _Optional[float] = ..., last_error: _Optional[str] = ..., epochs_applied: _Optional[int] = ..., transactions_applied: _Optional[int] = ..., paused: _Optional[bool] = ..., conflicts: _Optional[_Mapping[str, int]] = ..., seed: _Optional[str] = ..., source_epoch: _Optional[int] = ..., source_sealed_at_ns: _Optional[int] = ..., last_heard_ns: _Optional[int] = ..., replicated_time_ns: _Optional[int] = ..., since_last_heard: _Optional[bool] = ..., leader_id: _Optional[int] = ...) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("cluster_id", "max_replicated_epoch", "held_epoch")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLICATED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HELD_EPOCH_FIELD_NUMBER: _ClassVar[int]
    cluster_id: int
    max_replicated_epoch: int
    held_epoch: int
    def __init__(self, cluster_id: _Optional[int] = ..., max_replicated_epoch: _Optional[int] = ..., held_epoch: _Optional[int] = ...) -> None: ...

class AddChannelRequest(_message.Message):
    __slots__ = ("definition", "replace", "seed", "merge")
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MERGE_FIELD_NUMBER: _ClassVar[int]
    definition: _replication_pb2.ChannelDefinition
    replace: bool
    seed: bool
    merge: bool
    def __init__(self, definition: _Optional[_Union[_replication_pb2.ChannelDefinition, _Mapping]] = ..., replace: _Optional[bool] = ..., seed: _Optional[bool] = ..., merge: _Optional[bool] = ...) -> None: ...

class ChannelActionRequest(_message.Message):
    __slots__ = ("name", "action", "confirm")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_FIELD_NUMBER: _ClassVar[int]
    name: str
    action: str
    confirm: bool
    def __init__(self, name: _Optional[str] = ..., action: _Optional[str] = ..., confirm: _Optional[bool] = ...) -> None: ...

class ConflictsRequest(_message.Message):
    __slots__ = ("set", "unset", "role")
    SET_FIELD_NUMBER: _ClassVar[int]
    UNSET_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    set: _replication_pb2.ConflictRule
    unset: str
    role: str
    def __init__(self, set: _Optional[_Union[_replication_pb2.ConflictRule, _Mapping]] = ..., unset: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class AlarmRequest(_message.Message):
    __slots__ = ("disarm", "disarm_all")
    DISARM_FIELD_NUMBER: _ClassVar[int]
    DISARM_ALL_FIELD_NUMBER: _ClassVar[int]
    disarm: int
    disarm_all: bool
    def __init__(self, disarm: _Optional[int] = ..., disarm_all: _Optional[bool] = ...) -> None: ...

class AddNodeRequest(_message.Message):
    __slots__ = ("node_id", "peer_address", "api_address", "learner")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    API_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LEARNER_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    peer_address: str
    api_address: str
    learner: bool
    def __init__(self, node_id: _Optional[int] = ..., peer_address: _Optional[str] = ..., api_address: _Optional[str] = ..., learner: _Optional[bool] = ...) -> None: ...

class RemoveNodeRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class TransferLeaderRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AdminResponse(_message.Message):
    __slots__ = ("message", "log_index")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    message: str
    log_index: int
    def __init__(self, message: _Optional[str] = ..., log_index: _Optional[int] = ...) -> None: ...

class ConflictsListRequest(_message.Message):
    __slots__ = ("pattern", "limit", "page_token", "counts_only")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    COUNTS_ONLY_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    limit: int
    page_token: str
    counts_only: bool
    def __init__(self, pattern: _Optional[str] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ..., counts_only: _Optional[bool] = ...) -> None: ...

class ConflictCount(_message.Message):
    __slots__ = ("table", "cause", "count")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    table: str
    cause: str
    count: int
    def __init__(self, table: _Optional[str] = ..., cause: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class ConflictRow(_message.Message):
    __slots__ = ("table", "id", "op_type", "cause", "orig_transid", "row", "replayed")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    ORIG_TRANSID_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    table: str
    id: str
    op_type: str
    cause: str
    orig_transid: str
    row: Row
    replayed: str
    def __init__(self, table: _Optional[str] = ..., id: _Optional[str] = ..., op_type: _Optional[str] = ..., cause: _Optional[str] = ..., orig_transid: _Optional[str] = ..., row: _Optional[_Union[Row, _Mapping]] = ..., replayed: _Optional[str] = ...) -> None: ...

class ConflictsListResponse(_message.Message):
    __slots__ = ("counts", "rows", "next_page_token", "applied_index")
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.RepeatedCompositeFieldContainer[ConflictCount]
    rows: _containers.RepeatedCompositeFieldContainer[ConflictRow]
    next_page_token: str
    applied_index: int
    def __init__(self, counts: _Optional[_Iterable[_Union[ConflictCount, _Mapping]]] = ..., rows: _Optional[_Iterable[_Union[ConflictRow, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., applied_index: _Optional[int] = ...) -> None: ...

class ConflictsReplayRequest(_message.Message):
    __slots__ = ("table", "ids", "cause", "dry_run")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    table: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    cause: str
    dry_run: bool
    def __init__(self, table: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ..., cause: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class ConflictReplayOutcome(_message.Message):
    __slots__ = ("table", "id", "outcome", "detail")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    table: str
    id: str
    outcome: str
    detail: str
    def __init__(self, table: _Optional[str] = ..., id: _Optional[str] = ..., outcome: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class ConflictsReplayResponse(_message.Message):
    __slots__ = ("outcomes", "applied", "skipped")
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[ConflictReplayOutcome]
    applied: int
    skipped: int
    def __init__(self, outcomes: _Optional[_Iterable[_Union[ConflictReplayOutcome, _Mapping]]] = ..., applied: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class DeadLettersRequest(_message.Message):
    __slots__ = ("applier", "include_closed", "after_id", "limit")
    APPLIER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CLOSED_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    applier: str
    include_closed: bool
    after_id: int
    limit: int
    def __init__(self, applier: _Optional[str] = ..., include_closed: _Optional[bool] = ..., after_id: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class DeadLetterInfo(_message.Message):
    __slots__ = ("applier", "id", "state", "log_index", "gtid", "kind", "table", "key", "error_type", "error", "attempts", "failed_at_ns", "letter")
    APPLIER_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    GTID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    LETTER_FIELD_NUMBER: _ClassVar[int]
    applier: str
    id: int
    state: str
    log_index: int
    gtid: str
    kind: str
    table: str
    key: str
    error_type: str
    error: str
    attempts: int
    failed_at_ns: int
    letter: bytes
    def __init__(self, applier: _Optional[str] = ..., id: _Optional[int] = ..., state: _Optional[str] = ..., log_index: _Optional[int] = ..., gtid: _Optional[str] = ..., kind: _Optional[str] = ..., table: _Optional[str] = ..., key: _Optional[str] = ..., error_type: _Optional[str] = ..., error: _Optional[str] = ..., attempts: _Optional[int] = ..., failed_at_ns: _Optional[int] = ..., letter: _Optional[bytes] = ...) -> None: ...

class DeadLetterCount(_message.Message):
    __slots__ = ("applier", "open", "total")
    APPLIER_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    applier: str
    open: int
    total: int
    def __init__(self, applier: _Optional[str] = ..., open: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class DeadLettersResponse(_message.Message):
    __slots__ = ("letters", "counts", "next_after_id")
    LETTERS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    letters: _containers.RepeatedCompositeFieldContainer[DeadLetterInfo]
    counts: _containers.RepeatedCompositeFieldContainer[DeadLetterCount]
    next_after_id: int
    def __init__(self, letters: _Optional[_Iterable[_Union[DeadLetterInfo, _Mapping]]] = ..., counts: _Optional[_Iterable[_Union[DeadLetterCount, _Mapping]]] = ..., next_after_id: _Optional[int] = ...) -> None: ...

class DeadLetterActionRequest(_message.Message):
    __slots__ = ("applier", "action", "ids", "all", "note")
    APPLIER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    applier: str
    action: str
    ids: _containers.RepeatedScalarFieldContainer[int]
    all: bool
    note: str
    def __init__(self, applier: _Optional[str] = ..., action: _Optional[str] = ..., ids: _Optional[_Iterable[int]] = ..., all: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class DeadLetterOutcome(_message.Message):
    __slots__ = ("id", "outcome", "detail")
    ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    id: int
    outcome: str
    detail: str
    def __init__(self, id: _Optional[int] = ..., outcome: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class DeadLetterActionResponse(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[DeadLetterOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[DeadLetterOutcome, _Mapping]]] = ...) -> None: ...
