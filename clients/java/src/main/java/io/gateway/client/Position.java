package io.gateway.client;

import io.gateway.v1.Gtid;
import io.gateway.v1.SubscribeRequest;

/** Where a subscription starts: {@link #fromLogIndex} or {@link #afterGtid}. */
public final class Position {
  private final SubscribeRequest request;

  private Position(SubscribeRequest request) {
    this.request = request;
  }

  /** At log index {@code index} (0 or 1: the start of the log). */
  public static Position fromLogIndex(long index) {
    return new Position(SubscribeRequest.newBuilder().setFromLogIndex(index).build());
  }

  /** Just after the transaction {@code serverId:transId} of this cluster. */
  public static Position afterGtid(int serverId, long transId) {
    return new Position(SubscribeRequest.newBuilder()
        .setAfterGtid(Gtid.newBuilder().setServerId(serverId).setTransId(transId)).build());
  }

  SubscribeRequest request() {
    return request;
  }
}
