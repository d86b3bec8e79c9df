package gateway_test

// WriteStream against in-process fake servers: ack matching, the window, a broken stream.

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type writeStreamServer = grpc.BidiStreamingServer[pb.StreamWriteRequest, pb.StreamWriteResponse]

// received reads requests until n writes arrived; their sequence numbers and keys.
func received(t *testing.T, s writeStreamServer, n int) ([]uint64, []string) {
	var seqs []uint64
	var keys []string
	for len(seqs) < n {
		req, err := s.Recv()
		if err != nil {
			t.Errorf("fake server: %v after %d writes", err, len(seqs))
			return seqs, keys
		}
		for i, w := range req.GetWrites() {
			seqs = append(seqs, req.GetSeq()+uint64(i))
			keys = append(keys, w.GetIdempotencyKey())
		}
	}
	return seqs, keys
}

// acked is a response acknowledging seqs, each with its own number as its log index.
func acked(seqs ...uint64) *pb.StreamWriteResponse {
	resp := &pb.StreamWriteResponse{}
	for _, q := range seqs {
		resp.Acks = append(resp.Acks, &pb.StreamWriteAck{Seq: q, Result: &pb.WriteResult{LogIndex: q}})
	}
	return resp
}

// openStream is a WriteStream on a fake server whose StreamWrite is fn.
func openStream(t *testing.T, fn func(writeStreamServer) error, opts ...gateway.StreamOption) *gateway.WriteStream {
	t.Helper()
	c := newFakeClient(t, []string{serve(t, &fakeGateway{streamFn: fn})})
	s, err := c.Stream(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sendRows sends n one-row writes; their PendingWrites.
func sendRows(t *testing.T, s *gateway.WriteStream, n int) []*gateway.PendingWrite {
	t.Helper()
	var out []*gateway.PendingWrite
	for range n {
		p, err := s.Send(context.Background(), row(t))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestStreamMatchesEachAckToItsWriteWhateverTheOrder(t *testing.T) {
	s := openStream(t, func(s writeStreamServer) error {
		seqs, _ := received(t, s, 5)
		// Reversed, split over two responses; the third write is refused.
		var acks []*pb.StreamWriteAck
		for i := len(seqs) - 1; i >= 0; i-- {
			if i == 2 {
				acks = append(acks, &pb.StreamWriteAck{Seq: seqs[i], Code: int32(codes.InvalidArgument), Error: "statements[0]: bad"})
				continue
			}
			acks = append(acks, &pb.StreamWriteAck{Seq: seqs[i], Result: &pb.WriteResult{LogIndex: 100 + seqs[i]}})
		}
		if err := s.Send(&pb.StreamWriteResponse{Acks: acks[:2]}); err != nil {
			return err
		}
		if err := s.Send(&pb.StreamWriteResponse{Acks: acks[2:]}); err != nil {
			return err
		}
		_, err := s.Recv() // the client's CloseSend
		if !errors.Is(err, io.EOF) {
			t.Errorf("after the acks: %v, want EOF", err)
		}
		return nil
	}, gateway.WithMaxPerRequest(2))
	writes := sendRows(t, s, 5)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for i, p := range writes {
		res, err := p.Result()
		if i == 2 {
			var gerr *gateway.GatewayError
			if !errors.As(err, &gerr) || gerr.Code != codes.InvalidArgument || gerr.Message != "statements[0]: bad" {
				t.Fatalf("write 2: %v, want its INVALID_ARGUMENT", err)
			}
			continue
		}
		if err != nil || res.GetLogIndex() != 100+uint64(i+1) {
			t.Fatalf("write %d: %v %v, want log index %d", i, res, err, 101+i)
		}
	}
	if s.InFlight() != 0 {
		t.Fatalf("in flight after close: %d", s.InFlight())
	}
	if _, err := s.Send(context.Background(), row(t)); err == nil {
		t.Fatal("send after close succeeded")
	}
}

func TestStreamSendWaitsWhileTheWindowIsFull(t *testing.T) {
	release := make(chan struct{})
	s := openStream(t, func(s writeStreamServer) error {
		<-release
		// Ack each request as it comes: the client may hold its second write until the
		// first is acknowledged (its sender coalesces while writes are unacknowledged), so
		// waiting here for both before acking any would never end.
		for n := 0; n < 3; {
			seqs, _ := received(t, s, 1)
			if err := s.Send(acked(seqs...)); err != nil {
				return err
			}
			n += len(seqs)
		}
		return nil
	}, gateway.WithWindow(2))
	ctx := context.Background()
	sendRows(t, s, 2)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.Send(short, row(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third send with a full window: %v, want the context's deadline", err)
	}
	if s.InFlight() != 2 {
		t.Fatalf("in flight = %d, want 2", s.InFlight())
	}
	close(release)
	p, err := s.Send(ctx, row(t)) // waits for the two acks, then goes
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(ctx); err != nil || res.GetLogIndex() != 3 {
		t.Fatalf("third write: %v %v, want log index 3", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestABrokenStreamFailsEveryUnacknowledgedWrite(t *testing.T) {
	s := openStream(t, func(s writeStreamServer) error {
		// Ack the first write as soon as its request comes: the client may hold the other
		// two until that ack (its sender coalesces while writes are unacknowledged), so
		// waiting for all three before acking any could never end.
		seqs, _ := received(t, s, 1)
		if err := s.Send(acked(seqs[0])); err != nil {
			return err
		}
		if len(seqs) < 3 {
			received(t, s, 3-len(seqs))
		}
		return status.Error(codes.Unavailable, "the node is stopping")
	})
	writes := sendRows(t, s, 3)
	if res, err := writes[0].Result(); err != nil || res.GetLogIndex() != 1 {
		t.Fatalf("acknowledged write: %v %v", res, err)
	}
	for _, p := range writes[1:] {
		_, err := p.Result()
		if status.Code(err) != codes.Unavailable || p.IdempotencyKey == "" {
			t.Fatalf("unacknowledged write: %v (key %q), want UNAVAILABLE", err, p.IdempotencyKey)
		}
	}
	if _, err := s.Send(context.Background(), row(t)); status.Code(err) != codes.Unavailable {
		t.Fatalf("send on a broken stream: %v, want its UNAVAILABLE", err)
	}
	if err := s.Close(); status.Code(err) != codes.Unavailable {
		t.Fatalf("close of a broken stream: %v, want its UNAVAILABLE", err)
	}
	if s.InFlight() != 0 {
		t.Fatalf("in flight = %d", s.InFlight())
	}
}

func TestStreamedWritesCarryDistinctKeysUnlessGiven(t *testing.T) {
	keys := make(chan []string, 1)
	s := openStream(t, func(s writeStreamServer) error {
		seqs, got := received(t, s, 3)
		keys <- got
		return s.Send(acked(seqs...))
	})
	var writes []*gateway.PendingWrite
	for _, opts := range [][]gateway.WriteOption{nil, {gateway.WithIdempotencyKey("mine")}, nil} {
		p, err := s.Send(context.Background(), row(t), opts...)
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := <-keys
	if got[1] != "mine" || got[0] == "" || got[2] == "" || got[0] == got[2] {
		t.Fatalf("keys sent %q", got)
	}
	for i, p := range writes {
		if p.IdempotencyKey != got[i] {
			t.Fatalf("write %d: key %q, sent %q", i, p.IdempotencyKey, got[i])
		}
	}
}

func TestWritesQueuedWhileOthersAreUnacknowledgedLeaveTogether(t *testing.T) {
	queued, gotFirst := make(chan struct{}), make(chan struct{})
	sizes := make(chan []int, 1)
	s := openStream(t, func(s writeStreamServer) error {
		first, err := s.Recv() // a lone write leaves at once
		if err != nil {
			return err
		}
		close(gotFirst)
		<-queued // ten more queued meanwhile: held until this ack
		if err := s.Send(acked(first.GetSeq())); err != nil {
			return err
		}
		var got []int
		var seqs []uint64
		for len(seqs) < 10 {
			req, err := s.Recv()
			if err != nil {
				return err
			}
			got = append(got, len(req.GetWrites()))
			for i := range req.GetWrites() {
				seqs = append(seqs, req.GetSeq()+uint64(i))
			}
		}
		sizes <- append([]int{len(first.GetWrites())}, got...)
		return s.Send(acked(seqs...))
	})
	first := sendRows(t, s, 1)[0]
	<-gotFirst
	more := sendRows(t, s, 10)
	close(queued)
	if _, err := first.Result(); err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		if _, err := p.Result(); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-sizes; len(got) != 2 || got[0] != 1 || got[1] != 10 {
		t.Fatalf("writes per request %v, want [1 10]", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
