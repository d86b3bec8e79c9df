// Against a live 3-node cluster (TLS and bearer tokens) from clients/testing/cluster.py.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, afterEach, before, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { type ClientOptions, FieldType, GatewayClient, GatewayError, SchemaChangeKind, WriteBatchError, condition, decimal, insert, rowOf, update } from "../src/index";
import type { ChangeEvent, WriteResult } from "../src/gen/gateway/v1/gateway";
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

function client(targets: string[], token: string, opts: ClientOptions = {}): GatewayClient {
  const c = new GatewayClient(targets, { rootCerts: cluster.ca, token, attemptTimeoutMs: 2000, timeoutMs: 60_000, ...opts });
  clients.push(c);
  return c;
}
const writer = () => client(cluster.apis, cluster.info.tokens.writer);
const table = (name: string) => `tstest.${name}_${Date.now()}_${process.hrtime.bigint() % 1000000n}`;

/** The table and id of a change event's single-row insert. */
function insertOf(ev: ChangeEvent): { table: string; id: bigint } | undefined {
  const sts = ev.transaction?.statements ?? [];
  const kind = sts.length === 1 ? sts[0].kind : undefined;
  if (kind?.$case !== "insert") return undefined;
  const key = kind.value.records[0].keyValues[0].kind;
  return {
    table: `${kind.value.table?.schemaName}.${kind.value.table?.tableName}`,
    id: key?.$case === "intValue" ? key.value : -1n,
  };
}

test("a write then a read returns the row", async () => {
  const c = writer();
  const t = table("roundtrip");
  const at = new Date(1714564800123);
  const r = await c.write([
    insert(t, { id: 1 }, { name: "a", price: 2.5, paid: true, blob: Buffer.from([0, 255]), at, amount: decimal("12.50"), note: null }),
  ]);
  assert.ok(r.gtid!.transId > 0n && r.logIndex > 0n && !r.duplicate);
  const row = await c.get(t, 1);
  assert.deepEqual(row, {
    id: 1n,
    name: "a",
    price: 2.5,
    paid: true,
    blob: Buffer.from([0, 255]),
    at: 1714564800123000000n,
    amount: "12.50",
    note: null,
  });
  const read = await c.read(t, 1, { consistency: "lease" });
  assert.deepEqual(read.row!.gtid, r.gtid);
  assert.equal(read.row!.logIndex, r.logIndex);
  assert.equal(await c.get(t, 2), undefined);
});

test("readBatch returns every key's row in order", async () => {
  const c = writer();
  const t = table("readbatch");
  await c.writeBatch([[insert(t, { id: 1 }, { name: "a" })], [insert(t, { id: 2 }, { name: "b" })]]);
  assert.deepEqual(await c.getMany(t, [2, 9, 1]), [{ id: 2n, name: "b" }, undefined, { id: 1n, name: "a" }]);
  const resp = await c.readBatch(t, [1], { consistency: "lease" });
  assert.equal(resp.results.length, 1);
  assert.ok(resp.appliedIndex > 0n);
});

test("writeBatch results are in order and scan is in key order", async () => {
  const c = writer();
  const t = table("batch");
  const results = await c.writeBatch([3, 1, 2, 5, 4].map((id) => [insert(t, { id }, { v: `v${id}` })]));
  assert.equal(results.length, 5);
  for (let i = 1; i < results.length; i++) assert.ok(results[i].logIndex > results[i - 1].logIndex);
  const scan = await c.scan(t, { start: 2, end: 5 });
  assert.deepEqual(
    scan.rows.map((r) => rowOf(r).id),
    [2n, 3n, 4n],
  );
  assert.equal(scan.more, false);
  const limited = await c.scan(t, { limit: 2, consistency: "stale" });
  assert.ok(limited.rows.length <= 2);
  // pages of 2, each after the last key of the one before: every row once, in order
  const paged: unknown[] = [];
  let page = await c.scan(t, { limit: 2 });
  for (;;) {
    paged.push(...page.rows.map((r) => rowOf(r).id));
    if (!page.more) break;
    page = await c.scan(t, { limit: 2, startAfter: page.rows[page.rows.length - 1].keyValues });
  }
  assert.deepEqual(paged, [1n, 2n, 3n, 4n, 5n]);
  const after = await c.scan(t, { startAfter: 3 });
  assert.deepEqual(
    after.rows.map((r) => rowOf(r).id),
    [4n, 5n],
  );
});

test("the same idempotency key applies once", async () => {
  const c = writer();
  const t = table("idem");
  const key = randomUUID();
  const first = await c.write([insert(t, { id: 1 }, { v: "first" })], { idempotencyKey: key });
  const again = await c.write([insert(t, { id: 1 }, { v: "second" })], { idempotencyKey: key });
  assert.equal(again.duplicate, true);
  assert.deepEqual(again.gtid, first.gtid);
  assert.equal(again.logIndex, first.logIndex);
  assert.equal((await c.get(t, 1))!.v, "first");
});

test("a bad request names the offending field", async () => {
  // the key column repeated among the value columns (docs/node.md, "Validation")
  await assert.rejects(writer().write([insert(table("bad"), { id: 1 }, { id: 1 })]), (e: unknown) => {
    assert.ok(e instanceof GatewayError, String(e));
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(e.field, "statements[0].insert.fields[0].name");
    return true;
  });
});

test("tokens are checked", async () => {
  const reader = client(cluster.apis, cluster.info.tokens.reader);
  await assert.rejects(reader.write([insert(table("perm"), { id: 1 }, { v: "x" })]), (e: unknown) => {
    assert.ok(e instanceof GatewayError && e.code === grpc.status.PERMISSION_DENIED, String(e));
    return true;
  });
  assert.ok((await reader.status()).nodeId > 0n);
  const stranger = client(cluster.apis, "not-a-token");
  await assert.rejects(stranger.write([insert(table("perm"), { id: 1 }, { v: "x" })]), (e: unknown) => {
    assert.ok(e instanceof GatewayError && e.code === grpc.status.UNAUTHENTICATED, String(e));
    return true;
  });
});

async function collect(c: GatewayClient, t: string, from: bigint, until: bigint): Promise<ChangeEvent[]> {
  const out: ChangeEvent[] = [];
  for await (const ev of c.subscribe({ fromLogIndex: from }, { signal: AbortSignal.timeout(60_000) })) {
    if (insertOf(ev)?.table === t) out.push(ev);
    if (ev.logIndex >= until) break;
  }
  return out;
}

test("a leader kill during a write loop loses and duplicates nothing", async () => {
  const lead = await cluster.leader();
  const c = writer();
  const t = table("leaderkill");
  const writers = 4;
  const perWriter = 40;
  const results = new Map<bigint, WriteResult>();
  let done = 0;
  let killed: Promise<void> | undefined;
  try {
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        for (let i = 0; i < perWriter; i++) {
          const id = BigInt(w * perWriter + i);
          results.set(id, await c.write([insert(t, { id }, { writer: w })]));
          if (++done === 40) killed = cluster.kill(lead);
        }
      }),
    );
    await killed;
  } finally {
    await killed?.catch(() => undefined);
    await cluster.restart(lead);
    await cluster.leader();
  }
  const indices = [...results.values()].map((r) => r.logIndex);
  const lo = indices.reduce((a, b) => (a < b ? a : b));
  const hi = indices.reduce((a, b) => (a > b ? a : b));
  const seen = new Map<bigint, number>();
  for (const ev of await collect(c, t, lo, hi)) {
    const id = insertOf(ev)!.id;
    seen.set(id, (seen.get(id) ?? 0) + 1);
    assert.deepEqual(ev.transaction!.gtid, results.get(id)!.gtid, `gtid of id ${id}`);
  }
  for (let id = 0n; id < BigInt(writers * perWriter); id++) {
    assert.equal(seen.get(id) ?? 0, 1, `times id ${id} was committed`);
    assert.equal((await c.get(t, id))!.writer, id / BigInt(perWriter));
  }
});

test("subscribe resumes after its node dies", async () => {
  const lead = await cluster.leader();
  const victim = (lead % 3) + 1; // a follower: the cluster keeps its leader and takes writes
  const w = client(cluster.others(victim), cluster.info.tokens.writer);
  const sub = client([cluster.api(victim), ...cluster.others(victim)], cluster.info.tokens.reader);
  const t = table("resume");
  const want: bigint[] = [];
  const write = async (id: number) => want.push((await w.write([insert(t, { id }, { v: "x" })])).logIndex);
  await write(0);
  const controller = new AbortController();
  const got: bigint[] = [];
  let reconnects = 0;
  const waiters: Array<() => void> = [];
  const consumer = (async () => {
    for await (const ev of sub.subscribe({ fromLogIndex: want[0] }, { signal: controller.signal, onReconnect: () => reconnects++ })) {
      if (insertOf(ev)?.table === t) {
        got.push(ev.logIndex);
        waiters.splice(0).forEach((f) => f());
      }
    }
  })();
  const failed = consumer.then(
    () => assert.fail("the subscription ended"),
    (e: unknown) => {
      if (!controller.signal.aborted) throw e;
    },
  );
  const receive = async (n: number) => {
    const deadline = Date.now() + 60_000;
    while (got.length < n) {
      assert.ok(Date.now() < deadline, `got ${got.length} of ${n} events`);
      await Promise.race([new Promise<void>((r) => waiters.push(r)), failed, new Promise((r) => setTimeout(r, 1000))]);
    }
  };
  try {
    for (let id = 1; id < 5; id++) await write(id);
    await receive(5);
    await cluster.kill(victim);
    for (let id = 5; id < 10; id++) await write(id);
    await receive(10);
  } finally {
    controller.abort();
    await failed.catch(() => undefined);
    await cluster.restart(victim);
    await cluster.leader(); // a later test may write through the restarted node
  }
  assert.deepEqual(got, want);
  assert.ok(reconnects > 0, "the subscription never reconnected, yet its node was killed");
});

test("a conditional write refused names the row, and alone in a batch", async () => {
  const c = writer();
  const t = table("cond");
  const first = await c.write([insert(t, { id: 1 }, { balance: 100 })], { conditions: [condition.absent(t, 1)] });
  const upd = update(t, { id: 1 }, { balance: 90 });
  await c.write([upd], { conditions: [condition.gtid(t, 1, first.gtid!), condition.values(t, 1, { balance: 100 })] });
  await assert.rejects(c.write([upd], { conditions: [condition.absent(t, 2), condition.gtid(t, 1, first.gtid!)] }), (e: unknown) => {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(e.conditionIndex, 1);
    assert.ok(e.details.includes(`${t} key (1)`), e.details);
    return true;
  });
  await assert.rejects(
    c.writeBatchRequests([
      { statements: [insert(t, { id: 2 }, { balance: 1 })] },
      { statements: [insert(t, { id: 3 }, { balance: 1 })], conditions: [condition.absent(t, 1)] },
      { statements: [insert(t, { id: 4 }, { balance: 1 })] },
    ]),
    (e: unknown) => {
      assert.ok(e instanceof WriteBatchError);
      assert.deepEqual([...e.refused.keys()], [1]);
      assert.equal(e.refused.get(1)!.conditionIndex, 0);
      assert.ok(e.results[0] !== undefined && e.results[1] === undefined && e.results[2] !== undefined);
      return true;
    },
  );
  assert.equal(await c.get(t, 3), undefined);
  assert.deepEqual(await c.get(t, 4), { id: 4n, balance: 1n });
});

test("two clients incrementing one row with conditions lose no update", async () => {
  const t = table("counter");
  const a = client([cluster.apis[0]], cluster.info.tokens.writer);
  const b = client([cluster.apis[1]], cluster.info.tokens.writer);
  await a.write([insert(t, { id: 1 }, { n: 0 })]);
  const run = async (c: GatewayClient) => {
    for (let done = 0; done < 10; ) {
      const r = await c.read(t, 1);
      const n = r.row!.values[0].kind?.$case === "intValue" ? (r.row!.values[0].kind.value as bigint) : -1n;
      try {
        await c.write([update(t, { id: 1 }, { n: n + 1n })], { conditions: [condition.gtid(t, 1, r.row!.gtid!)] });
        done++;
      } catch (e) {
        if (!(e instanceof GatewayError) || e.conditionIndex !== 0) throw e;
      }
    }
  };
  await Promise.all([run(a), run(b)]);
  assert.deepEqual(await a.get(t, 1), { id: 1n, n: 20n });
});

test("schema calls create, alter, show and refuse", async () => {
  const admin = client(cluster.apis, cluster.info.tokens.admin);
  const t = table("schema");
  const created = await admin.createTable(t, ["id"], [
    { name: "id", type: FieldType.FIELD_TYPE_INTEGER, notNull: true },
    { name: "name", type: FieldType.FIELD_TYPE_VARCHAR },
  ]);
  assert.equal(created.version, 1n);
  const added = await admin.addColumn(t, { name: "c", type: FieldType.FIELD_TYPE_INTEGER, default: 0n });
  assert.equal(added.version, 2n);
  assert.equal(added.definition!.columns.length, 3);
  await admin.renameColumn(t, "name", "title");
  // A type change cannot be applied everywhere: refused before it commits.
  await assert.rejects(
    admin.changeSchema({ table: t, kind: SchemaChangeKind.SCHEMA_CHANGE_KIND_CHANGE_TYPE, column: { name: "c", type: FieldType.FIELD_TYPE_VARCHAR, defaultValue: undefined, notNull: false } }),
    (e: unknown) => e instanceof GatewayError && e.code === grpc.status.FAILED_PRECONDITION,
  );
  await assert.rejects(
    admin.addColumn(t, { name: "", type: FieldType.FIELD_TYPE_INTEGER }),
    (e: unknown) => e instanceof GatewayError && e.code === grpc.status.INVALID_ARGUMENT,
  );
  // Without the admin token the change is refused.
  const w = writer();
  await assert.rejects(w.dropColumn(t, "c"), (e: unknown) => e instanceof GatewayError && e.code === grpc.status.PERMISSION_DENIED);
  // The node that answers may be a follower that has not applied the last change yet.
  let shown = await w.showTable(t);
  for (let i = 0; i < 200 && shown.definition?.version !== 3n; i++) {
    await new Promise((r) => setTimeout(r, 100));
    shown = await w.showTable(t);
  }
  assert.deepEqual(shown.definition!.columns.map((c) => c.name), ["id", "title", "c"]);
  const history = await w.schemaHistory(t);
  assert.deepEqual(
    history.events.map((e) => e.kind),
    [SchemaChangeKind.SCHEMA_CHANGE_KIND_CREATE, SchemaChangeKind.SCHEMA_CHANGE_KIND_ADD_COLUMN, SchemaChangeKind.SCHEMA_CHANGE_KIND_RENAME_COLUMN],
  );
  await admin.dropTable(t);
});
