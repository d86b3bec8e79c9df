// Retry, redirect, deadline and error rules against in-process fake servers.
import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import { GatewayClient, GatewayError, fromValue, insert, toValue, decimal } from "../src/index";
import {
  type ChangeEvent,
  GatewayService,
  type StreamWriteRequest,
  type StreamWriteResponse,
  type SubscribeRequest,
  type WriteRequest,
  type WriteResult,
} from "../src/gen/gateway/v1/gateway";

type Behaviour = (n: number, req: WriteRequest, call: grpc.ServerUnaryCall<WriteRequest, WriteResult>) => Promise<WriteResult>;

class Fake {
  keys: string[] = [];
  auth: string[] = [];
  subscribes: SubscribeRequest[] = [];
  /** Serves StreamWrite when set (UNIMPLEMENTED otherwise). */
  streamWrite?: (call: grpc.ServerDuplexStream<StreamWriteRequest, StreamWriteResponse>) => void;
  constructor(readonly behaviour: Behaviour) {}
}

const servers: grpc.Server[] = [];
const clients: GatewayClient[] = [];

afterEach(() => {
  clients.splice(0).forEach((c) => c.close());
  servers.splice(0).forEach((s) => s.forceShutdown());
});

const fail = (code: grpc.status, details: string, trailers: Record<string, string> = {}): grpc.ServiceError => {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(trailers)) md.set(k, v);
  return Object.assign(new Error(details), { code, details, metadata: md });
};

const ok = async (n: number): Promise<WriteResult> => ({
  gtid: { serverId: 1, transId: BigInt(n + 1) },
  epoch: 1n,
  commitTimestampNs: 0n,
  logIndex: BigInt(100 + n),
  duplicate: false,
});

async function serve(fake: Fake): Promise<string> {
  const server = new grpc.Server();
  const unimplemented = (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(fail(grpc.status.UNIMPLEMENTED, "fake"), null);
  server.addService(GatewayService, {
    write: (call: grpc.ServerUnaryCall<WriteRequest, WriteResult>, cb: grpc.sendUnaryData<WriteResult>) => {
      const n = fake.keys.length;
      fake.keys.push(call.request.idempotencyKey);
      fake.auth.push(String(call.metadata.get("authorization")[0] ?? ""));
      fake.behaviour(n, call.request, call).then(
        (r) => cb(null, r),
        (e) => cb(e, null),
      );
    },
    subscribe: (call: grpc.ServerWritableStream<SubscribeRequest, ChangeEvent>) => {
      const n = fake.subscribes.length;
      fake.subscribes.push(call.request);
      const start = call.request.fromLogIndex;
      for (let i = start; i < start + 3n; i++) call.write({ logIndex: i, transaction: undefined, epochMarker: undefined, applyStatus: undefined, schemaEvent: undefined, epoch: 0n, entryEnd: true, sealedAtNs: 0n });
      if (n === 0) call.emit("error", fail(grpc.status.UNAVAILABLE, "node stopping")); // grpc-js: ends the call with this status
      // later calls stay open
    },
    writeBatch: unimplemented,
    streamWrite: (call: grpc.ServerDuplexStream<StreamWriteRequest, StreamWriteResponse>) =>
      fake.streamWrite ? fake.streamWrite(call) : call.destroy(fail(grpc.status.UNIMPLEMENTED, "fake")),
    read: unimplemented,
    scan: unimplemented,
    status: unimplemented,
    addNode: unimplemented,
    removeNode: unimplemented,
    transferLeader: unimplemented,
    snapshot: unimplemented,
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  servers.push(server);
  return `127.0.0.1:${port}`;
}

function client(targets: string[], opts: ConstructorParameters<typeof GatewayClient>[1] = {}): GatewayClient {
  const c = new GatewayClient(targets, { token: "s3cret", attemptTimeoutMs: 1000, maxBackoffMs: 50, ...opts });
  clients.push(c);
  return c;
}

const row = () => [insert("fake.t", { id: 1 }, { v: "a" })];

test("retries reuse the idempotency key and send the token", async () => {
  const f = new Fake(async (n) => {
    if (n < 2) throw fail(grpc.status.UNAVAILABLE, "not the leader");
    return ok(n);
  });
  await client([await serve(f)]).write(row());
  assert.equal(f.keys.length, 3);
  assert.ok(f.keys[0].length > 0);
  assert.deepEqual(new Set(f.keys).size, 1, `keys differ between attempts: ${f.keys}`);
  assert.deepEqual(f.auth, ["Bearer s3cret", "Bearer s3cret", "Bearer s3cret"]);
});

test("each write has its own key unless given", async () => {
  const f = new Fake(ok);
  const c = client([await serve(f)]);
  await c.write(row());
  await c.write(row());
  await c.write(row(), { idempotencyKey: "order-42" });
  assert.notEqual(f.keys[0], f.keys[1]);
  assert.equal(f.keys[2], "order-42");
});

test("UNAVAILABLE follows the gateway-leader-api trailer", async () => {
  const leader = new Fake(ok);
  const leaderAddr = await serve(leader);
  const follower = new Fake(async () => {
    throw fail(grpc.status.UNAVAILABLE, "not the leader", { "gateway-leader-id": "2", "gateway-leader-api": leaderAddr });
  });
  const other = new Fake(async () => {
    throw fail(grpc.status.UNAVAILABLE, "not the leader");
  });
  const c = client([await serve(follower), await serve(other)]);
  await c.write(row());
  assert.equal(follower.keys.length, 1);
  assert.equal(other.keys.length, 0, "the next target was tried instead of the named leader");
  assert.deepEqual(leader.keys, follower.keys);
  assert.equal(c.targets[2], leaderAddr);
});

test("UNAVAILABLE without trailer moves to the next target", async () => {
  const down = new Fake(async () => {
    throw fail(grpc.status.UNAVAILABLE, "down");
  });
  const up = new Fake(ok);
  await client([await serve(down), await serve(up)]).write(row());
  assert.equal(down.keys.length, 1);
  assert.equal(up.keys.length, 1);
});

test("an attempt past its deadline is retried", async () => {
  const f = new Fake(async (n) => {
    if (n === 0) await sleep(400); // past the 150 ms attempt deadline
    return ok(n);
  });
  const r = await client([await serve(f)], { attemptTimeoutMs: 150 }).write(row());
  assert.equal(f.keys.length, 2);
  assert.equal(f.keys[0], f.keys[1]);
  assert.equal(r.logIndex, 101n);
});

test("the overall deadline ends the retries", async () => {
  const f = new Fake(async () => {
    throw fail(grpc.status.UNAVAILABLE, "down");
  });
  const c = client([await serve(f)], { timeoutMs: 400 });
  const start = Date.now();
  // The last attempt's UNAVAILABLE, or DEADLINE_EXCEEDED when the deadline fell inside an
  // attempt (a loaded machine): either way the deadline ended the retries.
  await assert.rejects(
    c.write(row()),
    (e: unknown) =>
      e instanceof GatewayError && (e.code === grpc.status.UNAVAILABLE || e.code === grpc.status.DEADLINE_EXCEEDED),
  );
  assert.ok(Date.now() - start < 2000, "gave up too late");
  assert.ok(f.keys.length >= 2, "no retry before the deadline");
});

test("INVALID_ARGUMENT is not retried and names the field", async () => {
  const f = new Fake(async () => {
    throw fail(grpc.status.INVALID_ARGUMENT, "missing table name", { "gateway-field": "statements[0].insert.table.table_name" });
  });
  await assert.rejects(client([await serve(f)]).write(row()), (e: unknown) => {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(e.codeName, "INVALID_ARGUMENT");
    assert.equal(e.field, "statements[0].insert.table.table_name");
    return true;
  });
  assert.equal(f.keys.length, 1);
});

test("subscribe resumes after the last delivered index", async () => {
  const f = new Fake(ok);
  const c = client([await serve(f)]);
  const got: bigint[] = [];
  let reconnects = 0;
  for await (const ev of c.subscribe({ fromLogIndex: 5 }, { onReconnect: () => reconnects++ })) {
    got.push(ev.logIndex);
    if (got.length === 6) break;
  }
  assert.deepEqual(got, [5n, 6n, 7n, 8n, 9n, 10n]);
  assert.equal(reconnects, 1);
  assert.equal(f.subscribes[1].fromLogIndex, 8n);
});

test("values round-trip", () => {
  for (const v of [null, true, -7n, 2.5, "a"]) {
    assert.deepEqual(fromValue(toValue(v).value), v);
  }
  assert.equal(fromValue(toValue(7).value), 7n);
  assert.equal(fromValue(toValue(decimal("-12.50")).value), "-12.50");
  assert.equal(fromValue(toValue(new Date(1714564800123)).value), 1714564800123000000n);
  assert.throws(() => toValue({} as never), TypeError);
  assert.throws(() => toValue(2 ** 60), /bigint/);
});

test("stream: acks in any order settle the writes with their sequence numbers", async () => {
  // The fake holds every write until it has four, then acks them in reverse order in one
  // response, refusing the third; write seq gets logIndex 100 + seq.
  const fake = new Fake(ok);
  const seqs: bigint[] = [];
  fake.streamWrite = (call) => {
    call.on("data", (req: StreamWriteRequest) => {
      req.writes.forEach((_w, i) => seqs.push(req.seq + BigInt(i)));
      if (seqs.length < 4) return;
      call.write({
        acks: [...seqs].reverse().map((seq) =>
          seq === 3n
            ? { seq, result: undefined, code: grpc.status.FAILED_PRECONDITION, error: "row exists", field: "conditions[0]" }
            : { seq, result: { gtid: { serverId: 1, transId: seq }, epoch: 1n, commitTimestampNs: 0n, logIndex: 100n + seq, duplicate: false }, code: 0, error: "", field: "" },
        ),
      });
    });
    call.on("end", () => call.end());
  };
  const c = client([await serve(fake)]);
  const s = c.stream({ window: 8, maxPerRequest: 2 });
  const sent = [];
  for (let i = 0; i < 4; i++) sent.push(await s.send(row()));
  await s.close();
  assert.deepEqual(seqs, [1n, 2n, 3n, 4n], "writes numbered from 1, in order, across requests");
  assert.equal((await sent[0].result).logIndex, 101n);
  assert.equal((await sent[1].result).logIndex, 102n);
  await assert.rejects(sent[2].result, (e: unknown) => e instanceof GatewayError && e.conditionIndex === 0);
  assert.equal((await sent[3].result).logIndex, 104n);
});
