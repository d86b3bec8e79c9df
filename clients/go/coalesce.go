package gateway

// Read coalescing (WithReadCoalescing): the Reads of one client that wait at the same moment
// go to the node as one Reads.ReadBatch. A node pays most of a one-key read's CPU in the
// per-call cost of its gRPC server; a batch pays it once for all its keys
// (docs/benchmarks.md, "Reads like with like").

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "gateway/clients/go/gatewayv1"
)

// maxSending is how many ReadBatch calls one lane (one consistency) has out at once: while
// they are out, the Reads that arrive wait and leave together in the next one.
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
	return func(o *options) {
		if maxBatch < 1 || maxBatch > 10000 {
			o.err = errors.New("gateway: WithReadCoalescing: maxBatch must be 1..10000")
			return
		}
		o.coalesce = maxBatch
	}
}

type waitingRead struct {
	ctx  context.Context
	req  *pb.ReadRequest
	done chan readAnswer
}

type readAnswer struct {
	resp *pb.ReadResponse
	err  error
}

type readLane struct {
	mu      sync.Mutex
	queue   []*waitingRead
	sending int
}

type readLanes struct {
	mu    sync.Mutex
	lanes map[pb.Consistency]*readLane
}

func (r *readLanes) lane(level pb.Consistency) *readLane {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lanes == nil {
		r.lanes = map[pb.Consistency]*readLane{}
	}
	l := r.lanes[level]
	if l == nil {
		l = &readLane{}
		r.lanes[level] = l
	}
	return l
}

// coalescedRead queues req on its lane, starts a sender when the lane has fewer than
// maxSending batches out, and waits for its answer or for ctx.
func (c *Client) coalescedRead(ctx context.Context, req *pb.ReadRequest) (*pb.ReadResponse, error) {
	l := c.reads.lane(req.GetConsistency())
	w := &waitingRead{ctx: ctx, req: req, done: make(chan readAnswer, 1)}
	l.mu.Lock()
	l.queue = append(l.queue, w)
	start := l.sending < maxSending
	if start {
		l.sending++
	}
	l.mu.Unlock()
	if start {
		go c.sendReads(l, req.GetConsistency())
	}
	select {
	case a := <-w.done:
		return a.resp, a.err
	case <-ctx.Done():
		return nil, withContext(toError(status.FromContextError(ctx.Err()).Err(), nil), ctx)
	}
}

// sendReads takes what waits on the lane, up to the batch size, reads it in one ReadBatch,
// answers each Read, and goes on while Reads wait.
func (c *Client) sendReads(l *readLane, level pb.Consistency) {
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.sending--
			l.mu.Unlock()
			return
		}
		n := min(len(l.queue), c.opts.coalesce)
		batch := append([]*waitingRead(nil), l.queue[:n]...)
		l.queue = l.queue[n:]
		l.mu.Unlock()
		c.readBatchOf(batch, level)
	}
}

// perKey: the codes a batch fails with for one of its keys, or for being a batch; its Reads
// are then sent one by one.
func perKey(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.NotFound, codes.FailedPrecondition,
		codes.ResourceExhausted, codes.OutOfRange, codes.Unimplemented:
		return true
	}
	var gerr *GatewayError
	if errors.As(err, &gerr) {
		switch gerr.Code {
		case codes.InvalidArgument, codes.PermissionDenied, codes.NotFound, codes.FailedPrecondition,
			codes.ResourceExhausted, codes.OutOfRange, codes.Unimplemented:
			return true
		}
	}
	return false
}

func (c *Client) readBatchOf(batch []*waitingRead, level pb.Consistency) {
	live := batch[:0:0]
	for _, w := range batch {
		if w.ctx.Err() == nil { // a Read whose caller gave up is not read
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return
	}
	req := &pb.ReadBatchRequest{Consistency: level, Keys: make([]*pb.ReadKey, len(live))}
	for i, w := range live {
		req.Keys[i] = &pb.ReadKey{Table: w.req.GetTable(), Key: w.req.GetKey()}
	}
	resp, err := call(context.Background(), c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.ReadBatchResponse, error) {
		return s.(pb.ReadsClient).ReadBatch(ctx, req, o...)
	})
	if err == nil && len(resp.GetResults()) != len(live) {
		err = toError(status.Errorf(codes.Internal, "ReadBatch answered %d results for %d keys",
			len(resp.GetResults()), len(live)), nil)
	}
	if err == nil {
		for i, w := range live {
			r := resp.GetResults()[i]
			w.done <- readAnswer{resp: &pb.ReadResponse{Found: r.GetFound(), Row: r.GetRow(),
				AppliedIndex: resp.GetAppliedIndex()}}
		}
		return
	}
	if len(live) == 1 || !perKey(err) {
		for _, w := range live {
			w.done <- readAnswer{err: err}
		}
		return
	}
	var wg sync.WaitGroup
	for _, w := range live {
		wg.Add(1)
		go func(w *waitingRead) {
			defer wg.Done()
			got, err := c.readOne(w.ctx, w.req)
			w.done <- readAnswer{resp: got, err: err}
		}(w)
	}
	wg.Wait()
}
