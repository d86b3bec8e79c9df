// WriteStream: many writes in flight on one StreamWrite call (the Go and Python clients' write
// stream, docs/node.md "API"), opened by GatewayClient.stream().
//
// send() queues a write and resolves with its PendingWrite at once, waiting only while
// `window` writes are unacknowledged. Each write gets the next sequence number (from 1); the
// writes queued in one turn of the event loop leave together in as few StreamWriteRequests as
// they fit (up to `maxPerRequest` each, `seq` = the first write's number), and while writes it
// sent are unacknowledged the stream lets queued writes wait for the next response of acks (or
// a full request) so they leave together, as the Go client does. The server acknowledges each
// write by its sequence number, packed the same way and in any order: each ack settles the
// write with that number.
//
// Failures: a write the server refuses (a failed condition: FAILED_PRECONDITION naming
// "conditions[i]"; an invalid write) rejects its own `result` with a GatewayError; the stream
// goes on. If the stream itself breaks (node down, deadline, abort()), every unacknowledged
// write rejects with the stream's error and later sends reject with it; an UNAVAILABLE break
// moves the client on to the leader it names or the next target, as a call does. Nothing is
// retried on a stream: every write carries an idempotency key (`PendingWrite.idempotencyKey`),
// so sending the failed ones again -- on a new stream or with `write` and that key -- never
// applies a write twice.

import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type { StreamWriteRequest, StreamWriteResponse, WriteRequest, WriteResult } from "./gen/gateway/v1/gateway";
import type { Statement } from "./gen/gateway/v1/statement";
import type { Condition } from "./gen/gateway/v1/transaction";
import { GatewayError } from "./errors";

export interface StreamOptions {
  /** Writes sent or queued and not yet acknowledged at most (default 1024): send() waits. */
  window?: number;
  /** Writes per StreamWriteRequest at most (default 256). */
  maxPerRequest?: number;
  /** Deadline of the whole call (default: none). */
  deadlineMs?: number;
}

export interface StreamSendOptions {
  /** The write's key (default: a random UUID; "" sends none: the write is not deduplicated). */
  idempotencyKey?: string;
  /** Conditions the rows must meet when the write is applied (`condition.absent`, ...). */
  conditions?: Condition[];
}

/** One write sent on a WriteStream. */
export interface PendingWrite {
  /** The key the write carries (to send it again safely). */
  readonly idempotencyKey: string;
  /** Its result once acknowledged; rejects with a GatewayError when refused or the stream broke. */
  readonly result: Promise<WriteResult>;
}

interface Slot {
  resolve: (r: WriteResult) => void;
  reject: (e: GatewayError) => void;
}

export class WriteStream {
  private readonly window: number;
  private readonly maxPerRequest: number;
  /** Serialized in order: the writes numbered queueSeq, queueSeq + 1, ... */
  private queue: WriteRequest[] = [];
  private queueSeq = 1n;
  private seq = 0n;
  private readonly pending = new Map<bigint, Slot>();
  private failed: GatewayError | undefined;
  private closing = false;
  private halfClosed = false;
  private acked = false; // a response of acks arrived since the last request was sent
  private flushScheduled = false;
  private roomWaiters: Array<() => void> = [];
  private readonly ended: Promise<void>;
  private markEnded!: () => void;

  /** Use GatewayClient.stream(). `onUnavailable` moves the client on when the stream breaks so. */
  constructor(
    private readonly call: grpc.ClientDuplexStream<StreamWriteRequest, StreamWriteResponse>,
    opts: StreamOptions,
    onUnavailable: (err: GatewayError) => void,
  ) {
    this.window = opts.window ?? 1024;
    this.maxPerRequest = opts.maxPerRequest ?? 256;
    if (!(this.window >= 1) || !(this.maxPerRequest >= 1)) {
      call.on("error", () => {}); // the cancellation below
      call.cancel();
      throw new RangeError("WriteStream: window and maxPerRequest must be at least 1");
    }
    this.ended = new Promise((resolve) => (this.markEnded = resolve));
    call.on("data", (resp: StreamWriteResponse) => this.onAcks(resp));
    call.on("error", (e: unknown) => {
      const err = GatewayError.from(e);
      if (err.code === grpc.status.UNAVAILABLE) onUnavailable(err);
      this.fail(err);
      this.markEnded();
    });
    call.on("end", () => {
      if (this.pending.size > 0) {
        this.fail(new GatewayError(grpc.status.UNAVAILABLE, `the stream ended with ${this.pending.size} writes unacknowledged`));
      }
      this.markEnded();
    });
  }

  /** The writes sent or queued and not yet acknowledged. */
  get inFlight(): number {
    return this.pending.size;
  }

  /**
   * Queues one write, waiting while the window is full; resolves with its PendingWrite. Rejects
   * with the stream's GatewayError when it broke, FAILED_PRECONDITION when it is closing.
   */
  async send(statements: Statement[], opts: StreamSendOptions = {}): Promise<PendingWrite> {
    this.refuseIfDone();
    while (this.pending.size >= this.window) {
      await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
      this.refuseIfDone();
    }
    const write: WriteRequest = { statements, idempotencyKey: opts.idempotencyKey ?? randomUUID(), conditions: opts.conditions ?? [] };
    this.seq += 1n;
    if (this.queue.length === 0) this.queueSeq = this.seq;
    this.queue.push(write);
    const result = new Promise<WriteResult>((resolve, reject) => this.pending.set(this.seq, { resolve, reject }));
    result.catch(() => {}); // a write nobody awaits may fail without an unhandled rejection
    this.schedule();
    return { idempotencyKey: write.idempotencyKey, result };
  }

  /**
   * Stops taking writes, waits for every outstanding ack and ends the call. Rejects with the
   * stream's error when it broke (its unacknowledged writes failed with it); a write the server
   * refused is reported by its own PendingWrite.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.wakeAll();
    this.schedule();
    await this.ended;
    if (this.failed) throw this.failed;
  }

  /** Ends the call at once: every unacknowledged write fails with CANCELLED (it may still have
   * been applied: its idempotency key tells). */
  abort(): void {
    this.fail(new GatewayError(grpc.status.CANCELLED, "the write stream was aborted"));
    this.call.cancel();
  }

  private refuseIfDone(): void {
    if (this.failed) throw this.failed;
    if (this.closing) throw new GatewayError(grpc.status.FAILED_PRECONDITION, "the write stream is closing");
  }

  private schedule(): void {
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        this.flush();
      });
    }
  }

  /** Sends the queued writes, as many per request as there are (up to maxPerRequest). */
  private flush(): void {
    while (!this.failed && this.queue.length > 0) {
      const unacknowledgedSent = this.pending.size > this.queue.length;
      if (!this.closing && this.queue.length < this.maxPerRequest && !this.acked && unacknowledgedSent) {
        return; // wait for the next response of acks: the writes queued meanwhile leave together
      }
      this.acked = false;
      const writes = this.queue.splice(0, this.maxPerRequest);
      this.call.write({ seq: this.queueSeq, writes });
      this.queueSeq += BigInt(writes.length);
    }
    if (this.closing && !this.failed && this.queue.length === 0 && !this.halfClosed) {
      this.halfClosed = true; // everything sent: the server acks the rest, then ends the call
      this.call.end();
    }
  }

  private onAcks(resp: StreamWriteResponse): void {
    for (const ack of resp.acks) {
      const slot = this.pending.get(ack.seq);
      if (slot === undefined) continue; // not ours (never expected), or failed with the stream
      this.pending.delete(ack.seq);
      if (ack.code === 0 && ack.result !== undefined) {
        slot.resolve(ack.result);
      } else {
        slot.reject(new GatewayError(ack.code || grpc.status.UNKNOWN, ack.error, ack.field));
      }
    }
    this.acked = true;
    this.wakeAll();
    this.schedule();
  }

  private wakeAll(): void {
    const waiters = this.roomWaiters;
    this.roomWaiters = [];
    for (const w of waiters) w();
  }

  /** Records the stream's error (the first wins) and fails every unacknowledged write. */
  private fail(err: GatewayError): void {
    this.failed ??= err;
    this.queue = [];
    const left = [...this.pending.values()];
    this.pending.clear();
    for (const slot of left) slot.reject(this.failed);
    this.wakeAll();
  }
}
