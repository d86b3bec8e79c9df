package gateway

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	pb "gateway/clients/go/gatewayv1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// randomValue is a Value of any kind (or none), edge values included.
func randomValue(r *rand.Rand) *pb.Value {
	texts := []string{"", "r-000001", "héllo ✓", strings.Repeat("x", 300), "\x00nul"}
	switch r.Intn(11) {
	case 0:
		return &pb.Value{}
	case 1:
		return &pb.Value{Kind: &pb.Value_NullValue{}}
	case 2:
		return &pb.Value{Kind: &pb.Value_BoolValue{BoolValue: r.Intn(2) == 0}}
	case 3:
		ints := []int64{0, -1, 1, math.MinInt64, math.MaxInt64, r.Int63() - r.Int63()}
		return &pb.Value{Kind: &pb.Value_IntValue{IntValue: ints[r.Intn(len(ints))]}}
	case 4:
		return &pb.Value{Kind: &pb.Value_UintValue{UintValue: []uint64{0, math.MaxUint64, r.Uint64()}[r.Intn(3)]}}
	case 5:
		return &pb.Value{Kind: &pb.Value_DoubleValue{DoubleValue: []float64{0, -1.5, math.Inf(1), r.NormFloat64()}[r.Intn(4)]}}
	case 6:
		return &pb.Value{Kind: &pb.Value_DecimalValue{DecimalValue: "-12.50"}}
	case 7, 8:
		return &pb.Value{Kind: &pb.Value_StringValue{StringValue: texts[r.Intn(len(texts))]}}
	case 9:
		b := make([]byte, r.Intn(40))
		r.Read(b)
		return &pb.Value{Kind: &pb.Value_BytesValue{BytesValue: b}}
	default:
		return &pb.Value{Kind: &pb.Value_TimestampNs{TimestampNs: r.Int63() - r.Int63()}}
	}
}

func randomRow(r *rand.Rand) *pb.Row {
	row := &pb.Row{Epoch: r.Uint64() >> r.Intn(64), Author: r.Uint32() >> r.Intn(32),
		CommitTimestampNs: r.Uint64(), LogIndex: uint64(r.Intn(1 << 20))}
	if r.Intn(4) > 0 {
		row.Table = &pb.TableMetadata{SchemaName: "shop", TableName: []string{"", "items", "ünï"}[r.Intn(3)]}
	}
	if r.Intn(4) > 0 {
		row.Gtid = &pb.Gtid{ServerId: r.Uint32(), TransId: r.Uint64()}
	}
	for i := r.Intn(3); i > 0; i-- {
		row.KeyFields = append(row.KeyFields, &pb.FieldMetadata{Name: "id", Type: pb.FieldType(r.Intn(14))})
		row.KeyValues = append(row.KeyValues, randomValue(r))
	}
	for i := r.Intn(5); i > 0; i-- {
		row.Fields = append(row.Fields, &pb.FieldMetadata{Name: []string{"", "name", "prïce"}[r.Intn(3)], Type: pb.FieldType(r.Intn(14))})
		row.Values = append(row.Values, randomValue(r))
	}
	return row
}

func randomScan(r *rand.Rand) *pb.ScanResponse {
	resp := &pb.ScanResponse{More: r.Intn(2) == 0, AppliedIndex: r.Uint64() >> r.Intn(64)}
	for i := r.Intn(40); i > 0; i-- {
		resp.Rows = append(resp.Rows, randomRow(r))
	}
	if r.Intn(3) == 0 {
		row := randomRow(r)
		resp.Shape = &pb.RowShape{Table: row.Table, KeyFields: row.KeyFields, Fields: row.Fields}
	}
	return resp
}

// decodedBoth decodes data with the codec (the fast decoder, proto.Unmarshal when it gives
// up) and with proto.Unmarshal alone; the two must agree on the error and the message.
func decodedBoth(t *testing.T, data []byte) (fast *pb.ScanResponse, err error) {
	t.Helper()
	fast = &pb.ScanResponse{}
	err = rowsCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, fast)
	want := &pb.ScanResponse{}
	wantErr := proto.Unmarshal(data, want)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("codec error %v, proto.Unmarshal error %v on %x", err, wantErr, data)
	}
	if err == nil && !proto.Equal(fast, want) {
		t.Fatalf("codec decoded %v, proto.Unmarshal %v from %x", fast, want, data)
	}
	return fast, err
}

func TestScanResponsesDecodeAsProtoUnmarshalDecodesThem(t *testing.T) {
	r := rand.New(rand.NewSource(58))
	for i := 0; i < 2000; i++ {
		msg := randomScan(r)
		data, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		var got pb.ScanResponse
		if !decodeScanResponse(append([]byte(nil), data...), &got) { // the fast path
			t.Fatalf("the decoder gave up on %v", msg)
		}
		if !proto.Equal(&got, msg) {
			t.Fatalf("decoded %v, want %v", &got, msg)
		}
		decodedBoth(t, data)
	}
}

func TestDamagedOrUnknownScanResponsesGetProtoUnmarshalsAnswer(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 3000; i++ {
		data, _ := proto.Marshal(randomScan(r))
		if len(data) == 0 {
			continue
		}
		switch i % 3 {
		case 0: // a flipped byte: a different field, wire type, length or a bad varint
			data[r.Intn(len(data))] ^= byte(1 << r.Intn(8))
		case 1: // cut short
			data = data[:r.Intn(len(data))]
		default: // a byte inserted
			at := r.Intn(len(data))
			data = append(data[:at], append([]byte{byte(r.Intn(256))}, data[at:]...)...)
		}
		decodedBoth(t, data)
	}
}

func TestFieldsTheDecoderDoesNotKnowAreKeptByTheFallback(t *testing.T) {
	row, _ := proto.Marshal(&pb.Row{LogIndex: 7})
	row = protowire.AppendTag(row, 99, protowire.VarintType) // a field of a newer node
	row = protowire.AppendVarint(row, 5)
	data := protowire.AppendTag(nil, 1, protowire.BytesType)
	data = protowire.AppendBytes(data, row)
	if decodeScanResponse(append([]byte(nil), data...), &pb.ScanResponse{}) {
		t.Fatal("the decoder read a field it does not know")
	}
	got, err := decodedBoth(t, data)
	if err != nil || len(got.Rows[0].ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("unknown field lost: %v %v", got, err)
	}
	// a singular message field twice: proto merges the two, the decoder leaves it to proto
	twice := protowire.AppendTag(nil, 8, protowire.BytesType)
	twice = protowire.AppendBytes(twice, []byte{0x08, 0x01})
	twice = protowire.AppendTag(twice, 8, protowire.BytesType)
	twice = protowire.AppendBytes(twice, []byte{0x10, 0x02})
	data = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), twice)
	got, _ = decodedBoth(t, data)
	if got.Rows[0].GetGtid().GetServerId() != 1 || got.Rows[0].GetGtid().GetTransId() != 2 {
		t.Fatalf("gtid not merged: %v", got)
	}
}

func TestATextValueThatIsNotUTF8IsRefusedAsProtoRefusesIt(t *testing.T) {
	v := protowire.AppendBytes(protowire.AppendTag(nil, 7, protowire.BytesType), []byte{0xff, 'a'})
	row := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), v)
	data := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), row)
	if _, err := decodedBoth(t, data); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
}

func TestDecodedBytesValuesDoNotShareStorageWithTheirNeighbours(t *testing.T) {
	msg := &pb.ScanResponse{Rows: []*pb.Row{{
		Values: []*pb.Value{{Kind: &pb.Value_BytesValue{BytesValue: []byte("ab")}},
			{Kind: &pb.Value_StringValue{StringValue: "cd"}},
			{Kind: &pb.Value_BytesValue{BytesValue: []byte("ef")}}},
	}}}
	data, _ := proto.Marshal(msg)
	var got pb.ScanResponse
	if err := (rowsCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &got); err != nil {
		t.Fatal(err)
	}
	first := got.Rows[0].Values[0].GetBytesValue()
	_ = append(first, "XXXXXXXX"...) // must not write over what follows it
	first[0] = 'z'
	data[len(data)-1] = '!' // nor does the response's buffer back what was decoded
	if !proto.Equal(got.Rows[0].Values[2], msg.Rows[0].Values[2]) ||
		got.Rows[0].Values[1].GetStringValue() != "cd" {
		t.Fatalf("a neighbour changed: %v", &got)
	}
}

func TestWholeRowsGivesShapelessRowsTheSharedShapeAndLeavesOthersWhole(t *testing.T) {
	shape := &pb.RowShape{Table: &pb.TableMetadata{SchemaName: "s", TableName: "t"},
		KeyFields: []*pb.FieldMetadata{{Name: "id"}}, Fields: []*pb.FieldMetadata{{Name: "v"}}}
	own := &pb.Row{Table: &pb.TableMetadata{SchemaName: "s", TableName: "t"},
		KeyFields: []*pb.FieldMetadata{{Name: "id"}}, LogIndex: 2}
	resp := &pb.ScanResponse{Shape: shape, Rows: []*pb.Row{{LogIndex: 1}, own, {LogIndex: 3}}}
	want := []*pb.Row{
		{Table: shape.Table, KeyFields: shape.KeyFields, Fields: shape.Fields, LogIndex: 1},
		proto.Clone(own).(*pb.Row),
		{Table: shape.Table, KeyFields: shape.KeyFields, Fields: shape.Fields, LogIndex: 3},
	}
	WholeRows(resp)
	if resp.Shape != nil {
		t.Fatal("shape kept")
	}
	for i := range want {
		if !proto.Equal(resp.Rows[i], want[i]) {
			t.Fatalf("row %d: %v, want %v", i, resp.Rows[i], want[i])
		}
	}
	// appending to one row's fields must not reach another's
	resp.Rows[0].Fields = append(resp.Rows[0].Fields, &pb.FieldMetadata{Name: "extra"})
	if len(resp.Rows[2].Fields) != 1 {
		t.Fatal("an append reached a neighbour")
	}
	WholeRows(&pb.ScanResponse{Rows: []*pb.Row{{}}}) // no shape: nothing to do
}

func FuzzScanResponseDecodesAsProtoUnmarshal(f *testing.F) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 8; i++ {
		data, _ := proto.Marshal(randomScan(r))
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { decodedBoth(t, data) })
}

// scanOf1000 is a ScanResponse of 1,000 rows shaped as the node sends bench.kv's (goload),
// with their shape in each row or, shared, once.
func scanOf1000(shared bool) []byte {
	r := &pb.ScanResponse{}
	for i := 0; i < 1000; i++ {
		key := &pb.Value{Kind: &pb.Value_StringValue{StringValue: "r-000123"}}
		r.Rows = append(r.Rows, &pb.Row{
			Table:     &pb.TableMetadata{SchemaName: "bench", TableName: "kv"},
			KeyFields: []*pb.FieldMetadata{{Name: "k", Type: pb.FieldType_FIELD_TYPE_VARCHAR}},
			KeyValues: []*pb.Value{key},
			Fields: []*pb.FieldMetadata{{Name: "k", Type: pb.FieldType_FIELD_TYPE_VARCHAR},
				{Name: "v", Type: pb.FieldType_FIELD_TYPE_VARCHAR}},
			Values: []*pb.Value{key, {Kind: &pb.Value_StringValue{StringValue: "xxxxxxxxxx"}}},
			Epoch:  1 << 33, Author: 1, Gtid: &pb.Gtid{ServerId: 1, TransId: uint64(1000 + i)},
			CommitTimestampNs: 1234567890123, LogIndex: uint64(100 + i),
		})
	}
	if shared {
		first := r.Rows[0]
		r.Shape = &pb.RowShape{Table: first.Table, KeyFields: first.KeyFields, Fields: first.Fields}
		for _, row := range r.Rows {
			row.Table, row.KeyFields, row.Fields = nil, nil, nil
		}
	}
	b, _ := proto.Marshal(r)
	return b
}

// go test -run XXX -bench ScanResponse: protobuf-go against this decoder, per 1,000 rows.
func BenchmarkScanResponseProtoUnmarshal(b *testing.B) {
	data := scanOf1000(false)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var r pb.ScanResponse
		if err := proto.Unmarshal(data, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScanResponseRowsCodec(b *testing.B) { benchCodec(b, scanOf1000(false)) }

// What Client.Scan does: the shape once, the rows from slabs, then WholeRows.
func BenchmarkScanResponseSharedShapeRowsCodec(b *testing.B) { benchCodec(b, scanOf1000(true)) }

func benchCodec(b *testing.B, data []byte) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var r pb.ScanResponse
		if err := (rowsCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &r); err != nil {
			b.Fatal(err)
		}
		WholeRows(&r)
	}
}
