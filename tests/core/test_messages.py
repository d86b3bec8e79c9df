"""The type-tag registry: pack/unpack round trips and named decoding failures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core import messages
from gateway.core.messages import (
    EmptyPayloadError,
    MalformedMessageError,
    MessageDecodeError,
    TypeTag,
    UnknownTypeTagError,
)
from gateway.v1 import epoch_pb2, gtid_pb2, statement_pb2, transaction_pb2, value_pb2


def _transaction() -> transaction_pb2.Transaction:
    txn = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=7),
        epoch=3,
        author=1,
        start_timestamp_ns=1_700_000_000_000_000_000,
        commit_timestamp_ns=1_700_000_000_000_000_001,
        segment_id=1,
        end_segment=True,
    )
    insert = txn.statements.add().insert
    insert.table.schema_name = "unittests"
    insert.table.table_name = "test1"
    insert.key_fields.add(name="id", type=value_pb2.FIELD_TYPE_INTEGER)
    insert.fields.add(name="test", type=value_pb2.FIELD_TYPE_VARCHAR)
    record = insert.records.add()
    record.key_values.add(int_value=78)
    record.after_values.add(null_value=value_pb2.NULL_VALUE)
    sql = txn.statements.add().sql
    sql.query = "INSERT INTO whatever VALUES (@nick)"
    sql.variables.add(name="nick", value=value_pb2.Value(string_value="mkindahl"))
    return txn


def test_every_tag_has_a_message_class_and_back() -> None:
    for tag in TypeTag:
        cls = messages.message_class(tag)
        assert messages.tag_of(cls()) is tag


def test_pack_puts_the_tag_byte_first() -> None:
    txn = _transaction()
    packed = messages.pack(txn)
    assert packed[0] == TypeTag.TRANSACTION
    assert packed[1:] == txn.SerializeToString(deterministic=True)


def test_transaction_round_trips() -> None:
    txn = _transaction()
    assert messages.unpack(messages.pack(txn)) == txn


def test_null_value_is_distinct_from_an_unset_value() -> None:
    txn = messages.unpack(messages.pack(_transaction()))
    assert isinstance(txn, transaction_pb2.Transaction)
    value = txn.statements[0].insert.records[0].after_values[0]
    assert value.WhichOneof("kind") == "null_value"
    assert value_pb2.Value().WhichOneof("kind") is None


def test_an_empty_message_packs_to_its_tag_alone() -> None:
    assert messages.pack(epoch_pb2.ApplyStatus()) == bytes([TypeTag.APPLY_STATUS])
    assert messages.unpack(bytes([TypeTag.APPLY_STATUS])) == epoch_pb2.ApplyStatus()


@given(
    server_id=st.integers(0, 2**32 - 1),
    epoch=st.integers(0, 2**64 - 1),
    last=st.integers(0, 2**64 - 1),
    sealed=st.integers(0, 2**64 - 1),
)
def test_epoch_marker_round_trips(server_id: int, epoch: int, last: int, sealed: int) -> None:
    marker = epoch_pb2.EpochMarker(
        server_id=server_id, epoch=epoch, sealed_at_ns=sealed, last_trans_id=last
    )
    assert messages.unpack(messages.pack(marker)) == marker


def test_unpack_of_empty_bytes_names_the_missing_tag() -> None:
    with pytest.raises(EmptyPayloadError, match="no type tag at offset 100"):
        messages.unpack(b"", base_offset=100)


def test_unpack_of_tag_zero_is_an_unknown_tag() -> None:
    with pytest.raises(UnknownTypeTagError, match=r"unknown type tag 0 \(0x00\) at offset 5") as e:
        messages.unpack(b"\x00\x08\x01", base_offset=5)
    assert e.value.tag == 0
    assert e.value.offset == 5


def test_unpack_of_an_unregistered_tag_is_an_unknown_tag() -> None:
    with pytest.raises(UnknownTypeTagError, match="0xfe"):
        messages.unpack(b"\xfe")


def test_unpack_of_a_truncated_body_names_the_body_offset() -> None:
    packed = messages.pack(_transaction())
    with pytest.raises(MalformedMessageError, match=r"gateway\.v1\.Transaction") as e:
        messages.unpack(packed[:-3], base_offset=1000)
    assert e.value.offset == 1001
    assert e.value.tag == TypeTag.TRANSACTION


def test_decode_errors_are_value_errors() -> None:
    assert issubclass(MessageDecodeError, ValueError)


def test_pack_of_an_unregistered_class_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="SqlStatement has no type tag"):
        messages.pack(statement_pb2.SqlStatement())


def test_message_class_of_an_unknown_tag_raises() -> None:
    with pytest.raises(UnknownTypeTagError):
        messages.message_class(200)
