"""A stand-in for ``gateway run`` that lets the harness test itself: the same command-line
shape and the same public gRPC API (Write, Read, Scan, Status), but no Raft — node 1 is the
leader forever and holds the only copy; other nodes forward every call to it through their
``--peers`` address (so through the proxies). It is trivially linearizable.

``--bug stale-reads`` makes followers answer every read from a local cache that is refreshed
at most every 0.5 s: a deliberately broken node, to prove that the verification catches
violations. ``--bug lose-writes`` makes the leader acknowledge every 7th write without storing
it.

    python -m tests.harness.fakenode run --node-id 2 --listen 127.0.0.1:P --api 127.0.0.1:A \\
        --peers 1=...,2=... --data-dir D [--bug stale-reads|lose-writes]
"""

from __future__ import annotations

import argparse
import threading
import time
from concurrent import futures

import grpc

from gateway.v1 import gateway_pb2, gateway_pb2_grpc

_FWD_TIMEOUT = 1.0


class FakeGateway(gateway_pb2_grpc.GatewayServicer):
    """The servicer; ``leader_addr`` is None on node 1."""

    def __init__(self, node_id: int, peers: dict[int, str], bug: str) -> None:
        self.node_id = node_id
        self.peers = peers
        self.bug = bug
        self.lock = threading.Lock()
        self.rows: dict[tuple[str, str], gateway_pb2.Row] = {}
        self.index = 0
        self.writes = 0
        self.cache: dict[tuple[str, str], gateway_pb2.Row] = {}
        self.cache_at = 0.0
        self.leader = (
            None
            if node_id == 1
            else gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(peers[1]))
        )

    # the leader's own operations

    def Write(self, request: gateway_pb2.WriteRequest, context: grpc.ServicerContext) -> (
        gateway_pb2.WriteResult
    ):
        if self.leader is not None:
            return self.leader.Write(request, timeout=_FWD_TIMEOUT)
        with self.lock:
            self.index += 1
            self.writes += 1
            result = gateway_pb2.WriteResult(log_index=self.index)
            result.gtid.server_id = 1
            result.gtid.trans_id = self.index
            if self.bug == "lose-writes" and self.writes % 7 == 0:
                return result
            for st in request.statements:
                ins = st.insert
                for rec in ins.records:
                    row = gateway_pb2.Row(
                        table=ins.table,
                        key_fields=ins.key_fields,
                        key_values=rec.key_values,
                        fields=ins.fields,
                        values=rec.after_values,
                        log_index=self.index,
                    )
                    row.gtid.CopyFrom(result.gtid)
                    name = f"{ins.table.schema_name}.{ins.table.table_name}"
                    self.rows[(name, rec.key_values[0].string_value)] = row
            return result

    def _local_rows(self) -> dict[tuple[str, str], gateway_pb2.Row]:
        if self.leader is None:
            return self.rows
        if self.bug == "stale-reads":
            if time.monotonic() - self.cache_at > 0.5:
                self.cache = {
                    ("jepsen.kv", r.key_values[0].string_value): r
                    for r in self.leader.Scan(
                        gateway_pb2.ScanRequest(table="jepsen.kv", limit=10000),
                        timeout=_FWD_TIMEOUT,
                    ).rows
                }
                self.cache_at = time.monotonic()
            return self.cache
        raise LookupError

    def Read(self, request: gateway_pb2.ReadRequest, context: grpc.ServicerContext) -> (
        gateway_pb2.ReadResponse
    ):
        try:
            rows = self._local_rows()
        except LookupError:
            assert self.leader is not None
            return self.leader.Read(request, timeout=_FWD_TIMEOUT)
        with self.lock:
            row = rows.get((request.table, request.key[0].string_value))
            if row is None:
                return gateway_pb2.ReadResponse(found=False, applied_index=self.index)
            return gateway_pb2.ReadResponse(found=True, row=row, applied_index=self.index)

    def Scan(self, request: gateway_pb2.ScanRequest, context: grpc.ServicerContext) -> (
        gateway_pb2.ScanResponse
    ):
        if self.leader is not None:
            return self.leader.Scan(request, timeout=_FWD_TIMEOUT)
        with self.lock:
            rows = [r for (t, _k), r in sorted(self.rows.items()) if t == request.table]
        return gateway_pb2.ScanResponse(rows=rows, applied_index=self.index)

    def Status(self, request: gateway_pb2.StatusRequest, context: grpc.ServicerContext) -> (
        gateway_pb2.StatusResponse
    ):
        index = self.index
        if self.leader is not None:
            try:
                index = self.leader.Status(request, timeout=_FWD_TIMEOUT).commit_index
            except grpc.RpcError:
                index = 0
        st = gateway_pb2.StatusResponse(
            node_id=self.node_id,
            role="leader" if self.leader is None else "follower",
            term=1,
            leader_id=1,
            commit_index=index,
            applied_index=index,
            first_index=1,
            last_index=index,
        )
        for nid, addr in sorted(self.peers.items()):
            st.members.add(node_id=nid, peer_address=addr, role="voter")
        return st


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="fakenode")
    p.add_argument("command", choices=["run"])
    p.add_argument("--node-id", type=int, required=True)
    p.add_argument("--listen", required=True)
    p.add_argument("--api", required=True)
    p.add_argument("--peers", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--bug", default="", choices=["", "stale-reads", "lose-writes"])
    args = p.parse_args(argv)
    peers = {int(k): v for k, v in (item.split("=", 1) for item in args.peers.split(","))}
    servicer = FakeGateway(args.node_id, peers, args.bug)
    server = grpc.server(futures.ThreadPoolExecutor(16))
    gateway_pb2_grpc.add_GatewayServicer_to_server(servicer, server)
    server.add_insecure_port(args.api)
    server.add_insecure_port(args.listen)
    server.start()
    print(f"fake node {args.node_id} serving on {args.api} and {args.listen}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
