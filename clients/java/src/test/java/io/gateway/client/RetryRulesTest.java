package io.gateway.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gateway.v1.ChangeEvent;
import io.gateway.v1.GatewayGrpc;
import io.gateway.v1.Gtid;
import io.gateway.v1.Statement;
import io.gateway.v1.StreamWriteAck;
import io.gateway.v1.StreamWriteRequest;
import io.gateway.v1.StreamWriteResponse;
import io.gateway.v1.SubscribeRequest;
import io.gateway.v1.WriteRequest;
import io.gateway.v1.WriteResult;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Retry, redirect, deadline and error rules against in-process fake servers. */
class RetryRulesTest {
  private static final Context.Key<String> AUTH = Context.key("authorization");
  private static final Metadata.Key<String> AUTH_HEADER =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  interface WriteBehaviour {
    void write(int attempt, WriteRequest req, StreamObserver<WriteResult> out) throws Exception;
  }

  /** Records every Write attempt's idempotency key and authorization header. */
  static final class Fake extends GatewayGrpc.GatewayImplBase {
    final List<String> keys = new ArrayList<>();
    final List<String> auth = new ArrayList<>();
    final List<SubscribeRequest> subscribes = new ArrayList<>();
    final WriteBehaviour behaviour;
    final AtomicInteger subscribeCalls = new AtomicInteger();

    /** Serves StreamWrite when set (UNIMPLEMENTED otherwise). */
    Function<StreamObserver<StreamWriteResponse>, StreamObserver<StreamWriteRequest>> streamWrite;

    Fake(WriteBehaviour behaviour) {
      this.behaviour = behaviour;
    }

    @Override
    public StreamObserver<StreamWriteRequest> streamWrite(StreamObserver<StreamWriteResponse> out) {
      return streamWrite != null ? streamWrite.apply(out) : super.streamWrite(out);
    }

    @Override
    public void write(WriteRequest req, StreamObserver<WriteResult> out) {
      int n;
      synchronized (this) {
        n = keys.size();
        keys.add(req.getIdempotencyKey());
        auth.add(AUTH.get());
      }
      try {
        behaviour.write(n, req, out);
      } catch (Exception e) {
        out.onError(e);
      }
    }

    @Override
    public void subscribe(SubscribeRequest req, StreamObserver<ChangeEvent> out) {
      int n;
      synchronized (this) {
        n = subscribes.size();
        subscribes.add(req);
      }
      long start = req.getFromLogIndex();
      for (long i = start; i < start + 3; i++) {
        out.onNext(ChangeEvent.newBuilder().setLogIndex(i).build());
      }
      if (n == 0) {
        out.onError(Status.UNAVAILABLE.withDescription("node stopping").asRuntimeException());
      } // later calls stay open
    }
  }

  private final List<Server> servers = new ArrayList<>();
  private final List<GatewayClient> clients = new ArrayList<>();

  @AfterEach
  void stop() throws InterruptedException {
    clients.forEach(GatewayClient::close);
    for (Server s : servers) {
      s.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private String serve(Fake fake) throws Exception {
    ServerInterceptor auth = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
          ServerCallHandler<Q, R> next) {
        String v = headers.get(AUTH_HEADER);
        return Contexts.interceptCall(Context.current().withValue(AUTH, v == null ? "" : v), call, headers, next);
      }
    };
    Server s = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
        .addService(ServerInterceptors.intercept(fake, auth)).build().start();
    servers.add(s);
    return "127.0.0.1:" + s.getPort();
  }

  private GatewayClient client(String... targets) {
    GatewayClient c = GatewayClient.builder().targets(targets).token("s3cret")
        .attemptTimeout(Duration.ofSeconds(1)).maxBackoff(Duration.ofMillis(50)).build();
    clients.add(c);
    return c;
  }

  private static List<Statement> row() {
    return List.of(Rows.insert("fake.t", Rows.cols("id", 1L), Rows.cols("v", "a")));
  }

  private static void ok(int n, StreamObserver<WriteResult> out) {
    out.onNext(WriteResult.newBuilder().setLogIndex(100 + n)
        .setGtid(Gtid.newBuilder().setServerId(1).setTransId(n + 1)).build());
    out.onCompleted();
  }

  private static Exception unavailable(String leaderApi) {
    Metadata t = new Metadata();
    if (!leaderApi.isEmpty()) {
      t.put(GatewayException.LEADER_API, leaderApi);
    }
    return Status.UNAVAILABLE.withDescription("not the leader").asRuntimeException(t);
  }

  @Test
  void retriesReuseTheIdempotencyKeyAndSendTheToken() throws Exception {
    Fake f = new Fake((n, req, out) -> {
      if (n < 2) {
        throw unavailable("");
      }
      ok(n, out);
    });
    client(serve(f)).write(row());
    assertEquals(3, f.keys.size());
    assertFalse(f.keys.get(0).isEmpty());
    assertEquals(1, f.keys.stream().distinct().count(), "keys differ between attempts: " + f.keys);
    assertTrue(f.auth.stream().allMatch("Bearer s3cret"::equals), f.auth.toString());
  }

  @Test
  void eachWriteHasItsOwnKeyUnlessGiven() throws Exception {
    Fake f = new Fake((n, req, out) -> ok(n, out));
    GatewayClient c = client(serve(f));
    c.write(row());
    c.write(row());
    c.write(row(), "order-42");
    assertNotEquals(f.keys.get(0), f.keys.get(1));
    assertEquals("order-42", f.keys.get(2));
  }

  @Test
  void unavailableFollowsTheLeaderApiTrailer() throws Exception {
    Fake leader = new Fake((n, req, out) -> ok(n, out));
    String leaderAddr = serve(leader);
    Fake follower = new Fake((n, req, out) -> {
      throw unavailable(leaderAddr);
    });
    Fake other = new Fake((n, req, out) -> {
      throw unavailable("");
    });
    GatewayClient c = client(serve(follower), serve(other));
    c.write(row());
    assertEquals(1, follower.keys.size());
    assertEquals(0, other.keys.size(), "the next target was tried instead of the named leader");
    assertEquals(follower.keys, leader.keys);
    assertEquals(leaderAddr, c.targets().get(2));
  }

  @Test
  void unavailableWithoutTrailerMovesToTheNextTarget() throws Exception {
    Fake down = new Fake((n, req, out) -> {
      throw unavailable("");
    });
    Fake up = new Fake((n, req, out) -> ok(n, out));
    client(serve(down), serve(up)).write(row());
    assertEquals(1, down.keys.size());
    assertEquals(1, up.keys.size());
  }

  @Test
  void anAttemptPastItsDeadlineIsRetried() throws Exception {
    Fake f = new Fake((n, req, out) -> {
      if (n == 0) {
        Thread.sleep(1500); // past the 1 s attempt deadline
      }
      ok(n, out);
    });
    WriteResult r = client(serve(f)).write(row());
    assertEquals(2, f.keys.size());
    assertEquals(f.keys.get(0), f.keys.get(1));
    assertEquals(101, r.getLogIndex());
  }

  @Test
  void theOverallDeadlineEndsTheRetries() throws Exception {
    Fake f = new Fake((n, req, out) -> {
      throw unavailable("");
    });
    GatewayClient c = GatewayClient.builder().targets(serve(f)).timeout(Duration.ofMillis(400))
        .maxBackoff(Duration.ofMillis(50)).build();
    clients.add(c);
    long start = System.nanoTime();
    GatewayException e = assertThrows(GatewayException.class, () -> c.write(row()));
    // The last attempt's UNAVAILABLE, or DEADLINE_EXCEEDED when the deadline fell inside an
    // attempt (a loaded machine): either way the deadline ended the retries.
    assertTrue(e.code() == Status.Code.UNAVAILABLE || e.code() == Status.Code.DEADLINE_EXCEEDED,
        "code " + e.code());
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(2), "gave up too late");
    assertTrue(f.keys.size() >= 2, "no retry before the deadline");
  }

  @Test
  void invalidArgumentIsNotRetriedAndNamesTheField() throws Exception {
    Fake f = new Fake((n, req, out) -> {
      Metadata t = new Metadata();
      t.put(GatewayException.FIELD, "statements[0].insert.table.table_name");
      throw Status.INVALID_ARGUMENT.withDescription("missing table name").asRuntimeException(t);
    });
    GatewayException e = assertThrows(GatewayException.class, () -> client(serve(f)).write(row()));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    assertEquals("statements[0].insert.table.table_name", e.field());
    assertEquals(1, f.keys.size());
  }

  @Test
  void subscribeResumesAfterTheLastDeliveredIndex() throws Exception {
    Fake f = new Fake((n, req, out) -> ok(n, out));
    GatewayClient c = client(serve(f));
    List<Long> got = new ArrayList<>();
    AtomicInteger reconnects = new AtomicInteger();
    try (Subscription s = c.subscribe(Position.fromLogIndex(5), (t, e) -> reconnects.incrementAndGet())) {
      while (got.size() < 6 && s.hasNext()) {
        got.add(s.next().getLogIndex());
      }
    }
    assertEquals(List.of(5L, 6L, 7L, 8L, 9L, 10L), got);
    assertEquals(1, reconnects.get());
    assertEquals(8, f.subscribes.get(1).getFromLogIndex());
  }

  @Test
  void valuesRoundTrip() {
    for (Object v : new Object[] {true, -7L, 2.5, new java.math.BigDecimal("-12.50"), "a",
        java.time.Instant.ofEpochSecond(1714564800L, 123456789)}) {
      assertEquals(v, Rows.fromValue(Rows.toValue(v).value()));
    }
    assertEquals(null, Rows.fromValue(Rows.toValue(null).value()));
    assertThrows(IllegalArgumentException.class, () -> Rows.toValue(new Object()));
  }

  @Test
  void streamAcksInAnyOrderSettleTheWritesWithTheirSequenceNumbers() throws Exception {
    // The fake holds every write until it has four, then acks them in reverse order in one
    // response, refusing the third; write seq gets log index 100 + seq.
    Fake fake = new Fake((n, req, out) -> out.onError(Status.UNIMPLEMENTED.asRuntimeException()));
    List<Long> seqs = java.util.Collections.synchronizedList(new ArrayList<>());
    fake.streamWrite = out -> new StreamObserver<>() {
      @Override
      public void onNext(StreamWriteRequest req) {
        for (int i = 0; i < req.getWritesCount(); i++) {
          seqs.add(req.getSeq() + i);
        }
        if (seqs.size() < 4) {
          return;
        }
        StreamWriteResponse.Builder resp = StreamWriteResponse.newBuilder();
        for (int i = seqs.size() - 1; i >= 0; i--) {
          long seq = seqs.get(i);
          StreamWriteAck.Builder ack = StreamWriteAck.newBuilder().setSeq(seq);
          if (seq == 3) {
            ack.setCode(Status.Code.FAILED_PRECONDITION.value()).setError("row exists")
                .setField("conditions[0]");
          } else {
            ack.setResult(WriteResult.newBuilder().setLogIndex(100 + seq));
          }
          resp.addAcks(ack);
        }
        out.onNext(resp.build());
      }

      @Override
      public void onError(Throwable t) {}

      @Override
      public void onCompleted() {
        out.onCompleted();
      }
    };
    GatewayClient c = GatewayClient.builder().targets(serve(fake)).build();
    clients.add(c);
    List<WriteStream.PendingWrite> sent = new ArrayList<>();
    try (WriteStream s = c.stream(8, 2, Duration.ofSeconds(30))) {
      for (int i = 0; i < 4; i++) {
        sent.add(s.send(row()));
      }
    }
    assertEquals(List.of(1L, 2L, 3L, 4L), seqs, "writes numbered from 1, in order, across requests");
    assertEquals(101, sent.get(0).join().getLogIndex());
    assertEquals(102, sent.get(1).join().getLogIndex());
    GatewayException refused = assertThrows(GatewayException.class, () -> sent.get(2).join());
    assertEquals(0, refused.conditionIndex());
    assertEquals(104, sent.get(3).join().getLogIndex());
  }
}
