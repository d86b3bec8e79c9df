package gateway_test

// WithReadCoalescing against an in-process fake node: which calls the node gets, and what
// each Read answers when a batch is refused or a caller's deadline passes.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeReads keeps rows "fake.t" id -> v for ids 0..99; a key that is a string is refused
// INVALID_ARGUMENT by both Read and ReadBatch (ReadBatch: the whole call, naming it). Each
// ReadBatch waits for gate (when set) before answering, so the Reads sent meanwhile queue.
type fakeReads struct {
	pb.UnimplementedGatewayServer
	pb.UnimplementedReadsServer
	batchGate
	reads int
}

// batchGate records each batch call's size and holds it until gate closes (when set).
type batchGate struct {
	gate    chan struct{}
	mu      sync.Mutex
	batches []int
}

func (g *batchGate) arrive(ctx context.Context, n int) error {
	g.mu.Lock()
	g.batches = append(g.batches, n)
	g.mu.Unlock()
	if g.gate == nil {
		return nil
	}
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveFake serves what register registers on a local port for the test's duration.
func serveFake(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func (f *fakeReads) answer(key []*pb.Value) (*pb.ReadBatchResult, error) {
	if len(key) != 1 {
		return nil, status.Error(codes.InvalidArgument, "one key value expected")
	}
	if _, ok := key[0].GetKind().(*pb.Value_StringValue); ok {
		return nil, status.Error(codes.InvalidArgument, "key: INTEGER expected")
	}
	id := key[0].GetIntValue()
	if id < 0 || id >= 100 {
		return &pb.ReadBatchResult{}, nil
	}
	return &pb.ReadBatchResult{Found: true, Row: &pb.Row{Values: []*pb.Value{
		{Kind: &pb.Value_IntValue{IntValue: id}}, {Kind: &pb.Value_StringValue{StringValue: fmt.Sprint("v", id)}}}}}, nil
}

func (f *fakeReads) Read(_ context.Context, req *pb.ReadRequest) (*pb.ReadResponse, error) {
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
	r, err := f.answer(req.GetKey())
	if err != nil {
		return nil, err
	}
	return &pb.ReadResponse{Found: r.GetFound(), Row: r.GetRow(), AppliedIndex: 7}, nil
}

func (f *fakeReads) ReadBatch(ctx context.Context, req *pb.ReadBatchRequest) (*pb.ReadBatchResponse, error) {
	if err := f.arrive(ctx, len(req.GetKeys())); err != nil {
		return nil, err
	}
	out := &pb.ReadBatchResponse{AppliedIndex: 9}
	for i, k := range req.GetKeys() {
		r, err := f.answer(k.GetKey())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "keys[%d].key[0]: %s", i, status.Convert(err).Message())
		}
		out.Results = append(out.Results, r)
	}
	return out, nil
}

func (f *fakeReads) counts() (int, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads, append([]int(nil), f.batches...)
}

func serveReads(t *testing.T, f *fakeReads) string {
	return serveFake(t, func(s *grpc.Server) { pb.RegisterGatewayServer(s, f); pb.RegisterReadsServer(s, f) })
}

// readAll runs one Read per key at once and returns each one's answer, in keys' order.
func readAll(c *gateway.Client, ctx context.Context, keys []any) ([]*pb.ReadResponse, []error) {
	resps, errs := make([]*pb.ReadResponse, len(keys)), make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = c.Read(ctx, "fake.t", k)
		}()
	}
	wg.Wait()
	return resps, errs
}

func TestCoalescedReadsGoAsBatchesAndEachGetsItsOwnRow(t *testing.T) {
	f := &fakeReads{batchGate: batchGate{gate: make(chan struct{})}}
	c := newFakeClient(t, []string{serveReads(t, f)}, gateway.WithReadCoalescing(16))
	keys := make([]any, 60)
	for i := range keys {
		keys[i] = int64(i * 2) // ids 100.. are absent
	}
	go func() { time.Sleep(300 * time.Millisecond); close(f.gate) }()
	resps, errs := readAll(c, context.Background(), keys)
	for i, r := range resps {
		id := int64(i * 2)
		if errs[i] != nil {
			t.Fatalf("read %d: %v", id, errs[i])
		}
		if r.GetFound() != (id < 100) || (id < 100 && r.GetRow().GetValues()[1].GetStringValue() != fmt.Sprint("v", id)) {
			t.Fatalf("read %d: %v", id, r)
		}
	}
	reads, batches := f.counts()
	if reads != 0 {
		t.Fatalf("%d single Reads reached the node, want 0", reads)
	}
	total, most := 0, 0
	for _, n := range batches {
		total += n
		most = max(most, n)
	}
	if total != len(keys) || most > 16 || len(batches) >= len(keys) {
		t.Fatalf("batches %v: want %d keys in all, at most 16 per batch, fewer batches than keys", batches, len(keys))
	}
}

func TestABatchRefusedForOneKeyFailsOnlyThatRead(t *testing.T) {
	f := &fakeReads{batchGate: batchGate{gate: make(chan struct{})}}
	c := newFakeClient(t, []string{serveReads(t, f)}, gateway.WithReadCoalescing(64))
	keys := []any{int64(1), int64(2), "bad", int64(3), int64(500)}
	// the first Read's batch waits at the gate while the others queue behind it
	go func() { time.Sleep(300 * time.Millisecond); close(f.gate) }()
	resps, errs := readAll(c, context.Background(), keys)
	for i, k := range keys {
		if k == "bad" {
			var gerr *gateway.GatewayError
			if !errors.As(errs[i], &gerr) || gerr.Code != codes.InvalidArgument {
				t.Fatalf("bad key: %v, want INVALID_ARGUMENT", errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("read %v: %v", k, errs[i])
		}
		if want := k.(int64) < 100; resps[i].GetFound() != want {
			t.Fatalf("read %v: found %v, want %v", k, resps[i].GetFound(), want)
		}
	}
	if _, batches := f.counts(); len(batches) == 0 {
		t.Fatal("no ReadBatch reached the node")
	}
}

func TestACoalescedReadEndsAtItsOwnDeadline(t *testing.T) {
	f := &fakeReads{batchGate: batchGate{gate: make(chan struct{})}} // never opened: every batch waits
	c := newFakeClient(t, []string{serveReads(t, f)}, gateway.WithReadCoalescing(8),
		gateway.WithAttemptTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := c.Read(ctx, "fake.t", int64(1))
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want one that is context.DeadlineExceeded", err)
	}
	if time.Since(began) > 5*time.Second {
		t.Fatalf("the Read returned after %v, past its deadline", time.Since(began))
	}
}

func TestReadCoalescingRefusesABatchSizeOutOfRange(t *testing.T) {
	for _, n := range []int{0, -1, 10001} {
		if _, err := gateway.New([]string{"127.0.0.1:1"}, gateway.WithReadCoalescing(n)); err == nil {
			t.Fatalf("WithReadCoalescing(%d) accepted", n)
		}
	}
}

func TestCoalescedReadsOnALiveClusterSeeEveryWriteBeforeThem(t *testing.T) {
	ctx := context.Background()
	writer := liveClient(t, cluster.APIs(), "writer")
	reader := liveClient(t, cluster.APIs(), "reader", gateway.WithReadCoalescing(32))
	tbl := table("coalesced")
	var writes []*pb.WriteRequest
	for id := int64(0); id < 40; id++ {
		st, err := gateway.Insert(tbl, []gateway.Col{gateway.C("id", id)}, gateway.C("name", fmt.Sprint("n", id)))
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, &pb.WriteRequest{Statements: []*pb.Statement{st}})
	}
	if _, err := writer.WriteBatchRequests(ctx, writes); err != nil {
		t.Fatal(err)
	}
	// linearizable: each Read began after the writes were acknowledged, so it sees them
	keys := make([]any, 0, 80)
	for id := int64(0); id < 80; id++ {
		keys = append(keys, id)
	}
	got := make([]gateway.Row, len(keys))
	found := make([]bool, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], found[i], errs[i] = reader.Get(ctx, tbl, k)
		}()
	}
	wg.Wait()
	for i := range keys {
		id := int64(i)
		if errs[i] != nil {
			t.Fatalf("read %d: %v", id, errs[i])
		}
		if found[i] != (id < 40) || (id < 40 && got[i]["name"] != fmt.Sprint("n", id)) {
			t.Fatalf("read %d: found %v, row %v", id, found[i], got[i])
		}
	}
	// the reader's token may read, not write: a coalesced Read of a table that does not
	// exist answers as a plain Read does
	plain := liveClient(t, cluster.APIs(), "reader")
	_, errPlain := plain.Read(ctx, "gotest.no_such_table_x", int64(1))
	_, errCoalesced := reader.Read(ctx, "gotest.no_such_table_x", int64(1))
	if status.Code(errPlain) != status.Code(errCoalesced) {
		t.Fatalf("missing table: plain %v, coalesced %v", errPlain, errCoalesced)
	}
}

// fakeWrites answers Write and WriteBatch: a write whose first statement's table is "bad.t"
// is invalid (Write: INVALID_ARGUMENT; WriteBatch: the whole call, naming it); a write with a
// condition is refused FAILED_PRECONDITION (Write: the call; WriteBatch: that write alone);
// the others get log index 100 + the write's position in arrival order. Each WriteBatch waits
// for gate (when set) before answering.
type fakeWrites struct {
	pb.UnimplementedGatewayServer
	batchGate
	n       int
	singles int
	keys    map[string]bool
}

func (f *fakeWrites) one(req *pb.WriteRequest) (*pb.WriteResult, *pb.WriteError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]bool{}
	}
	f.keys[req.GetIdempotencyKey()] = true
	if len(req.GetConditions()) > 0 {
		return nil, &pb.WriteError{Code: int32(codes.FailedPrecondition), Error: "condition 0 failed on fake.t", Field: "conditions[0]"}
	}
	f.n++
	return &pb.WriteResult{LogIndex: uint64(100 + f.n), Gtid: &pb.Gtid{ServerId: 1, TransId: uint64(f.n)}}, nil
}

func invalid(req *pb.WriteRequest) bool {
	return req.GetStatements()[0].GetInsert().GetTable().GetSchemaName() == "bad"
}

func (f *fakeWrites) Write(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResult, error) {
	f.mu.Lock()
	f.singles++
	f.mu.Unlock()
	if invalid(req) {
		return nil, status.Error(codes.InvalidArgument, "statements[0]: bad table")
	}
	res, refused := f.one(req)
	if refused != nil { // as the node: the condition named in the gateway-field trailer
		_ = grpc.SetTrailer(ctx, metadata.Pairs(gateway.TrailerField, refused.GetField()))
		return nil, status.Error(codes.FailedPrecondition, refused.GetError())
	}
	return res, nil
}

func (f *fakeWrites) WriteBatch(ctx context.Context, req *pb.WriteBatchRequest) (*pb.WriteBatchResponse, error) {
	if err := f.arrive(ctx, len(req.GetWrites())); err != nil {
		return nil, err
	}
	for i, w := range req.GetWrites() {
		if invalid(w) {
			return nil, status.Errorf(codes.InvalidArgument, "writes[%d].statements[0]: bad table", i)
		}
	}
	out := &pb.WriteBatchResponse{}
	for i, w := range req.GetWrites() {
		res, refused := f.one(w)
		if refused != nil {
			refused.Index = uint32(i)
			out.Errors = append(out.Errors, refused)
			res = &pb.WriteResult{}
		}
		out.Results = append(out.Results, res)
	}
	return out, nil
}

func serveWrites(t *testing.T, f *fakeWrites) string {
	return serveFake(t, func(s *grpc.Server) { pb.RegisterGatewayServer(s, f) })
}

type write struct {
	table string
	opts  []gateway.WriteOption
}

// writeAll runs one Write per entry at once and returns each one's answer, in order.
func writeAll(t *testing.T, c *gateway.Client, writes []write) ([]*pb.WriteResult, []error) {
	t.Helper()
	res, errs := make([]*pb.WriteResult, len(writes)), make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		st, err := gateway.Insert(w.table, []gateway.Col{gateway.C("id", i)}, gateway.C("v", "a"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = c.Write(context.Background(), []*pb.Statement{st}, w.opts...)
		}()
	}
	wg.Wait()
	return res, errs
}

func TestCoalescedWritesGoAsBatchesEachWithItsOwnKeyAndResult(t *testing.T) {
	f := &fakeWrites{batchGate: batchGate{gate: make(chan struct{})}}
	c := newFakeClient(t, []string{serveWrites(t, f)}, gateway.WithWriteCoalescing(16))
	writes := make([]write, 50)
	for i := range writes {
		writes[i] = write{table: "fake.t"}
	}
	go func() { time.Sleep(300 * time.Millisecond); close(f.gate) }()
	res, errs := writeAll(t, c, writes)
	seen := map[uint64]bool{}
	for i := range writes {
		if errs[i] != nil {
			t.Fatalf("write %d: %v", i, errs[i])
		}
		if res[i].GetLogIndex() <= 100 || seen[res[i].GetLogIndex()] {
			t.Fatalf("write %d: result %v (one per write expected)", i, res[i])
		}
		seen[res[i].GetLogIndex()] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	total, most := 0, 0
	for _, n := range f.batches {
		total += n
		most = max(most, n)
	}
	if f.singles != 0 || total != len(writes) || most > 16 || len(f.batches) >= len(writes) {
		t.Fatalf("singles %d, batches %v: want every write in a batch of at most 16", f.singles, f.batches)
	}
	if len(f.keys) != len(writes) {
		t.Fatalf("%d distinct idempotency keys for %d writes", len(f.keys), len(writes))
	}
}

func TestACoalescedWriteRefusedByItsConditionFailsAloneAsALoneWriteWould(t *testing.T) {
	f := &fakeWrites{batchGate: batchGate{gate: make(chan struct{})}}
	c := newFakeClient(t, []string{serveWrites(t, f)}, gateway.WithWriteCoalescing(64))
	cond, err := gateway.ConditionAbsent("fake.t", 3)
	if err != nil {
		t.Fatal(err)
	}
	writes := []write{{table: "fake.t"}, {table: "fake.t", opts: []gateway.WriteOption{gateway.WithConditions(cond)}},
		{table: "bad.t"}, {table: "fake.t"}}
	go func() { time.Sleep(300 * time.Millisecond); close(f.gate) }()
	res, errs := writeAll(t, c, writes)
	var gerr *gateway.GatewayError
	if !errors.As(errs[1], &gerr) || gerr.Code != codes.FailedPrecondition || gerr.ConditionIndex() != 0 ||
		!gateway.IsPreconditionFailed(errs[1]) {
		t.Fatalf("conditional write: %v, want FAILED_PRECONDITION on conditions[0]", errs[1])
	}
	if !errors.As(errs[2], &gerr) || gerr.Code != codes.InvalidArgument {
		t.Fatalf("invalid write: %v, want INVALID_ARGUMENT", errs[2])
	}
	for _, i := range []int{0, 3} {
		if errs[i] != nil || res[i].GetLogIndex() <= 100 {
			t.Fatalf("write %d: %v %v", i, res[i], errs[i])
		}
	}
	// without the invalid write the batch is answered write by write: the refusal comes
	// from the batch's errors, the same error
	f2 := &fakeWrites{batchGate: batchGate{gate: make(chan struct{})}}
	c2 := newFakeClient(t, []string{serveWrites(t, f2)}, gateway.WithWriteCoalescing(64))
	go func() { time.Sleep(300 * time.Millisecond); close(f2.gate) }()
	res, errs = writeAll(t, c2, []write{writes[0], writes[1], writes[3], writes[0]})
	if !errors.As(errs[1], &gerr) || gerr.Code != codes.FailedPrecondition || gerr.ConditionIndex() != 0 {
		t.Fatalf("conditional write in a batch: %v, want FAILED_PRECONDITION on conditions[0]", errs[1])
	}
	for _, i := range []int{0, 2, 3} {
		if errs[i] != nil || res[i].GetLogIndex() <= 100 {
			t.Fatalf("write %d: %v %v", i, res[i], errs[i])
		}
	}
	f2.mu.Lock()
	defer f2.mu.Unlock()
	if f2.singles != 0 {
		t.Fatalf("%d single Writes, want every write in a batch", f2.singles)
	}
}

func TestWriteCoalescingRefusesABatchSizeOutOfRange(t *testing.T) {
	for _, n := range []int{0, 10001} {
		if _, err := gateway.New([]string{"127.0.0.1:1"}, gateway.WithWriteCoalescing(n)); err == nil {
			t.Fatalf("WithWriteCoalescing(%d) accepted", n)
		}
	}
}

func TestCoalescedWritesOnALiveClusterAllLandAndAConditionFailsAlone(t *testing.T) {
	ctx := context.Background()
	c := liveClient(t, cluster.APIs(), "writer", gateway.WithWriteCoalescing(32))
	tbl := table("coalesced_writes")
	if _, err := c.Write(ctx, mustInsert(t, tbl, 0, gateway.C("name", "first"))); err != nil {
		t.Fatal(err)
	}
	absent, err := gateway.ConditionAbsent(tbl, int64(0))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 41)
	for i := 1; i <= 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Write(ctx, mustInsert(t, tbl, int64(i), gateway.C("name", fmt.Sprint("n", i))))
		}()
	}
	wg.Add(1)
	go func() { // row 0 exists: this one is refused, alone
		defer wg.Done()
		_, errs[0] = c.Write(ctx, mustInsert(t, tbl, 0, gateway.C("name", "again")), gateway.WithConditions(absent))
	}()
	wg.Wait()
	if !gateway.IsPreconditionFailed(errs[0]) {
		t.Fatalf("conditional write over an existing row: %v, want a precondition failure", errs[0])
	}
	for i := 1; i <= 40; i++ {
		if errs[i] != nil {
			t.Fatalf("write %d: %v", i, errs[i])
		}
		row, found, err := c.Get(ctx, tbl, int64(i))
		if err != nil || !found || row["name"] != fmt.Sprint("n", i) {
			t.Fatalf("row %d: %v %v %v", i, row, found, err)
		}
	}
	if row, _, err := c.Get(ctx, tbl, int64(0)); err != nil || row["name"] != "first" {
		t.Fatalf("row 0: %v %v", row, err)
	}
}

// noBatches serves Read alone, as a node without the Reads service.
type noBatches struct {
	pb.UnimplementedGatewayServer
	reads atomic.Int64
}

func (f *noBatches) Read(_ context.Context, req *pb.ReadRequest) (*pb.ReadResponse, error) {
	f.reads.Add(1)
	return &pb.ReadResponse{Found: true, Row: &pb.Row{Values: req.GetKey()}}, nil
}

func TestACoalescedReadOfANodeWithoutReadBatchIsSentAsARead(t *testing.T) {
	f := &noBatches{}
	c := newFakeClient(t, []string{serveFake(t, func(s *grpc.Server) { pb.RegisterGatewayServer(s, f) })},
		gateway.WithReadCoalescing(8))
	resp, err := c.Read(context.Background(), "fake.t", int64(5))
	if err != nil || !resp.GetFound() || f.reads.Load() != 1 {
		t.Fatalf("read: %v %v (%d Reads reached the node)", resp, err, f.reads.Load())
	}
}
