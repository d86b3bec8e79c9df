package io.gateway.client;

import io.gateway.v1.WriteResult;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Some writes of a {@link GatewayClient#writeBatchRequests} were refused (their conditions did
 * not hold); the others were applied. {@link #results()} has every write's result ({@code null}
 * where refused), {@link #refused()} each refusal by the write's position.
 */
public final class WriteBatchException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient List<WriteResult> results;
  private final transient Map<Integer, GatewayException> refused;

  WriteBatchException(List<WriteResult> results, Map<Integer, GatewayException> refused) {
    super("writes refused: " + new TreeMap<>(refused).values());
    this.results = Collections.unmodifiableList(results);
    this.refused = Collections.unmodifiableMap(new TreeMap<>(refused));
  }

  /** Every write's result, in order; {@code null} for a refused write. */
  public List<WriteResult> results() {
    return results;
  }

  /** The refusals by the refused write's position. */
  public Map<Integer, GatewayException> refused() {
    return refused;
  }
}
