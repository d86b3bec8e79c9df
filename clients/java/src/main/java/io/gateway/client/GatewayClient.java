package io.gateway.client;

import io.gateway.v1.Condition;
import io.gateway.v1.Consistency;
import io.gateway.v1.GatewayGrpc;
import io.gateway.v1.ReadBatchRequest;
import io.gateway.v1.ReadBatchResponse;
import io.gateway.v1.ReadKey;
import io.gateway.v1.ReadRequest;
import io.gateway.v1.ReadResponse;
import io.gateway.v1.ScanRequest;
import io.gateway.v1.ScanResponse;
import io.gateway.v1.Statement;
import io.gateway.v1.StatusRequest;
import io.gateway.v1.StatusResponse;
import io.gateway.v1.WriteBatchRequest;
import io.gateway.v1.WriteBatchResponse;
import io.gateway.v1.WriteError;
import io.gateway.v1.WriteRequest;
import io.gateway.v1.ReadsGrpc;
import io.gateway.v1.ColumnDef;
import io.gateway.v1.FieldType;
import io.gateway.v1.SchemaChangeKind;
import io.gateway.v1.SchemaChangeRequest;
import io.gateway.v1.SchemaChangeResponse;
import io.gateway.v1.SchemaGrpc;
import io.gateway.v1.SchemaHistoryRequest;
import io.gateway.v1.SchemaHistoryResponse;
import io.gateway.v1.ShowTableRequest;
import io.gateway.v1.ShowTableResponse;
import io.gateway.v1.WriteResult;
import io.gateway.v1.Value;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptors;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.AbstractStub;
import io.grpc.stub.MetadataUtils;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Function;

/**
 * A client for the Gateway gRPC API with the contract of the Python client (docs/node.md):
 *
 * <ul>
 *   <li>every write carries an idempotency key (a random UUID unless given) sent unchanged on
 *       every retry, so a retry after a timeout or a failover never applies a write twice;
 *   <li>UNAVAILABLE and an attempt's DEADLINE_EXCEEDED are retried with jittered exponential
 *       backoff until the call's overall deadline ({@link Builder#timeout}); each attempt has its
 *       own deadline ({@link Builder#attemptTimeout});
 *   <li>on UNAVAILABLE the client moves to the node the {@code gateway-leader-api} trailer
 *       names, or to the next target;
 *   <li>other errors throw {@link GatewayException} at once (code, description, field);
 *   <li>{@link #subscribe} resumes a broken stream after the last delivered log index;
 *   <li>{@link #stream} keeps many writes in flight on one {@code StreamWrite} call.
 * </ul>
 *
 * <pre>{@code
 * try (GatewayClient c = GatewayClient.builder().targets("127.0.0.1:7071", "127.0.0.1:7072").build()) {
 *   WriteResult r = c.write(List.of(Rows.insert("shop.items", Rows.cols("id", 1L), Rows.cols("name", "a"))));
 *   Optional<Map<String, Object>> row = c.get("shop.items", 1L);
 * }
 * }</pre>
 *
 * Thread-safe; calls block the calling thread.
 */
public final class GatewayClient implements AutoCloseable {
  static final long FIRST_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(20);

  private final List<String> targets;
  private final ChannelCredentials credentials;
  private final Metadata headers;
  final Duration timeout;
  final Duration attemptTimeout;
  final Duration maxBackoff;
  private final Map<String, ManagedChannel> channels = new HashMap<>();
  private int current;
  private boolean closed;

  private GatewayClient(Builder b) {
    this.targets = new ArrayList<>(b.targets);
    this.credentials = b.rootCertificates == null
        ? InsecureChannelCredentials.create()
        : tls(b.rootCertificates);
    this.headers = new Metadata();
    if (!b.token.isEmpty()) {
      headers.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + b.token);
    }
    this.timeout = b.timeout;
    this.attemptTimeout = b.attemptTimeout;
    this.maxBackoff = b.maxBackoff;
  }

  private static ChannelCredentials tls(byte[] pem) {
    try {
      return TlsChannelCredentials.newBuilder().trustManager(new ByteArrayInputStream(pem)).build();
    } catch (IOException | IllegalArgumentException e) {
      throw new IllegalArgumentException("rootCertificates: not a PEM certificate: " + e.getMessage(), e);
    }
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Options of a {@link GatewayClient}. */
  public static final class Builder {
    private final List<String> targets = new ArrayList<>();
    private String token = "";
    private byte[] rootCertificates;
    private Duration timeout = Duration.ofSeconds(30);
    private Duration attemptTimeout = Duration.ofSeconds(5);
    private Duration maxBackoff = Duration.ofSeconds(1);

    private Builder() {}

    /** Node API addresses ("host:port"); any node serves every call. */
    public Builder targets(String... targets) {
      this.targets.addAll(Arrays.asList(targets));
      return this;
    }

    public Builder targets(List<String> targets) {
      this.targets.addAll(targets);
      return this;
    }

    /** Sends "authorization: Bearer token" on every call. */
    public Builder token(String token) {
      this.token = token == null ? "" : token;
      return this;
    }

    /** Speaks TLS, trusting the CA certificates in this PEM. */
    public Builder rootCertificates(byte[] pem) {
      this.rootCertificates = pem.clone();
      return this;
    }

    /** The overall deadline of a call, retries included (default 30 s). */
    public Builder timeout(Duration d) {
      this.timeout = positive(d, "timeout");
      return this;
    }

    /** The deadline of one attempt (default 5 s). */
    public Builder attemptTimeout(Duration d) {
      this.attemptTimeout = positive(d, "attemptTimeout");
      return this;
    }

    /** The longest pause between retries (default 1 s; the first is 20 ms). */
    public Builder maxBackoff(Duration d) {
      this.maxBackoff = positive(d, "maxBackoff");
      return this;
    }

    private static Duration positive(Duration d, String what) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(what + ": must be positive");
      }
      return d;
    }

    public GatewayClient build() {
      if (targets.isEmpty()) {
        throw new IllegalArgumentException("targets: at least one host:port is needed");
      }
      return new GatewayClient(this);
    }
  }

  // -- targets and channels ---------------------------------------------------------------------

  /** The node addresses the client knows (leaders it was redirected to included). */
  public synchronized List<String> targets() {
    return List.copyOf(targets);
  }

  synchronized String currentTarget() {
    return targets.get(current);
  }

  synchronized Channel channel(String target) {
    if (closed) {
      throw new GatewayException(Status.Code.CANCELLED, "client is closed", "", "", null);
    }
    ManagedChannel ch = channels.computeIfAbsent(target,
        t -> Grpc.newChannelBuilder(t, credentials).build());
    return ClientInterceptors.intercept(ch, MetadataUtils.newAttachHeadersInterceptor(headers));
  }

  /** After a failure on {@code failed}: the named leader, else the target after it. */
  synchronized void moveOn(String failed, String leaderApi) {
    if (!leaderApi.isEmpty()) {
      int i = targets.indexOf(leaderApi);
      if (i < 0) {
        targets.add(leaderApi);
        i = targets.size() - 1;
      }
      current = i;
    } else if (targets.get(current).equals(failed)) {
      current = (current + 1) % targets.size();
    }
  }

  static boolean retryable(Status.Code code) {
    return code == Status.Code.UNAVAILABLE || code == Status.Code.DEADLINE_EXCEEDED;
  }

  /** Sleeps about {@code nanos} (±50%); an interrupt ends the call with CANCELLED. */
  static void pause(long nanos, GatewayException last) {
    long jittered = (long) (nanos * (0.5 + ThreadLocalRandom.current().nextDouble()));
    try {
      TimeUnit.NANOSECONDS.sleep(jittered);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      GatewayException g = new GatewayException(Status.Code.CANCELLED, "interrupted", "", "", e);
      g.addSuppressed(last);
      throw g;
    }
  }

  /** One unary call with the retry rules of the class comment. */
  private <T> T call(Function<GatewayGrpc.GatewayBlockingStub, T> rpc) {
    return callOn(GatewayGrpc::newBlockingStub, rpc);
  }

  /** {@link #call} on the stub {@code newStub} makes of the target's channel (another service). */
  private <S extends AbstractStub<S>, T> T callOn(Function<Channel, S> newStub, Function<S, T> rpc) {
    long deadline = System.nanoTime() + timeout.toNanos();
    long backoff = FIRST_BACKOFF_NANOS;
    while (true) {
      String target = currentTarget();
      long left = Math.max(TimeUnit.MILLISECONDS.toNanos(10), deadline - System.nanoTime());
      S stub = newStub.apply(channel(target))
          .withDeadlineAfter(Math.min(attemptTimeout.toNanos(), left), TimeUnit.NANOSECONDS);
      try {
        return rpc.apply(stub);
      } catch (StatusRuntimeException e) {
        GatewayException g = GatewayException.of(e);
        if (!retryable(g.code()) || System.nanoTime() + backoff >= deadline) {
          throw g;
        }
        moveOn(target, g.leaderApi());
        pause(backoff, g);
        backoff = Math.min(2 * backoff, maxBackoff.toNanos());
      }
    }
  }

  // -- the API ----------------------------------------------------------------------------------

  /** Writes one transaction with a fresh idempotency key. */
  public WriteResult write(List<Statement> statements) {
    return write(statements, UUID.randomUUID().toString());
  }

  /**
   * Writes one transaction with this idempotency key (at most 128 bytes): a key used before
   * returns the first write's result with {@code duplicate} set.
   */
  public WriteResult write(List<Statement> statements, String idempotencyKey) {
    WriteRequest req = WriteRequest.newBuilder().addAllStatements(statements)
        .setIdempotencyKey(idempotencyKey).build();
    return call(s -> s.write(req));
  }

  /**
   * Writes one transaction with a fresh idempotency key if {@code conditions} hold when it is
   * applied (see {@link Conditions}); else throws a {@link GatewayException} with code
   * FAILED_PRECONDITION naming the condition, and nothing of the write is applied.
   */
  public WriteResult write(List<Statement> statements, List<Condition> conditions) {
    return write(statements, UUID.randomUUID().toString(), conditions);
  }

  /** {@link #write(List, List)} with this idempotency key. */
  public WriteResult write(List<Statement> statements, String idempotencyKey,
      List<Condition> conditions) {
    WriteRequest req = WriteRequest.newBuilder().addAllStatements(statements)
        .setIdempotencyKey(idempotencyKey).addAllConditions(conditions).build();
    return call(s -> s.write(req));
  }

  /**
   * Writes whole write requests (statements, conditions, a key: a fresh one where empty) in one
   * round trip; results in order. A write whose conditions fail is refused alone: the others
   * are applied and a {@link WriteBatchException} says which were refused.
   */
  public List<WriteResult> writeBatchRequests(List<WriteRequest> writes) {
    WriteBatchRequest.Builder b = WriteBatchRequest.newBuilder();
    for (WriteRequest w : writes) {
      b.addWrites(w.getIdempotencyKey().isEmpty()
          ? w.toBuilder().setIdempotencyKey(UUID.randomUUID().toString()).build() : w);
    }
    WriteBatchRequest req = b.build();
    WriteBatchResponse resp = call(s -> s.writeBatch(req));
    if (resp.getErrorsCount() == 0) {
      return resp.getResultsList();
    }
    List<WriteResult> results = new ArrayList<>(resp.getResultsList());
    Map<Integer, GatewayException> refused = new HashMap<>();
    for (WriteError e : resp.getErrorsList()) {
      refused.put(e.getIndex(), new GatewayException(Status.fromCodeValue(e.getCode()).getCode(),
          e.getError(), e.getField(), "", null));
      if (e.getIndex() < results.size()) {
        results.set(e.getIndex(), null);
      }
    }
    throw new WriteBatchException(results, refused);
  }

  /** Writes many transactions in one round trip, each with its own key; results in order. */
  public List<WriteResult> writeBatch(List<List<Statement>> writes) {
    WriteBatchRequest.Builder b = WriteBatchRequest.newBuilder();
    for (List<Statement> w : writes) {
      b.addWrites(WriteRequest.newBuilder().addAllStatements(w)
          .setIdempotencyKey(UUID.randomUUID().toString()));
    }
    WriteBatchRequest req = b.build();
    return call(s -> s.writeBatch(req)).getResultsList();
  }

  /** Reads one row (linearizable); {@code key} is a value or a List of key values. */
  public ReadResponse read(String table, Object key) {
    return read(table, key, Consistency.CONSISTENCY_LINEARIZABLE);
  }

  public ReadResponse read(String table, Object key, Consistency consistency) {
    ReadRequest req = ReadRequest.newBuilder().setTable(table).addAllKey(Rows.keyValues(key))
        .setConsistency(consistency).build();
    return call(s -> s.read(req));
  }

  /** The row as column name to value, or empty when there is none (linearizable). */
  public Optional<Map<String, Object>> get(String table, Object key) {
    return get(table, key, Consistency.CONSISTENCY_LINEARIZABLE);
  }

  public Optional<Map<String, Object>> get(String table, Object key, Consistency consistency) {
    ReadResponse r = read(table, key, consistency);
    return r.getFound() ? Optional.of(Rows.rowOf(r.getRow())) : Optional.empty();
  }

  /**
   * The rows of many keys of a table in one call (Reads.ReadBatch): one result per key in order,
   * all read at one applied index after one read point; each key is a value or a List of key
   * values.
   */
  public ReadBatchResponse readBatch(String table, List<?> keys, Consistency consistency) {
    ReadBatchRequest.Builder b = ReadBatchRequest.newBuilder().setTable(table)
        .setConsistency(consistency);
    for (Object key : keys) {
      b.addKeys(ReadKey.newBuilder().addAllKey(Rows.keyValues(key)));
    }
    ReadBatchRequest req = b.build();
    return callOn(ReadsGrpc::newBlockingStub, s -> s.readBatch(req));
  }

  /** {@link #readBatch}'s rows as column name to value (empty for a key with no row). */
  public List<Optional<Map<String, Object>>> getMany(String table, List<?> keys,
      Consistency consistency) {
    List<Optional<Map<String, Object>>> out = new ArrayList<>();
    for (var r : readBatch(table, keys, consistency).getResultsList()) {
      out.add(r.getFound() ? Optional.of(Rows.rowOf(r.getRow())) : Optional.empty());
    }
    return out;
  }

  // -- schema (docs/schema.md) ------------------------------------------------------------------

  /**
   * Commits one table-definition change (Schema.ChangeSchema, admin token) and returns the
   * definition after it, its version and the event's log index. Throws a {@link
   * GatewayException}: INVALID_ARGUMENT for a malformed change ({@code field()} names the request
   * field), FAILED_PRECONDITION with the reason for one that cannot be applied everywhere (a type
   * or primary-key change, a {@code base_version} that is not the table's). {@link #createTable},
   * {@link #addColumn}, {@link #dropColumn}, {@link #renameColumn} and {@link #dropTable} build
   * the request.
   */
  public SchemaChangeResponse changeSchema(SchemaChangeRequest req) {
    return callOn(SchemaGrpc::newBlockingStub, s -> s.changeSchema(req));
  }

  /**
   * A column for {@link #createTable} and {@link #addColumn}: its default is encoded as {@link
   * Rows#toValue} does ({@code null}: NULL).
   */
  public static ColumnDef column(String name, FieldType type, Object defaultValue, boolean notNull) {
    ColumnDef.Builder b = ColumnDef.newBuilder().setName(name).setType(type).setNotNull(notNull);
    if (defaultValue != null) {
      b.setDefaultValue(Rows.toValue(defaultValue).value());
    }
    return b.build();
  }

  /** CREATE TABLE: {@code columns} key columns first, {@code primaryKey} their names; version 1. */
  public SchemaChangeResponse createTable(String table, List<String> primaryKey,
      List<ColumnDef> columns) {
    return changeSchema(SchemaChangeRequest.newBuilder().setTable(table)
        .setKind(SchemaChangeKind.SCHEMA_CHANGE_KIND_CREATE).addAllPrimaryKey(primaryKey)
        .addAllColumns(columns).build());
  }

  /** ALTER TABLE ... ADD COLUMN, with its default (rows written before get it). */
  public SchemaChangeResponse addColumn(String table, ColumnDef column) {
    return changeSchema(SchemaChangeRequest.newBuilder().setTable(table)
        .setKind(SchemaChangeKind.SCHEMA_CHANGE_KIND_ADD_COLUMN).setColumn(column).build());
  }

  /** ALTER TABLE ... DROP COLUMN {@code name}. */
  public SchemaChangeResponse dropColumn(String table, String name) {
    return changeSchema(SchemaChangeRequest.newBuilder().setTable(table)
        .setKind(SchemaChangeKind.SCHEMA_CHANGE_KIND_DROP_COLUMN)
        .setColumn(ColumnDef.newBuilder().setName(name)).build());
  }

  /** ALTER TABLE ... RENAME COLUMN {@code oldName} TO {@code newName}. */
  public SchemaChangeResponse renameColumn(String table, String oldName, String newName) {
    return changeSchema(SchemaChangeRequest.newBuilder().setTable(table)
        .setKind(SchemaChangeKind.SCHEMA_CHANGE_KIND_RENAME_COLUMN).setOldName(oldName)
        .setNewName(newName).build());
  }

  /** DROP TABLE (its history keeps its last version). */
  public SchemaChangeResponse dropTable(String table) {
    return changeSchema(SchemaChangeRequest.newBuilder().setTable(table)
        .setKind(SchemaChangeKind.SCHEMA_CHANGE_KIND_DROP_TABLE).build());
  }

  /** The definition and version of a table on the node that answers (read token; may lag). */
  public ShowTableResponse showTable(String table) {
    ShowTableRequest req = ShowTableRequest.newBuilder().setTable(table).build();
    return callOn(SchemaGrpc::newBlockingStub, s -> s.showTable(req));
  }

  /** A table's applied schema events, oldest first, and the changes that lost with their causes. */
  public SchemaHistoryResponse schemaHistory(String table) {
    SchemaHistoryRequest req = SchemaHistoryRequest.newBuilder().setTable(table).build();
    return callOn(SchemaGrpc::newBlockingStub, s -> s.schemaHistory(req));
  }

  /** All rows of a table in key order, up to the server's default limit (1000). */
  public ScanResponse scan(String table) {
    return scan(table, null, null, 0, Consistency.CONSISTENCY_LINEARIZABLE);
  }

  /**
   * Rows with {@code start <= key < end} in key order ({@code null} = open; keys as in
   * {@link #read}); {@code limit} 0 = 1000, at most 10000; {@code more} when it stopped the scan.
   */
  public ScanResponse scan(String table, Object start, Object end, int limit, Consistency consistency) {
    ScanRequest.Builder b = scanRequest(table, end, limit, consistency);
    if (start != null) {
      b.addAllStartKey(Rows.keyValues(start));
    }
    ScanRequest req = b.build();
    return call(s -> s.scan(req));
  }

  /**
   * Rows with {@code after < key < end} in key order ({@code end} {@code null} = open): a scan
   * whose response had {@code more} continues with {@code after} = its last row's
   * {@code getKeyValuesList()} (or any key, as in {@link #read}); every page moves on, however
   * few rows the response's size let through.
   */
  public ScanResponse scanAfter(String table, Object after, Object end, int limit, Consistency consistency) {
    if (after == null) {
      throw new IllegalArgumentException("scanAfter: give the key the scan starts after");
    }
    ScanRequest.Builder b = scanRequest(table, end, limit, consistency).setStartAfter(true);
    if (after instanceof List<?> l && !l.isEmpty() && l.stream().allMatch(v -> v instanceof Value)) {
      l.forEach(v -> b.addStartKey((Value) v));
    } else {
      b.addAllStartKey(Rows.keyValues(after));
    }
    ScanRequest req = b.build();
    return call(s -> s.scan(req));
  }

  /** A scan of {@code table} up to {@code end} ({@code null} = open), without its start. */
  private static ScanRequest.Builder scanRequest(String table, Object end, int limit, Consistency consistency) {
    ScanRequest.Builder b = ScanRequest.newBuilder().setTable(table).setLimit(limit)
        .setConsistency(consistency);
    if (end != null) {
      b.addAllEndKey(Rows.keyValues(end));
    }
    return b;
  }

  /** Status of the node currently targeted (one attempt, no failover). */
  public StatusResponse status() {
    try {
      return GatewayGrpc.newBlockingStub(channel(currentTarget()))
          .withDeadlineAfter(attemptTimeout.toNanos(), TimeUnit.NANOSECONDS)
          .status(StatusRequest.getDefaultInstance());
    } catch (StatusRuntimeException e) {
      throw GatewayException.of(e);
    }
  }

  /**
   * The committed transactions from {@code from} on, in log order, as a blocking iterator that
   * reconnects (to the next target, with backoff) when its stream breaks and resumes after the
   * last delivered log index; close it (from any thread) to stop.
   */
  public Subscription subscribe(Position from) {
    return new Subscription(this, from, (target, error) -> {});
  }

  /** As {@link #subscribe(Position)}, calling {@code onReconnect} before each reconnection. */
  public Subscription subscribe(Position from, BiConsumer<String, GatewayException> onReconnect) {
    return new Subscription(this, from, onReconnect);
  }

  /**
   * A {@link WriteStream} on one {@code StreamWrite} call to the current target (a follower
   * forwards each write to the leader): up to 1024 writes unacknowledged, up to 256 per
   * request, no deadline. Writes on a stream are not retried (see {@link WriteStream}).
   */
  public WriteStream stream() {
    return stream(1024, 256, null);
  }

  /**
   * As {@link #stream()}: {@code window} writes at most unacknowledged ({@link WriteStream#send}
   * waits while that many are), at most {@code maxPerRequest} writes per request, and the whole
   * call's {@code deadline} ({@code null}: none).
   */
  public WriteStream stream(int window, int maxPerRequest, Duration deadline) {
    return new WriteStream(this, currentTarget(), window, maxPerRequest, deadline);
  }

  /** Closes every channel; calls in progress fail. */
  @Override
  public void close() {
    List<ManagedChannel> open;
    synchronized (this) {
      closed = true;
      open = new ArrayList<>(channels.values());
      channels.clear();
    }
    for (ManagedChannel ch : open) {
      ch.shutdownNow();
    }
    for (ManagedChannel ch : open) {
      try {
        ch.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }
}
