"""``gateway.client``: a Python client for the public Gateway API (synchronous and asyncio).

::

    from gateway.client import GatewayClient, row_insert

    with GatewayClient("127.0.0.1:7070") as c:           # or a list of node addresses
        res = c.write([row_insert("shop.items", {"id": 1}, {"name": "a"})])
        print(res.gtid.trans_id, res.log_index)
        print(c.get("shop.items", 1))                      # {"id": 1, "name": "a"} or None

Retries respect idempotency: every write gets an idempotency key (``uuid4`` unless given;
``idempotency_key=""`` sends none, and a retry may then apply it twice), and the same key is
sent on every attempt, so a retry after a timeout or a failover never applies the write twice.
Retried: UNAVAILABLE (no leader, node down, lost proposal) and DEADLINE_EXCEEDED of an
attempt, with exponential backoff, until the call's overall ``timeout``. On UNAVAILABLE the
client follows the ``gateway-leader-api`` trailing metadata to the leader. Every other code --
INVALID_ARGUMENT (``field`` names the request field, e.g.
``statements[0].insert.table.table_name``, or ``request`` when the message did not parse),
RESOURCE_EXHAUSTED (a request over the node's ``max_request_bytes``), PERMISSION_DENIED,
UNAUTHENTICATED, ... -- is raised at once as :class:`GatewayError` (``code``, ``details``,
``field``). Writes are serialized by the client itself, once (the channel's write methods
take bytes).

Every attempt has a deadline (``attempt_timeout``, default 5 s); every call an overall one
(``timeout``, default 30 s). TLS: pass ``root_certificates`` (PEM bytes); tokens: ``token``.

Many concurrent callers (threads on ``GatewayClient``, tasks on ``AsyncGatewayClient``):
``coalesce_reads=N`` sends the reads waiting at one moment as one ``Reads.ReadBatch`` and
``coalesce_writes=N`` the writes as one ``WriteBatch``, each call keeping its semantics and its
own outcome (:mod:`gateway.client.coalesce`); off by default.

``AsyncGatewayClient`` has every method of ``GatewayClient``, with the same parameters, as
coroutines (``subscribe`` returns :class:`AsyncChangeEvents` and ``scan_all`` is an async
generator, both iterated with ``async for``);
both build requests and read responses through the shared ``_Base`` helpers, so the two faces
cannot drift (as httpx keeps ``Client`` and ``AsyncClient``).

High-rate producers: ``AsyncGatewayClient.stream()`` keeps many writes in flight on one
``StreamWrite`` call (:mod:`gateway.client.stream`; failed writes are not retried there), and
a :class:`~gateway.client.prepared.PreparedInsert` encodes rows of one table and column list
straight to bytes, which every write method takes in place of a statement list.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import Message

from gateway.client.coalesce import (
    AsyncLanes,
    ThreadLanes,
    Waiting,
    check_batch_size,
    settle,
    settle_async,
)
from gateway.client.conditions import Condition, serialize_conditions
from gateway.client.errors import GatewayError, PreconditionFailed, error_of
from gateway.client.prepared import (
    PreparedInsert,
    Statements,
    keyed,
    repeated,
    serialize_statements,
)
from gateway.client.stream import WriteStream
from gateway.client.values import FieldValue
from gateway.v1 import (
    gateway_pb2,
    gateway_pb2_grpc,
    reads_pb2,
    schema_pb2,
    schema_pb2_grpc,
    statement_pb2,
    transaction_pb2,
    value_pb2,
)

__all__ = [
    "AsyncChangeEvents",
    "AsyncGatewayClient",
    "ChangeEvents",
    "Condition",
    "FieldValue",
    "GatewayClient",
    "GatewayError",
    "PreconditionFailed",
    "PreparedInsert",
    "Row",
    "WriteStream",
    "python_row",
    "row_delete",
    "row_insert",
    "row_update",
    "to_value",
]

FT = value_pb2.FieldType
T = TypeVar("T")
L = TypeVar("L", ThreadLanes, AsyncLanes)
Row = dict[str, FieldValue]

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
CONSISTENCY = {"linearizable": gateway_pb2.CONSISTENCY_LINEARIZABLE,
               "lease": gateway_pb2.CONSISTENCY_LEASE, "stale": gateway_pb2.CONSISTENCY_STALE}


# -- values -----------------------------------------------------------------------------------


def to_value(v: object) -> tuple[value_pb2.Value, value_pb2.FieldType]:
    """``(Value, FieldType)`` of a Python value (None -> null, typed VARCHAR). A ``Value``
    message is taken as it is (type UNSPECIFIED: usable as a key value, which the node types
    by the table's key columns)."""
    if isinstance(v, value_pb2.Value):
        return v, FT.FIELD_TYPE_UNSPECIFIED
    if v is None:
        return value_pb2.Value(null_value=value_pb2.NULL_VALUE), FT.FIELD_TYPE_VARCHAR
    if isinstance(v, bool):
        return value_pb2.Value(bool_value=v), FT.FIELD_TYPE_BOOLEAN
    if isinstance(v, int):
        return value_pb2.Value(int_value=v), FT.FIELD_TYPE_INTEGER
    if isinstance(v, float):
        return value_pb2.Value(double_value=v), FT.FIELD_TYPE_DOUBLE
    if isinstance(v, bytes | bytearray):
        return value_pb2.Value(bytes_value=bytes(v)), FT.FIELD_TYPE_BLOB
    if isinstance(v, str):
        return value_pb2.Value(string_value=v), FT.FIELD_TYPE_VARCHAR
    from decimal import Decimal

    if isinstance(v, Decimal):
        return value_pb2.Value(decimal_value=str(v)), FT.FIELD_TYPE_DECIMAL
    raise TypeError(f"unsupported value type {type(v).__name__}")


def from_value(v: value_pb2.Value) -> FieldValue:
    case = v.WhichOneof("kind")
    if case is None or case == "null_value":
        return None
    value: FieldValue = getattr(v, case)
    return value


def _table(name: str) -> statement_pb2.TableMetadata:
    """``schema.table`` split at its first dot, as the node splits it (names cannot hold a
    dot: anything after a second one is refused by the node, naming ``table_name``)."""
    schema, _, table = name.partition(".")
    return statement_pb2.TableMetadata(schema_name=schema, table_name=table)


def _fields(cols: Mapping[str, object]) -> tuple[list[statement_pb2.FieldMetadata],
                                              list[value_pb2.Value]]:
    metas, vals = [], []
    for name, v in cols.items():
        val, ftype = to_value(v)
        metas.append(statement_pb2.FieldMetadata(name=name, type=ftype))
        vals.append(val)
    return metas, vals


def row_insert(table: str, key: Mapping[str, object], values: Mapping[str, object] | None = None
               ) -> statement_pb2.Statement:
    """An INSERT of one row: ``key`` = primary-key columns, ``values`` = the others (types
    inferred from the Python values)."""
    kf, kv = _fields(key)
    f, v = _fields(values or {})
    return statement_pb2.Statement(insert=statement_pb2.InsertStatement(
        table=_table(table), key_fields=kf, fields=f,
        records=[statement_pb2.InsertRecord(key_values=kv, after_values=v)]))


def row_update(table: str, key: Mapping[str, object], values: Mapping[str, object]
               ) -> statement_pb2.Statement:
    """An UPDATE of one row's ``values`` (the row found by ``key``)."""
    kf, kv = _fields(key)
    f, v = _fields(values)
    return statement_pb2.Statement(update=statement_pb2.UpdateStatement(
        table=_table(table), key_fields=kf, set_fields=f,
        records=[statement_pb2.UpdateRecord(key_values=kv, after_values=v)]))


def row_delete(table: str, key: Mapping[str, object]) -> statement_pb2.Statement:
    """A DELETE of one row by ``key``."""
    kf, kv = _fields(key)
    return statement_pb2.Statement(delete=statement_pb2.DeleteStatement(
        table=_table(table), key_fields=kf, records=[statement_pb2.DeleteRecord(key_values=kv)]))


def python_row(row: gateway_pb2.Row) -> Row:
    """A stored row as ``{column: value}`` (key columns first)."""
    out = {f.name: from_value(v) for f, v in zip(row.key_fields, row.key_values, strict=False)}
    out.update((f.name, from_value(v)) for f, v in zip(row.fields, row.values, strict=False))
    return out


def _key_values(key: object) -> list[value_pb2.Value]:
    items = key if isinstance(key, list | tuple) else [key]
    return [to_value(k)[0] for k in items]


class ChangeEvents:
    """The events of one ``Subscribe`` call: iterate for ``ChangeEvent`` messages; a failed
    stream raises :class:`GatewayError` like every other call; ``cancel()`` ends it."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> ChangeEvents:
        return self

    def __next__(self) -> gateway_pb2.ChangeEvent:
        try:
            return next(self._call)
        except grpc.RpcError as exc:
            raise error_of(exc) from None

    def cancel(self) -> None:
        self._call.cancel()


class AsyncChangeEvents:
    """The events of one ``Subscribe`` call of :class:`AsyncGatewayClient`: ``async for`` the
    ``ChangeEvent`` messages; a failed stream raises :class:`GatewayError` like every other
    call; ``cancel()`` ends it."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __aiter__(self) -> AsyncChangeEvents:
        return self

    async def __anext__(self) -> gateway_pb2.ChangeEvent:
        try:
            ev = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            raise error_of(exc) from None
        if not isinstance(ev, gateway_pb2.ChangeEvent):  # grpc.aio.EOF: the stream ended
            raise StopAsyncIteration
        return ev

    def cancel(self) -> None:
        self._call.cancel()


class _Base:
    def __init__(self, targets: str | Sequence[str], *, token: str = "",
                 root_certificates: bytes | None = None, timeout: float = 30.0,
                 attempt_timeout: float = 5.0, max_backoff: float = 1.0,
                 coalesce_reads: int = 0, coalesce_writes: int = 0) -> None:
        self.targets = [targets] if isinstance(targets, str) else list(targets)
        if not self.targets:
            raise ValueError("at least one target HOST:PORT is needed")
        self.coalesce_reads = check_batch_size("coalesce_reads", coalesce_reads)
        self.coalesce_writes = check_batch_size("coalesce_writes", coalesce_writes)
        self._coalescing: dict[bool, Any] = {}  # reads? -> their lanes, made on first use
        self.timeout = timeout
        self.attempt_timeout = attempt_timeout
        self.max_backoff = max_backoff
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._creds = (grpc.ssl_channel_credentials(root_certificates)
                       if root_certificates is not None else None)
        self._current = 0

    def _next_target(self, leader_api: str) -> None:
        if leader_api:
            if leader_api not in self.targets:
                self.targets.append(leader_api)
            self._current = self.targets.index(leader_api)
        else:
            self._current = (self._current + 1) % len(self.targets)

    # -- requests and responses, built and read once for both clients ---------------------

    @staticmethod
    def _read_request(table: str, key: object, consistency: str) -> gateway_pb2.ReadRequest:
        return gateway_pb2.ReadRequest(table=table, key=_key_values(key),
                                       consistency=CONSISTENCY[consistency])

    @staticmethod
    def _found_row(resp: gateway_pb2.ReadResponse) -> Row | None:
        return python_row(resp.row) if resp.found else None

    @staticmethod
    def _read_batch_request(table: str, keys: Iterable[object], consistency: str
                            ) -> reads_pb2.ReadBatchRequest:
        return reads_pb2.ReadBatchRequest(
            table=table, keys=[reads_pb2.ReadKey(key=_key_values(k)) for k in keys],
            consistency=CONSISTENCY[consistency])

    @staticmethod
    def _found_rows(resp: reads_pb2.ReadBatchResponse) -> list[Row | None]:
        return [python_row(r.row) if r.found else None for r in resp.results]

    @staticmethod
    def _scan_request(table: str, start: object, end: object, limit: int, consistency: str,
                      start_after: bool = False) -> gateway_pb2.ScanRequest:
        if start_after and start is None:
            raise ValueError("start_after: give start, the key the scan starts after")
        return gateway_pb2.ScanRequest(
            table=table, start_key=_key_values(start) if start is not None else [],
            end_key=_key_values(end) if end is not None else [], limit=limit,
            consistency=CONSISTENCY[consistency], start_after=start_after)

    @staticmethod
    def _page_rows(req: gateway_pb2.ScanRequest, resp: gateway_pb2.ScanResponse
                   ) -> Sequence[gateway_pb2.Row]:
        """``resp``'s rows that are after ``req``'s start: all of them, but for a node older
        than ``start_after``, which starts the page at the key it was asked to start after."""
        rows = resp.rows
        if req.start_after and rows and rows[0].key_values == req.start_key:
            return rows[1:]
        return rows

    @staticmethod
    def _next_page(req: gateway_pb2.ScanRequest, resp: gateway_pb2.ScanResponse) -> bool:
        """Point ``req`` after ``resp``'s last row; False when ``resp`` was the last page."""
        if not resp.more or not resp.rows:
            return False
        last = list(resp.rows[-1].key_values)
        if req.start_after and list(req.start_key) == last:
            raise GatewayError(grpc.StatusCode.INTERNAL,
                               f"Scan of {req.table}: the node answered a page with no row "
                               f"after the previous page's and said more: it cannot page "
                               f"past that row (a node older than start_after?)")
        del req.start_key[:]
        req.start_key.extend(last)
        req.start_after = True
        return True

    @staticmethod
    def _subscribe_request(from_log_index: int, after_gtid: tuple[int, int] | None,
                           after_epoch: tuple[int, int] | None, ignore_origins: Iterable[int],
                           log_records: bool) -> gateway_pb2.SubscribeRequest:
        req = gateway_pb2.SubscribeRequest(from_log_index=from_log_index,
                                           ignore_origins=list(ignore_origins),
                                           log_records=log_records)
        if after_gtid is not None:
            req.after_gtid.server_id, req.after_gtid.trans_id = after_gtid
        if after_epoch is not None:
            req.after_epoch.server_id, req.after_epoch.epoch = after_epoch
        return req

    @staticmethod
    def _add_channel_request(name: str, sources: Sequence[str], source_id: int, token: str,
                             ca_pem: str, replace: bool, seed: bool = False,
                             merge: bool = False) -> tuple[str, Message]:
        from gateway.v1 import replication_pb2

        d = replication_pb2.ChannelDefinition(name=name, sources=list(sources),
                                              source_id=source_id, token=token, ca_pem=ca_pem)
        return "AddChannel", gateway_pb2.AddChannelRequest(definition=d, replace=replace,
                                                           seed=seed, merge=merge)

    @staticmethod
    def _channel_action_request(name: str, action: str, confirm: bool = False
                                ) -> tuple[str, Message]:
        return "ChannelAction", gateway_pb2.ChannelActionRequest(name=name, action=action,
                                                                 confirm=confirm)

    @staticmethod
    def _conflicts_request(*, table: str = "", function: str = "", unset: str = "",
                           role: str = "") -> tuple[str, Message]:
        """``Conflicts``: set ``table``'s rule to ``function``, ``unset`` a pattern's rule,
        or set the ``role`` (exactly one)."""
        if table:
            from gateway.v1 import replication_pb2

            return "Conflicts", gateway_pb2.ConflictsRequest(
                set=replication_pb2.ConflictRule(table=table, function=function))
        if unset:
            return "Conflicts", gateway_pb2.ConflictsRequest(unset=unset)
        return "Conflicts", gateway_pb2.ConflictsRequest(role=role)

    @staticmethod
    def _alarm_request(node_id: int, all_nodes: bool) -> tuple[str, Message]:
        return "Alarm", gateway_pb2.AlarmRequest(disarm=node_id, disarm_all=all_nodes)

    @staticmethod
    def _add_node_request(node_id: int, peer_address: str, api_address: str, learner: bool
                          ) -> tuple[str, Message]:
        return "AddNode", gateway_pb2.AddNodeRequest(
            node_id=node_id, peer_address=peer_address, api_address=api_address,
            learner=learner)

    @staticmethod
    def _remove_node_request(node_id: int) -> tuple[str, Message]:
        return "RemoveNode", gateway_pb2.RemoveNodeRequest(node_id=node_id)

    @staticmethod
    def _transfer_leader_request(node_id: int) -> tuple[str, Message]:
        return "TransferLeader", gateway_pb2.TransferLeaderRequest(node_id=node_id)

    @staticmethod
    def _snapshot_request() -> tuple[str, Message]:
        return "Snapshot", gateway_pb2.SnapshotRequest()

    @staticmethod
    def _write_bytes(statements: Statements, key: str | None,
                     conditions: Sequence[transaction_pb2.Condition] = ()) -> bytes:
        """The serialized ``WriteRequest`` of one write: ``statements`` a statement list or a
        prepared insert's bytes; ``key`` the idempotency key (``None``: a fresh ``uuid4``;
        ``""``: none); ``conditions``: see :mod:`gateway.client.conditions`."""
        body = keyed(serialize_statements(statements), uuid.uuid4().hex if key is None else key)
        return body + serialize_conditions(conditions) if conditions else body

    @classmethod
    def _batch_bytes(cls, writes: Iterable[Statements], keys: Sequence[str] | None,
                     conditions: Sequence[Sequence[transaction_pb2.Condition]] | None = None
                     ) -> tuple[bytes, list[Sequence[transaction_pb2.Condition]]]:
        """The serialized ``WriteBatchRequest`` of ``writes`` (``keys``: one per write, as
        :meth:`_write_bytes` takes them; ``None``: a fresh one each; ``conditions``: one
        list per write, or None) and each write's conditions."""
        writes = list(writes)
        if keys is not None and len(keys) != len(writes):
            raise ValueError(f"{len(keys)} idempotency keys given for {len(writes)} writes")
        conds: list[Sequence[transaction_pb2.Condition]] = \
            [()] * len(writes) if conditions is None else list(conditions)
        if len(conds) != len(writes):
            raise ValueError(f"{len(conds)} condition lists given for {len(writes)} writes")
        reqs = [cls._write_bytes(w, None if keys is None else keys[i], conds[i])
                for i, w in enumerate(writes)]
        return repeated(b"\x0a", reqs), conds  # WriteBatchRequest.writes

    @staticmethod
    def _batch_results(resp: gateway_pb2.WriteBatchResponse,
                       conds: list[Sequence[transaction_pb2.Condition]]
                       ) -> list[gateway_pb2.WriteResult]:
        """The results of a ``WriteBatch``; raises :class:`PreconditionFailed` (the first
        refused write's, with every result and refusal) when writes were refused."""
        if not resp.errors:
            return list(resp.results)
        results: list[gateway_pb2.WriteResult | None] = list(resp.results)
        errors = []
        for e in resp.errors:
            err = _Base._refusal(e, conds[e.index] if e.index < len(conds) else ())
            err.index = e.index
            if e.index < len(results):
                results[e.index] = None
            errors.append(err)
        for err in errors:
            err.results, err.errors = results, errors
        raise errors[0]

    @staticmethod
    def _refusal(e: gateway_pb2.WriteError, conditions: Sequence[transaction_pb2.Condition]
                 ) -> PreconditionFailed:
        """The :class:`PreconditionFailed` of a write a ``WriteBatch`` refused (``e``), its
        condition resolved from the ``conditions`` that write carried."""
        return PreconditionFailed(e.error, e.field).resolve(conditions)

    def _lanes(self, reads: bool, make: Callable[[int, Any], L], send: Any) -> L:
        """The waiting reads' (or writes') lanes, made on first use by ``make(batch size,
        send)``."""
        lanes = self._coalescing.get(reads)
        if lanes is None:
            lanes = self._coalescing[reads] = make(
                self.coalesce_reads if reads else self.coalesce_writes, send)
        return cast("L", lanes)

    # -- coalesced calls (gateway.client.coalesce): one batch's request and answers ---------

    @staticmethod
    def _coalesced_reads(level: Any, batch: list[Waiting]) -> reads_pb2.ReadBatchRequest:
        """The ``ReadBatchRequest`` of a batch of waiting reads (each ``req`` a
        ``ReadRequest``)."""
        return reads_pb2.ReadBatchRequest(
            consistency=level, keys=[reads_pb2.ReadKey(table=w.req.table, key=w.req.key)
                                     for w in batch])

    @staticmethod
    def _answer_reads(batch: list[Waiting], resp: reads_pb2.ReadBatchResponse) -> None:
        """Answer each waiting read with its key's result, as ``Read`` answers it."""
        if len(resp.results) != len(batch):
            raise GatewayError(grpc.StatusCode.INTERNAL, f"ReadBatch answered "
                               f"{len(resp.results)} results for {len(batch)} keys")
        for w, r in zip(batch, resp.results, strict=True):
            w.answer(gateway_pb2.ReadResponse(found=r.found, row=r.row,
                                              applied_index=resp.applied_index))

    @staticmethod
    def _coalesced_writes(batch: list[Waiting]) -> bytes:
        """The serialized ``WriteBatchRequest`` of a batch of waiting writes (each ``req``
        its ``WriteRequest`` bytes and its conditions)."""
        return repeated(b"\x0a", [w.req[0] for w in batch])

    @staticmethod
    def _answer_writes(batch: list[Waiting], resp: gateway_pb2.WriteBatchResponse) -> None:
        """Answer each waiting write with its result, or with the refusal a lone ``Write``
        raises (:class:`PreconditionFailed`, its condition resolved)."""
        if len(resp.results) != len(batch):
            raise GatewayError(grpc.StatusCode.INTERNAL, f"WriteBatch answered "
                               f"{len(resp.results)} results for {len(batch)} writes")
        refused = {e.index: e for e in resp.errors}
        for i, w in enumerate(batch):
            e = refused.get(i)
            if e is None:
                w.answer(resp.results[i])
            else:
                w.answer(error=_Base._refusal(e, w.req[1]))


class _Bytes:
    """A channel's write methods taking serialized requests (the client encodes them once),
    and ``Reads.ReadBatch`` (a service of its own, on the same channel)."""

    def __init__(self, channel: Any) -> None:
        self.ReadBatch = channel.unary_unary(
            "/gateway.v1.Reads/ReadBatch",
            request_serializer=reads_pb2.ReadBatchRequest.SerializeToString,
            response_deserializer=reads_pb2.ReadBatchResponse.FromString)
        self.Write = channel.unary_unary(
            "/gateway.v1.Gateway/Write", request_serializer=None,
            response_deserializer=gateway_pb2.WriteResult.FromString)
        self.WriteBatch = channel.unary_unary(
            "/gateway.v1.Gateway/WriteBatch", request_serializer=None,
            response_deserializer=gateway_pb2.WriteBatchResponse.FromString)
        self.StreamWrite = channel.stream_stream(
            "/gateway.v1.Gateway/StreamWrite", request_serializer=None,
            response_deserializer=gateway_pb2.StreamWriteResponse.FromString)


class GatewayClient(_Base):
    """Synchronous client; see the module docstring."""

    def __init__(self, targets: str | Sequence[str], **kw: Any) -> None:
        super().__init__(targets, **kw)
        self._channels: dict[str, tuple[grpc.Channel, gateway_pb2_grpc.GatewayStub,
                                        _Bytes]] = {}

    def _stub(self, raw: bool = False) -> Any:
        """The current target's stub (``raw``: its write methods taking bytes)."""
        target = self.targets[self._current]
        if target not in self._channels:
            ch = (grpc.secure_channel(target, self._creds) if self._creds is not None
                  else grpc.insecure_channel(target))
            self._channels[target] = (ch, gateway_pb2_grpc.GatewayStub(ch), _Bytes(ch))
        return self._channels[target][2 if raw else 1]

    def _call(self, fn: Callable[[Any, float], T], timeout: float | None = None,
              raw: bool = False) -> T:
        deadline = time.monotonic() + (timeout or self.timeout)
        backoff = 0.02
        while True:
            left = deadline - time.monotonic()
            try:
                return fn(self._stub(raw), max(0.01, min(self.attempt_timeout, left)))
            except grpc.RpcError as exc:
                err = error_of(exc)
                if err.code not in RETRYABLE or time.monotonic() + backoff >= deadline:
                    raise err from None
                self._next_target(getattr(err, "leader_api", ""))
                time.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, self.max_backoff)

    def write(self, statements: Statements, *,
              idempotency_key: str | None = None, timeout: float | None = None,
              conditions: Sequence[transaction_pb2.Condition] = ()
              ) -> gateway_pb2.WriteResult:
        """Write one transaction; returns its GTID, epoch, commit timestamp and log index.
        ``conditions`` (:class:`Condition`): the write is applied only if they all hold
        when it is applied, else :class:`PreconditionFailed` is raised (nothing applied)."""
        req = self._write_bytes(statements, idempotency_key, conditions)
        if self.coalesce_writes:
            return cast("gateway_pb2.WriteResult", self._lanes(
                False, ThreadLanes, self._send_writes).submit(
                None, (req, conditions), timeout or self.timeout))
        return self._write_one((req, conditions), timeout)

    def _write_one(self, item: tuple[bytes, Sequence[transaction_pb2.Condition]],
                   timeout: float | None = None) -> gateway_pb2.WriteResult:
        """One ``Write`` of ``item`` (its request bytes and conditions), with the retries."""
        req, conditions = item
        try:
            return self._call(lambda s, t: s.Write(req, timeout=t, metadata=self._metadata),
                              timeout, raw=True)
        except PreconditionFailed as exc:
            raise exc.resolve(conditions) from None

    def write_batch(self, writes: Iterable[Statements], *,
                    idempotency_keys: Sequence[str] | None = None,
                    timeout: float | None = None,
                    conditions: Sequence[Sequence[transaction_pb2.Condition]] | None = None
                    ) -> list[gateway_pb2.WriteResult]:
        """Write many transactions in one round trip, each with its own idempotency key
        (``idempotency_keys``: one per write, ``""`` for none; fresh ones by default) and
        conditions (``conditions``: one list per write). A write whose conditions fail is
        refused alone: the others are applied, and :class:`PreconditionFailed` is raised
        with ``index``, ``results`` and ``errors`` saying which."""
        req, conds = self._batch_bytes(writes, idempotency_keys, conditions)
        resp = self._call(lambda s, t: s.WriteBatch(req, timeout=t, metadata=self._metadata),
                          timeout, raw=True)
        return self._batch_results(resp, conds)

    def read(self, table: str, key: object, consistency: str = "linearizable",
             timeout: float | None = None) -> gateway_pb2.ReadResponse:
        """Read one row (``key``: a value or a list of key values)."""
        req = self._read_request(table, key, consistency)
        if self.coalesce_reads:
            return cast("gateway_pb2.ReadResponse", self._lanes(
                True, ThreadLanes, self._send_reads).submit(
                req.consistency, req, timeout or self.timeout))
        return self._read_one(req, timeout)

    def _read_one(self, req: gateway_pb2.ReadRequest, timeout: float | None = None
                  ) -> gateway_pb2.ReadResponse:
        """One ``Read`` of ``req``, with the retries."""
        return self._call(lambda s, t: s.Read(req, timeout=t, metadata=self._metadata), timeout)

    def _send_reads(self, level: Any, batch: list[Waiting]) -> None:
        req = self._coalesced_reads(level, batch)
        try:
            resp = self._call(lambda s, t: s.ReadBatch(req, timeout=t, metadata=self._metadata),
                              None, raw=True)
        except GatewayError as err:
            settle(batch, err, self._read_one)
            return
        self._answer_reads(batch, resp)

    def _send_writes(self, _: Any, batch: list[Waiting]) -> None:
        body = self._coalesced_writes(batch)
        try:
            resp = self._call(lambda s, t: s.WriteBatch(body, timeout=t,
                                                        metadata=self._metadata),
                              None, raw=True)
        except GatewayError as err:
            settle(batch, err, self._write_one)
            return
        self._answer_writes(batch, resp)

    def get(self, table: str, key: object, consistency: str = "linearizable") -> Row | None:
        """The row as a dict, or ``None``."""
        return self._found_row(self.read(table, key, consistency))

    def read_batch(self, table: str, keys: Iterable[object], consistency: str = "linearizable",
                   timeout: float | None = None) -> reads_pb2.ReadBatchResponse:
        """Read the rows of many keys of ``table`` in one call (``Reads.ReadBatch``): one
        result per key in order, all read at one applied index after one read point."""
        req = self._read_batch_request(table, keys, consistency)
        return self._call(lambda s, t: s.ReadBatch(req, timeout=t, metadata=self._metadata),
                          timeout, raw=True)

    def get_many(self, table: str, keys: Iterable[object], consistency: str = "linearizable"
                 ) -> list[Row | None]:
        """:meth:`read_batch`'s rows as dicts (``None`` for a key with no row), in order."""
        return self._found_rows(self.read_batch(table, keys, consistency))

    def scan(self, table: str, start: object = None, end: object = None, limit: int = 0,
             consistency: str = "linearizable", timeout: float | None = None,
             start_after: bool = False) -> gateway_pb2.ScanResponse:
        """One page: the rows of ``table`` with keys in ``[start, end)`` (``(start, end)``
        with ``start_after``; ``None``: unbounded; each a value or a list of key values), at
        most ``limit`` (0: the node's page size, 1,000) and at most what one response carries
        (~4 MiB). ``more`` says the page stopped before the end: continue after its last
        row's key with ``start_after=True``, or read every page with :meth:`scan_all`."""
        req = self._scan_request(table, start, end, limit, consistency, start_after)
        return self._call(lambda s, t: s.Scan(req, timeout=t, metadata=self._metadata),
                          timeout)

    def scan_all(self, table: str, start: object = None, end: object = None, page: int = 0,
                 consistency: str = "linearizable", timeout: float | None = None
                 ) -> Iterator[gateway_pb2.Row]:
        """Every row of ``table`` with keys in ``[start, end)``, in key order, page after page
        (``page`` rows a call at most, 0: the node's page size); each page continues after
        the previous page's last key. Each page is its own read at ``consistency``
        (``timeout`` each): rows written while the scan runs are seen if their keys are
        after the page being read, as with any paged scan."""
        req = self._scan_request(table, start, end, page, consistency)
        while True:
            resp = self._call(lambda s, t: s.Scan(req, timeout=t, metadata=self._metadata),
                              timeout)
            yield from self._page_rows(req, resp)
            if not self._next_page(req, resp):
                return

    def status(self, timeout: float | None = None) -> gateway_pb2.StatusResponse:
        """Status of the node currently targeted (no failover to another node)."""
        try:
            return self._stub().Status(gateway_pb2.StatusRequest(),
                                       timeout=timeout or self.attempt_timeout,
                                       metadata=self._metadata)
        except grpc.RpcError as exc:
            raise error_of(exc) from None

    def subscribe(self, from_log_index: int = 0, after_gtid: tuple[int, int] | None = None,
                  timeout: float | None = None, *,
                  after_epoch: tuple[int, int] | None = None,
                  ignore_origins: Iterable[int] = (), log_records: bool = False
                  ) -> ChangeEvents:
        """Committed transactions -- this cluster's and replicated ones, with their origin
        GTIDs -- from a position: ``from_log_index`` (resume with ``last + 1`` after an event
        with ``entry_end``), ``after_gtid = (server_id, trans_id)`` of any origin, or
        ``after_epoch = (server_id, epoch)``. ``ignore_origins``: leave out transactions of
        these clusters; ``log_records``: also epoch markers and apply-status rows. A failed
        stream raises :class:`GatewayError` (e.g. INVALID_ARGUMENT ``from_log_index`` when
        the log was compacted past it: resync from a snapshot)."""
        req = self._subscribe_request(from_log_index, after_gtid, after_epoch, ignore_origins,
                                      log_records)
        return ChangeEvents(self._stub().Subscribe(req, timeout=timeout,
                                                   metadata=self._metadata))

    def add_channel(self, name: str, sources: Sequence[str], *, source_id: int = 0,
                    token: str = "", ca_pem: str = "", replace: bool = False,
                    seed: bool = False, merge: bool = False,
                    timeout: float = 30.0) -> gateway_pb2.AdminResponse:
        """Make this cluster a replica of the cluster at ``sources`` (docs/replication.md);
        ``seed``: from a snapshot of the source first (``merge``: into a cluster with rows)."""
        return self._admin(*self._add_channel_request(name, sources, source_id, token, ca_pem,
                                                      replace, seed, merge), timeout)

    def channel_action(self, name: str, action: str, timeout: float = 30.0,
                       confirm: bool = False) -> gateway_pb2.AdminResponse:
        """``remove``, ``pause``, ``resume``, ``quarantine`` or ``resync`` channel ``name``
        (``resync`` reports what it would change unless ``confirm``)."""
        return self._admin(*self._channel_action_request(name, action, confirm), timeout)

    def set_conflict_rule(self, table: str, function: str, timeout: float = 30.0
                          ) -> gateway_pb2.AdminResponse:
        """Judge replicated changes of the tables matching ``table`` (``schema.table``, ``*``
        and ``?`` wildcards) with ``function`` (``"NDB$MAX(ts)"``, ``"NDB$EPOCH2"``, ``"LWW"``;
        docs/conflicts.md); replaces the pattern's rule."""
        return self._admin(*self._conflicts_request(table=table, function=function), timeout)

    def unset_conflict_rule(self, table: str, timeout: float = 30.0
                            ) -> gateway_pb2.AdminResponse:
        """Remove the conflict rule of the table pattern ``table``."""
        return self._admin(*self._conflicts_request(unset=table), timeout)

    def set_conflict_role(self, role: str, timeout: float = 30.0) -> gateway_pb2.AdminResponse:
        """Set this cluster's conflict role: PRIMARY, SECONDARY, PASS or NONE."""
        return self._admin(*self._conflicts_request(role=role), timeout)

    def disarm_alarm(self, node_id: int = 0, *, all_nodes: bool = False,
                     timeout: float = 30.0) -> gateway_pb2.AdminResponse:
        """Clear the NOSPACE alarm of ``node_id`` (or every alarm, ``all_nodes``); the
        raised alarms are in ``status().alarms``. Needs the admin permission."""
        return self._admin(*self._alarm_request(node_id, all_nodes), timeout)

    def _admin(self, name: str, req: Message, timeout: float | None) -> gateway_pb2.AdminResponse:
        return self._call(lambda s, t: getattr(s, name)(req, timeout=max(t, timeout or 0),
                                                        metadata=self._metadata), timeout)

    def _here(self, name: str, req: Message, timeout: float | None, stub: Any = None) -> Any:
        """Call ``name`` on the node targeted (no failover: what it answers is its own), on
        ``stub`` (a stub of another service on the same channel) or the Gateway stub."""
        try:
            return getattr(stub or self._stub(), name)(
                req, timeout=timeout or self.attempt_timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise error_of(exc) from None

    def _schema_stub(self) -> schema_pb2_grpc.SchemaStub:
        """A ``Schema`` stub on the current target's channel."""
        self._stub()  # the channel of the current target exists
        return schema_pb2_grpc.SchemaStub(self._channels[self.targets[self._current]][0])

    def change_schema(self, request: schema_pb2.SchemaChangeRequest, *,
                      timeout: float = 60.0) -> schema_pb2.SchemaChangeResponse:
        """Commit one table-definition change (CREATE TABLE, ADD/DROP/RENAME COLUMN, DROP
        TABLE; docs/schema.md) and return the definition after it. Admin.
        INVALID_ARGUMENT for a malformed change, FAILED_PRECONDITION (with the reason) for
        one that cannot be applied everywhere."""
        return self._call(lambda s, t: self._schema_stub().ChangeSchema(
            request, timeout=max(t, timeout), metadata=self._metadata), timeout)

    def show_table(self, table: str, *, timeout: float | None = None
                   ) -> schema_pb2.ShowTableResponse:
        """The definition and version of ``table`` on the node targeted. Read."""
        return self._here("ShowTable", schema_pb2.ShowTableRequest(table=table), timeout,
                          self._schema_stub())

    def schema_history(self, table: str, *, timeout: float | None = None
                       ) -> schema_pb2.SchemaHistoryResponse:
        """The applied schema events of ``table``, oldest first, on the node targeted. Read."""
        return self._here("SchemaHistory", schema_pb2.SchemaHistoryRequest(table=table),
                          timeout, self._schema_stub())

    def conflicts_list(self, pattern: str = "", *, limit: int = 0, page_token: str = "",
                       counts_only: bool = False, timeout: float | None = None
                       ) -> gateway_pb2.ConflictsListResponse:
        """The recorded conflicts of the tables matching ``pattern`` ("" = all): counts per
        table and cause, then a page of exception rows (docs/conflicts.md). Read."""
        return self._here("ConflictsList", gateway_pb2.ConflictsListRequest(
            pattern=pattern, limit=limit, page_token=page_token, counts_only=counts_only),
            timeout)

    def conflicts_replay(self, table: str, ids: Sequence[str] = (), *, cause: str = "",
                         dry_run: bool = False, timeout: float = 60.0
                         ) -> gateway_pb2.ConflictsReplayResponse:
        """Write rejected changes again, each conditional on its row being unchanged since
        the conflict (docs/conflicts.md). Admin."""
        req = gateway_pb2.ConflictsReplayRequest(table=table, ids=list(ids), cause=cause,
                                                 dry_run=dry_run)
        return self._call(lambda s, t: s.ConflictsReplay(
            req, timeout=max(t, timeout), metadata=self._metadata), timeout)

    def dead_letters(self, applier: str = "", *, include_closed: bool = False,
                     after_id: int = 0, limit: int = 0, timeout: float | None = None
                     ) -> gateway_pb2.DeadLettersResponse:
        """This node's dead letters (one applier's page, or every applier's first). Read."""
        return self._here("DeadLetters", gateway_pb2.DeadLettersRequest(
            applier=applier, include_closed=include_closed, after_id=after_id, limit=limit),
            timeout)

    def dead_letter_action(self, applier: str, action: str, ids: Sequence[int] = (), *,
                           every: bool = False, note: str = "", timeout: float = 60.0
                           ) -> gateway_pb2.DeadLetterActionResponse:
        """Replay (through the applier) or discard dead letters of this node. Admin."""
        return self._here("DeadLetterAction", gateway_pb2.DeadLetterActionRequest(
            applier=applier, action=action, ids=list(ids), all=every, note=note), timeout)

    def add_node(self, node_id: int, peer_address: str, api_address: str = "", *,
                 learner: bool = False, timeout: float = 60.0) -> gateway_pb2.AdminResponse:
        """Add node ``node_id`` (a voter, or a ``learner``) to this cluster."""
        return self._admin(*self._add_node_request(node_id, peer_address, api_address,
                                                   learner), timeout)

    def remove_node(self, node_id: int, timeout: float = 30.0) -> gateway_pb2.AdminResponse:
        """Remove node ``node_id`` from this cluster."""
        return self._admin(*self._remove_node_request(node_id), timeout)

    def transfer_leader(self, node_id: int, timeout: float = 30.0) -> gateway_pb2.AdminResponse:
        """Make node ``node_id`` the leader."""
        return self._admin(*self._transfer_leader_request(node_id), timeout)

    def snapshot(self, timeout: float = 60.0) -> gateway_pb2.AdminResponse:
        """Take a snapshot on the node now."""
        return self._admin(*self._snapshot_request(), timeout)

    def close(self) -> None:
        for lanes in self._coalescing.values():
            lanes.close()
        self._coalescing.clear()
        for ch, *_ in self._channels.values():
            ch.close()
        self._channels.clear()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGatewayClient(_Base):
    """asyncio client with the same retry rules (``await c.write(...)``)."""

    def __init__(self, targets: str | Sequence[str], **kw: Any) -> None:
        super().__init__(targets, **kw)
        self._channels: dict[str, tuple[grpc.aio.Channel, gateway_pb2_grpc.GatewayStub,
                                        _Bytes]] = {}

    def _stub(self, raw: bool = False) -> Any:
        """The current target's stub (``raw``: its write methods taking bytes)."""
        target = self.targets[self._current]
        if target not in self._channels:
            ch = (grpc.aio.secure_channel(target, self._creds) if self._creds is not None
                  else grpc.aio.insecure_channel(target))
            self._channels[target] = (ch, gateway_pb2_grpc.GatewayStub(ch), _Bytes(ch))
        return self._channels[target][2 if raw else 1]

    async def _call(self, fn: Callable[[Any, float], Awaitable[T]],
                    timeout: float | None = None, raw: bool = False) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout or self.timeout)
        backoff = 0.02
        while True:
            left = deadline - loop.time()
            try:
                return await fn(self._stub(raw), max(0.01, min(self.attempt_timeout, left)))
            except grpc.aio.AioRpcError as exc:
                err = error_of(exc)
                if err.code not in RETRYABLE or loop.time() + backoff >= deadline:
                    raise err from None
                self._next_target(getattr(err, "leader_api", ""))
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, self.max_backoff)

    async def write(self, statements: Statements, *,
                    idempotency_key: str | None = None, timeout: float | None = None,
                    conditions: Sequence[transaction_pb2.Condition] = ()
                    ) -> gateway_pb2.WriteResult:
        """As :meth:`GatewayClient.write`."""
        req = self._write_bytes(statements, idempotency_key, conditions)
        if self.coalesce_writes:
            return cast("gateway_pb2.WriteResult", await self._lanes(
                False, AsyncLanes, self._send_writes).submit(
                None, (req, conditions), timeout or self.timeout))
        return await self._write_one((req, conditions), timeout)

    async def _write_one(self, item: tuple[bytes, Sequence[transaction_pb2.Condition]],
                         timeout: float | None = None) -> gateway_pb2.WriteResult:
        """One ``Write`` of ``item`` (its request bytes and conditions), with the retries."""
        req, conditions = item
        try:
            return await self._call(
                lambda s, t: s.Write(req, timeout=t, metadata=self._metadata), timeout,
                raw=True)
        except PreconditionFailed as exc:
            raise exc.resolve(conditions) from None

    async def write_batch(self, writes: Iterable[Statements], *,
                          idempotency_keys: Sequence[str] | None = None,
                          timeout: float | None = None,
                          conditions: Sequence[Sequence[transaction_pb2.Condition]] | None = None
                          ) -> list[gateway_pb2.WriteResult]:
        """As :meth:`GatewayClient.write_batch`."""
        req, conds = self._batch_bytes(writes, idempotency_keys, conditions)
        resp = await self._call(
            lambda s, t: s.WriteBatch(req, timeout=t, metadata=self._metadata), timeout,
            raw=True)
        return self._batch_results(resp, conds)

    def stream(self, *, window: int = 1024, max_per_request: int = 256,
               timeout: float | None = None) -> WriteStream:
        """A :class:`~gateway.client.stream.WriteStream` on one ``StreamWrite`` call to the
        current target (``timeout``: the whole call's deadline, none by default). Must be
        called in a running event loop."""
        call = self._stub(raw=True).StreamWrite(timeout=timeout, metadata=self._metadata)
        return WriteStream(call, window=window, max_per_request=max_per_request)

    async def read(self, table: str, key: object, consistency: str = "linearizable",
                   timeout: float | None = None) -> gateway_pb2.ReadResponse:
        """As :meth:`GatewayClient.read`."""
        req = self._read_request(table, key, consistency)
        if self.coalesce_reads:
            return cast("gateway_pb2.ReadResponse", await self._lanes(
                True, AsyncLanes, self._send_reads).submit(
                req.consistency, req, timeout or self.timeout))
        return await self._read_one(req, timeout)

    async def _read_one(self, req: gateway_pb2.ReadRequest, timeout: float | None = None
                        ) -> gateway_pb2.ReadResponse:
        """One ``Read`` of ``req``, with the retries."""
        return await self._call(lambda s, t: s.Read(req, timeout=t, metadata=self._metadata),
                                timeout)

    async def _send_reads(self, level: Any, batch: list[Waiting]) -> None:
        req = self._coalesced_reads(level, batch)
        try:
            resp = await self._call(
                lambda s, t: s.ReadBatch(req, timeout=t, metadata=self._metadata), None,
                raw=True)
        except GatewayError as err:
            await settle_async(batch, err, self._read_one)
            return
        self._answer_reads(batch, resp)

    async def _send_writes(self, _: Any, batch: list[Waiting]) -> None:
        body = self._coalesced_writes(batch)
        try:
            resp = await self._call(
                lambda s, t: s.WriteBatch(body, timeout=t, metadata=self._metadata), None,
                raw=True)
        except GatewayError as err:
            await settle_async(batch, err, self._write_one)
            return
        self._answer_writes(batch, resp)

    async def get(self, table: str, key: object, consistency: str = "linearizable") -> Row | None:
        """As :meth:`GatewayClient.get`."""
        return self._found_row(await self.read(table, key, consistency))

    async def read_batch(self, table: str, keys: Iterable[object],
                         consistency: str = "linearizable", timeout: float | None = None
                         ) -> reads_pb2.ReadBatchResponse:
        """As :meth:`GatewayClient.read_batch`."""
        req = self._read_batch_request(table, keys, consistency)
        return await self._call(
            lambda s, t: s.ReadBatch(req, timeout=t, metadata=self._metadata), timeout,
            raw=True)

    async def get_many(self, table: str, keys: Iterable[object],
                       consistency: str = "linearizable") -> list[Row | None]:
        """As :meth:`GatewayClient.get_many`."""
        return self._found_rows(await self.read_batch(table, keys, consistency))

    async def scan(self, table: str, start: object = None, end: object = None, limit: int = 0,
                   consistency: str = "linearizable", timeout: float | None = None,
                   start_after: bool = False) -> gateway_pb2.ScanResponse:
        """As :meth:`GatewayClient.scan`."""
        req = self._scan_request(table, start, end, limit, consistency, start_after)
        return await self._call(lambda s, t: s.Scan(req, timeout=t, metadata=self._metadata),
                                timeout)

    async def scan_all(self, table: str, start: object = None, end: object = None,
                       page: int = 0, consistency: str = "linearizable",
                       timeout: float | None = None) -> AsyncIterator[gateway_pb2.Row]:
        """As :meth:`GatewayClient.scan_all` (iterated with ``async for``)."""
        req = self._scan_request(table, start, end, page, consistency)
        while True:
            resp = await self._call(
                lambda s, t: s.Scan(req, timeout=t, metadata=self._metadata), timeout)
            for row in self._page_rows(req, resp):
                yield row
            if not self._next_page(req, resp):
                return

    async def status(self, timeout: float | None = None) -> gateway_pb2.StatusResponse:
        """As :meth:`GatewayClient.status`."""
        try:
            return await self._stub().Status(gateway_pb2.StatusRequest(),
                                             timeout=timeout or self.attempt_timeout,
                                             metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise error_of(exc) from None

    def subscribe(self, from_log_index: int = 0, after_gtid: tuple[int, int] | None = None,
                  timeout: float | None = None, *,
                  after_epoch: tuple[int, int] | None = None,
                  ignore_origins: Iterable[int] = (), log_records: bool = False
                  ) -> AsyncChangeEvents:
        """As :meth:`GatewayClient.subscribe`, iterated with ``async for``. Must be called in
        a running event loop."""
        req = self._subscribe_request(from_log_index, after_gtid, after_epoch, ignore_origins,
                                      log_records)
        return AsyncChangeEvents(self._stub().Subscribe(req, timeout=timeout,
                                                        metadata=self._metadata))

    async def add_channel(self, name: str, sources: Sequence[str], *, source_id: int = 0,
                          token: str = "", ca_pem: str = "", replace: bool = False,
                          seed: bool = False, merge: bool = False,
                          timeout: float = 30.0) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.add_channel`."""
        return await self._admin(*self._add_channel_request(name, sources, source_id, token,
                                                            ca_pem, replace, seed, merge),
                                 timeout)

    async def channel_action(self, name: str, action: str, timeout: float = 30.0,
                             confirm: bool = False) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.channel_action`."""
        return await self._admin(*self._channel_action_request(name, action, confirm),
                                 timeout)

    async def set_conflict_rule(self, table: str, function: str, timeout: float = 30.0
                                ) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.set_conflict_rule`."""
        return await self._admin(*self._conflicts_request(table=table, function=function),
                                 timeout)

    async def unset_conflict_rule(self, table: str, timeout: float = 30.0
                                  ) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.unset_conflict_rule`."""
        return await self._admin(*self._conflicts_request(unset=table), timeout)

    async def set_conflict_role(self, role: str, timeout: float = 30.0
                                ) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.set_conflict_role`."""
        return await self._admin(*self._conflicts_request(role=role), timeout)

    async def disarm_alarm(self, node_id: int = 0, *, all_nodes: bool = False,
                           timeout: float = 30.0) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.disarm_alarm`."""
        return await self._admin(*self._alarm_request(node_id, all_nodes), timeout)

    async def _admin(self, name: str, req: Message, timeout: float | None
                     ) -> gateway_pb2.AdminResponse:
        return await self._call(lambda s, t: getattr(s, name)(
            req, timeout=max(t, timeout or 0), metadata=self._metadata), timeout)

    async def _here(self, name: str, req: Message, timeout: float | None,
                    stub: Any = None) -> Any:
        """As :meth:`GatewayClient._here`: the node targeted, no failover."""
        try:
            return await getattr(stub or self._stub(), name)(
                req, timeout=timeout or self.attempt_timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise error_of(exc) from None

    def _schema_stub(self) -> schema_pb2_grpc.SchemaStub:
        """A ``Schema`` stub on the current target's channel."""
        self._stub()  # the channel of the current target exists
        return schema_pb2_grpc.SchemaStub(self._channels[self.targets[self._current]][0])

    async def change_schema(self, request: schema_pb2.SchemaChangeRequest, *,
                            timeout: float = 60.0) -> schema_pb2.SchemaChangeResponse:
        """As :meth:`GatewayClient.change_schema`."""
        return await self._call(lambda s, t: self._schema_stub().ChangeSchema(
            request, timeout=max(t, timeout), metadata=self._metadata), timeout)

    async def show_table(self, table: str, *, timeout: float | None = None
                         ) -> schema_pb2.ShowTableResponse:
        """As :meth:`GatewayClient.show_table`."""
        return await self._here("ShowTable", schema_pb2.ShowTableRequest(table=table),
                                timeout, self._schema_stub())

    async def schema_history(self, table: str, *, timeout: float | None = None
                             ) -> schema_pb2.SchemaHistoryResponse:
        """As :meth:`GatewayClient.schema_history`."""
        return await self._here("SchemaHistory", schema_pb2.SchemaHistoryRequest(table=table),
                                timeout, self._schema_stub())

    async def conflicts_list(self, pattern: str = "", *, limit: int = 0, page_token: str = "",
                             counts_only: bool = False, timeout: float | None = None
                             ) -> gateway_pb2.ConflictsListResponse:
        """As :meth:`GatewayClient.conflicts_list`."""
        return await self._here("ConflictsList", gateway_pb2.ConflictsListRequest(
            pattern=pattern, limit=limit, page_token=page_token, counts_only=counts_only),
            timeout)

    async def conflicts_replay(self, table: str, ids: Sequence[str] = (), *, cause: str = "",
                               dry_run: bool = False, timeout: float = 60.0
                               ) -> gateway_pb2.ConflictsReplayResponse:
        """As :meth:`GatewayClient.conflicts_replay`."""
        req = gateway_pb2.ConflictsReplayRequest(table=table, ids=list(ids), cause=cause,
                                                 dry_run=dry_run)
        return await self._call(lambda s, t: s.ConflictsReplay(
            req, timeout=max(t, timeout), metadata=self._metadata), timeout)

    async def dead_letters(self, applier: str = "", *, include_closed: bool = False,
                           after_id: int = 0, limit: int = 0, timeout: float | None = None
                           ) -> gateway_pb2.DeadLettersResponse:
        """As :meth:`GatewayClient.dead_letters`."""
        return await self._here("DeadLetters", gateway_pb2.DeadLettersRequest(
            applier=applier, include_closed=include_closed, after_id=after_id, limit=limit),
            timeout)

    async def dead_letter_action(self, applier: str, action: str, ids: Sequence[int] = (), *,
                                 every: bool = False, note: str = "", timeout: float = 60.0
                                 ) -> gateway_pb2.DeadLetterActionResponse:
        """As :meth:`GatewayClient.dead_letter_action`."""
        return await self._here("DeadLetterAction", gateway_pb2.DeadLetterActionRequest(
            applier=applier, action=action, ids=list(ids), all=every, note=note), timeout)

    async def add_node(self, node_id: int, peer_address: str, api_address: str = "", *,
                       learner: bool = False, timeout: float = 60.0
                       ) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.add_node`."""
        return await self._admin(*self._add_node_request(node_id, peer_address, api_address,
                                                         learner), timeout)

    async def remove_node(self, node_id: int, timeout: float = 30.0
                          ) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.remove_node`."""
        return await self._admin(*self._remove_node_request(node_id), timeout)

    async def transfer_leader(self, node_id: int, timeout: float = 30.0
                              ) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.transfer_leader`."""
        return await self._admin(*self._transfer_leader_request(node_id), timeout)

    async def snapshot(self, timeout: float = 60.0) -> gateway_pb2.AdminResponse:
        """As :meth:`GatewayClient.snapshot`."""
        return await self._admin(*self._snapshot_request(), timeout)

    async def close(self) -> None:
        for ch, *_ in self._channels.values():
            await ch.close()
        self._channels.clear()

    async def __aenter__(self) -> AsyncGatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
