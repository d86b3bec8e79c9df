package io.gateway.client;

import io.gateway.v1.ChangeEvent;
import io.gateway.v1.GatewayGrpc;
import io.gateway.v1.SubscribeRequest;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.function.BiConsumer;

/**
 * A change stream (see {@link GatewayClient#subscribe}): a blocking {@link Iterator} of
 * {@link ChangeEvent}s in log order that never ends by itself. When the stream breaks
 * (UNAVAILABLE: the node stopped or died; a stream ended or cancelled by the server) it
 * reconnects to the next target with backoff and resumes from the last delivered log index +
 * 1, so no event is lost or repeated; it throws {@link GatewayException} when no node served it
 * for the client's timeout, or at once on another error (such as INVALID_ARGUMENT for a
 * compacted position). {@link #close} (from any thread) cancels the stream; {@code hasNext}
 * then returns false.
 */
public final class Subscription implements Iterator<ChangeEvent>, AutoCloseable {
  private final GatewayClient client;
  private final BiConsumer<String, GatewayException> onReconnect;
  private final List<String> targets;
  private SubscribeRequest request;
  private int index;
  private volatile boolean closed;
  private Context.CancellableContext context;
  private Iterator<ChangeEvent> stream;
  private ChangeEvent next;
  private long last;

  Subscription(GatewayClient client, Position from, BiConsumer<String, GatewayException> onReconnect) {
    this.client = client;
    this.onReconnect = onReconnect;
    this.request = from.request();
    this.targets = client.targets();
    this.index = Math.max(0, targets.indexOf(client.currentTarget()));
  }

  private synchronized void open(String target) {
    if (closed) {
      throw Status.CANCELLED.withDescription("subscription closed").asRuntimeException();
    }
    context = Context.current().withCancellation();
    GatewayGrpc.GatewayBlockingStub stub = GatewayGrpc.newBlockingStub(client.channel(target));
    SubscribeRequest req = request;
    Context previous = context.attach(); // the call lives in (and is cancelled with) context
    try {
      stream = stub.subscribe(req);
    } finally {
      context.detach(previous);
    }
  }

  private synchronized void drop() {
    if (context != null) {
      context.cancel(null);
      context = null;
    }
    stream = null;
  }

  @Override
  public boolean hasNext() {
    long failingSince = 0;
    long backoff = GatewayClient.FIRST_BACKOFF_NANOS;
    while (true) {
      if (next != null) {
        return true;
      }
      if (closed) {
        return false;
      }
      String target = targets.get(index);
      GatewayException failure;
      try {
        if (stream == null) {
          open(target);
        }
        Iterator<ChangeEvent> s = stream;
        if (s == null) {
          continue; // closed meanwhile
        }
        if (s.hasNext()) {
          ChangeEvent ev = s.next();
          failingSince = 0;
          backoff = GatewayClient.FIRST_BACKOFF_NANOS;
          if (ev.getLogIndex() > last) { // never expected otherwise: resumption starts after last
            last = ev.getLogIndex();
            next = ev;
          }
          continue;
        }
        failure = new GatewayException(Status.Code.UNAVAILABLE, "the server ended the stream", "", "", null);
      } catch (StatusRuntimeException e) {
        if (closed) {
          return false;
        }
        failure = GatewayException.of(e);
      } catch (Exception e) {
        if (closed) {
          return false;
        }
        throw new GatewayException(Status.Code.UNKNOWN, String.valueOf(e), "", "", e);
      }
      drop();
      long now = System.nanoTime();
      if (failingSince == 0) {
        failingSince = now;
      }
      boolean resumable = failure.code() == Status.Code.UNAVAILABLE || failure.code() == Status.Code.CANCELLED;
      if (!resumable || now - failingSince > client.timeout.toNanos()) {
        throw failure;
      }
      onReconnect.accept(target, failure);
      if (last > 0) {
        request = SubscribeRequest.newBuilder().setFromLogIndex(last + 1).build();
      }
      index = (index + 1) % targets.size();
      GatewayClient.pause(backoff, failure);
      backoff = Math.min(2 * backoff, client.maxBackoff.toNanos());
    }
  }

  @Override
  public ChangeEvent next() {
    if (!hasNext()) {
      throw new NoSuchElementException("subscription closed");
    }
    ChangeEvent ev = next;
    next = null;
    return ev;
  }

  /** The log index of the last event delivered (0 before the first). */
  public long lastLogIndex() {
    return last;
  }

  /** Cancels the stream; safe from any thread. */
  @Override
  public void close() {
    closed = true;
    drop();
  }
}
