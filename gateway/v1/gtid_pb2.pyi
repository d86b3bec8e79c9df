from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Gtid(_message.Message):
    __slots__ = ("server_id", "trans_id")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TRANS_ID_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    trans_id: int
    def __init__(self, server_id: _Optional[int] = ..., trans_id: _Optional[int] = ...) -> None: ...
