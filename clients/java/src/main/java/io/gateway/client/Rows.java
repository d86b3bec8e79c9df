package io.gateway.client;

import com.google.protobuf.ByteString;
import io.gateway.v1.DeleteRecord;
import io.gateway.v1.DeleteStatement;
import io.gateway.v1.FieldMetadata;
import io.gateway.v1.FieldType;
import io.gateway.v1.InsertRecord;
import io.gateway.v1.InsertStatement;
import io.gateway.v1.NullValue;
import io.gateway.v1.Row;
import io.gateway.v1.Statement;
import io.gateway.v1.TableMetadata;
import io.gateway.v1.UpdateRecord;
import io.gateway.v1.UpdateStatement;
import io.gateway.v1.Value;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * Row statements and values: {@code Rows.insert("shop.items", Rows.cols("id", 1L),
 * Rows.cols("name", "a"))}.
 *
 * <p>Java types map to column types: {@code null} to a null (VARCHAR), Boolean to BOOLEAN,
 * Long/Integer/Short/Byte to INTEGER, Double/Float to DOUBLE, BigDecimal to DECIMAL, String to
 * VARCHAR, byte[] to BLOB, Instant to TIMESTAMP, LocalDate to DATE, LocalTime to TIME,
 * LocalDateTime to DATETIME, UUID to UUID, and {@link Typed} to its explicit type (UNSIGNED,
 * JSON...). Reading back ({@link #fromValue}) gives Boolean, Long, Double, BigDecimal, String,
 * byte[] and Instant (timestamps), or null.
 */
public final class Rows {
  private Rows() {}

  /** A value with an explicit column type, for types no Java type stands for. */
  public record Typed(FieldType type, Object value) {}

  /** An encoded value and the column type inferred for it. */
  public record Encoded(Value value, FieldType type) {}

  /** Columns in the order given: {@code cols("id", 1L, "name", "a")}. */
  public static Map<String, Object> cols(Object... namesAndValues) {
    if (namesAndValues.length % 2 != 0) {
      throw new IllegalArgumentException("cols: expected name, value pairs");
    }
    Map<String, Object> out = new LinkedHashMap<>();
    for (int i = 0; i < namesAndValues.length; i += 2) {
      if (!(namesAndValues[i] instanceof String name)) {
        throw new IllegalArgumentException("cols: argument " + i + " is not a column name");
      }
      out.put(name, namesAndValues[i + 1]);
    }
    return out;
  }

  /** Encodes a Java value (see the class comment); other types are an IllegalArgumentException. */
  public static Encoded toValue(Object v) {
    Value.Builder b = Value.newBuilder();
    if (v == null) {
      return new Encoded(b.setNullValue(NullValue.NULL_VALUE).build(), FieldType.FIELD_TYPE_VARCHAR);
    } else if (v instanceof Typed t) {
      return new Encoded(toValue(t.value()).value(), t.type());
    } else if (v instanceof Boolean x) {
      return new Encoded(b.setBoolValue(x).build(), FieldType.FIELD_TYPE_BOOLEAN);
    } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
      return new Encoded(b.setIntValue(((Number) v).longValue()).build(), FieldType.FIELD_TYPE_INTEGER);
    } else if (v instanceof Double || v instanceof Float) {
      return new Encoded(b.setDoubleValue(((Number) v).doubleValue()).build(), FieldType.FIELD_TYPE_DOUBLE);
    } else if (v instanceof BigDecimal x) {
      return new Encoded(b.setDecimalValue(x.toPlainString()).build(), FieldType.FIELD_TYPE_DECIMAL);
    } else if (v instanceof String x) {
      return new Encoded(b.setStringValue(x).build(), FieldType.FIELD_TYPE_VARCHAR);
    } else if (v instanceof byte[] x) {
      return new Encoded(b.setBytesValue(ByteString.copyFrom(x)).build(), FieldType.FIELD_TYPE_BLOB);
    } else if (v instanceof Instant x) {
      long ns = Math.addExact(Math.multiplyExact(x.getEpochSecond(), 1_000_000_000L), x.getNano());
      return new Encoded(b.setTimestampNs(ns).build(), FieldType.FIELD_TYPE_TIMESTAMP);
    } else if (v instanceof LocalDate x) {
      return new Encoded(b.setStringValue(x.toString()).build(), FieldType.FIELD_TYPE_DATE);
    } else if (v instanceof LocalTime x) {
      return new Encoded(b.setStringValue(x.toString()).build(), FieldType.FIELD_TYPE_TIME);
    } else if (v instanceof LocalDateTime x) {
      return new Encoded(b.setStringValue(x.toString()).build(), FieldType.FIELD_TYPE_DATETIME);
    } else if (v instanceof UUID x) {
      ByteBuffer buf = ByteBuffer.allocate(16);
      buf.putLong(x.getMostSignificantBits()).putLong(x.getLeastSignificantBits());
      return new Encoded(b.setBytesValue(ByteString.copyFrom(buf.array())).build(), FieldType.FIELD_TYPE_UUID);
    }
    throw new IllegalArgumentException("unsupported value type " + v.getClass().getName());
  }

  /** Decodes a stored value (see the class comment). */
  public static Object fromValue(Value v) {
    return switch (v.getKindCase()) {
      case BOOL_VALUE -> v.getBoolValue();
      case INT_VALUE -> v.getIntValue();
      case UINT_VALUE -> v.getUintValue(); // a long holding the unsigned bits
      case DOUBLE_VALUE -> v.getDoubleValue();
      case DECIMAL_VALUE -> new BigDecimal(v.getDecimalValue());
      case STRING_VALUE -> v.getStringValue();
      case BYTES_VALUE -> v.getBytesValue().toByteArray();
      case TIMESTAMP_NS -> Instant.ofEpochSecond(0, v.getTimestampNs());
      default -> null;
    };
  }

  /** A stored row as column name to value, key columns first. */
  public static Map<String, Object> rowOf(Row row) {
    Map<String, Object> out = new LinkedHashMap<>();
    for (int i = 0; i < row.getKeyFieldsCount() && i < row.getKeyValuesCount(); i++) {
      out.put(row.getKeyFields(i).getName(), fromValue(row.getKeyValues(i)));
    }
    for (int i = 0; i < row.getFieldsCount() && i < row.getValuesCount(); i++) {
      out.put(row.getFields(i).getName(), fromValue(row.getValues(i)));
    }
    return out;
  }

  static TableMetadata table(String name) {
    int dot = name.lastIndexOf('.');
    return TableMetadata.newBuilder()
        .setSchemaName(dot < 0 ? "" : name.substring(0, dot))
        .setTableName(name.substring(dot + 1))
        .build();
  }

  private record Columns(List<FieldMetadata> fields, List<Value> values) {}

  private static Columns columns(Map<String, ?> cols) {
    List<FieldMetadata> fields = new ArrayList<>();
    List<Value> values = new ArrayList<>();
    for (Map.Entry<String, ?> e : cols.entrySet()) {
      Encoded enc;
      try {
        enc = toValue(e.getValue());
      } catch (IllegalArgumentException ex) {
        throw new IllegalArgumentException("column '" + e.getKey() + "': " + ex.getMessage(), ex);
      }
      fields.add(FieldMetadata.newBuilder().setName(e.getKey()).setType(enc.type()).build());
      values.add(enc.value());
    }
    return new Columns(fields, values);
  }

  /** An INSERT (an upsert in the node's store) of one row: key columns and the others. */
  public static Statement insert(String table, Map<String, ?> key, Map<String, ?> values) {
    Columns k = columns(key);
    Columns v = columns(values);
    return Statement.newBuilder().setInsert(InsertStatement.newBuilder()
        .setTable(table(table)).addAllKeyFields(k.fields()).addAllFields(v.fields())
        .addRecords(InsertRecord.newBuilder().addAllKeyValues(k.values()).addAllAfterValues(v.values())))
        .build();
  }

  /** An UPDATE of {@code values} of the row found by {@code key}. */
  public static Statement update(String table, Map<String, ?> key, Map<String, ?> values) {
    Columns k = columns(key);
    Columns v = columns(values);
    return Statement.newBuilder().setUpdate(UpdateStatement.newBuilder()
        .setTable(table(table)).addAllKeyFields(k.fields()).addAllSetFields(v.fields())
        .addRecords(UpdateRecord.newBuilder().addAllKeyValues(k.values()).addAllAfterValues(v.values())))
        .build();
  }

  /** A DELETE of the row found by {@code key}. */
  public static Statement delete(String table, Map<String, ?> key) {
    Columns k = columns(key);
    return Statement.newBuilder().setDelete(DeleteStatement.newBuilder()
        .setTable(table(table)).addAllKeyFields(k.fields())
        .addRecords(DeleteRecord.newBuilder().addAllKeyValues(k.values())))
        .build();
  }

  /** Key values of a key given as one value or a List of the key columns' values. */
  static List<Value> keyValues(Object key) {
    List<?> items = key instanceof List<?> l ? l : java.util.Collections.singletonList(key);
    List<Value> out = new ArrayList<>(items.size());
    for (Object k : items) {
      out.add(toValue(k).value());
    }
    return out;
  }
}
