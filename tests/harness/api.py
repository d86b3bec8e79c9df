"""A small synchronous view of one node's public gRPC API (``gateway.v1.Gateway``) for tests:
key/value puts and reads on one test table, scans, status and admin calls.

The harness talks to the wire API directly rather than through ``gateway.client`` so that every
call is exactly one RPC with a deadline: the workload must know when an operation was invoked
and when (or whether) it completed, and must not have a library retry hide an outcome.

The test table is ``jepsen.kv (k VARCHAR PRIMARY KEY, v VARCHAR)``; a put is a one-row
``InsertStatement`` (an upsert in the node's store; see docs/node.md).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import grpc

from gateway.v1 import gateway_pb2, gateway_pb2_grpc, statement_pb2, value_pb2

SCHEMA = "jepsen"
TABLE = "kv"
TABLE_NAME = f"{SCHEMA}.{TABLE}"

LINEARIZABLE = gateway_pb2.CONSISTENCY_LINEARIZABLE
LEASE = gateway_pb2.CONSISTENCY_LEASE
STALE = gateway_pb2.CONSISTENCY_STALE
CONSISTENCY_NAMES = {LINEARIZABLE: "linearizable", LEASE: "lease", STALE: "stale"}

_KEY_FIELDS = [statement_pb2.FieldMetadata(name="k", type=value_pb2.FIELD_TYPE_VARCHAR)]
# The value columns are the columns other than the key (docs/log-model.md): the key column is
# not repeated among them (the node rejects that, and appliers would dead-letter it).
_FIELDS = [statement_pb2.FieldMetadata(name="v", type=value_pb2.FIELD_TYPE_VARCHAR)]
_TABLE = statement_pb2.TableMetadata(schema_name=SCHEMA, table_name=TABLE)

#: gRPC codes after which a write is known NOT to have been applied (the request was refused
#: before it could reach the log). Every other failure of a write leaves its outcome unknown.
DEFINITE_WRITE_FAILURES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)

#: UNAVAILABLE details the node documents as "not ordered" (gateway/node/base/errors.py): a
#: node that is not the leader and knows none to forward to, and a proposal overwritten by another
#: leader's entry. A write failing with these is recorded as a definite failure, so a node that
#: says so and applies the write anyway is caught by the checker.
NOT_APPLIED_DETAILS = ("not the leader", "no leader elected yet", "was replaced by another leader")


def write_definitely_failed(error: grpc.RpcError) -> bool:
    """True when a failed write is known not to have taken effect."""
    code = error.code()
    if code in DEFINITE_WRITE_FAILURES:
        return True
    details = error.details() or ""
    return code == grpc.StatusCode.UNAVAILABLE and any(d in details for d in NOT_APPLIED_DETAILS)


def put_request(key: str, value: str, idempotency_key: str = "", pad: int = 0) -> (
    gateway_pb2.WriteRequest
):
    """A transaction that upserts row ``key`` with ``value`` (plus ``pad`` filler bytes)."""
    record = statement_pb2.InsertRecord(
        key_values=[value_pb2.Value(string_value=key)],
        after_values=[value_pb2.Value(string_value=value + ("." * pad if pad else ""))],
    )
    stmt = statement_pb2.Statement(
        insert=statement_pb2.InsertStatement(
            table=_TABLE, key_fields=_KEY_FIELDS, fields=_FIELDS, records=[record]
        )
    )
    return gateway_pb2.WriteRequest(statements=[stmt], idempotency_key=idempotency_key)


def row_value(row: gateway_pb2.Row) -> str | None:
    """The ``v`` column of a stored row (None when the row has no such column or it is NULL)."""
    for f, v in zip(row.fields, row.values, strict=False):
        if f.name == "v":
            return v.string_value if v.WhichOneof("kind") == "string_value" else None
    return None


def row_key(row: gateway_pb2.Row) -> str:
    """The ``k`` primary-key value of a stored row."""
    return row.key_values[0].string_value


@dataclass(frozen=True, slots=True)
class StoredRow:
    """What a replica holds for one key: value and the log index of the write that set it."""

    value: str | None
    log_index: int
    trans_id: int
    row_bytes: bytes = b""  # the whole stored row (metadata included), deterministic encoding


class NodeApi:
    """One channel to one node's public API. Not thread-safe to close while in use."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = grpc.insecure_channel(
            address,
            options=[
                ("grpc.enable_retries", 0),
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 500),
            ],
        )
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.channel.close()

    def __enter__(self) -> NodeApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- data

    def put(self, key: str, value: str, *, timeout: float, idempotency_key: str = "") -> (
        gateway_pb2.WriteResult
    ):
        """Upsert ``key = value``; returns the write's result once committed and applied."""
        return self.stub.Write(put_request(key, value, idempotency_key), timeout=timeout)

    def get(self, key: str, consistency: int, *, timeout: float) -> str | None:
        """The value of ``key`` read with ``consistency`` (None when absent)."""
        resp = self.stub.Read(
            gateway_pb2.ReadRequest(
                table=TABLE_NAME,
                key=[value_pb2.Value(string_value=key)],
                consistency=consistency,
            ),
            timeout=timeout,
        )
        return row_value(resp.row) if resp.found else None

    def scan(self, consistency: int = STALE, *, timeout: float = 10.0) -> dict[str, StoredRow]:
        """Every row of the test table on this node, paging with ``limit``."""
        out: dict[str, StoredRow] = {}
        start: list[value_pb2.Value] = []
        while True:
            resp = self.stub.Scan(
                gateway_pb2.ScanRequest(
                    table=TABLE_NAME, start_key=start, limit=1000, consistency=consistency
                ),
                timeout=timeout,
            )
            for row in resp.rows:
                out[row_key(row)] = StoredRow(
                    row_value(row),
                    row.log_index,
                    row.gtid.trans_id,
                    row.SerializeToString(deterministic=True),
                )
            if not resp.more or not resp.rows:
                return out
            # continue just after the last key: the smallest string greater than it
            start = [value_pb2.Value(string_value=row_key(resp.rows[-1]) + "\x00")]

    # ---------------------------------------------------------------- admin

    def status(self, *, timeout: float = 2.0) -> gateway_pb2.StatusResponse:
        return self.stub.Status(gateway_pb2.StatusRequest(), timeout=timeout)

    def add_node(
        self, node_id: int, peer_address: str, api_address: str = "", *, timeout: float = 10.0
    ) -> gateway_pb2.AdminResponse:
        return self.stub.AddNode(
            gateway_pb2.AddNodeRequest(
                node_id=node_id, peer_address=peer_address, api_address=api_address
            ),
            timeout=timeout,
        )

    def remove_node(self, node_id: int, *, timeout: float = 10.0) -> gateway_pb2.AdminResponse:
        return self.stub.RemoveNode(gateway_pb2.RemoveNodeRequest(node_id=node_id), timeout=timeout)

    def snapshot(self, *, timeout: float = 30.0) -> gateway_pb2.AdminResponse:
        return self.stub.Snapshot(gateway_pb2.SnapshotRequest(), timeout=timeout)

    def transfer_leader(self, node_id: int, *, timeout: float = 10.0) -> (
        gateway_pb2.AdminResponse
    ):
        return self.stub.TransferLeader(
            gateway_pb2.TransferLeaderRequest(node_id=node_id), timeout=timeout
        )
