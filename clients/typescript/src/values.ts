// Column values, row statements and stored rows.
//
// JavaScript values map to column types: null/undefined -> null (VARCHAR), boolean ->
// BOOLEAN, integral number -> INTEGER, other number -> DOUBLE, bigint -> INTEGER (UNSIGNED
// above the int64 range), string -> VARCHAR, Uint8Array/Buffer -> BLOB, Date -> TIMESTAMP;
// `decimal("9.90")`, `double(2)`, `unsigned(5n)` and `typed(FieldType.X, v)` say the type
// explicitly. Read back (fromValue): null, boolean, bigint (INTEGER, UNSIGNED, and TIMESTAMP as
// nanoseconds since the Unix epoch: lossless, unlike Date), number, string (DECIMAL as its
// canonical text), Buffer.

import { FieldType, NullValue, type Value } from "./gen/gateway/v1/value";
import type { Row as StoredRow } from "./gen/gateway/v1/gateway";
import type { FieldMetadata, Statement, TableMetadata } from "./gen/gateway/v1/statement";
import type { Gtid } from "./gen/gateway/v1/gtid";
import type { Condition } from "./gen/gateway/v1/transaction";

/** A value with an explicit column type. */
export class Typed {
  constructor(
    readonly type: FieldType,
    readonly value: ColumnValue,
  ) {}
}

export type ColumnValue = null | undefined | boolean | number | bigint | string | Uint8Array | Date | Typed;

/** Columns in order: an object, a Map or [name, value] pairs. */
export type Columns = Record<string, ColumnValue> | Map<string, ColumnValue> | Array<[string, ColumnValue]>;

/** A key: one value, or the key columns' values in key order. */
export type KeyInput = ColumnValue | ColumnValue[];

/** A stored row: column name -> value (key columns first). */
export type Row = Record<string, unknown>;

export const typed = (type: FieldType, value: ColumnValue): Typed => new Typed(type, value);
export const decimal = (text: string): Typed => new Typed(FieldType.FIELD_TYPE_DECIMAL, text);
export const double = (v: number): Typed => new Typed(FieldType.FIELD_TYPE_DOUBLE, v);
export const unsigned = (v: bigint | number): Typed => new Typed(FieldType.FIELD_TYPE_UNSIGNED, BigInt(v));

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/** Encodes a value and infers its column type; unsupported values throw a TypeError. */
export function toValue(v: ColumnValue): { value: Value; type: FieldType } {
  if (v instanceof Typed) {
    return { value: encodeAs(v.type, v.value), type: v.type };
  }
  if (v === null || v === undefined) {
    return { value: { kind: { $case: "nullValue", value: NullValue.NULL_VALUE } }, type: FieldType.FIELD_TYPE_VARCHAR };
  }
  switch (typeof v) {
    case "boolean":
      return { value: { kind: { $case: "boolValue", value: v } }, type: FieldType.FIELD_TYPE_BOOLEAN };
    case "number":
      if (Number.isSafeInteger(v)) {
        return { value: { kind: { $case: "intValue", value: BigInt(v) } }, type: FieldType.FIELD_TYPE_INTEGER };
      }
      if (Number.isInteger(v)) {
        throw new TypeError(`integer ${v} is beyond 2^53: pass it as a bigint`);
      }
      return { value: { kind: { $case: "doubleValue", value: v } }, type: FieldType.FIELD_TYPE_DOUBLE };
    case "bigint":
      if (v >= INT64_MIN && v <= INT64_MAX) {
        return { value: { kind: { $case: "intValue", value: v } }, type: FieldType.FIELD_TYPE_INTEGER };
      }
      return { value: encodeAs(FieldType.FIELD_TYPE_UNSIGNED, v), type: FieldType.FIELD_TYPE_UNSIGNED };
    case "string":
      return { value: { kind: { $case: "stringValue", value: v } }, type: FieldType.FIELD_TYPE_VARCHAR };
  }
  if (v instanceof Uint8Array) {
    return { value: { kind: { $case: "bytesValue", value: Buffer.from(v) } }, type: FieldType.FIELD_TYPE_BLOB };
  }
  if (v instanceof Date) {
    const ns = BigInt(v.getTime()) * 1_000_000n;
    return { value: { kind: { $case: "timestampNs", value: ns } }, type: FieldType.FIELD_TYPE_TIMESTAMP };
  }
  throw new TypeError(`unsupported value ${Object.prototype.toString.call(v)}`);
}

/** The Value of v as a column of type t (the case t's values travel in). */
function encodeAs(t: FieldType, v: ColumnValue): Value {
  if (v === null || v === undefined) {
    return toValue(v).value;
  }
  switch (t) {
    case FieldType.FIELD_TYPE_DOUBLE:
      return { kind: { $case: "doubleValue", value: Number(v) } };
    case FieldType.FIELD_TYPE_DECIMAL:
      return { kind: { $case: "decimalValue", value: String(v) } };
    case FieldType.FIELD_TYPE_UNSIGNED: {
      const u = BigInt(v as bigint | number);
      if (u < 0n || u > UINT64_MAX) {
        throw new TypeError(`${u} is outside the unsigned 64-bit range`);
      }
      return { kind: { $case: "uintValue", value: u } };
    }
    case FieldType.FIELD_TYPE_TIMESTAMP:
      return v instanceof Date ? toValue(v).value : { kind: { $case: "timestampNs", value: BigInt(v as bigint | number) } };
    default:
      return toValue(v).value;
  }
}

/** Decodes a stored value (see the module comment). */
export function fromValue(v: Value | undefined): unknown {
  const kind = v?.kind;
  if (kind === undefined || kind.$case === "nullValue") {
    return null;
  }
  return kind.value;
}

/** A stored row as column name -> value. */
export function rowOf(row: StoredRow): Row {
  const out: Row = {};
  row.keyFields.forEach((f, i) => (out[f.name] = fromValue(row.keyValues[i])));
  row.fields.forEach((f, i) => (out[f.name] = fromValue(row.values[i])));
  return out;
}

function entries(cols: Columns): Array<[string, ColumnValue]> {
  if (Array.isArray(cols)) return cols;
  if (cols instanceof Map) return [...cols.entries()];
  return Object.entries(cols);
}

function fields(cols: Columns): { metas: FieldMetadata[]; values: Value[] } {
  const metas: FieldMetadata[] = [];
  const values: Value[] = [];
  for (const [name, v] of entries(cols)) {
    let enc;
    try {
      enc = toValue(v);
    } catch (e) {
      throw new TypeError(`column '${name}': ${(e as Error).message}`);
    }
    metas.push({ name, type: enc.type });
    values.push(enc.value);
  }
  return { metas, values };
}

export function tableMeta(name: string): TableMetadata {
  const dot = name.lastIndexOf(".");
  return { schemaName: dot < 0 ? "" : name.slice(0, dot), tableName: name.slice(dot + 1) };
}

/** An INSERT (an upsert in the node's store) of one row: key columns and the others. */
export function insert(table: string, key: Columns, values: Columns = {}): Statement {
  const k = fields(key);
  const v = fields(values);
  return {
    kind: {
      $case: "insert",
      value: { table: tableMeta(table), keyFields: k.metas, fields: v.metas, records: [{ keyValues: k.values, afterValues: v.values }] },
    },
  };
}

/** An UPDATE of `values` of the row found by `key`. */
export function update(table: string, key: Columns, values: Columns): Statement {
  const k = fields(key);
  const v = fields(values);
  return {
    kind: {
      $case: "update",
      value: {
        table: tableMeta(table),
        keyFields: k.metas,
        setFields: v.metas,
        records: [{ keyValues: k.values, beforeValues: [], afterValues: v.values }],
      },
    },
  };
}

/** A DELETE of the row found by `key`. */
export function remove(table: string, key: Columns): Statement {
  const k = fields(key);
  return {
    kind: { $case: "delete", value: { table: tableMeta(table), keyFields: k.metas, fields: [], records: [{ keyValues: k.values, beforeValues: [] }] } },
  };
}

export function keyValues(key: KeyInput): Value[] {
  return (Array.isArray(key) ? key : [key]).map((k) => toValue(k).value);
}

/**
 * Conditions of a conditional write (docs/node.md, "Conditional writes"): the write is applied
 * only if every condition holds when it is applied, else it is refused whole with a
 * GatewayError of code FAILED_PRECONDITION whose `field` names the condition ("conditions[i]",
 * `conditionIndex` gives i) and whose details name its table and key.
 */
export const condition = {
  /** The row of `table` with this key does not exist. */
  absent(table: string, key: KeyInput): Condition {
    return { table, key: keyValues(key), expect: { $case: "absent", value: true } };
  },
  /** The row exists and the transaction `gtid` wrote it last (a read's `row.gtid`). */
  gtid(table: string, key: KeyInput, gtid: Gtid): Condition {
    return { table, key: keyValues(key), expect: { $case: "gtid", value: gtid } };
  },
  /** The row exists and these columns hold these values (null matches NULL). */
  values(table: string, key: KeyInput, values: Columns): Condition {
    const f = fields(values);
    return { table, key: keyValues(key), expect: { $case: "values", value: { fields: f.metas.map((m) => m.name), values: f.values } } };
  },
};
