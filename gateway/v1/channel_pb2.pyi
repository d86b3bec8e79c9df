from gateway.v1 import epoch_pb2 as _epoch_pb2
from gateway.v1 import gateway_pb2 as _gateway_pb2
from gateway.v1 import schema_pb2 as _schema_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChannelHello(_message.Message):
    __slots__ = ("protocol_version", "features", "reader_cluster_id", "channel", "after_epoch", "ignore_origins", "acked_epoch", "seed", "holds")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    READER_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    AFTER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IGNORE_ORIGINS_FIELD_NUMBER: _ClassVar[int]
    ACKED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    features: _containers.RepeatedScalarFieldContainer[str]
    reader_cluster_id: int
    channel: str
    after_epoch: _gateway_pb2.EpochPosition
    ignore_origins: _containers.RepeatedScalarFieldContainer[int]
    acked_epoch: int
    seed: SeedRequest
    holds: _containers.RepeatedCompositeFieldContainer[SeedWatermark]
    def __init__(self, protocol_version: _Optional[int] = ..., features: _Optional[_Iterable[str]] = ..., reader_cluster_id: _Optional[int] = ..., channel: _Optional[str] = ..., after_epoch: _Optional[_Union[_gateway_pb2.EpochPosition, _Mapping]] = ..., ignore_origins: _Optional[_Iterable[int]] = ..., acked_epoch: _Optional[int] = ..., seed: _Optional[_Union[SeedRequest, _Mapping]] = ..., holds: _Optional[_Iterable[_Union[SeedWatermark, _Mapping]]] = ...) -> None: ...

class SeedRequest(_message.Message):
    __slots__ = ("seed_id", "after_key")
    SEED_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_KEY_FIELD_NUMBER: _ClassVar[int]
    seed_id: int
    after_key: bytes
    def __init__(self, seed_id: _Optional[int] = ..., after_key: _Optional[bytes] = ...) -> None: ...

class ChannelAck(_message.Message):
    __slots__ = ("acked_epoch", "source_log_index")
    ACKED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    acked_epoch: int
    source_log_index: int
    def __init__(self, acked_epoch: _Optional[int] = ..., source_log_index: _Optional[int] = ...) -> None: ...

class ChannelUp(_message.Message):
    __slots__ = ("hello", "ack")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    hello: ChannelHello
    ack: ChannelAck
    def __init__(self, hello: _Optional[_Union[ChannelHello, _Mapping]] = ..., ack: _Optional[_Union[ChannelAck, _Mapping]] = ...) -> None: ...

class ChannelWelcome(_message.Message):
    __slots__ = ("protocol_version", "features", "source_cluster_id", "retained_first_index", "retained_first_epoch")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIRST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    features: _containers.RepeatedScalarFieldContainer[str]
    source_cluster_id: int
    retained_first_index: int
    retained_first_epoch: int
    def __init__(self, protocol_version: _Optional[int] = ..., features: _Optional[_Iterable[str]] = ..., source_cluster_id: _Optional[int] = ..., retained_first_index: _Optional[int] = ..., retained_first_epoch: _Optional[int] = ...) -> None: ...

class SourceProgress(_message.Message):
    __slots__ = ("epoch", "sealed_at_ns", "log_index", "sent_at_ns")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEALED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_NS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    sealed_at_ns: int
    log_index: int
    sent_at_ns: int
    def __init__(self, epoch: _Optional[int] = ..., sealed_at_ns: _Optional[int] = ..., log_index: _Optional[int] = ..., sent_at_ns: _Optional[int] = ...) -> None: ...

class ChannelDown(_message.Message):
    __slots__ = ("welcome", "event", "progress", "seed_start", "seed_chunk", "seed_end")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SEED_START_FIELD_NUMBER: _ClassVar[int]
    SEED_CHUNK_FIELD_NUMBER: _ClassVar[int]
    SEED_END_FIELD_NUMBER: _ClassVar[int]
    welcome: ChannelWelcome
    event: _gateway_pb2.ChangeEvent
    progress: SourceProgress
    seed_start: SeedStart
    seed_chunk: SeedChunk
    seed_end: SeedEnd
    def __init__(self, welcome: _Optional[_Union[ChannelWelcome, _Mapping]] = ..., event: _Optional[_Union[_gateway_pb2.ChangeEvent, _Mapping]] = ..., progress: _Optional[_Union[SourceProgress, _Mapping]] = ..., seed_start: _Optional[_Union[SeedStart, _Mapping]] = ..., seed_chunk: _Optional[_Union[SeedChunk, _Mapping]] = ..., seed_end: _Optional[_Union[SeedEnd, _Mapping]] = ...) -> None: ...

class SeedStart(_message.Message):
    __slots__ = ("seed_id", "epoch", "source_log_index", "source_id")
    SEED_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SOURCE_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    seed_id: int
    epoch: int
    source_log_index: int
    source_id: int
    def __init__(self, seed_id: _Optional[int] = ..., epoch: _Optional[int] = ..., source_log_index: _Optional[int] = ..., source_id: _Optional[int] = ...) -> None: ...

class SeedRow(_message.Message):
    __slots__ = ("key", "value", "tombstone", "epoch", "author", "commit_ts")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    tombstone: bool
    epoch: int
    author: int
    commit_ts: int
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., tombstone: _Optional[bool] = ..., epoch: _Optional[int] = ..., author: _Optional[int] = ..., commit_ts: _Optional[int] = ...) -> None: ...

class SeedChunk(_message.Message):
    __slots__ = ("seed_id", "rows", "last_key", "chunk_no")
    SEED_ID_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    LAST_KEY_FIELD_NUMBER: _ClassVar[int]
    CHUNK_NO_FIELD_NUMBER: _ClassVar[int]
    seed_id: int
    rows: _containers.RepeatedCompositeFieldContainer[SeedRow]
    last_key: bytes
    chunk_no: int
    def __init__(self, seed_id: _Optional[int] = ..., rows: _Optional[_Iterable[_Union[SeedRow, _Mapping]]] = ..., last_key: _Optional[bytes] = ..., chunk_no: _Optional[int] = ...) -> None: ...

class SeedEnd(_message.Message):
    __slots__ = ("seed_id", "epoch", "apply_status", "watermarks", "chunks", "schema_history")
    SEED_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    APPLY_STATUS_FIELD_NUMBER: _ClassVar[int]
    WATERMARKS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_HISTORY_FIELD_NUMBER: _ClassVar[int]
    seed_id: int
    epoch: int
    apply_status: _containers.RepeatedCompositeFieldContainer[_epoch_pb2.ApplyStatus]
    watermarks: _containers.RepeatedCompositeFieldContainer[SeedWatermark]
    chunks: int
    schema_history: _containers.RepeatedCompositeFieldContainer[_schema_pb2.SchemaEvent]
    def __init__(self, seed_id: _Optional[int] = ..., epoch: _Optional[int] = ..., apply_status: _Optional[_Iterable[_Union[_epoch_pb2.ApplyStatus, _Mapping]]] = ..., watermarks: _Optional[_Iterable[_Union[SeedWatermark, _Mapping]]] = ..., chunks: _Optional[int] = ..., schema_history: _Optional[_Iterable[_Union[_schema_pb2.SchemaEvent, _Mapping]]] = ...) -> None: ...

class SeedWatermark(_message.Message):
    __slots__ = ("origin", "trans_id")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    TRANS_ID_FIELD_NUMBER: _ClassVar[int]
    origin: int
    trans_id: int
    def __init__(self, origin: _Optional[int] = ..., trans_id: _Optional[int] = ...) -> None: ...

class SeedPin(_message.Message):
    __slots__ = ("seed_id", "release", "reader_cluster_id", "channel")
    SEED_ID_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    READER_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    seed_id: int
    release: bool
    reader_cluster_id: int
    channel: str
    def __init__(self, seed_id: _Optional[int] = ..., release: _Optional[bool] = ..., reader_cluster_id: _Optional[int] = ..., channel: _Optional[str] = ...) -> None: ...

class SeedInstall(_message.Message):
    __slots__ = ("channel", "source_id", "local_epoch", "begin", "chunk", "end", "request", "merge", "cancel")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    MERGE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    channel: str
    source_id: int
    local_epoch: int
    begin: SeedStart
    chunk: SeedChunk
    end: SeedEnd
    request: bool
    merge: bool
    cancel: bool
    def __init__(self, channel: _Optional[str] = ..., source_id: _Optional[int] = ..., local_epoch: _Optional[int] = ..., begin: _Optional[_Union[SeedStart, _Mapping]] = ..., chunk: _Optional[_Union[SeedChunk, _Mapping]] = ..., end: _Optional[_Union[SeedEnd, _Mapping]] = ..., request: _Optional[bool] = ..., merge: _Optional[bool] = ..., cancel: _Optional[bool] = ...) -> None: ...
