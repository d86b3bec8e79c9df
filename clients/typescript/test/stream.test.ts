// WriteStream against a live 3-node cluster (TLS and bearer tokens) from clients/testing/cluster.py.
import assert from "node:assert/strict";
import { after, afterEach, before, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { GatewayClient, GatewayError, type PendingWrite, condition, insert, update } from "../src/index";
import { TestCluster } from "./testcluster";

let cluster: TestCluster;
const clients: GatewayClient[] = [];

before(async () => {
  cluster = await TestCluster.start(3, true);
});
after(async () => {
  await cluster?.stop();
});
afterEach(() => clients.splice(0).forEach((c) => c.close()));

function writer(): GatewayClient {
  const c = new GatewayClient(cluster.apis, { rootCerts: cluster.ca, token: cluster.info.tokens.writer, attemptTimeoutMs: 2000, timeoutMs: 60_000 });
  clients.push(c);
  return c;
}
const table = (name: string) => `tsstream.${name}_${Date.now()}_${process.hrtime.bigint() % 1000000n}`;

test("stream: every write is acknowledged with its own result", async () => {
  const c = writer();
  const t = table("many");
  const s = c.stream({ window: 64, maxPerRequest: 16, deadlineMs: 60_000 });
  const sent: PendingWrite[] = [];
  for (let i = 0; i < 300; i++) {
    sent.push(await s.send([insert(t, { id: i }, { v: `v${i}` })]));
    assert.ok(s.inFlight <= 64, "the window caps the writes in flight");
  }
  await s.close();
  const results = await Promise.all(sent.map((p) => p.result));
  assert.equal(new Set(results.map((r) => r.logIndex)).size, 300, "each write has its own log index");
  assert.equal(new Set(sent.map((p) => p.idempotencyKey)).size, 300, "each write has its own key");
  assert.ok(results.every((r) => r.logIndex > 0n && !r.duplicate));
  assert.equal((await c.get(t, 299))?.v, "v299");
  assert.equal((await c.scan(t)).rows.length, 300);
});

test("stream: a refused write fails alone and the stream goes on", async () => {
  const c = writer();
  const t = table("refused");
  await c.write([insert(t, { id: 1 }, { v: "first" })]);
  const s = c.stream();
  const before = await s.send([insert(t, { id: 2 }, { v: "a" })]);
  const refused = await s.send([update(t, { id: 1 }, { v: "second" })], { conditions: [condition.absent(t, 1)] });
  const afterIt = await s.send([insert(t, { id: 3 }, { v: "b" })]);
  await s.close();
  await before.result;
  await afterIt.result;
  await assert.rejects(refused.result, (e: unknown) => {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(e.conditionIndex, 0, e.field);
    return true;
  });
  assert.equal((await c.get(t, 1))?.v, "first", "nothing of the refused write");
  assert.ok(await c.get(t, 3));
});

test("stream: a write sent again with its key is not applied twice", async () => {
  const c = writer();
  const t = table("again");
  const s1 = c.stream();
  const first = await s1.send([insert(t, { id: 1 }, { v: "a" })]);
  await s1.close();
  const r1 = await first.result;
  const s2 = c.stream();
  const again = await s2.send([insert(t, { id: 1 }, { v: "a" })], { idempotencyKey: first.idempotencyKey });
  await s2.close();
  const r2 = await again.result;
  assert.ok(r2.duplicate);
  assert.deepEqual(r2.gtid, r1.gtid);
  assert.deepEqual((await c.write([insert(t, { id: 1 }, { v: "a" })], { idempotencyKey: first.idempotencyKey })).gtid, r1.gtid);
});

test("stream: a closed or aborted stream refuses writes", async () => {
  const c = writer();
  const t = table("closed");
  const s = c.stream();
  await (await s.send([insert(t, { id: 1 }, { v: "a" })])).result;
  await s.close();
  await assert.rejects(s.send([insert(t, { id: 2 }, { v: "b" })]), (e: unknown) => e instanceof GatewayError && e.code === grpc.status.FAILED_PRECONDITION);
  const a = c.stream();
  a.abort();
  await assert.rejects(a.send([insert(t, { id: 3 }, { v: "c" })]), (e: unknown) => e instanceof GatewayError && e.code === grpc.status.CANCELLED);
  await assert.rejects(a.close(), (e: unknown) => e instanceof GatewayError && e.code === grpc.status.CANCELLED);
});
