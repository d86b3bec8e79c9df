package io.gateway.client;

import io.gateway.v1.Condition;
import io.gateway.v1.Gtid;
import io.gateway.v1.RowValues;
import java.util.Map;

/**
 * Conditions of a conditional write (docs/node.md, "Conditional writes"): the write is applied
 * only if every condition holds when it is applied, else it is refused whole with a {@link
 * GatewayException} of code FAILED_PRECONDITION whose {@link GatewayException#field()} names the
 * condition ({@code conditions[i]}) and whose description names its table and key. Keys are one
 * value or a List of the key columns' values, as {@link GatewayClient#read} takes them.
 *
 * <pre>{@code
 * ReadResponse r = c.read("bank.accounts", 1L);
 * c.write(List.of(Rows.update("bank.accounts", Rows.cols("id", 1L), Rows.cols("balance", 90L))),
 *     List.of(Conditions.gtid("bank.accounts", 1L, r.getRow().getGtid())));
 * }</pre>
 */
public final class Conditions {
  private Conditions() {}

  /** The row of {@code table} with this key does not exist. */
  public static Condition absent(String table, Object key) {
    return Condition.newBuilder().setTable(table).addAllKey(Rows.keyValues(key)).setAbsent(true)
        .build();
  }

  /** The row exists and the transaction {@code gtid} wrote it last (a Read's row gtid). */
  public static Condition gtid(String table, Object key, Gtid gtid) {
    return Condition.newBuilder().setTable(table).addAllKey(Rows.keyValues(key)).setGtid(gtid)
        .build();
  }

  /** The row exists and these columns hold these values (a null value matches NULL). */
  public static Condition values(String table, Object key, Map<String, ?> values) {
    RowValues.Builder rv = RowValues.newBuilder();
    for (Map.Entry<String, ?> e : values.entrySet()) {
      rv.addFields(e.getKey()).addValues(Rows.toValue(e.getValue()).value());
    }
    return Condition.newBuilder().setTable(table).addAllKey(Rows.keyValues(key)).setValues(rv)
        .build();
  }
}
