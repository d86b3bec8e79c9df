package io.gateway.client;

import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * A failed call: the gRPC status code, the server's message, the request field a validation
 * error names ({@code gateway-field} trailer; "" otherwise) and the leader's API address when
 * the server named one ({@code gateway-leader-api}). Unchecked, like grpc-java's own
 * {@link StatusRuntimeException}, which is kept as the cause.
 */
public final class GatewayException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Trailer naming the offending request field of an INVALID_ARGUMENT. */
  public static final Metadata.Key<String> FIELD =
      Metadata.Key.of("gateway-field", Metadata.ASCII_STRING_MARSHALLER);
  /** Trailer naming the leader's API address (with UNAVAILABLE). */
  public static final Metadata.Key<String> LEADER_API =
      Metadata.Key.of("gateway-leader-api", Metadata.ASCII_STRING_MARSHALLER);

  private final Status.Code code;
  private final String description;
  private final String field;
  private final String leaderApi;

  public GatewayException(Status.Code code, String description, String field, String leaderApi,
      Throwable cause) {
    super(code + ": " + description + (field.isEmpty() ? "" : " (field " + field + ")"), cause);
    this.code = code;
    this.description = description;
    this.field = field;
    this.leaderApi = leaderApi;
  }

  /** The exception for a failed gRPC call, with the gateway trailers read. */
  public static GatewayException of(StatusRuntimeException e) {
    Metadata trailers = e.getTrailers();
    String field = trailers == null ? null : trailers.get(FIELD);
    String leader = trailers == null ? null : trailers.get(LEADER_API);
    Status st = e.getStatus();
    return new GatewayException(st.getCode(),
        st.getDescription() == null ? "" : st.getDescription(),
        field == null ? "" : field, leader == null ? "" : leader, e);
  }

  /** The gRPC status code. */
  public Status.Code code() {
    return code;
  }

  /** The server's message. */
  public String description() {
    return description;
  }

  /** The offending request field (INVALID_ARGUMENT; a refused condition), or "". */
  public String field() {
    return field;
  }

  /** Whether a conditional write was refused (FAILED_PRECONDITION). */
  public boolean isPreconditionFailed() {
    return code == Status.Code.FAILED_PRECONDITION;
  }

  /** {@code i} of a refusal naming condition {@code conditions[i]}, else -1. */
  public int conditionIndex() {
    if (!isPreconditionFailed() || !field.startsWith("conditions[") || !field.endsWith("]")) {
      return -1;
    }
    try {
      return Integer.parseInt(field.substring("conditions[".length(), field.length() - 1));
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** The leader's API address the server named, or "". */
  public String leaderApi() {
    return leaderApi;
  }
}
