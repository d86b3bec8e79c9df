from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WalEntry(_message.Message):
    __slots__ = ("index", "term", "type", "data")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    index: int
    term: int
    type: int
    data: bytes
    def __init__(self, index: _Optional[int] = ..., term: _Optional[int] = ..., type: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class WalSegmentHeader(_message.Message):
    __slots__ = ("first_index", "format_version")
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    first_index: int
    format_version: int
    def __init__(self, first_index: _Optional[int] = ..., format_version: _Optional[int] = ...) -> None: ...

class WalSegmentIndex(_message.Message):
    __slots__ = ("first_index", "count", "bounds", "term_runs", "last_marker")
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    TERM_RUNS_FIELD_NUMBER: _ClassVar[int]
    LAST_MARKER_FIELD_NUMBER: _ClassVar[int]
    first_index: int
    count: int
    bounds: bytes
    term_runs: bytes
    last_marker: WalHardState
    def __init__(self, first_index: _Optional[int] = ..., count: _Optional[int] = ..., bounds: _Optional[bytes] = ..., term_runs: _Optional[bytes] = ..., last_marker: _Optional[_Union[WalHardState, _Mapping]] = ...) -> None: ...

class WalSegmentFooter(_message.Message):
    __slots__ = ("first_index", "count", "index_offset", "index_end", "index_crc32c", "format_version")
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    INDEX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    INDEX_END_FIELD_NUMBER: _ClassVar[int]
    INDEX_CRC32C_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    first_index: int
    count: int
    index_offset: int
    index_end: int
    index_crc32c: int
    format_version: int
    def __init__(self, first_index: _Optional[int] = ..., count: _Optional[int] = ..., index_offset: _Optional[int] = ..., index_end: _Optional[int] = ..., index_crc32c: _Optional[int] = ..., format_version: _Optional[int] = ...) -> None: ...

class WalLogStart(_message.Message):
    __slots__ = ("first_index", "prev_term")
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    PREV_TERM_FIELD_NUMBER: _ClassVar[int]
    first_index: int
    prev_term: int
    def __init__(self, first_index: _Optional[int] = ..., prev_term: _Optional[int] = ...) -> None: ...

class WalHardState(_message.Message):
    __slots__ = ("term", "vote", "commit", "seq", "log_end")
    TERM_FIELD_NUMBER: _ClassVar[int]
    VOTE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    LOG_END_FIELD_NUMBER: _ClassVar[int]
    term: int
    vote: int
    commit: int
    seq: int
    log_end: int
    def __init__(self, term: _Optional[int] = ..., vote: _Optional[int] = ..., commit: _Optional[int] = ..., seq: _Optional[int] = ..., log_end: _Optional[int] = ...) -> None: ...
