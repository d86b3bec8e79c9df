import * as grpc from "@grpc/grpc-js";

/** Trailer naming the offending request field of an INVALID_ARGUMENT. */
export const TRAILER_FIELD = "gateway-field";
/** Trailer naming the leader's API address (with UNAVAILABLE). */
export const TRAILER_LEADER_API = "gateway-leader-api";

/**
 * A failed call: the gRPC status `code` (`codeName` spells it, e.g. "INVALID_ARGUMENT"), the
 * server's `details`, the offending request `field` ("" unless a validation error named one)
 * and `leaderApi`, the leader's address when the server named one.
 */
export class GatewayError extends Error {
  override readonly name = "GatewayError";

  constructor(
    readonly code: grpc.status,
    readonly details: string,
    readonly field = "",
    readonly leaderApi = "",
    options?: { cause?: unknown },
  ) {
    super(`${grpc.status[code] ?? code}: ${details}${field ? ` (field ${field})` : ""}`, options);
  }

  get codeName(): string {
    return grpc.status[this.code] ?? String(this.code);
  }

  /** The GatewayError for what a call threw (a grpc-js ServiceError, or anything else). */
  static from(e: unknown): GatewayError {
    if (e instanceof GatewayError) {
      return e;
    }
    const se = e as Partial<grpc.ServiceError>;
    if (typeof se?.code === "number") {
      const first = (key: string) => {
        const v = se.metadata?.get(key)[0];
        return v === undefined ? "" : v.toString();
      };
      return new GatewayError(se.code, se.details ?? String(se.message ?? ""), first(TRAILER_FIELD), first(TRAILER_LEADER_API), {
        cause: e,
      });
    }
    return new GatewayError(grpc.status.UNKNOWN, String(e), "", "", { cause: e });
  }
}
