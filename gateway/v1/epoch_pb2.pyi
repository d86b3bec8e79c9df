from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class EpochMarker(_message.Message):
    __slots__ = ("server_id", "epoch", "sealed_at_ns", "last_trans_id")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEALED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANS_ID_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    epoch: int
    sealed_at_ns: int
    last_trans_id: int
    def __init__(self, server_id: _Optional[int] = ..., epoch: _Optional[int] = ..., sealed_at_ns: _Optional[int] = ..., last_trans_id: _Optional[int] = ...) -> None: ...

class ApplyStatus(_message.Message):
    __slots__ = ("server_id", "epoch", "applied_by")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    APPLIED_BY_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    epoch: int
    applied_by: int
    def __init__(self, server_id: _Optional[int] = ..., epoch: _Optional[int] = ..., applied_by: _Optional[int] = ...) -> None: ...
