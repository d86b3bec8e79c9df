package gateway

// Call coalescing (WithReadCoalescing, WithWriteCoalescing): the Reads, or the Writes, of one
// client that wait at the same moment go to the node as one Reads.ReadBatch, or one
// WriteBatch. A node pays most of a one-row call's CPU in the per-call cost of its gRPC
// server; a batch pays it once for all its rows (docs/benchmarks.md, "Reads like with like"
// and "The per-call ceiling").

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "gateway/clients/go/gatewayv1"
)

// maxSending is how many batch calls one lane has out at once: while they are out, the calls
// that arrive wait and leave together in the next one.
const maxSending = 2

// WithReadCoalescing sends the Reads (and Gets) this client has waiting at one moment with
// the same consistency as one Reads.ReadBatch of at most maxBatch keys (1..10000). Each Read
// keeps its semantics: ReadBatch answers every key with Read's semantics and permission, a
// linearizable batch takes its read point after each of its Reads began and answers before
// any returns, and each Read still ends at its own context's deadline. A batch the node
// refuses for one key (a bad key, a denied table, a response over its size limit, a node
// without the Reads service) is sent again as one Read per key, so each caller gets its own
// answer or error. Off by default: a lone Read then waits for nothing, but pays one more
// goroutine hand-off.
func WithReadCoalescing(maxBatch int) Option {
	return batchSize("WithReadCoalescing", maxBatch, func(o *options) *int { return &o.readBatch })
}

// WithWriteCoalescing sends the Writes this client has waiting at one moment as one
// WriteBatch of at most maxBatch writes (1..10000). Each Write keeps its semantics: it is its
// own transaction with its own idempotency key (so the batch's retries apply none twice) and
// its own conditions (a refused one fails that Write alone, with the error a lone Write gets);
// a Write that returned before another began is in an earlier batch, so it is ordered before
// it; each Write ends at its own context's deadline. A batch the node refuses whole (one
// invalid write, a request over its size limit, a denied table) is sent again as one Write per
// write, so each caller gets its own result or error. Off by default.
func WithWriteCoalescing(maxBatch int) Option {
	return batchSize("WithWriteCoalescing", maxBatch, func(o *options) *int { return &o.writeBatch })
}

// batchSize is the Option setting *field(o) to maxBatch, or failing New when it is not 1..10000.
func batchSize(name string, maxBatch int, field func(*options) *int) Option {
	return func(o *options) {
		if maxBatch < 1 || maxBatch > 10000 {
			o.err = fmt.Errorf("gateway: %s: maxBatch must be 1..10000", name)
			return
		}
		*field(o) = maxBatch
	}
}

// waiting is one call queued on a lane; done gets its one outcome.
type waiting[Q, A any] struct {
	ctx  context.Context
	req  Q
	done chan outcome[A]
}

type outcome[A any] struct {
	resp A
	err  error
}

type lane[Q, A any] struct {
	mu      sync.Mutex
	queue   []*waiting[Q, A]
	sending int
}

// gatherer keeps the lanes of one kind of call, by key (a Read's consistency; one lane for
// Writes); send answers a batch of one lane, every call in it exactly once.
type gatherer[K comparable, Q, A any] struct {
	mu    sync.Mutex
	lanes map[K]*lane[Q, A]
}

func (g *gatherer[K, Q, A]) lane(k K) *lane[Q, A] {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lanes == nil {
		g.lanes = map[K]*lane[Q, A]{}
	}
	l := g.lanes[k]
	if l == nil {
		l = &lane[Q, A]{}
		g.lanes[k] = l
	}
	return l
}

// gather queues req on lane k, starts a sender when the lane has fewer than maxSending
// batches out, and waits for its outcome or for ctx.
func gather[K comparable, Q, A any](ctx context.Context, g *gatherer[K, Q, A], k K, req Q, maxBatch int,
	send func(K, []*waiting[Q, A])) (A, error) {
	l := g.lane(k)
	w := &waiting[Q, A]{ctx: ctx, req: req, done: make(chan outcome[A], 1)}
	l.mu.Lock()
	l.queue = append(l.queue, w)
	start := l.sending < maxSending
	if start {
		l.sending++
	}
	l.mu.Unlock()
	if start {
		go drain(l, k, maxBatch, send)
	}
	select {
	case o := <-w.done:
		return o.resp, o.err
	case <-ctx.Done():
		var zero A
		return zero, withContext(toError(status.FromContextError(ctx.Err()).Err(), nil), ctx)
	}
}

// drain takes what waits on the lane, up to maxBatch calls, has send answer them, and goes on
// while calls wait.
func drain[K comparable, Q, A any](l *lane[Q, A], k K, maxBatch int, send func(K, []*waiting[Q, A])) {
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.sending--
			l.mu.Unlock()
			return
		}
		n := min(len(l.queue), maxBatch)
		batch := append([]*waiting[Q, A](nil), l.queue[:n]...)
		l.queue = l.queue[n:]
		l.mu.Unlock()
		live := batch[:0:0]
		for _, w := range batch {
			if w.ctx.Err() == nil { // a call whose caller gave up is not sent
				live = append(live, w)
			}
		}
		if len(live) > 0 {
			send(k, live)
		}
	}
}

// wholeBatchRefusal: the codes a node refuses a whole batch with for one of its calls (or for
// being a batch); its calls are then sent one by one.
func wholeBatchRefusal(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.NotFound, codes.FailedPrecondition,
		codes.ResourceExhausted, codes.OutOfRange, codes.Unimplemented:
		return true
	}
	return false
}

// settle answers every call of a batch the node did not answer call by call: with err, or,
// when the node refused the batch whole, by sending each call alone with one (even a batch of
// one: its caller gets the error of its own call -- "key[0]", not "keys[0].key[0]" -- and a
// node without the batch method still answers it).
func settle[Q, A any](batch []*waiting[Q, A], err error, one func(context.Context, Q) (A, error)) {
	if !wholeBatchRefusal(err) {
		for _, w := range batch {
			w.done <- outcome[A]{err: err}
		}
		return
	}
	var wg sync.WaitGroup
	for _, w := range batch {
		wg.Add(1)
		go func(w *waiting[Q, A]) {
			defer wg.Done()
			got, err := one(w.ctx, w.req)
			w.done <- outcome[A]{resp: got, err: err}
		}(w)
	}
	wg.Wait()
}

type readGatherer = gatherer[pb.Consistency, *pb.ReadRequest, *pb.ReadResponse]
type writeGatherer = gatherer[struct{}, *pb.WriteRequest, *pb.WriteResult]

// readBatchOf answers a lane's Reads from one ReadBatch.
func (c *Client) readBatchOf(level pb.Consistency, batch []*waiting[*pb.ReadRequest, *pb.ReadResponse]) {
	req := &pb.ReadBatchRequest{Consistency: level, Keys: make([]*pb.ReadKey, len(batch))}
	for i, w := range batch {
		req.Keys[i] = &pb.ReadKey{Table: w.req.GetTable(), Key: w.req.GetKey()}
	}
	resp, err := call(context.Background(), c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.ReadBatchResponse, error) {
		return s.(pb.ReadsClient).ReadBatch(ctx, req, o...)
	})
	if err == nil && len(resp.GetResults()) != len(batch) {
		err = toError(status.Errorf(codes.Internal, "ReadBatch answered %d results for %d keys",
			len(resp.GetResults()), len(batch)), nil)
	}
	if err != nil {
		settle(batch, err, c.readOne)
		return
	}
	for i, w := range batch {
		r := resp.GetResults()[i]
		w.done <- outcome[*pb.ReadResponse]{resp: &pb.ReadResponse{Found: r.GetFound(), Row: r.GetRow(),
			AppliedIndex: resp.GetAppliedIndex()}}
	}
}

// writeBatchOf answers the Writes of a batch from one WriteBatch: each its result, or its
// refusal as the error a lone Write gets.
func (c *Client) writeBatchOf(_ struct{}, batch []*waiting[*pb.WriteRequest, *pb.WriteResult]) {
	req := &pb.WriteBatchRequest{Writes: make([]*pb.WriteRequest, len(batch))}
	for i, w := range batch {
		req.Writes[i] = w.req
	}
	resp, err := call(context.Background(), c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.WriteBatchResponse, error) {
		return s.WriteBatch(ctx, req, o...)
	})
	if err == nil && len(resp.GetResults()) != len(batch) {
		err = toError(status.Errorf(codes.Internal, "WriteBatch answered %d results for %d writes",
			len(resp.GetResults()), len(batch)), nil)
	}
	if err != nil {
		settle(batch, err, c.writeOne)
		return
	}
	refused := map[int]*GatewayError{}
	for _, e := range resp.GetErrors() {
		gerr := refusalOf(e)
		gerr.Cause = status.Error(gerr.Code, gerr.Message) // as a lone Write's refusal has
		refused[int(e.GetIndex())] = gerr
	}
	for i, w := range batch {
		if gerr, ok := refused[i]; ok {
			w.done <- outcome[*pb.WriteResult]{err: gerr}
			continue
		}
		w.done <- outcome[*pb.WriteResult]{resp: resp.GetResults()[i]}
	}
}
