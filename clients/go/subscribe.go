package gateway

import (
	"context"
	"iter"
	"time"

	pb "gateway/clients/go/gatewayv1"

	"google.golang.org/grpc/codes"
)

// Position is where a subscription starts: FromLogIndex or AfterGTID.
type Position struct {
	fromLogIndex uint64
	afterGTID    *pb.Gtid
}

// FromLogIndex starts at log index i (0 or 1: the start of the log).
func FromLogIndex(i uint64) Position { return Position{fromLogIndex: i} }

// AfterGTID starts just after the transaction serverID:transID of this cluster.
func AfterGTID(serverID uint32, transID uint64) Position {
	return Position{afterGTID: &pb.Gtid{ServerId: serverID, TransId: transID}}
}

// SubscribeOption configures Subscribe.
type SubscribeOption func(*subscribeOptions)

type subscribeOptions struct {
	onReconnect func(target string, err error)
}

// OnReconnect calls f with the target that failed and why, before each reconnection.
func OnReconnect(f func(target string, err error)) SubscribeOption {
	return func(o *subscribeOptions) { o.onReconnect = f }
}

// resumable tells whether a broken stream is worth reopening: the node went away (UNAVAILABLE,
// a stream ended by the server) or the server cancelled it (shutting down).
func resumable(ctx context.Context, code codes.Code) bool {
	return code == codes.Unavailable || (code == codes.Canceled && ctx.Err() == nil)
}

// Subscribe follows the committed transactions from a position, in log order, forever:
//
//	for ev, err := range client.Subscribe(ctx, gateway.FromLogIndex(1)) {
//		if err != nil { return err } // ctx's error, or the stream could not be resumed
//		fmt.Println(ev.LogIndex, ev.Transaction.Gtid)
//	}
//
// When the stream breaks (the node stopped or died) it reconnects to the next target (in
// turn, with backoff; any node serves a subscription) and resumes from the last delivered log
// index + 1, so no event is lost or delivered twice. It gives up with the last error when no
// node served it for the client's timeout (WithTimeout), or at once on a non-retryable error
// (such as INVALID_ARGUMENT for a compacted position). Ending the loop or cancelling ctx
// closes the stream.
func (c *Client) Subscribe(ctx context.Context, from Position, opts ...SubscribeOption) iter.Seq2[*pb.ChangeEvent, error] {
	var so subscribeOptions
	for _, o := range opts {
		o(&so)
	}
	return func(yield func(*pb.ChangeEvent, error) bool) {
		req := &pb.SubscribeRequest{FromLogIndex: from.fromLogIndex, AfterGtid: from.afterGTID}
		targets := c.Targets()
		idx := 0
		if cur, _, err := c.stub(""); err == nil {
			for i, t := range targets {
				if t == cur {
					idx = i
				}
			}
		}
		var last uint64
		var failingSince time.Time
		backoff := firstBackoff
		for {
			target, stub, err := c.stub(targets[idx])
			if err != nil {
				yield(nil, err)
				return
			}
			sctx, cancel := context.WithCancel(c.outgoing(ctx))
			stream, err := stub.Subscribe(sctx, req)
			for err == nil {
				var ev *pb.ChangeEvent
				if ev, err = stream.Recv(); err != nil {
					break
				}
				failingSince, backoff = time.Time{}, firstBackoff
				if ev.GetLogIndex() <= last {
					continue // already delivered (never expected: resumption starts after last)
				}
				last = ev.GetLogIndex()
				if !yield(ev, nil) {
					cancel()
					return
				}
			}
			var gerr *GatewayError
			if stream != nil {
				gerr = toError(err, stream.Trailer())
			} else {
				gerr = toError(err, nil)
			}
			cancel()
			if ctx.Err() != nil {
				yield(nil, ctx.Err())
				return
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if !resumable(ctx, gerr.Code) || time.Since(failingSince) > c.opts.timeout {
				yield(nil, gerr)
				return
			}
			if so.onReconnect != nil {
				so.onReconnect(target, gerr)
			}
			if last > 0 {
				req = &pb.SubscribeRequest{FromLogIndex: last + 1}
			}
			idx = (idx + 1) % len(targets)
			if !sleep(ctx, backoff) {
				yield(nil, ctx.Err())
				return
			}
			backoff = min(2*backoff, c.opts.maxBackoff)
		}
	}
}
