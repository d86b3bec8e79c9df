package gateway

import (
	"fmt"
	"strings"
	"time"

	pb "gateway/clients/go/gatewayv1"
)

// Col is one named column value of a row, for Insert, Update and Delete. Build it with C.
type Col struct {
	Name  string
	Value any
}

// C is a column: C("id", 1), C("name", "a"), C("price", gateway.Decimal("9.90")).
func C(name string, value any) Col { return Col{Name: name, Value: value} }

// Decimal is an exact decimal in canonical text ("-12.50"): a FIELD_TYPE_DECIMAL value.
type Decimal string

// TypedValue is a value with an explicit column type, for the types no Go type stands for
// (DATE, TIME, DATETIME, JSON, UUID): Typed(pb.FieldType_FIELD_TYPE_DATE, "2024-05-01").
type TypedValue struct {
	Type  pb.FieldType
	Value any
}

// Typed gives value the column type t (the value's own encoding must suit t).
func Typed(t pb.FieldType, value any) TypedValue { return TypedValue{Type: t, Value: value} }

// Row is a stored row as column name -> value (key columns included); see FromValue for the
// Go types of the values.
type Row map[string]any

// ToValue encodes a Go value and infers its column type: nil -> null (VARCHAR), bool ->
// BOOLEAN, signed integers -> INTEGER, unsigned integers -> UNSIGNED, floats -> DOUBLE,
// Decimal -> DECIMAL, string -> VARCHAR, []byte -> BLOB, time.Time -> TIMESTAMP, TypedValue
// -> its type. Other types are an error naming the type.
func ToValue(v any) (*pb.Value, pb.FieldType, error) {
	switch x := v.(type) {
	case nil:
		return &pb.Value{Kind: &pb.Value_NullValue{}}, pb.FieldType_FIELD_TYPE_VARCHAR, nil
	case bool:
		return &pb.Value{Kind: &pb.Value_BoolValue{BoolValue: x}}, pb.FieldType_FIELD_TYPE_BOOLEAN, nil
	case int:
		return intValue(int64(x))
	case int8:
		return intValue(int64(x))
	case int16:
		return intValue(int64(x))
	case int32:
		return intValue(int64(x))
	case int64:
		return intValue(x)
	case uint:
		return uintValue(uint64(x))
	case uint8:
		return uintValue(uint64(x))
	case uint16:
		return uintValue(uint64(x))
	case uint32:
		return uintValue(uint64(x))
	case uint64:
		return uintValue(x)
	case float32:
		return &pb.Value{Kind: &pb.Value_DoubleValue{DoubleValue: float64(x)}}, pb.FieldType_FIELD_TYPE_DOUBLE, nil
	case float64:
		return &pb.Value{Kind: &pb.Value_DoubleValue{DoubleValue: x}}, pb.FieldType_FIELD_TYPE_DOUBLE, nil
	case Decimal:
		return &pb.Value{Kind: &pb.Value_DecimalValue{DecimalValue: string(x)}}, pb.FieldType_FIELD_TYPE_DECIMAL, nil
	case string:
		return &pb.Value{Kind: &pb.Value_StringValue{StringValue: x}}, pb.FieldType_FIELD_TYPE_VARCHAR, nil
	case []byte:
		return &pb.Value{Kind: &pb.Value_BytesValue{BytesValue: x}}, pb.FieldType_FIELD_TYPE_BLOB, nil
	case time.Time:
		return &pb.Value{Kind: &pb.Value_TimestampNs{TimestampNs: x.UnixNano()}}, pb.FieldType_FIELD_TYPE_TIMESTAMP, nil
	case TypedValue:
		val, _, err := ToValue(x.Value)
		return val, x.Type, err
	}
	return nil, 0, fmt.Errorf("gateway: unsupported value type %T", v)
}

func intValue(v int64) (*pb.Value, pb.FieldType, error) {
	return &pb.Value{Kind: &pb.Value_IntValue{IntValue: v}}, pb.FieldType_FIELD_TYPE_INTEGER, nil
}

func uintValue(v uint64) (*pb.Value, pb.FieldType, error) {
	return &pb.Value{Kind: &pb.Value_UintValue{UintValue: v}}, pb.FieldType_FIELD_TYPE_UNSIGNED, nil
}

// FromValue decodes a stored value: nil, bool, int64, uint64, float64, Decimal, string,
// []byte or time.Time (TIMESTAMP, UTC).
func FromValue(v *pb.Value) any {
	switch x := v.GetKind().(type) {
	case *pb.Value_BoolValue:
		return x.BoolValue
	case *pb.Value_IntValue:
		return x.IntValue
	case *pb.Value_UintValue:
		return x.UintValue
	case *pb.Value_DoubleValue:
		return x.DoubleValue
	case *pb.Value_DecimalValue:
		return Decimal(x.DecimalValue)
	case *pb.Value_StringValue:
		return x.StringValue
	case *pb.Value_BytesValue:
		return x.BytesValue
	case *pb.Value_TimestampNs:
		return time.Unix(0, x.TimestampNs).UTC()
	}
	return nil
}

// RowOf is a stored row as a Row (key columns and the other columns).
func RowOf(r *pb.Row) Row {
	out := make(Row, len(r.GetKeyFields())+len(r.GetFields()))
	for i, f := range r.GetKeyFields() {
		if i < len(r.GetKeyValues()) {
			out[f.GetName()] = FromValue(r.GetKeyValues()[i])
		}
	}
	for i, f := range r.GetFields() {
		if i < len(r.GetValues()) {
			out[f.GetName()] = FromValue(r.GetValues()[i])
		}
	}
	return out
}

func tableMeta(name string) *pb.TableMetadata {
	schema, table := "", name
	if i := strings.LastIndex(name, "."); i >= 0 {
		schema, table = name[:i], name[i+1:]
	}
	return &pb.TableMetadata{SchemaName: schema, TableName: table}
}

func fields(cols []Col) ([]*pb.FieldMetadata, []*pb.Value, error) {
	metas := make([]*pb.FieldMetadata, 0, len(cols))
	vals := make([]*pb.Value, 0, len(cols))
	for _, c := range cols {
		v, t, err := ToValue(c.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		metas = append(metas, &pb.FieldMetadata{Name: c.Name, Type: t})
		vals = append(vals, v)
	}
	return metas, vals, nil
}

// Insert is an INSERT (an upsert in the node's store) of one row of table "schema.table":
// key holds the primary-key columns, values the other columns.
func Insert(table string, key []Col, values ...Col) (*pb.Statement, error) {
	kf, kv, err := fields(key)
	if err != nil {
		return nil, err
	}
	f, v, err := fields(values)
	if err != nil {
		return nil, err
	}
	return &pb.Statement{Kind: &pb.Statement_Insert{Insert: &pb.InsertStatement{
		Table: tableMeta(table), KeyFields: kf, Fields: f,
		Records: []*pb.InsertRecord{{KeyValues: kv, AfterValues: v}},
	}}}, nil
}

// Update sets values of the row of table found by key.
func Update(table string, key []Col, values ...Col) (*pb.Statement, error) {
	kf, kv, err := fields(key)
	if err != nil {
		return nil, err
	}
	f, v, err := fields(values)
	if err != nil {
		return nil, err
	}
	return &pb.Statement{Kind: &pb.Statement_Update{Update: &pb.UpdateStatement{
		Table: tableMeta(table), KeyFields: kf, SetFields: f,
		Records: []*pb.UpdateRecord{{KeyValues: kv, AfterValues: v}},
	}}}, nil
}

// Delete deletes the row of table found by key.
func Delete(table string, key ...Col) (*pb.Statement, error) {
	kf, kv, err := fields(key)
	if err != nil {
		return nil, err
	}
	return &pb.Statement{Kind: &pb.Statement_Delete{Delete: &pb.DeleteStatement{
		Table: tableMeta(table), KeyFields: kf,
		Records: []*pb.DeleteRecord{{KeyValues: kv}},
	}}}, nil
}

// keyValues encodes a key given as one value or as a []any of the key columns' values.
func keyValues(key any) ([]*pb.Value, error) {
	items, ok := key.([]any)
	if !ok {
		items = []any{key}
	}
	out := make([]*pb.Value, 0, len(items))
	for i, k := range items {
		v, _, err := ToValue(k)
		if err != nil {
			return nil, fmt.Errorf("key value %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// ConditionAbsent is the condition "the row of table with this key does not exist" (key: one
// value or a []any of the key columns' values, as Read takes it).
func ConditionAbsent(table string, key any) (*pb.Condition, error) {
	kv, err := keyValues(key)
	if err != nil {
		return nil, err
	}
	return &pb.Condition{Table: table, Key: kv, Expect: &pb.Condition_Absent{Absent: true}}, nil
}

// ConditionGtid is the condition "the row exists and the transaction gtid wrote it last"
// (the Row.Gtid a Read returned).
func ConditionGtid(table string, key any, gtid *pb.Gtid) (*pb.Condition, error) {
	kv, err := keyValues(key)
	if err != nil {
		return nil, err
	}
	return &pb.Condition{Table: table, Key: kv, Expect: &pb.Condition_Gtid{Gtid: gtid}}, nil
}

// ConditionValues is the condition "the row exists and these columns hold these values" (a
// nil value matches NULL).
func ConditionValues(table string, key any, values ...Col) (*pb.Condition, error) {
	kv, err := keyValues(key)
	if err != nil {
		return nil, err
	}
	rv := &pb.RowValues{}
	for _, c := range values {
		v, _, err := ToValue(c.Value)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
		rv.Fields = append(rv.Fields, c.Name)
		rv.Values = append(rv.Values, v)
	}
	return &pb.Condition{Table: table, Key: kv, Expect: &pb.Condition_Values{Values: rv}}, nil
}
