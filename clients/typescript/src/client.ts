// A TypeScript client for the Gateway gRPC API on @grpc/grpc-js, with the contract of the
// Python client (docs/node.md, "Python client"):
//
// - every write carries an idempotency key (a random UUID unless given) sent unchanged on
//   every retry, so a retry after a timeout or a failover never applies a write twice;
// - UNAVAILABLE and an attempt's DEADLINE_EXCEEDED are retried with jittered exponential
//   backoff until the call's overall deadline (`timeoutMs`); each attempt has its own deadline
//   (`attemptTimeoutMs`);
// - on UNAVAILABLE the client moves to the node named by the `gateway-leader-api` trailer, or
//   to the next target;
// - other errors reject at once with a GatewayError (code, details, field);
// - subscribe() resumes a broken stream after the last delivered log index;
// - stream() keeps many writes in flight on one StreamWrite call (./stream.ts).

import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import {
  type ChangeEvent,
  Consistency,
  GatewayClient as GatewayStub,
  type ReadResponse,
  type ScanResponse,
  type StatusResponse,
  SubscribeRequest,
  type WriteResult,
} from "./gen/gateway/v1/gateway";
import { type ReadBatchResponse, ReadsClient as ReadsStub } from "./gen/gateway/v1/reads";
import {
  type ColumnDef,
  SchemaChangeKind,
  type SchemaChangeRequest,
  type SchemaChangeResponse,
  SchemaClient as SchemaStub,
  type SchemaHistoryResponse,
  type ShowTableResponse,
} from "./gen/gateway/v1/schema";
import type { FieldType, Value } from "./gen/gateway/v1/value";
import type { Statement } from "./gen/gateway/v1/statement";
import { GatewayError, WriteBatchError } from "./errors";
import type { Condition } from "./gen/gateway/v1/transaction";
import { type ColumnValue, type KeyInput, keyValues, type Row, rowOf, toValue } from "./values";
import { type StreamOptions, WriteStream } from "./stream";

/** A column for createTable and addColumn: name, type, default (NULL when absent), NOT NULL. */
export interface ColumnSpec {
  name: string;
  type: FieldType;
  default?: ColumnValue;
  notNull?: boolean;
}

function columnDef(c: ColumnSpec): ColumnDef {
  const defaultValue = c.default === undefined || c.default === null ? undefined : toValue(c.default).value;
  return { name: c.name, type: c.type, defaultValue, notNull: c.notNull ?? false };
}

export interface ClientOptions {
  /** Sent as "authorization: Bearer <token>" on every call. */
  token?: string;
  /** Speak TLS, trusting these CA certificates (PEM). */
  rootCerts?: Buffer;
  /** Overall deadline of a call, retries included (default 30 000 ms). */
  timeoutMs?: number;
  /** Deadline of one attempt (default 5 000 ms). */
  attemptTimeoutMs?: number;
  /** Longest pause between retries (default 1 000 ms; the first is 20 ms). */
  maxBackoffMs?: number;
  /** Extra @grpc/grpc-js channel options. */
  channelOptions?: grpc.ChannelOptions;
}

export type ConsistencyName = "linearizable" | "lease" | "stale";

export interface ReadOptions {
  consistency?: ConsistencyName;
  timeoutMs?: number;
}

export interface ScanOptions extends ReadOptions {
  /** First key (inclusive). */
  start?: KeyInput;
  /**
   * Start after this key (exclusive; instead of `start`): a key, or a row's `keyValues`. A scan
   * whose response had `more` continues with `startAfter` = its last row's `keyValues`: every
   * page moves on, however few rows the response's size let through.
   */
  startAfter?: KeyInput | Value[];
  /** End key (exclusive). */
  end?: KeyInput;
  /** Row limit: 0 = the server's 1000; at most 10 000. */
  limit?: number;
}

export interface WriteOptions {
  /** At most 128 bytes; a key used before returns the first write's result (duplicate). */
  idempotencyKey?: string;
  /** Conditions the rows must meet when the write is applied (`condition.absent`, ...). */
  conditions?: Condition[];
  timeoutMs?: number;
}

export interface SubscribeOptions {
  /** Aborting ends the subscription (the iteration throws the abort reason). */
  signal?: AbortSignal;
  /** Called before each reconnection with the target that failed and why. */
  onReconnect?: (target: string, error: GatewayError) => void;
}

/** Where a subscription starts: a log index (0 or 1: the start) or just after a GTID. */
export type Position = { fromLogIndex: bigint | number } | { afterGtid: { serverId: number; transId: bigint | number } };

const CONSISTENCY: Record<ConsistencyName, Consistency> = {
  linearizable: Consistency.CONSISTENCY_LINEARIZABLE,
  lease: Consistency.CONSISTENCY_LEASE,
  stale: Consistency.CONSISTENCY_STALE,
};

const FIRST_BACKOFF_MS = 20;

type Unary<Req, Resp> = (
  req: Req,
  md: grpc.Metadata,
  opts: Partial<grpc.CallOptions>,
  cb: (err: grpc.ServiceError | null, resp: Resp) => void,
) => grpc.ClientUnaryCall;

const retryable = (code: grpc.status) => code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED;
const jitter = (ms: number) => ms * (0.5 + Math.random());

export class GatewayClient {
  private readonly targetList: string[];
  private current = 0;
  private readonly stubs = new Map<string, GatewayStub>();
  private readonly readsStubs = new Map<string, ReadsStub>();
  private readonly schemaStubs = new Map<string, SchemaStub>();
  private readonly credentials: grpc.ChannelCredentials;
  private readonly timeoutMs: number;
  private readonly attemptTimeoutMs: number;
  private readonly maxBackoffMs: number;
  private closed = false;

  constructor(
    targets: string | string[],
    private readonly options: ClientOptions = {},
  ) {
    this.targetList = typeof targets === "string" ? [targets] : [...targets];
    if (this.targetList.length === 0) {
      throw new TypeError("GatewayClient: at least one target host:port is needed");
    }
    this.credentials = options.rootCerts ? grpc.credentials.createSsl(options.rootCerts) : grpc.credentials.createInsecure();
    this.timeoutMs = positive(options.timeoutMs ?? 30_000, "timeoutMs");
    this.attemptTimeoutMs = positive(options.attemptTimeoutMs ?? 5_000, "attemptTimeoutMs");
    this.maxBackoffMs = positive(options.maxBackoffMs ?? 1_000, "maxBackoffMs");
  }

  /** The node addresses the client knows (leaders it was redirected to included). */
  get targets(): string[] {
    return [...this.targetList];
  }

  private stub(target: string): GatewayStub {
    if (this.closed) {
      throw new GatewayError(grpc.status.CANCELLED, "client is closed");
    }
    let stub = this.stubs.get(target);
    if (stub === undefined) {
      stub = new GatewayStub(target, this.credentials, this.options.channelOptions);
      this.stubs.set(target, stub);
    }
    return stub;
  }

  /** The Reads service's stub of `target`, on the Gateway stub's channel. */
  private readsStub(target: string): ReadsStub {
    const gateway = this.stub(target);
    let stub = this.readsStubs.get(target);
    if (stub === undefined) {
      stub = new ReadsStub(target, this.credentials, { channelOverride: gateway.getChannel() });
      this.readsStubs.set(target, stub);
    }
    return stub;
  }

  /** The Schema service's stub of `target`, on the Gateway stub's channel. */
  private schemaStub(target: string): SchemaStub {
    const gateway = this.stub(target);
    let stub = this.schemaStubs.get(target);
    if (stub === undefined) {
      stub = new SchemaStub(target, this.credentials, { channelOverride: gateway.getChannel() });
      this.schemaStubs.set(target, stub);
    }
    return stub;
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.options.token) {
      md.set("authorization", `Bearer ${this.options.token}`);
    }
    return md;
  }

  /** After a failure on `failed`: the named leader, else the target after it. */
  private moveOn(failed: string, leaderApi: string): void {
    if (leaderApi) {
      let i = this.targetList.indexOf(leaderApi);
      if (i < 0) {
        i = this.targetList.push(leaderApi) - 1;
      }
      this.current = i;
    } else if (this.targetList[this.current] === failed) {
      this.current = (this.current + 1) % this.targetList.length;
    }
  }

  /** One unary call with the retry rules of the module comment. */
  private async call<Req, Resp>(pick: (s: GatewayStub) => Unary<Req, Resp>, req: Req, timeoutMs?: number): Promise<Resp> {
    return this.callOn((t) => this.stub(t), pick, req, timeoutMs);
  }

  /** `call` on the stub `stubOf` gives for the target (another service of the same channel). */
  private async callOn<S, Req, Resp>(stubOf: (target: string) => S, pick: (s: S) => Unary<Req, Resp>, req: Req, timeoutMs?: number): Promise<Resp> {
    const deadline = Date.now() + (timeoutMs ?? this.timeoutMs);
    let backoff = FIRST_BACKOFF_MS;
    for (;;) {
      const target = this.targetList[this.current];
      const stub = stubOf(target);
      const attemptDeadline = new Date(Math.min(Date.now() + this.attemptTimeoutMs, Math.max(deadline, Date.now() + 10)));
      try {
        return await new Promise<Resp>((resolve, reject) => {
          pick(stub).call(stub, req, this.metadata(), { deadline: attemptDeadline }, (err, resp) => (err ? reject(err) : resolve(resp)));
        });
      } catch (e) {
        const err = GatewayError.from(e);
        if (!retryable(err.code) || Date.now() + backoff >= deadline) {
          throw err;
        }
        this.moveOn(target, err.leaderApi);
        await sleep(jitter(backoff));
        backoff = Math.min(2 * backoff, this.maxBackoffMs);
      }
    }
  }

  /** Writes one transaction; resolves with its GTID, epoch, commit timestamp and log index. */
  async write(statements: Statement[], opts: WriteOptions = {}): Promise<WriteResult> {
    const req = { statements, idempotencyKey: opts.idempotencyKey ?? randomUUID(), conditions: opts.conditions ?? [] };
    return this.call((s) => s.write, req, opts.timeoutMs);
  }

  /**
   * Writes whole write requests (statements, conditions, a key: a fresh one where empty) in one
   * round trip; results in order. A write whose conditions fail is refused alone: the others are
   * applied and the promise rejects with a WriteBatchError saying which were refused.
   */
  async writeBatchRequests(
    writes: Array<{ statements: Statement[]; conditions?: Condition[]; idempotencyKey?: string }>,
    opts: { timeoutMs?: number } = {},
  ): Promise<WriteResult[]> {
    const req = {
      writes: writes.map((w) => ({ statements: w.statements, conditions: w.conditions ?? [], idempotencyKey: w.idempotencyKey || randomUUID() })),
    };
    const resp = await this.call((s) => s.writeBatch, req, opts.timeoutMs);
    if (resp.errors.length === 0) return resp.results;
    const results: Array<WriteResult | undefined> = [...resp.results];
    const refused = new Map<number, GatewayError>();
    for (const e of resp.errors) {
      refused.set(e.index, new GatewayError(e.code, e.error, e.field));
      results[e.index] = undefined;
    }
    throw new WriteBatchError(results, refused);
  }

  /** Writes many transactions in one round trip, each with its own key; results in order. */
  async writeBatch(writes: Statement[][], opts: { timeoutMs?: number } = {}): Promise<WriteResult[]> {
    const req = { writes: writes.map((statements) => ({ statements, idempotencyKey: randomUUID(), conditions: [] })) };
    return (await this.call((s) => s.writeBatch, req, opts.timeoutMs)).results;
  }

  /** Reads one row of `table` ("schema.table"); `key` is a value or the key values in order. */
  async read(table: string, key: KeyInput, opts: ReadOptions = {}): Promise<ReadResponse> {
    const req = { table, key: keyValues(key), consistency: CONSISTENCY[opts.consistency ?? "linearizable"] };
    return this.call((s) => s.read, req, opts.timeoutMs);
  }

  /** The row as column name -> value, or undefined when there is none. */
  async get(table: string, key: KeyInput, opts: ReadOptions = {}): Promise<Row | undefined> {
    const resp = await this.read(table, key, opts);
    return resp.found && resp.row ? rowOf(resp.row) : undefined;
  }

  /**
   * The rows of many keys of `table` in one call (Reads.ReadBatch): one result per key in order,
   * all read at one applied index after one read point. Each key is a value or the key values.
   */
  async readBatch(table: string, keys: KeyInput[], opts: ReadOptions = {}): Promise<ReadBatchResponse> {
    const req = { table, keys: keys.map((k) => ({ table: "", key: keyValues(k) })), consistency: CONSISTENCY[opts.consistency ?? "linearizable"] };
    return this.callOn((t) => this.readsStub(t), (s) => s.readBatch, req, opts.timeoutMs);
  }

  /** readBatch's rows as column name -> value (undefined for a key with no row), in order. */
  async getMany(table: string, keys: KeyInput[], opts: ReadOptions = {}): Promise<Array<Row | undefined>> {
    const resp = await this.readBatch(table, keys, opts);
    return resp.results.map((r) => (r.found && r.row ? rowOf(r.row) : undefined));
  }

  /**
   * Rows with start <= key < end (startAfter < key < end) in key order; `more` when the limit
   * or the response's size stopped the scan (continue with `startAfter`).
   */
  async scan(table: string, opts: ScanOptions = {}): Promise<ScanResponse> {
    if (opts.start !== undefined && opts.startAfter !== undefined) {
      throw new TypeError("scan: give start or startAfter, not both");
    }
    const after = opts.startAfter;
    const req = {
      table,
      startKey:
        after !== undefined ? (isValues(after) ? after : keyValues(after))
        : opts.start === undefined ? [] : keyValues(opts.start),
      endKey: opts.end === undefined ? [] : keyValues(opts.end),
      limit: opts.limit ?? 0,
      consistency: CONSISTENCY[opts.consistency ?? "linearizable"],
      sharedShape: false, // whole rows, each with its table and columns
      startAfter: after !== undefined,
    };
    return this.call((s) => s.scan, req, opts.timeoutMs);
  }

  /**
   * Commits one table-definition change (Schema.ChangeSchema, admin token; docs/schema.md) and
   * resolves with the definition after it, its version and the event's log index. Rejects with a
   * GatewayError: INVALID_ARGUMENT for a malformed change (`field` names the request field),
   * FAILED_PRECONDITION with the reason for one that cannot be applied everywhere (a type or
   * primary-key change, a `baseVersion` that is not the table's). createTable, addColumn,
   * dropColumn, renameColumn and dropTable build the request.
   */
  async changeSchema(req: Partial<SchemaChangeRequest> & { table: string; kind: SchemaChangeKind }, opts: { timeoutMs?: number } = {}): Promise<SchemaChangeResponse> {
    const full: SchemaChangeRequest = { columns: [], primaryKey: [], column: undefined, oldName: "", newName: "", baseVersion: 0n, ...req };
    return this.callOn((t) => this.schemaStub(t), (s) => s.changeSchema, full, opts.timeoutMs);
  }

  /** CREATE TABLE: `columns` key columns first, `primaryKey` their names; version 1. */
  async createTable(table: string, primaryKey: string[], columns: ColumnSpec[], opts: { timeoutMs?: number } = {}): Promise<SchemaChangeResponse> {
    return this.changeSchema({ table, kind: SchemaChangeKind.SCHEMA_CHANGE_KIND_CREATE, primaryKey, columns: columns.map(columnDef) }, opts);
  }

  /** ALTER TABLE ... ADD COLUMN, with its default (rows written before get it). */
  async addColumn(table: string, column: ColumnSpec, opts: { timeoutMs?: number } = {}): Promise<SchemaChangeResponse> {
    return this.changeSchema({ table, kind: SchemaChangeKind.SCHEMA_CHANGE_KIND_ADD_COLUMN, column: columnDef(column) }, opts);
  }

  /** ALTER TABLE ... DROP COLUMN `name`. */
  async dropColumn(table: string, name: string, opts: { timeoutMs?: number } = {}): Promise<SchemaChangeResponse> {
    const column = { name, type: 0 as FieldType, defaultValue: undefined, notNull: false };
    return this.changeSchema({ table, kind: SchemaChangeKind.SCHEMA_CHANGE_KIND_DROP_COLUMN, column }, opts);
  }

  /** ALTER TABLE ... RENAME COLUMN `oldName` TO `newName`. */
  async renameColumn(table: string, oldName: string, newName: string, opts: { timeoutMs?: number } = {}): Promise<SchemaChangeResponse> {
    return this.changeSchema({ table, kind: SchemaChangeKind.SCHEMA_CHANGE_KIND_RENAME_COLUMN, oldName, newName }, opts);
  }

  /** DROP TABLE (its history keeps its last version). */
  async dropTable(table: string, opts: { timeoutMs?: number } = {}): Promise<SchemaChangeResponse> {
    return this.changeSchema({ table, kind: SchemaChangeKind.SCHEMA_CHANGE_KIND_DROP_TABLE }, opts);
  }

  /** The definition and version of `table` on the node that answers (read token; a follower may lag). */
  async showTable(table: string, opts: { timeoutMs?: number } = {}): Promise<ShowTableResponse> {
    return this.callOn((t) => this.schemaStub(t), (s) => s.showTable, { table }, opts.timeoutMs);
  }

  /** The applied schema events of `table`, oldest first, and the changes that lost with their causes. */
  async schemaHistory(table: string, opts: { timeoutMs?: number } = {}): Promise<SchemaHistoryResponse> {
    return this.callOn((t) => this.schemaStub(t), (s) => s.schemaHistory, { table }, opts.timeoutMs);
  }

  /** Status of the node currently targeted (one attempt, no failover). */
  async status(): Promise<StatusResponse> {
    const stub = this.stub(this.targetList[this.current]);
    return new Promise((resolve, reject) => {
      stub.status({}, this.metadata(), { deadline: new Date(Date.now() + this.attemptTimeoutMs) }, (err, resp) =>
        err ? reject(GatewayError.from(err)) : resolve(resp),
      );
    });
  }

  /**
   * The committed transactions from `from` on, in log order, forever:
   *
   *     for await (const ev of client.subscribe({ fromLogIndex: 1n })) { ... }
   *
   * When the stream breaks (the node stopped or died) it reconnects to the next target (in
   * turn, with backoff; any node serves a subscription) and resumes from the last delivered
   * log index + 1, so no event is lost or repeated. It throws a GatewayError when no node
   * served it for the client's timeout, or at once on another error (such as INVALID_ARGUMENT
   * for a compacted position). Leaving the loop (break) or aborting `signal` cancels the call.
   */
  async *subscribe(from: Position, opts: SubscribeOptions = {}): AsyncGenerator<ChangeEvent, void, undefined> {
    let req: SubscribeRequest =
      "afterGtid" in from
        ? SubscribeRequest.fromPartial({ afterGtid: { serverId: from.afterGtid.serverId, transId: BigInt(from.afterGtid.transId) } })
        : SubscribeRequest.fromPartial({ fromLogIndex: BigInt(from.fromLogIndex) });
    const targets = this.targets;
    let idx = Math.max(0, targets.indexOf(this.targetList[this.current]));
    let last = 0n;
    let failingSince = 0;
    let backoff = FIRST_BACKOFF_MS;
    const { signal } = opts;
    for (;;) {
      signal?.throwIfAborted();
      const target = targets[idx];
      const call = this.stub(target).subscribe(req, this.metadata());
      const cancel = () => call.cancel();
      signal?.addEventListener("abort", cancel);
      let failure: GatewayError;
      try {
        for await (const ev of call as AsyncIterable<ChangeEvent>) {
          failingSince = 0;
          backoff = FIRST_BACKOFF_MS;
          if (ev.logIndex <= last) {
            continue; // already delivered (never expected: resumption starts after last)
          }
          last = ev.logIndex;
          yield ev;
        }
        failure = new GatewayError(grpc.status.UNAVAILABLE, "the server ended the stream");
      } catch (e) {
        signal?.throwIfAborted();
        failure = GatewayError.from(e);
      } finally {
        signal?.removeEventListener("abort", cancel);
        call.cancel();
      }
      const now = Date.now();
      failingSince ||= now;
      const resumable = failure.code === grpc.status.UNAVAILABLE || failure.code === grpc.status.CANCELLED;
      if (!resumable || now - failingSince > this.timeoutMs) {
        throw failure;
      }
      opts.onReconnect?.(target, failure);
      if (last > 0n) {
        req = SubscribeRequest.fromPartial({ fromLogIndex: last + 1n });
      }
      idx = (idx + 1) % targets.length;
      await sleep(jitter(backoff), undefined, { signal });
      backoff = Math.min(2 * backoff, this.maxBackoffMs);
    }
  }

  /**
   * A WriteStream on one StreamWrite call to the current target (a follower forwards each write
   * to the leader); see ./stream.ts. Writes on a stream are not retried: each keeps its
   * idempotency key to be sent again.
   */
  stream(opts: StreamOptions = {}): WriteStream {
    const target = this.targetList[this.current];
    const callOpts: Partial<grpc.CallOptions> = opts.deadlineMs === undefined ? {} : { deadline: new Date(Date.now() + opts.deadlineMs) };
    const call = this.stub(target).streamWrite(this.metadata(), callOpts);
    return new WriteStream(call, opts, (err) => this.moveOn(target, err.leaderApi));
  }

  /** Closes every channel; calls in progress fail. */
  close(): void {
    this.closed = true;
    for (const stub of this.stubs.values()) {
      stub.close();
    }
    this.stubs.clear();
    this.readsStubs.clear(); // on the Gateway stubs' channels, closed above
  }
}

function positive(v: number, what: string): number {
  if (!(v > 0)) {
    throw new RangeError(`${what}: must be positive`);
  }
  return v;
}

/** Whether `key` is key values as a row holds them (`Row.keyValues`), not key input. */
function isValues(key: KeyInput | Value[]): key is Value[] {
  return (
    Array.isArray(key) &&
    key.length > 0 &&
    key.every((k) => typeof k === "object" && k !== null && !Buffer.isBuffer(k) && "kind" in k)
  );
}
