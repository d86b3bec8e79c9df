package io.gateway.client;

import io.gateway.v1.Condition;
import io.gateway.v1.GatewayGrpc;
import io.gateway.v1.Statement;
import io.gateway.v1.StreamWriteAck;
import io.gateway.v1.StreamWriteRequest;
import io.gateway.v1.StreamWriteResponse;
import io.gateway.v1.WriteRequest;
import io.gateway.v1.WriteResult;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;

/**
 * One open {@code StreamWrite} call: many writes in flight, each acknowledged on its own (the Go
 * and Python clients' write stream, docs/node.md "API"). Opened by {@link
 * GatewayClient#stream}.
 *
 * <p>{@link #send} queues a write and returns at once with its {@link PendingWrite}, waiting
 * only while {@code window} writes are unacknowledged. Each write gets the next sequence number
 * (from 1); a sender thread packs the writes queued meanwhile into as few {@code
 * StreamWriteRequest}s as it can (up to {@code maxPerRequest} each, {@code seq} = the first
 * write's number), and while writes it sent are unacknowledged it lets queued writes wait for
 * the next response of acks (or a full request) so they leave together, as the Go client does.
 * The server acknowledges each write by its sequence number, packed the same way and in any
 * order: each ack completes the write with that number.
 *
 * <p>Failures: a write the server refuses (a failed condition: FAILED_PRECONDITION naming
 * {@code conditions[i]}; an invalid write) fails its own {@link PendingWrite} with a {@link
 * GatewayException}; the stream goes on. If the stream itself breaks (node down, deadline,
 * {@link #abort}), every unacknowledged write fails with the stream's error and later sends
 * throw it; an UNAVAILABLE break moves the client on to the leader it names or the next
 * target, as a call does. Nothing is retried on a stream: every write carries an idempotency
 * key ({@link PendingWrite#idempotencyKey}), so sending the failed ones again -- on a new
 * stream or with {@link GatewayClient#write(List, String)} -- never applies a write twice.
 *
 * <p>Thread-safe.
 */
public final class WriteStream implements AutoCloseable {
  /** One write sent on a stream. */
  public static final class PendingWrite {
    private final String idempotencyKey;
    private final CompletableFuture<WriteResult> result = new CompletableFuture<>();

    PendingWrite(String idempotencyKey) {
      this.idempotencyKey = idempotencyKey;
    }

    /** The key the write carries (to send it again safely). */
    public String idempotencyKey() {
      return idempotencyKey;
    }

    /**
     * The write's result, completed when it is acknowledged; completed exceptionally with a
     * {@link GatewayException} when it was refused or the stream broke.
     */
    public CompletableFuture<WriteResult> result() {
      return result;
    }

    /** Waits for the write: its result, or throws the {@link GatewayException} it failed with. */
    public WriteResult join() {
      try {
        return result.join();
      } catch (java.util.concurrent.CompletionException e) {
        if (e.getCause() instanceof GatewayException g) {
          throw g;
        }
        throw e;
      }
    }
  }

  private final GatewayClient client;
  private final String target;
  private final int maxPerRequest;
  private final Semaphore window;
  private final Context.CancellableContext context;
  private final StreamObserver<StreamWriteRequest> requests;
  private final Thread sender;

  // Guarded by this.
  private final ArrayDeque<WriteRequest> queue = new ArrayDeque<>();
  private long queueSeq = 1; // sequence number of queue's first write
  private long seq; // the last sequence number given
  private final Map<Long, PendingWrite> pending = new HashMap<>();
  private GatewayException failed;
  private boolean closing;
  private boolean acked; // a response of acks arrived since the last request was sent
  private boolean ended; // the call is over (completed or failed)

  WriteStream(GatewayClient client, String target, int window, int maxPerRequest,
      java.time.Duration deadline) {
    if (window < 1 || maxPerRequest < 1) {
      throw new IllegalArgumentException("window and maxPerRequest must be at least 1");
    }
    this.client = client;
    this.target = target;
    this.maxPerRequest = maxPerRequest;
    this.window = new Semaphore(window);
    this.context = Context.current().withCancellation();
    GatewayGrpc.GatewayStub stub = GatewayGrpc.newStub(client.channel(target));
    if (deadline != null) {
      stub = stub.withDeadlineAfter(deadline.toNanos(), java.util.concurrent.TimeUnit.NANOSECONDS);
    }
    // The call lives in a cancellable context of its own: abort and close end it.
    Context previous = context.attach();
    try {
      this.requests = stub.streamWrite(new Receiver());
    } finally {
      context.detach(previous);
    }
    this.sender = new Thread(this::sendLoop, "gateway-write-stream-sender");
    sender.setDaemon(true);
    sender.start();
  }

  /** Queues one write with a fresh idempotency key. */
  public PendingWrite send(List<Statement> statements) {
    return send(statements, UUID.randomUUID().toString(), List.of());
  }

  /** Queues one write with this idempotency key ("" sends none: it is not deduplicated). */
  public PendingWrite send(List<Statement> statements, String idempotencyKey) {
    return send(statements, idempotencyKey, List.of());
  }

  /**
   * Queues one conditional write (see {@link Conditions}): refused whole, failing its own
   * {@link PendingWrite} with FAILED_PRECONDITION, when a condition does not hold.
   */
  public PendingWrite send(List<Statement> statements, String idempotencyKey,
      List<Condition> conditions) {
    return send(WriteRequest.newBuilder().addAllStatements(statements)
        .setIdempotencyKey(idempotencyKey).addAllConditions(conditions).build());
  }

  /**
   * Queues one whole write request (as it is: its key, if any, is kept), waiting while the
   * window is full; throws the stream's {@link GatewayException} when it broke, and
   * FAILED_PRECONDITION when it is closing. An interrupt while waiting throws CANCELLED.
   */
  public PendingWrite send(WriteRequest write) {
    refuseIfDone();
    try {
      window.acquire();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new GatewayException(Status.Code.CANCELLED, "interrupted", "", "", e);
    }
    PendingWrite p = new PendingWrite(write.getIdempotencyKey());
    synchronized (this) {
      if (failed != null || closing) {
        window.release();
        refuseIfDone();
      }
      seq++;
      if (queue.isEmpty()) {
        queueSeq = seq;
      }
      queue.add(write);
      pending.put(seq, p);
      notifyAll();
    }
    return p;
  }

  /** The writes sent or queued and not yet acknowledged. */
  public synchronized int inFlight() {
    return pending.size();
  }

  private synchronized void refuseIfDone() {
    if (failed != null) {
      throw failed;
    }
    if (closing) {
      throw new GatewayException(Status.Code.FAILED_PRECONDITION, "the write stream is closing",
          "", "", null);
    }
  }

  /**
   * Stops taking writes, waits for every outstanding ack and ends the call. Throws the stream's
   * error when it broke (its unacknowledged writes failed with it); a write the server refused
   * is reported by its own {@link PendingWrite}.
   */
  @Override
  public void close() {
    synchronized (this) {
      closing = true;
      notifyAll();
      while (!ended) {
        try {
          wait();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    context.cancel(null);
    synchronized (this) {
      if (failed != null) {
        throw failed;
      }
    }
  }

  /**
   * Ends the call at once: every unacknowledged write fails with CANCELLED (it may still have
   * been applied: its idempotency key tells).
   */
  public void abort() {
    fail(new GatewayException(Status.Code.CANCELLED, "the write stream was aborted", "", "", null));
    context.cancel(null);
  }

  /** Sends the queued writes, as many per request as there are, until closed or failed. */
  private void sendLoop() {
    while (true) {
      StreamWriteRequest req;
      synchronized (this) {
        while (failed == null && !closing && (queue.isEmpty()
            || queue.size() < maxPerRequest && !acked && pending.size() > queue.size())) {
          try {
            wait();
          } catch (InterruptedException e) {
            return;
          }
        }
        if (failed != null) {
          return;
        }
        if (queue.isEmpty()) { // closing, everything sent: the server acks the rest, then ends
          requests.onCompleted();
          return;
        }
        acked = false;
        int n = Math.min(queue.size(), maxPerRequest);
        List<WriteRequest> writes = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          writes.add(queue.poll());
        }
        req = StreamWriteRequest.newBuilder().setSeq(queueSeq).addAllWrites(writes).build();
        queueSeq += n;
      }
      try {
        requests.onNext(req);
      } catch (RuntimeException e) {
        fail(toException(e));
        return;
      }
    }
  }

  private static GatewayException toException(Throwable t) {
    if (t instanceof GatewayException g) {
      return g;
    }
    if (t instanceof StatusRuntimeException e) {
      return GatewayException.of(e);
    }
    Status st = Status.fromThrowable(t);
    return GatewayException.of(st.asRuntimeException(Status.trailersFromThrowable(t)));
  }

  /** Records the stream's error (the first wins) and fails every unacknowledged write. */
  private void fail(GatewayException err) {
    List<PendingWrite> left;
    synchronized (this) {
      if (failed == null) {
        failed = err;
      }
      left = new ArrayList<>(pending.values());
      pending.clear();
      queue.clear();
      notifyAll();
    }
    for (PendingWrite p : left) {
      window.release();
      p.result.completeExceptionally(err);
    }
  }

  private final class Receiver implements StreamObserver<StreamWriteResponse> {
    @Override
    public void onNext(StreamWriteResponse resp) {
      for (StreamWriteAck ack : resp.getAcksList()) {
        PendingWrite p;
        synchronized (WriteStream.this) {
          p = pending.remove(ack.getSeq());
        }
        if (p == null) {
          continue; // not ours (never expected), or already failed with the stream
        }
        window.release();
        if (ack.getCode() == 0) {
          p.result.complete(ack.getResult());
        } else {
          p.result.completeExceptionally(new GatewayException(
              Status.fromCodeValue(ack.getCode()).getCode(), ack.getError(), ack.getField(), "",
              null));
        }
      }
      synchronized (WriteStream.this) {
        acked = true;
        WriteStream.this.notifyAll();
      }
    }

    @Override
    public void onError(Throwable t) {
      GatewayException g = toException(t);
      if (g.code() == Status.Code.UNAVAILABLE) {
        client.moveOn(target, g.leaderApi());
      }
      fail(g);
      end();
    }

    @Override
    public void onCompleted() {
      int left;
      synchronized (WriteStream.this) {
        left = pending.size();
      }
      if (left > 0) {
        fail(new GatewayException(Status.Code.UNAVAILABLE,
            "the stream ended with " + left + " writes unacknowledged", "", "", null));
      }
      end();
    }

    private void end() {
      synchronized (WriteStream.this) {
        ended = true;
        WriteStream.this.notifyAll();
      }
    }
  }
}
