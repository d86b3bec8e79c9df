from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RaftEntry(_message.Message):
    __slots__ = ("term", "index", "type", "data")
    TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    term: int
    index: int
    type: int
    data: bytes
    def __init__(self, term: _Optional[int] = ..., index: _Optional[int] = ..., type: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class RaftConfState(_message.Message):
    __slots__ = ("voters", "learners", "voters_outgoing", "learners_next", "auto_leave")
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    VOTERS_OUTGOING_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_NEXT_FIELD_NUMBER: _ClassVar[int]
    AUTO_LEAVE_FIELD_NUMBER: _ClassVar[int]
    voters: _containers.RepeatedScalarFieldContainer[int]
    learners: _containers.RepeatedScalarFieldContainer[int]
    voters_outgoing: _containers.RepeatedScalarFieldContainer[int]
    learners_next: _containers.RepeatedScalarFieldContainer[int]
    auto_leave: bool
    def __init__(self, voters: _Optional[_Iterable[int]] = ..., learners: _Optional[_Iterable[int]] = ..., voters_outgoing: _Optional[_Iterable[int]] = ..., learners_next: _Optional[_Iterable[int]] = ..., auto_leave: _Optional[bool] = ...) -> None: ...

class RaftSnapshotChunk(_message.Message):
    __slots__ = ("conf_state", "index", "term", "offset", "total", "data")
    CONF_STATE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    conf_state: RaftConfState
    index: int
    term: int
    offset: int
    total: int
    data: bytes
    def __init__(self, conf_state: _Optional[_Union[RaftConfState, _Mapping]] = ..., index: _Optional[int] = ..., term: _Optional[int] = ..., offset: _Optional[int] = ..., total: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class RaftMessage(_message.Message):
    __slots__ = ("type", "to", "term", "log_term", "index", "entries", "commit", "chunk", "reject", "reject_hint", "context", "lease")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LOG_TERM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    REJECT_HINT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    type: int
    to: int
    term: int
    log_term: int
    index: int
    entries: _containers.RepeatedCompositeFieldContainer[RaftEntry]
    commit: int
    chunk: RaftSnapshotChunk
    reject: bool
    reject_hint: int
    context: bytes
    lease: int
    def __init__(self, type: _Optional[int] = ..., to: _Optional[int] = ..., term: _Optional[int] = ..., log_term: _Optional[int] = ..., index: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[RaftEntry, _Mapping]]] = ..., commit: _Optional[int] = ..., chunk: _Optional[_Union[RaftSnapshotChunk, _Mapping]] = ..., reject: _Optional[bool] = ..., reject_hint: _Optional[int] = ..., context: _Optional[bytes] = ..., lease: _Optional[int] = ..., **kwargs) -> None: ...

class MessageBatch(_message.Message):
    __slots__ = ("from_api", "messages", "from_peer")
    FROM_FIELD_NUMBER: _ClassVar[int]
    FROM_API_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    FROM_PEER_FIELD_NUMBER: _ClassVar[int]
    from_api: str
    messages: _containers.RepeatedCompositeFieldContainer[RaftMessage]
    from_peer: str
    def __init__(self, from_api: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[RaftMessage, _Mapping]]] = ..., from_peer: _Optional[str] = ..., **kwargs) -> None: ...

class SendAck(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ForwardRequest(_message.Message):
    __slots__ = ("method", "request")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    method: str
    request: bytes
    def __init__(self, method: _Optional[str] = ..., request: _Optional[bytes] = ...) -> None: ...

class ForwardResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: bytes
    def __init__(self, response: _Optional[bytes] = ...) -> None: ...
