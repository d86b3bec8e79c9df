package gateway_test

// Retry, redirect, deadline and error rules against in-process fake servers: each behaviour
// is forced deterministically here; cluster_test.go checks them against real nodes.

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type attempt struct {
	key           string
	authorization string
}

// fakeGateway answers Write with writeFn(n, req) for its n-th attempt (from 0) and
// Subscribe with subscribeFn; it records every Write attempt.
type fakeGateway struct {
	pb.UnimplementedGatewayServer
	mu          sync.Mutex
	attempts    []attempt
	subscribes  []*pb.SubscribeRequest
	writeFn     func(ctx context.Context, n int, req *pb.WriteRequest) (*pb.WriteResult, error)
	subscribeFn func(n int, req *pb.SubscribeRequest, s grpc.ServerStreamingServer[pb.ChangeEvent]) error
	streamFn    func(s grpc.BidiStreamingServer[pb.StreamWriteRequest, pb.StreamWriteResponse]) error
}

func (f *fakeGateway) StreamWrite(s grpc.BidiStreamingServer[pb.StreamWriteRequest, pb.StreamWriteResponse]) error {
	return f.streamFn(s)
}

func (f *fakeGateway) Write(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResult, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	n := len(f.attempts)
	f.attempts = append(f.attempts, attempt{req.GetIdempotencyKey(), first(md.Get("authorization"))})
	f.mu.Unlock()
	return f.writeFn(ctx, n, req)
}

func (f *fakeGateway) Subscribe(req *pb.SubscribeRequest, s grpc.ServerStreamingServer[pb.ChangeEvent]) error {
	f.mu.Lock()
	n := len(f.subscribes)
	f.subscribes = append(f.subscribes, req)
	f.mu.Unlock()
	return f.subscribeFn(n, req, s)
}

func (f *fakeGateway) recorded() []attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]attempt(nil), f.attempts...)
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func serve(t *testing.T, f *fakeGateway) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterGatewayServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func ok(n int) (*pb.WriteResult, error) {
	return &pb.WriteResult{LogIndex: uint64(100 + n), Gtid: &pb.Gtid{ServerId: 1, TransId: uint64(n + 1)}}, nil
}

func unavailable(ctx context.Context, leaderAPI string) error {
	if leaderAPI != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("gateway-leader-id", "2", "gateway-leader-api", leaderAPI))
	}
	return status.Error(codes.Unavailable, "not the leader")
}

func newFakeClient(t *testing.T, targets []string, opts ...gateway.Option) *gateway.Client {
	t.Helper()
	opts = append([]gateway.Option{gateway.WithAttemptTimeout(time.Second), gateway.WithMaxBackoff(50 * time.Millisecond)}, opts...)
	c, err := gateway.New(targets, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func row(t *testing.T) []*pb.Statement {
	t.Helper()
	st, err := gateway.Insert("fake.t", []gateway.Col{gateway.C("id", 1)}, gateway.C("v", "a"))
	if err != nil {
		t.Fatal(err)
	}
	return []*pb.Statement{st}
}

func TestRetriesReuseTheIdempotencyKey(t *testing.T) {
	f := &fakeGateway{writeFn: func(ctx context.Context, n int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		if n < 2 {
			return nil, unavailable(ctx, "")
		}
		return ok(n)
	}}
	c := newFakeClient(t, []string{serve(t, f)}, gateway.WithToken("s3cret"))
	if _, err := c.Write(context.Background(), row(t)); err != nil {
		t.Fatal(err)
	}
	got := f.recorded()
	if len(got) != 3 {
		t.Fatalf("attempts = %d, want 3", len(got))
	}
	for _, a := range got {
		if a.key == "" || a.key != got[0].key {
			t.Fatalf("idempotency keys differ between attempts: %+v", got)
		}
		if a.authorization != "Bearer s3cret" {
			t.Fatalf("authorization = %q, want the bearer token", a.authorization)
		}
	}
}

func TestEachWriteHasItsOwnKeyUnlessGiven(t *testing.T) {
	f := &fakeGateway{writeFn: func(_ context.Context, n int, _ *pb.WriteRequest) (*pb.WriteResult, error) { return ok(n) }}
	c := newFakeClient(t, []string{serve(t, f)})
	ctx := context.Background()
	for range 2 {
		if _, err := c.Write(ctx, row(t)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Write(ctx, row(t), gateway.WithIdempotencyKey("order-42")); err != nil {
		t.Fatal(err)
	}
	got := f.recorded()
	if got[0].key == got[1].key || got[2].key != "order-42" {
		t.Fatalf("keys = %q, %q, %q", got[0].key, got[1].key, got[2].key)
	}
}

func TestUnavailableFollowsTheLeaderAPITrailer(t *testing.T) {
	leader := &fakeGateway{writeFn: func(_ context.Context, n int, _ *pb.WriteRequest) (*pb.WriteResult, error) { return ok(n) }}
	leaderAddr := serve(t, leader)
	follower := &fakeGateway{writeFn: func(ctx context.Context, _ int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		return nil, unavailable(ctx, leaderAddr)
	}}
	other := &fakeGateway{writeFn: func(ctx context.Context, _ int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		return nil, unavailable(ctx, "")
	}}
	// the leader is not among the targets: only the trailer can lead there
	c := newFakeClient(t, []string{serve(t, follower), serve(t, other)})
	if _, err := c.Write(context.Background(), row(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(follower.recorded()); n != 1 {
		t.Fatalf("follower attempts = %d, want 1", n)
	}
	if n := len(other.recorded()); n != 0 {
		t.Fatalf("the next target was tried %d times; the trailer should have been followed", n)
	}
	if got := leader.recorded(); len(got) != 1 || got[0].key != follower.recorded()[0].key {
		t.Fatalf("leader attempts = %+v", got)
	}
	if targets := c.Targets(); targets[len(targets)-1] != leaderAddr {
		t.Fatalf("targets = %v, want the leader added", targets)
	}
}

func TestUnavailableWithoutTrailerMovesToTheNextTarget(t *testing.T) {
	down := &fakeGateway{writeFn: func(ctx context.Context, _ int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		return nil, unavailable(ctx, "")
	}}
	up := &fakeGateway{writeFn: func(_ context.Context, n int, _ *pb.WriteRequest) (*pb.WriteResult, error) { return ok(n) }}
	c := newFakeClient(t, []string{serve(t, down), serve(t, up)})
	if _, err := c.Write(context.Background(), row(t)); err != nil {
		t.Fatal(err)
	}
	if len(down.recorded()) != 1 || len(up.recorded()) != 1 {
		t.Fatalf("attempts: down %d, up %d", len(down.recorded()), len(up.recorded()))
	}
}

func TestAnAttemptPastItsDeadlineIsRetried(t *testing.T) {
	f := &fakeGateway{writeFn: func(ctx context.Context, n int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		if n == 0 {
			<-ctx.Done() // the first attempt never answers in time
			return nil, ctx.Err()
		}
		return ok(n)
	}}
	c := newFakeClient(t, []string{serve(t, f)}, gateway.WithAttemptTimeout(150*time.Millisecond))
	res, err := c.Write(context.Background(), row(t))
	if err != nil {
		t.Fatal(err)
	}
	got := f.recorded()
	if len(got) != 2 || got[0].key != got[1].key || res.GetLogIndex() != 101 {
		t.Fatalf("attempts = %+v, result %v", got, res)
	}
}

func TestTheOverallDeadlineEndsTheRetries(t *testing.T) {
	f := &fakeGateway{writeFn: func(ctx context.Context, _ int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		return nil, unavailable(ctx, "")
	}}
	c := newFakeClient(t, []string{serve(t, f)})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Write(ctx, row(t))
	var gerr *gateway.GatewayError
	// The last attempt's UNAVAILABLE, or DEADLINE_EXCEEDED when the deadline fell inside an
	// attempt (a loaded machine): either way the deadline ended the retries.
	if !errors.As(err, &gerr) || (gerr.Code != codes.Unavailable &&
		gerr.Code != codes.DeadlineExceeded) {
		t.Fatalf("err = %v, want UNAVAILABLE or DEADLINE_EXCEEDED", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("gave up after %v, past the 400 ms deadline", elapsed)
	}
	if n := len(f.recorded()); n < 2 {
		t.Fatalf("attempts = %d, want retries before the deadline", n)
	}
}

func TestInvalidArgumentIsNotRetriedAndNamesTheField(t *testing.T) {
	f := &fakeGateway{writeFn: func(ctx context.Context, _ int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("gateway-field", "statements[0].insert.table.table_name"))
		return nil, status.Error(codes.InvalidArgument, "statements[0].insert.table.table_name: missing table name")
	}}
	c := newFakeClient(t, []string{serve(t, f)})
	_, err := c.Write(context.Background(), row(t))
	var gerr *gateway.GatewayError
	if !errors.As(err, &gerr) {
		t.Fatalf("err = %v, want a *GatewayError", err)
	}
	if gerr.Code != codes.InvalidArgument || gerr.Field != "statements[0].insert.table.table_name" {
		t.Fatalf("err = %+v", gerr)
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("status.Code = %v", status.Code(err))
	}
	if n := len(f.recorded()); n != 1 {
		t.Fatalf("attempts = %d, want 1 (not retried)", n)
	}
}

func TestSubscribeResumesAfterTheLastDeliveredIndex(t *testing.T) {
	f := &fakeGateway{subscribeFn: func(n int, req *pb.SubscribeRequest, s grpc.ServerStreamingServer[pb.ChangeEvent]) error {
		start := req.GetFromLogIndex()
		for i := start; i < start+3; i++ {
			if err := s.Send(&pb.ChangeEvent{LogIndex: i}); err != nil {
				return err
			}
		}
		if n == 0 {
			return status.Error(codes.Unavailable, "node stopping")
		}
		<-s.Context().Done()
		return nil
	}}
	c := newFakeClient(t, []string{serve(t, f)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []uint64
	reconnects := 0
	for ev, err := range c.Subscribe(ctx, gateway.FromLogIndex(5), gateway.OnReconnect(func(string, error) { reconnects++ })) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.GetLogIndex())
		if len(got) == 6 {
			break
		}
	}
	want := []uint64{5, 6, 7, 8, 9, 10}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("log indices = %v, want %v", got, want)
		}
	}
	if reconnects != 1 || f.subscribes[1].GetFromLogIndex() != 8 {
		t.Fatalf("reconnects = %d, second request from %d", reconnects, f.subscribes[1].GetFromLogIndex())
	}
}

func TestSubscribeGivesUpOnANonRetryableError(t *testing.T) {
	f := &fakeGateway{subscribeFn: func(_ int, _ *pb.SubscribeRequest, s grpc.ServerStreamingServer[pb.ChangeEvent]) error {
		_ = grpc.SetTrailer(s.Context(), metadata.Pairs("gateway-field", "from_log_index"))
		return status.Error(codes.InvalidArgument, "from_log_index: log index 3 was compacted")
	}}
	c := newFakeClient(t, []string{serve(t, f)})
	for _, err := range c.Subscribe(context.Background(), gateway.FromLogIndex(3)) {
		var gerr *gateway.GatewayError
		if !errors.As(err, &gerr) || gerr.Code != codes.InvalidArgument || gerr.Field != "from_log_index" {
			t.Fatalf("err = %v", err)
		}
		break
	}
	if len(f.subscribes) != 1 {
		t.Fatalf("subscribe attempts = %d, want 1", len(f.subscribes))
	}
}

func TestValuesRoundTrip(t *testing.T) {
	ts := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	for _, v := range []any{nil, true, int64(-7), uint64(1 << 63), 2.5, gateway.Decimal("-12.50"), "a", []byte{0, 1}, ts} {
		val, _, err := gateway.ToValue(v)
		if err != nil {
			t.Fatal(err)
		}
		back := gateway.FromValue(val)
		if b, isBytes := v.([]byte); isBytes {
			if string(back.([]byte)) != string(b) {
				t.Fatalf("%v -> %v", v, back)
			}
			continue
		}
		if back != v {
			t.Fatalf("%v (%T) -> %v (%T)", v, v, back, back)
		}
	}
	if _, _, err := gateway.ToValue(struct{}{}); err == nil {
		t.Fatal("an unsupported type was accepted")
	}
}

// blockingWrite is a fake whose Write answers only when its context ends; started is
// closed when the first attempt has reached the server.
func blockingWrite() (*fakeGateway, chan struct{}) {
	started := make(chan struct{})
	var once sync.Once
	return &fakeGateway{writeFn: func(ctx context.Context, _ int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return nil, ctx.Err()
	}}, started
}

func TestACallTheCallerCancelsUnwrapsToContextCanceled(t *testing.T) {
	f, started := blockingWrite()
	c := newFakeClient(t, []string{serve(t, f)}, gateway.WithAttemptTimeout(30*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err := c.Write(ctx, row(t))
	var gerr *gateway.GatewayError
	if !errors.As(err, &gerr) || gerr.Code != codes.Canceled {
		t.Fatalf("err = %v, want a Canceled GatewayError", err)
	}
	if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("errors.Is(%v, context.Canceled) = false or DeadlineExceeded = true", err)
	}
}

func TestACallPastTheCallersDeadlineUnwrapsToContextDeadlineExceeded(t *testing.T) {
	f, _ := blockingWrite()
	c := newFakeClient(t, []string{serve(t, f)}, gateway.WithAttemptTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Write(ctx, row(t))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one that is context.DeadlineExceeded", err)
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("status.Code(%v) = %v", err, status.Code(err))
	}
}

func TestRetriesEndedByTheDeadlineUnwrapToContextDeadlineExceeded(t *testing.T) {
	// Every attempt fails UNAVAILABLE: the error reported is the last attempt's, but it is
	// the caller's deadline that ended the retries, and errors.Is says so.
	f := &fakeGateway{writeFn: func(ctx context.Context, _ int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		return nil, unavailable(ctx, "")
	}}
	c := newFakeClient(t, []string{serve(t, f)})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Write(ctx, row(t))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one that is context.DeadlineExceeded", err)
	}
}

func TestARefusalIsNoContextError(t *testing.T) {
	f := &fakeGateway{writeFn: func(ctx context.Context, _ int, _ *pb.WriteRequest) (*pb.WriteResult, error) {
		return nil, status.Error(codes.InvalidArgument, "bad table")
	}}
	c := newFakeClient(t, []string{serve(t, f)})
	_, err := c.Write(context.Background(), row(t))
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v unwraps to a context error", err)
	}
	var gerr *gateway.GatewayError
	if !errors.As(err, &gerr) || gerr.Cause == nil || status.Code(gerr.Cause) != codes.InvalidArgument {
		t.Fatalf("err = %v, want its gRPC status error as Cause", err)
	}
}
