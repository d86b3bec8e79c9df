package io.gateway.client.interop;

import io.gateway.client.GatewayClient;
import io.gateway.client.Rows;
import io.gateway.v1.ReadResponse;
import java.util.Arrays;
import java.util.Map;

/**
 * The Java side of the cross-language test (clients/testing/test_cross_language.py): reads
 * rows 0..count-1 of a table (linearizable) and prints one JSON line per row with its GTID
 * and log index.
 *
 * <p>Usage: InteropReader TARGETS(comma-separated) TABLE COUNT
 */
public final class InteropReader {
  public static void main(String[] args) {
    try (GatewayClient c = GatewayClient.builder().targets(Arrays.asList(args[0].split(","))).build()) {
      int count = Integer.parseInt(args[2]);
      for (long id = 0; id < count; id++) {
        ReadResponse r = c.read(args[1], id);
        if (!r.getFound()) {
          System.out.printf("{\"id\": %d, \"found\": false}%n", id);
          continue;
        }
        Map<String, Object> row = Rows.rowOf(r.getRow());
        System.out.printf("{\"id\": %d, \"found\": true, \"server_id\": %d, \"trans_id\": %d, "
            + "\"log_index\": %d, \"name\": \"%s\", \"qty\": %d}%n", id,
            r.getRow().getGtid().getServerId(), r.getRow().getGtid().getTransId(),
            r.getRow().getLogIndex(), row.get("name"), (Long) row.get("qty"));
      }
    }
  }
}
