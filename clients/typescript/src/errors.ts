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

  /** i when a conditional write was refused by condition "conditions[i]", else -1. */
  get conditionIndex(): number {
    const m = this.code === grpc.status.FAILED_PRECONDITION ? /^conditions\[(\d+)\]$/.exec(this.field) : null;
    return m ? Number(m[1]) : -1;
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

/**
 * Some writes of a `writeBatchRequests` were refused (their conditions did not hold); the others
 * were applied. `results` has every write's result (undefined where refused), `refused` each
 * refusal by the write's position.
 */
export class WriteBatchError extends Error {
  override readonly name = "WriteBatchError";

  constructor(
    readonly results: Array<unknown>,
    readonly refused: Map<number, GatewayError>,
  ) {
    super(`writes refused: ${[...refused.entries()].map(([i, e]) => `write ${i}: ${e.details}`).join("; ")}`);
  }
}
