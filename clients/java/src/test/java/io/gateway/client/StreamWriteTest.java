package io.gateway.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gateway.v1.Statement;
import io.gateway.v1.WriteResult;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@link WriteStream} against a live 3-node cluster (TLS and tokens) from clients/testing/cluster.py. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StreamWriteTest {
  private static TestCluster cluster;
  private final List<GatewayClient> clients = new ArrayList<>();

  @BeforeAll
  static void start() throws Exception {
    cluster = TestCluster.start(3, true);
  }

  @AfterAll
  static void stop() throws Exception {
    if (cluster != null) {
      cluster.close();
    }
  }

  @AfterEach
  void closeClients() {
    clients.forEach(GatewayClient::close);
  }

  private GatewayClient client() {
    GatewayClient c = GatewayClient.builder().targets(cluster.apis)
        .token(cluster.tokens.get("writer")).rootCertificates(cluster.ca)
        .attemptTimeout(Duration.ofSeconds(2)).timeout(Duration.ofSeconds(60)).build();
    clients.add(c);
    return c;
  }

  private static String table(String name) {
    return "javastream." + name + "_" + System.nanoTime();
  }

  private static List<Statement> insert(String table, long id, String v) {
    return List.of(Rows.insert(table, Rows.cols("id", id), Rows.cols("v", v)));
  }

  @Test
  void everyWriteIsAcknowledgedWithItsOwnResult() {
    GatewayClient c = client();
    String t = table("many");
    List<WriteStream.PendingWrite> sent = new ArrayList<>();
    try (WriteStream s = c.stream(64, 16, Duration.ofSeconds(60))) {
      for (long i = 0; i < 300; i++) {
        sent.add(s.send(insert(t, i, "v" + i)));
        assertTrue(s.inFlight() <= 64, "the window caps the writes in flight");
      }
    }
    Set<Long> indexes = new HashSet<>();
    Set<String> keys = new HashSet<>();
    for (WriteStream.PendingWrite p : sent) {
      WriteResult r = p.join();
      assertTrue(r.getLogIndex() > 0 && !r.getDuplicate(), r.toString());
      indexes.add(r.getLogIndex());
      keys.add(p.idempotencyKey());
    }
    assertEquals(300, indexes.size(), "each write has its own log index");
    assertEquals(300, keys.size(), "each write has its own idempotency key");
    assertEquals("v299", c.get(t, 299L).orElseThrow().get("v"));
    assertEquals(300, c.scan(t).getRowsCount());
  }

  @Test
  void aRefusedWriteFailsAloneAndTheStreamGoesOn() {
    GatewayClient c = client();
    String t = table("refused");
    c.write(insert(t, 1, "first"));
    WriteStream.PendingWrite before;
    WriteStream.PendingWrite refused;
    WriteStream.PendingWrite after;
    try (WriteStream s = c.stream()) {
      before = s.send(insert(t, 2, "a"));
      refused = s.send(List.of(Rows.update(t, Rows.cols("id", 1L), Rows.cols("v", "second"))),
          "refused-" + System.nanoTime(), List.of(Conditions.absent(t, 1L)));
      after = s.send(insert(t, 3, "b"));
    }
    before.join();
    after.join();
    GatewayException e = assertThrows(GatewayException.class, refused::join);
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
    assertEquals(0, e.conditionIndex(), e.field());
    assertEquals("first", c.get(t, 1L).orElseThrow().get("v"), "nothing of the refused write");
    assertTrue(c.get(t, 3L).isPresent());
  }

  @Test
  void aWriteSentAgainWithItsKeyIsNotAppliedTwice() {
    GatewayClient c = client();
    String t = table("again");
    WriteStream.PendingWrite first;
    try (WriteStream s = c.stream()) {
      first = s.send(insert(t, 1, "a"));
    }
    WriteResult r1 = first.join();
    WriteResult r2;
    try (WriteStream s = c.stream()) {
      r2 = s.send(insert(t, 1, "a"), first.idempotencyKey()).join();
    }
    assertTrue(r2.getDuplicate(), r2.toString());
    assertEquals(r1.getGtid(), r2.getGtid());
    assertEquals(r1.getGtid(), c.write(insert(t, 1, "a"), first.idempotencyKey()).getGtid());
  }

  @Test
  void aClosedOrAbortedStreamRefusesWrites() {
    GatewayClient c = client();
    String t = table("closed");
    WriteStream s = c.stream();
    s.send(insert(t, 1, "a")).join();
    s.close();
    GatewayException closed = assertThrows(GatewayException.class, () -> s.send(insert(t, 2, "b")));
    assertEquals(Status.Code.FAILED_PRECONDITION, closed.code());
    WriteStream a = c.stream();
    a.abort();
    GatewayException aborted = assertThrows(GatewayException.class, () -> a.send(insert(t, 3, "c")));
    assertEquals(Status.Code.CANCELLED, aborted.code());
    assertThrows(GatewayException.class, a::close);
  }
}
