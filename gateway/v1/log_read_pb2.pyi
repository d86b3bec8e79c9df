from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LogLayoutRequest(_message.Message):
    __slots__ = ("all_entries", "index_from", "index_to")
    ALL_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    INDEX_FROM_FIELD_NUMBER: _ClassVar[int]
    INDEX_TO_FIELD_NUMBER: _ClassVar[int]
    all_entries: bool
    index_from: int
    index_to: int
    def __init__(self, all_entries: _Optional[bool] = ..., index_from: _Optional[int] = ..., index_to: _Optional[int] = ...) -> None: ...

class LogSegment(_message.Message):
    __slots__ = ("name", "first_index", "size", "start", "stop", "last_separator")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    LAST_SEPARATOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    first_index: int
    size: int
    start: int
    stop: int
    last_separator: int
    def __init__(self, name: _Optional[str] = ..., first_index: _Optional[int] = ..., size: _Optional[int] = ..., start: _Optional[int] = ..., stop: _Optional[int] = ..., last_separator: _Optional[int] = ...) -> None: ...

class LogLayoutResponse(_message.Message):
    __slots__ = ("log_start", "has_commit", "commit", "segments")
    LOG_START_FIELD_NUMBER: _ClassVar[int]
    HAS_COMMIT_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    log_start: int
    has_commit: bool
    commit: int
    segments: _containers.RepeatedCompositeFieldContainer[LogSegment]
    def __init__(self, log_start: _Optional[int] = ..., has_commit: _Optional[bool] = ..., commit: _Optional[int] = ..., segments: _Optional[_Iterable[_Union[LogSegment, _Mapping]]] = ...) -> None: ...

class LogReadRangeRequest(_message.Message):
    __slots__ = ("segment", "offset", "length")
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    segment: str
    offset: int
    length: int
    def __init__(self, segment: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("offset", "data", "eof")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    offset: int
    data: bytes
    eof: bool
    def __init__(self, offset: _Optional[int] = ..., data: _Optional[bytes] = ..., eof: _Optional[bool] = ...) -> None: ...
