from gateway.v1 import epoch_pb2 as _epoch_pb2
from gateway.v1 import schema_pb2 as _schema_pb2
from gateway.v1 import transaction_pb2 as _transaction_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicatedItem(_message.Message):
    __slots__ = ("transaction", "apply_status", "schema_event")
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    APPLY_STATUS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_EVENT_FIELD_NUMBER: _ClassVar[int]
    transaction: _transaction_pb2.Transaction
    apply_status: _epoch_pb2.ApplyStatus
    schema_event: _schema_pb2.SchemaEvent
    def __init__(self, transaction: _Optional[_Union[_transaction_pb2.Transaction, _Mapping]] = ..., apply_status: _Optional[_Union[_epoch_pb2.ApplyStatus, _Mapping]] = ..., schema_event: _Optional[_Union[_schema_pb2.SchemaEvent, _Mapping]] = ...) -> None: ...

class ReplicatedEpoch(_message.Message):
    __slots__ = ("channel", "source_id", "source_epoch", "local_epoch", "sealed_at_ns", "items", "segment_id", "end_segment", "source_log_index", "derived_trans_id", "derived_commit_ts")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOCAL_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEALED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_ID_FIELD_NUMBER: _ClassVar[int]
    END_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    DERIVED_TRANS_ID_FIELD_NUMBER: _ClassVar[int]
    DERIVED_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    channel: str
    source_id: int
    source_epoch: int
    local_epoch: int
    sealed_at_ns: int
    items: _containers.RepeatedCompositeFieldContainer[ReplicatedItem]
    segment_id: int
    end_segment: bool
    source_log_index: int
    derived_trans_id: int
    derived_commit_ts: int
    def __init__(self, channel: _Optional[str] = ..., source_id: _Optional[int] = ..., source_epoch: _Optional[int] = ..., local_epoch: _Optional[int] = ..., sealed_at_ns: _Optional[int] = ..., items: _Optional[_Iterable[_Union[ReplicatedItem, _Mapping]]] = ..., segment_id: _Optional[int] = ..., end_segment: _Optional[bool] = ..., source_log_index: _Optional[int] = ..., derived_trans_id: _Optional[int] = ..., derived_commit_ts: _Optional[int] = ...) -> None: ...

class ChannelDefinition(_message.Message):
    __slots__ = ("name", "sources", "source_id", "token", "ca_pem", "paused")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    CA_PEM_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    name: str
    sources: _containers.RepeatedScalarFieldContainer[str]
    source_id: int
    token: str
    ca_pem: str
    paused: bool
    def __init__(self, name: _Optional[str] = ..., sources: _Optional[_Iterable[str]] = ..., source_id: _Optional[int] = ..., token: _Optional[str] = ..., ca_pem: _Optional[str] = ..., paused: _Optional[bool] = ...) -> None: ...

class ChannelCommand(_message.Message):
    __slots__ = ("definition", "remove")
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    definition: ChannelDefinition
    remove: bool
    def __init__(self, definition: _Optional[_Union[ChannelDefinition, _Mapping]] = ..., remove: _Optional[bool] = ...) -> None: ...

class ConflictRule(_message.Message):
    __slots__ = ("table", "function", "args")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    table: str
    function: str
    args: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, table: _Optional[str] = ..., function: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ...) -> None: ...

class ConflictCommand(_message.Message):
    __slots__ = ("set", "unset", "role")
    SET_FIELD_NUMBER: _ClassVar[int]
    UNSET_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    set: ConflictRule
    unset: str
    role: str
    def __init__(self, set: _Optional[_Union[ConflictRule, _Mapping]] = ..., unset: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class SpaceAlarm(_message.Message):
    __slots__ = ("node_id", "path", "free_bytes", "min_free_bytes")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MIN_FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    path: str
    free_bytes: int
    min_free_bytes: int
    def __init__(self, node_id: _Optional[int] = ..., path: _Optional[str] = ..., free_bytes: _Optional[int] = ..., min_free_bytes: _Optional[int] = ...) -> None: ...

class AlarmCommand(_message.Message):
    __slots__ = ("alarm", "disarm")
    ALARM_FIELD_NUMBER: _ClassVar[int]
    DISARM_FIELD_NUMBER: _ClassVar[int]
    alarm: SpaceAlarm
    disarm: int
    def __init__(self, alarm: _Optional[_Union[SpaceAlarm, _Mapping]] = ..., disarm: _Optional[int] = ...) -> None: ...

class ChannelSlot(_message.Message):
    __slots__ = ("reader_cluster_id", "channel", "acked_epoch", "log_index", "acked_at_ns", "lost", "lost_reason")
    READER_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ACKED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    ACKED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    LOST_REASON_FIELD_NUMBER: _ClassVar[int]
    reader_cluster_id: int
    channel: str
    acked_epoch: int
    log_index: int
    acked_at_ns: int
    lost: bool
    lost_reason: str
    def __init__(self, reader_cluster_id: _Optional[int] = ..., channel: _Optional[str] = ..., acked_epoch: _Optional[int] = ..., log_index: _Optional[int] = ..., acked_at_ns: _Optional[int] = ..., lost: _Optional[bool] = ..., lost_reason: _Optional[str] = ...) -> None: ...

class SlotCommand(_message.Message):
    __slots__ = ("advance", "lost", "drop", "reset")
    ADVANCE_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    advance: _containers.RepeatedCompositeFieldContainer[ChannelSlot]
    lost: _containers.RepeatedCompositeFieldContainer[ChannelSlot]
    drop: _containers.RepeatedCompositeFieldContainer[ChannelSlot]
    reset: _containers.RepeatedCompositeFieldContainer[ChannelSlot]
    def __init__(self, advance: _Optional[_Iterable[_Union[ChannelSlot, _Mapping]]] = ..., lost: _Optional[_Iterable[_Union[ChannelSlot, _Mapping]]] = ..., drop: _Optional[_Iterable[_Union[ChannelSlot, _Mapping]]] = ..., reset: _Optional[_Iterable[_Union[ChannelSlot, _Mapping]]] = ...) -> None: ...
