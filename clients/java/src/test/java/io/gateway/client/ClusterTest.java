package io.gateway.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gateway.v1.ChangeEvent;
import io.gateway.v1.ColumnDef;
import io.gateway.v1.Consistency;
import io.gateway.v1.FieldType;
import io.gateway.v1.SchemaChangeKind;
import io.gateway.v1.SchemaChangeRequest;
import io.gateway.v1.SchemaEvent;
import io.gateway.v1.SchemaChangeResponse;
import io.gateway.v1.ShowTableResponse;
import io.gateway.v1.InsertStatement;
import io.gateway.v1.ReadResponse;
import io.gateway.v1.ScanResponse;
import io.gateway.v1.Statement;
import io.gateway.v1.WriteRequest;
import io.gateway.v1.WriteResult;
import io.gateway.v1.Value;
import io.grpc.Status;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Against a live 3-node cluster (TLS and bearer tokens) from clients/testing/cluster.py. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClusterTest {
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

  @org.junit.jupiter.api.AfterEach
  void closeClients() {
    clients.forEach(GatewayClient::close);
  }

  private GatewayClient client(List<String> targets, String token) {
    GatewayClient c = GatewayClient.builder().targets(targets).token(token)
        .rootCertificates(cluster.ca).attemptTimeout(Duration.ofSeconds(2))
        .timeout(Duration.ofSeconds(60)).build();
    clients.add(c);
    return c;
  }

  private GatewayClient client(String tokenName) {
    return client(cluster.apis, cluster.tokens.get(tokenName));
  }

  private static String table(String name) {
    return "javatest." + name + "_" + System.nanoTime();
  }

  private static List<Statement> insert(String table, long id, Object... values) {
    return List.of(Rows.insert(table, Rows.cols("id", id), Rows.cols(values)));
  }

  /** The table and id of a change event's single-row insert, or null. */
  private static Map.Entry<String, Long> insertOf(ChangeEvent ev) {
    List<Statement> sts = ev.getTransaction().getStatementsList();
    if (sts.size() != 1 || !sts.get(0).hasInsert()) {
      return null;
    }
    InsertStatement ins = sts.get(0).getInsert();
    return Map.entry(ins.getTable().getSchemaName() + "." + ins.getTable().getTableName(),
        ins.getRecords(0).getKeyValues(0).getIntValue());
  }

  @Test
  void writeThenReadReturnsTheRow() {
    GatewayClient c = client("writer");
    String t = table("roundtrip");
    Instant at = Instant.ofEpochSecond(1714564800L, 5);
    WriteResult r = c.write(insert(t, 1, "name", "a", "price", 2.5, "paid", true, "blob",
        new byte[] {0, (byte) 255}, "at", at, "amount", new BigDecimal("12.50"), "note", null,
        "day", LocalDate.of(2024, 5, 1)));
    assertTrue(r.getGtid().getTransId() > 0 && r.getLogIndex() > 0 && !r.getDuplicate(), r.toString());
    Map<String, Object> row = c.get(t, 1L).orElseThrow();
    assertEquals(1L, row.get("id"));
    assertEquals("a", row.get("name"));
    assertEquals(2.5, row.get("price"));
    assertEquals(true, row.get("paid"));
    assertArrayEquals(new byte[] {0, (byte) 255}, (byte[]) row.get("blob"));
    assertEquals(at, row.get("at"));
    assertEquals(new BigDecimal("12.50"), row.get("amount"));
    assertTrue(row.containsKey("note") && row.get("note") == null);
    assertEquals("2024-05-01", row.get("day"));
    ReadResponse read = c.read(t, 1L, Consistency.CONSISTENCY_LEASE);
    assertEquals(r.getGtid(), read.getRow().getGtid());
    assertEquals(r.getLogIndex(), read.getRow().getLogIndex());
    assertEquals(Optional.empty(), c.get(t, 2L));
  }

  @Test
  void readBatchReturnsEveryKeysRowInOrder() {
    GatewayClient c = client("writer");
    String t = table("readbatch");
    c.writeBatch(List.of(insert(t, 1, "v", "a"), insert(t, 2, "v", "b")));
    List<Optional<Map<String, Object>>> rows =
        c.getMany(t, List.of(2L, 9L, 1L), Consistency.CONSISTENCY_LINEARIZABLE);
    assertEquals(3, rows.size());
    assertEquals("b", rows.get(0).orElseThrow().get("v"));
    assertEquals(Optional.empty(), rows.get(1));
    assertEquals("a", rows.get(2).orElseThrow().get("v"));
  }

  @Test
  void schemaCallsCreateAlterShowAndRefuse() throws InterruptedException {
    GatewayClient admin = client("admin");
    String t = table("schema");
    SchemaChangeResponse created = admin.createTable(t, List.of("id"), List.of(
        GatewayClient.column("id", FieldType.FIELD_TYPE_INTEGER, null, true),
        GatewayClient.column("name", FieldType.FIELD_TYPE_VARCHAR, null, false)));
    assertEquals(1, created.getVersion());
    SchemaChangeResponse added =
        admin.addColumn(t, GatewayClient.column("c", FieldType.FIELD_TYPE_INTEGER, 0L, false));
    assertEquals(2, added.getVersion());
    assertEquals(3, added.getDefinition().getColumnsCount());
    admin.renameColumn(t, "name", "title");
    // A type change cannot be applied everywhere: refused before it commits.
    GatewayException typeChange = assertThrows(GatewayException.class, () -> admin.changeSchema(
        SchemaChangeRequest.newBuilder().setTable(t)
            .setKind(SchemaChangeKind.SCHEMA_CHANGE_KIND_CHANGE_TYPE)
            .setColumn(ColumnDef.newBuilder().setName("c")
                .setType(FieldType.FIELD_TYPE_VARCHAR)).build()));
    assertEquals(Status.Code.FAILED_PRECONDITION, typeChange.code());
    GatewayException unnamed = assertThrows(GatewayException.class, () -> admin.addColumn(t,
        GatewayClient.column("", FieldType.FIELD_TYPE_INTEGER, null, false)));
    assertEquals(Status.Code.INVALID_ARGUMENT, unnamed.code());
    // Without the admin token the change is refused.
    GatewayClient writer = client("writer");
    GatewayException denied =
        assertThrows(GatewayException.class, () -> writer.dropColumn(t, "c"));
    assertEquals(Status.Code.PERMISSION_DENIED, denied.code());
    // The node that answers may be a follower that has not applied the last change yet.
    ShowTableResponse shown = writer.showTable(t);
    for (int i = 0; i < 200 && shown.getDefinition().getVersion() != 3; i++) {
      Thread.sleep(100);
      shown = writer.showTable(t);
    }
    List<String> names = new ArrayList<>();
    shown.getDefinition().getColumnsList().forEach(col -> names.add(col.getName()));
    assertEquals(List.of("id", "title", "c"), names);
    List<SchemaChangeKind> kinds = new ArrayList<>();
    for (SchemaEvent ev : writer.schemaHistory(t).getEventsList()) {
      kinds.add(ev.getKind());
    }
    assertEquals(List.of(SchemaChangeKind.SCHEMA_CHANGE_KIND_CREATE,
        SchemaChangeKind.SCHEMA_CHANGE_KIND_ADD_COLUMN,
        SchemaChangeKind.SCHEMA_CHANGE_KIND_RENAME_COLUMN), kinds);
    admin.dropTable(t);
  }

  @Test
  void writeBatchResultsInOrderAndScanInKeyOrder() {
    GatewayClient c = client("writer");
    String t = table("batch");
    List<List<Statement>> writes = new ArrayList<>();
    for (long id : new long[] {3, 1, 2, 5, 4}) {
      writes.add(insert(t, id, "v", "v" + id));
    }
    List<WriteResult> results = c.writeBatch(writes);
    assertEquals(5, results.size());
    for (int i = 1; i < results.size(); i++) {
      assertTrue(results.get(i).getLogIndex() > results.get(i - 1).getLogIndex(), results.toString());
    }
    ScanResponse scan = c.scan(t, 2L, 5L, 0, Consistency.CONSISTENCY_LINEARIZABLE);
    List<Object> ids = new ArrayList<>();
    scan.getRowsList().forEach(row -> ids.add(Rows.rowOf(row).get("id")));
    assertEquals(List.of(2L, 3L, 4L), ids);
    assertFalse(scan.getMore());
    ScanResponse limited = c.scan(t, null, null, 2, Consistency.CONSISTENCY_STALE);
    assertTrue(limited.getRowsCount() <= 2);
    assertEquals(5, c.scan(t).getRowsCount());
    // pages of 2, each after the last key of the one before: every row once, in order
    List<Object> paged = new ArrayList<>();
    ScanResponse page = c.scan(t, null, null, 2, Consistency.CONSISTENCY_LINEARIZABLE);
    while (true) {
      page.getRowsList().forEach(row -> paged.add(Rows.rowOf(row).get("id")));
      if (!page.getMore()) {
        break;
      }
      List<Value> last = page.getRows(page.getRowsCount() - 1).getKeyValuesList();
      page = c.scanAfter(t, last, null, 2, Consistency.CONSISTENCY_LINEARIZABLE);
    }
    assertEquals(List.of(1L, 2L, 3L, 4L, 5L), paged);
    List<Object> after = new ArrayList<>();
    c.scanAfter(t, 3L, null, 0, Consistency.CONSISTENCY_LINEARIZABLE).getRowsList()
        .forEach(row -> after.add(Rows.rowOf(row).get("id")));
    assertEquals(List.of(4L, 5L), after);
  }

  @Test
  void theSameIdempotencyKeyAppliesOnce() {
    GatewayClient c = client("writer");
    String t = table("idem");
    String key = java.util.UUID.randomUUID().toString();
    WriteResult first = c.write(insert(t, 1, "v", "first"), key);
    WriteResult again = c.write(insert(t, 1, "v", "second"), key);
    assertTrue(again.getDuplicate());
    assertEquals(first.getGtid(), again.getGtid());
    assertEquals(first.getLogIndex(), again.getLogIndex());
    assertEquals("first", c.get(t, 1L).orElseThrow().get("v"));
  }

  @Test
  void aBadRequestNamesTheOffendingField() {
    GatewayClient c = client("writer");
    // the key column repeated among the value columns (docs/node.md, "Validation")
    GatewayException e = assertThrows(GatewayException.class, () -> c.write(insert(table("bad"), 1, "id", 1L)));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    assertEquals("statements[0].insert.fields[0].name", e.field());
  }

  @Test
  void tokensAreChecked() {
    GatewayClient reader = client("reader");
    GatewayException denied = assertThrows(GatewayException.class, () -> reader.write(insert(table("perm"), 1, "v", "x")));
    assertEquals(Status.Code.PERMISSION_DENIED, denied.code());
    assertNotNull(reader.status());
    GatewayClient stranger = client(cluster.apis, "not-a-token");
    GatewayException unknown = assertThrows(GatewayException.class, () -> stranger.write(insert(table("perm"), 1, "v", "x")));
    assertEquals(Status.Code.UNAUTHENTICATED, unknown.code());
  }

  /** Events of table {@code t} from index {@code from} up to index {@code until}. */
  private static List<ChangeEvent> collect(GatewayClient c, String t, long from, long until) {
    List<ChangeEvent> out = new ArrayList<>();
    try (Subscription s = c.subscribe(Position.fromLogIndex(from))) {
      while (s.hasNext()) {
        ChangeEvent ev = s.next();
        Map.Entry<String, Long> ins = insertOf(ev);
        if (ins != null && ins.getKey().equals(t)) {
          out.add(ev);
        }
        if (ev.getLogIndex() >= until) {
          break;
        }
      }
    }
    return out;
  }

  @Test
  void leaderKillDuringAWriteLoopLosesAndDuplicatesNothing() throws Exception {
    int lead = cluster.leader();
    GatewayClient c = client("writer");
    String t = table("leaderkill");
    int writers = 4;
    int perWriter = 40;
    Map<Long, WriteResult> results = new ConcurrentHashMap<>();
    CountDownLatch killNow = new CountDownLatch(40);
    ExecutorService pool = Executors.newFixedThreadPool(writers);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int w = 0; w < writers; w++) {
        int writer = w;
        done.add(pool.submit(() -> {
          for (int i = 0; i < perWriter; i++) {
            long id = (long) writer * perWriter + i;
            results.put(id, c.write(insert(t, id, "writer", (long) writer)));
            killNow.countDown();
          }
          return null;
        }));
      }
      assertTrue(killNow.await(60, TimeUnit.SECONDS), "the first 40 writes did not complete");
      cluster.kill(lead);
      for (Future<?> f : done) {
        f.get(90, TimeUnit.SECONDS); // a write that failed for good fails the test here
      }
    } finally {
      pool.shutdownNow();
      cluster.restart(lead);
      cluster.leader();
    }
    long lo = Long.MAX_VALUE;
    long hi = 0;
    for (WriteResult r : results.values()) {
      lo = Math.min(lo, r.getLogIndex());
      hi = Math.max(hi, r.getLogIndex());
    }
    Map<Long, Integer> seen = new HashMap<>();
    for (ChangeEvent ev : collect(c, t, lo, hi)) {
      long id = insertOf(ev).getValue();
      seen.merge(id, 1, Integer::sum);
      assertEquals(results.get(id).getGtid(), ev.getTransaction().getGtid(), "gtid of id " + id);
    }
    for (long id = 0; id < (long) writers * perWriter; id++) {
      assertEquals(1, seen.getOrDefault(id, 0), "times id " + id + " was committed");
      assertEquals(id / perWriter, c.get(t, id).orElseThrow().get("writer"));
    }
  }

  @Test
  void subscribeResumesAfterItsNodeDies() throws Exception {
    int lead = cluster.leader();
    int victim = lead % 3 + 1; // a follower: the cluster keeps its leader and takes writes
    GatewayClient writer = client(cluster.others(victim), cluster.tokens.get("writer"));
    List<String> subTargets = new ArrayList<>(List.of(cluster.api(victim)));
    subTargets.addAll(cluster.others(victim));
    GatewayClient reader = client(subTargets, cluster.tokens.get("reader"));
    String t = table("resume");
    List<Long> want = new ArrayList<>();
    want.add(writer.write(insert(t, 0, "v", "x")).getLogIndex());
    BlockingQueue<Object> events = new LinkedBlockingQueue<>();
    AtomicInteger reconnects = new AtomicInteger();
    Subscription sub = reader.subscribe(Position.fromLogIndex(want.get(0)), (target, e) -> reconnects.incrementAndGet());
    Thread consumer = new Thread(() -> {
      try {
        while (sub.hasNext()) {
          ChangeEvent ev = sub.next();
          Map.Entry<String, Long> ins = insertOf(ev);
          if (ins != null && ins.getKey().equals(t)) {
            events.add(ev.getLogIndex());
          }
        }
      } catch (GatewayException e) {
        events.add(e);
      }
    });
    consumer.start();
    List<Long> got = new ArrayList<>();
    try {
      for (long id = 1; id < 5; id++) {
        want.add(writer.write(insert(t, id, "v", "x")).getLogIndex());
      }
      receive(events, got, 5);
      cluster.kill(victim);
      for (long id = 5; id < 10; id++) {
        want.add(writer.write(insert(t, id, "v", "x")).getLogIndex());
      }
      receive(events, got, 10);
    } finally {
      sub.close();
      consumer.join(10_000);
      cluster.restart(victim);
      cluster.leader(); // a later test may write through the restarted node
    }
    assertEquals(want, got);
    assertTrue(reconnects.get() > 0, "the subscription never reconnected, yet its node was killed");
  }

  @Test
  void conditionRefusalNamesTheRowAndIsAloneInABatch() {
    GatewayClient c = client("writer");
    String t = table("cond");
    WriteResult first = c.write(insert(t, 1, "balance", 100L),
        List.of(Conditions.absent(t, 1L)));
    Statement upd = Rows.update(t, Rows.cols("id", 1L), Rows.cols("balance", 90L));
    c.write(List.of(upd), List.of(Conditions.gtid(t, 1L, first.getGtid()),
        Conditions.values(t, 1L, Rows.cols("balance", 100L))));
    GatewayException e = assertThrows(GatewayException.class, () -> c.write(List.of(upd),
        List.of(Conditions.absent(t, 2L), Conditions.gtid(t, 1L, first.getGtid()))));
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
    assertEquals(1, e.conditionIndex());
    assertTrue(e.description().contains(t + " key (1)"), e.description());
    WriteBatchException b = assertThrows(WriteBatchException.class, () -> c.writeBatchRequests(
        List.of(WriteRequest.newBuilder().addAllStatements(insert(t, 2, "balance", 1L)).build(),
            WriteRequest.newBuilder().addAllStatements(insert(t, 3, "balance", 1L))
                .addConditions(Conditions.absent(t, 1L)).build(),
            WriteRequest.newBuilder().addAllStatements(insert(t, 4, "balance", 1L)).build())));
    assertEquals(List.of(1), List.copyOf(b.refused().keySet()));
    assertEquals(0, b.refused().get(1).conditionIndex());
    assertNotNull(b.results().get(0));
    assertEquals(null, b.results().get(1));
    assertTrue(c.get(t, 2L).isPresent() && c.get(t, 3L).isEmpty() && c.get(t, 4L).isPresent());
  }

  @Test
  void conditionTwoClientsIncrementingLoseNoUpdate() throws Exception {
    String t = table("counter");
    GatewayClient a = client(List.of(cluster.apis.get(0)), cluster.tokens.get("writer"));
    GatewayClient b = client(List.of(cluster.apis.get(1)), cluster.tokens.get("writer"));
    a.write(insert(t, 1, "n", 0L));
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<Object>> done = new ArrayList<>();
      for (GatewayClient c : List.of(a, b)) {
        done.add(pool.submit(() -> {
          for (int i = 0; i < 10; ) {
            ReadResponse r = c.read(t, 1L);
            long n = r.getRow().getValues(0).getIntValue();
            try {
              c.write(List.of(Rows.update(t, Rows.cols("id", 1L), Rows.cols("n", n + 1))),
                  List.of(Conditions.gtid(t, 1L, r.getRow().getGtid())));
              i++;
            } catch (GatewayException e) {
              if (!e.isPreconditionFailed()) {
                throw e;
              }
            }
          }
          return null;
        }));
      }
      for (Future<Object> f : done) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
    assertEquals(20L, a.get(t, 1L).orElseThrow().get("n"));
  }

  private static void receive(BlockingQueue<Object> events, List<Long> got, int n) throws InterruptedException {
    while (got.size() < n) {
      Object o = events.poll(60, TimeUnit.SECONDS);
      if (o == null) {
        fail("got " + got.size() + " of " + n + " events");
      } else if (o instanceof GatewayException e) {
        fail("the subscription ended: " + e);
      }
      got.add((Long) o);
    }
  }
}
