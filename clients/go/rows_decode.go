package gateway

// A decoder for the responses that carry many rows (ScanResponse), without protobuf-go's
// reflection and with its objects allocated a slab at a time.
//
// protobuf-go decodes a 1,000-row ScanResponse into ~23 allocations per row (the Row, its
// TableMetadata, FieldMetadata, Values with their oneof wrappers, every string, the Gtid and
// four slices): ~1.5 us per row on this project's benchmark machine, more than the node
// spends serving it. This decoder builds the very same messages (the generated types, equal
// under proto.Equal to what proto.Unmarshal builds) from slabs: the rows, values, wrappers
// and pointer slices of one response are a few allocations, and every string and bytes
// value is a slice of the one copy of the response that any codec makes (gRPC frees its
// buffers after decoding). The price: a row kept after the others are dropped keeps its
// response's slabs and bytes alive, as a sub-slice keeps its array.
//
// It reads only what it knows exactly: the fields of ScanResponse, Row, RowShape,
// TableMetadata, FieldMetadata, Value and Gtid with their declared wire types, each singular message field
// at most once. Anything else (an unknown or repeated-singular field, a wire type that does
// not match, a malformed varint or length, a string that is not UTF-8) makes it give up, and
// the response is decoded by proto.Unmarshal, which gives the same message or the error.
// So it is never less correct than protobuf-go, only faster on the responses the node sends.

import (
	"math"
	"unicode/utf8"
	"unsafe"

	pb "gateway/clients/go/gatewayv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec delegated to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// FastRows is a call option for the generated stubs that decodes a ScanResponse with this
// package's slab decoder (see rows_decode.go) and every other message as gRPC's proto codec
// does. Client.Scan uses it; pass it to pb.GatewayClient.Scan to get the same decoding:
//
//	resp, err := stub.Scan(ctx, req, gateway.FastRows())
func FastRows() grpc.CallOption { return grpc.ForceCodecV2(rowsCodec{}) }

// rowsCodec is gRPC's "proto" codec with ScanResponse decoded by decodeScanResponse.
type rowsCodec struct{}

func (rowsCodec) Name() string { return "proto" }

func (rowsCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (rowsCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if out, ok := v.(*pb.ScanResponse); ok {
		// One copy of the response that the decoded message owns: gRPC frees data's
		// buffers when this returns.
		var own []byte
		if len(data) == 1 {
			own = append([]byte(nil), data[0].ReadOnlyData()...)
		} else {
			own = data.Materialize()
		}
		if decodeScanResponse(own, out) {
			return nil
		}
		proto.Reset(out)
		return proto.Unmarshal(own, out)
	}
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

// decodeScanResponse fills the empty out from data, which it takes: the strings and bytes
// of out are slices of it, so nothing may write to data afterwards. False: data holds
// something this decoder does not read exactly (out is then partly filled and must be
// reset).
func decodeScanResponse(data []byte, out *pb.ScanResponse) bool {
	rows := 0
	for rest := data; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if m < 0 {
			return false
		}
		if num == 1 {
			rows++
		}
		rest = rest[n+m:]
	}
	d := &rowDecoder{base: data, rows: make([]pb.Row, 0, rows)}
	if len(data) > 0 {
		d.text = unsafe.String(&data[0], len(data))
	}
	out.Rows = make([]*pb.Row, 0, rows)
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		data = data[n:] // n > 0: the counting pass read every tag
		switch {
		case num == 1 && typ == protowire.BytesType:
			b, m := protowire.ConsumeBytes(data)
			row := d.row(b)
			if row == nil {
				return false
			}
			out.Rows = append(out.Rows, row)
			data = data[m:]
		case num == 2 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(data)
			out.More = v != 0
			data = data[m:]
		case num == 3 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(data)
			out.AppliedIndex = v
			data = data[m:]
		case num == 4 && typ == protowire.BytesType:
			b, m := protowire.ConsumeBytes(data)
			if out.Shape != nil {
				return false // proto would merge the two
			}
			if out.Shape = d.shape(b); out.Shape == nil {
				return false
			}
			data = data[m:]
		default:
			return false
		}
	}
	return true
}

// WholeRows gives every row of a ScanResponse asked with shared_shape the table, key fields
// and fields it left out (ScanResponse.shape: a row without a table has the shape), and
// clears the shape: the response then reads as a plain Scan's. The rows share the shape's
// messages and slices: read them, do not change them in place. Client.Scan calls it.
func WholeRows(resp *pb.ScanResponse) {
	shape := resp.GetShape()
	if shape == nil {
		return
	}
	for _, r := range resp.Rows {
		if r.Table != nil {
			continue
		}
		r.Table = shape.Table
		r.KeyFields = shared(r.KeyFields, shape.KeyFields)
		r.Fields = shared(r.Fields, shape.Fields)
	}
	resp.Shape = nil
}

// shared is own followed by common: common itself (capped, so an append copies) when own
// is empty, as it is in a row that left its shape out.
func shared[T any](own, common []*T) []*T {
	if len(own) == 0 {
		return common[:len(common):len(common)]
	}
	return append(own[:len(own):len(own)], common...)
}

// rowDecoder decodes the rows of one response into slabs. Strings and bytes values are
// slices of base, the response the decoder owns (text is base as a string): no string
// overlaps a bytes value, and a bytes value is capped to its length, so writing into one or
// appending to it never changes another value.
type rowDecoder struct {
	text string
	base []byte
	done int // rows decoded so far

	rows   []pb.Row // one slab, exactly the response's rows (its capacity)
	tables slab[pb.TableMetadata]
	gtids  slab[pb.Gtid]
	fields slab[pb.FieldMetadata]
	values slab[pb.Value]
	fptrs  ptrSlab[pb.FieldMetadata]
	vptrs  ptrSlab[pb.Value]

	// the oneof wrappers of the common kinds (the others are allocated one by one)
	strs  slab[pb.Value_StringValue]
	byts  slab[pb.Value_BytesValue]
	ints  slab[pb.Value_IntValue]
	uints slab[pb.Value_UintValue]

	// per-row scratch, reused
	keyFields, allFields []*pb.FieldMetadata
	keyValues, allValues []*pb.Value
}

// slabSize is the size of a new slab for a kind of which used elements were taken so far:
// what the rows decoded so far took per row times the rows still to come, and 16 more (16
// alone before the first row is done). Rows alike -- the usual -- fill exact slabs; a
// kind the rows do not use (the metadata a shared shape leaves out) costs one small slab.
func (d *rowDecoder) slabSize(used int) int {
	n := 16
	if d.done > 0 {
		n += (used + d.done - 1) / d.done * (cap(d.rows) - d.done)
	}
	return n
}

// slab hands out zero elements of T from arrays allocated a slab at a time (earlier slabs
// stay referenced by what points into them).
type slab[T any] struct {
	buf  []T
	used int // elements handed out
}

func (s *slab[T]) take(d *rowDecoder) *T {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]T, 0, d.slabSize(s.used))
	}
	s.buf = s.buf[:len(s.buf)+1]
	s.used++
	return &s.buf[len(s.buf)-1]
}

// ptrSlab holds the pointer slices of the rows (their repeated fields).
type ptrSlab[T any] struct {
	buf  []*T
	used int
}

// carve copies src into the slab and returns the copy, capped to its length (nil for none,
// as proto.Unmarshal leaves an absent repeated field).
func (s *ptrSlab[T]) carve(d *rowDecoder, src []*T) []*T {
	if len(src) == 0 {
		return nil
	}
	if cap(s.buf)-len(s.buf) < len(src) {
		s.buf = make([]*T, 0, max(len(src), d.slabSize(s.used)))
	}
	lo := len(s.buf)
	s.buf = append(s.buf, src...)
	s.used += len(src)
	return s.buf[lo:len(s.buf):len(s.buf)]
}

// str is field value b (a sub-slice of base) as a string sharing d.text; ok is
// false when b is not UTF-8 (proto3 strings must be).
func (d *rowDecoder) str(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", true
	}
	lo := cap(d.base) - cap(b)
	s := d.text[lo : lo+len(b)]
	return s, utf8.ValidString(s)
}

// bytes is field value b as a slice of base capped to its length.
func (d *rowDecoder) bytes(b []byte) []byte {
	lo := cap(d.base) - cap(b)
	return d.base[lo : lo+len(b) : lo+len(b)]
}

// row decodes one Row; nil: give up (see the file's comment).
func (d *rowDecoder) row(b []byte) *pb.Row {
	d.rows = d.rows[:len(d.rows)+1] // the counting pass sized it
	r := &d.rows[len(d.rows)-1]
	d.keyFields, d.allFields = d.keyFields[:0], d.allFields[:0]
	d.keyValues, d.allValues = d.keyValues[:0], d.allValues[:0]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		var m int
		switch typ {
		case protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			if m < 0 {
				return nil
			}
			switch num {
			case 1:
				if r.Table != nil {
					return nil
				}
				if r.Table = d.table(v); r.Table == nil {
					return nil
				}
			case 2, 4:
				f := d.field(v)
				if f == nil {
					return nil
				}
				if num == 2 {
					d.keyFields = append(d.keyFields, f)
				} else {
					d.allFields = append(d.allFields, f)
				}
			case 3, 5:
				x := d.value(v)
				if x == nil {
					return nil
				}
				if num == 3 {
					d.keyValues = append(d.keyValues, x)
				} else {
					d.allValues = append(d.allValues, x)
				}
			case 8:
				if r.Gtid != nil {
					return nil
				}
				if r.Gtid = d.gtid(v); r.Gtid == nil {
					return nil
				}
			default:
				return nil
			}
		case protowire.VarintType:
			var v uint64
			v, m = protowire.ConsumeVarint(b)
			if m < 0 {
				return nil
			}
			switch num {
			case 6:
				r.Epoch = v
			case 7:
				r.Author = uint32(v)
			case 10:
				r.LogIndex = v
			default:
				return nil
			}
		case protowire.Fixed64Type:
			if num != 9 {
				return nil
			}
			var v uint64
			v, m = protowire.ConsumeFixed64(b)
			if m < 0 {
				return nil
			}
			r.CommitTimestampNs = v
		default:
			return nil
		}
		b = b[m:]
	}
	r.KeyFields = d.fptrs.carve(d, d.keyFields)
	r.Fields = d.fptrs.carve(d, d.allFields)
	r.KeyValues = d.vptrs.carve(d, d.keyValues)
	r.Values = d.vptrs.carve(d, d.allValues)
	d.done++
	return r
}

// shape decodes a RowShape (Row's fields 1, 2 and 4); nil: give up.
func (d *rowDecoder) shape(b []byte) *pb.RowShape {
	sh := &pb.RowShape{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2 && num != 4) {
			return nil
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil
		}
		b = b[n+m:]
		if num == 1 {
			if sh.Table != nil {
				return nil
			}
			if sh.Table = d.table(v); sh.Table == nil {
				return nil
			}
			continue
		}
		f := d.field(v)
		if f == nil {
			return nil
		}
		if num == 2 {
			sh.KeyFields = append(sh.KeyFields, f)
		} else {
			sh.Fields = append(sh.Fields, f)
		}
	}
	return sh
}

func (d *rowDecoder) table(b []byte) *pb.TableMetadata {
	t := d.tables.take(d)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2) {
			return nil
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil
		}
		s, ok := d.str(v)
		if !ok {
			return nil
		}
		if num == 1 {
			t.SchemaName = s
		} else {
			t.TableName = s
		}
		b = b[n+m:]
	}
	return t
}

func (d *rowDecoder) field(b []byte) *pb.FieldMetadata {
	f := d.fields.take(d)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		var m int
		switch {
		case num == 1 && typ == protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			if m < 0 {
				return nil
			}
			s, ok := d.str(v)
			if !ok {
				return nil
			}
			f.Name = s
		case num == 2 && typ == protowire.VarintType:
			var v uint64
			v, m = protowire.ConsumeVarint(b)
			if m < 0 {
				return nil
			}
			f.Type = pb.FieldType(int32(v))
		default:
			return nil
		}
		b = b[m:]
	}
	return f
}

func (d *rowDecoder) gtid(b []byte) *pb.Gtid {
	g := d.gtids.take(d)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.VarintType || (num != 1 && num != 2) {
			return nil
		}
		v, m := protowire.ConsumeVarint(b[n:])
		if m < 0 {
			return nil
		}
		if num == 1 {
			g.ServerId = uint32(v)
		} else {
			g.TransId = v
		}
		b = b[n+m:]
	}
	return g
}

// value decodes one Value: the last kind on the wire is the one set, as proto.Unmarshal
// sets a oneof.
func (d *rowDecoder) value(b []byte) *pb.Value {
	x := d.values.take(d)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		var m int
		switch typ {
		case protowire.VarintType:
			var v uint64
			v, m = protowire.ConsumeVarint(b)
			if m < 0 {
				return nil
			}
			switch num {
			case 1:
				x.Kind = &pb.Value_NullValue{NullValue: pb.NullValue(int32(v))}
			case 2:
				x.Kind = &pb.Value_BoolValue{BoolValue: v != 0}
			case 3:
				w := d.ints.take(d)
				w.IntValue = protowire.DecodeZigZag(v)
				x.Kind = w
			case 4:
				w := d.uints.take(d)
				w.UintValue = v
				x.Kind = w
			default:
				return nil
			}
		case protowire.Fixed64Type:
			var v uint64
			v, m = protowire.ConsumeFixed64(b)
			if m < 0 {
				return nil
			}
			switch num {
			case 5:
				x.Kind = &pb.Value_DoubleValue{DoubleValue: math.Float64frombits(v)}
			case 9:
				x.Kind = &pb.Value_TimestampNs{TimestampNs: int64(v)}
			default:
				return nil
			}
		case protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			if m < 0 {
				return nil
			}
			switch num {
			case 6, 7:
				s, ok := d.str(v)
				if !ok {
					return nil
				}
				if num == 6 {
					x.Kind = &pb.Value_DecimalValue{DecimalValue: s}
				} else {
					w := d.strs.take(d)
					w.StringValue = s
					x.Kind = w
				}
			case 8:
				w := d.byts.take(d)
				w.BytesValue = d.bytes(v)
				x.Kind = w
			default:
				return nil
			}
		default:
			return nil
		}
		b = b[m:]
	}
	return x
}
