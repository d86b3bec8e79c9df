// Command loadgen is benchmarks/bench_node.py's Go load generator: closed-loop writes against
// one node, the way etcd's own benchmark tool drives etcd, so that the two are measured with a
// client of the same kind (compiled, one process, goroutines) on the same machine.
//
//	go run ./internal/loadgen -target 127.0.0.1:7070 -clients 64 -conns 8 -duration 3 -size 10
//	go run ./internal/loadgen -target 127.0.0.1:7070 -mode batch -clients 4 -batch 200
//	go run ./internal/loadgen -target 127.0.0.1:7070 -mode stream -window 256
//	go run ./internal/loadgen -target 127.0.0.1:7070 -mode coalesced -clients 64 -batch 256
//
// Every write is a one-row transaction (INSERT into bench.kv, key column k, value column v, as
// bench_node.py's put_request builds them). -mode unary (the default): every client goroutine
// calls Write back to back over one of -conns connections (client i uses connection i %
// conns), each call waiting for its reply. -mode batch: every client goroutine calls
// WriteBatch with -batch writes back to back. -mode stream: one StreamWrite call through the
// client package's WriteStream keeps -window writes in flight, sending a new one as each is
// acknowledged (its latency is send to ack); its writes carry no idempotency key, as
// bench_node.py's do not, unless -idempotency. -mode coalesced: every client goroutine calls
// the client package's Write back to back on one Client made with WithWriteCoalescing(-batch),
// so the Writes waiting at one moment leave as one WriteBatch (no idempotency key either,
// unless -idempotency). Calls that start in the first -warmup seconds and
// those that end after the measured -duration are not counted. Prints one JSON object: ops
// (calls, or streamed writes), rows and errors counted, seconds measured, p50/p99 latency in
// milliseconds, the gRPC codes of the errors, and this process's CPU seconds (user + system)
// over the whole run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"
)

type result struct {
	Ops        int            `json:"ops"`
	Rows       int            `json:"rows"`
	Errors     int            `json:"errors"`
	ErrorCodes map[string]int `json:"error_codes"`
	Seconds    float64        `json:"seconds"`
	P50Ms      float64        `json:"p50_ms"`
	P99Ms      float64        `json:"p99_ms"`
	CPUSeconds float64        `json:"cpu_seconds"`
	AllRows    int            `json:"all_rows"`
}

// window is the measured interval; tally counts what one goroutine saw in it.
type window struct{ start, end time.Time }

type tally struct {
	ops, rows, all int
	latencies      []time.Duration
	errs           map[string]int
}

// done records a call (or streamed write) of rows rows that began at began and ended at end
// with err.
func (w window) done(t *tally, began, end time.Time, rows int, err error) {
	if err != nil {
		if !began.Before(w.start) {
			t.errs[status.Code(err).String()]++
		}
		return
	}
	t.all += rows
	if !began.Before(w.start) && !end.After(w.end) {
		t.ops++
		t.rows += rows
		t.latencies = append(t.latencies, end.Sub(began))
	}
}

func main() {
	target := flag.String("target", "127.0.0.1:7070", "the node's API address")
	mode := flag.String("mode", "unary", "unary (Write), batch (WriteBatch), stream (StreamWrite) or coalesced (Write, WithWriteCoalescing)")
	clients := flag.Int("clients", 1, "concurrent closed-loop clients (unary, batch)")
	conns := flag.Int("conns", 1, "gRPC connections shared by the clients")
	batch := flag.Int("batch", 200, "writes per WriteBatch (batch)")
	inflight := flag.Int("window", 256, "writes in flight on the stream (stream)")
	keyed := flag.Bool("idempotency", false, "streamed writes carry idempotency keys, as the "+
		"Go client's WriteStream gives by default (unary and batch writes never do, nor do "+
		"bench_node.py's)")
	duration := flag.Float64("duration", 3, "measured seconds")
	warmup := flag.Float64("warmup", 0.5, "seconds before the measured ones")
	size := flag.Int("size", 10, "bytes of each row's value")
	tag := flag.String("tag", "g", "key prefix (distinct per run, so every write inserts)")
	flag.Parse()
	if *clients < 1 || *conns < 1 || *batch < 1 || *inflight < 1 || *duration <= 0 {
		fail("clients, conns, batch and window must be >= 1 and duration > 0")
	}
	value := strings.Repeat("x", *size)
	insert := func(c, seq int) *pb.Statement {
		stmt, err := gateway.Insert("bench.kv",
			[]gateway.Col{gateway.C("k", fmt.Sprintf("%s-%d-%d", *tag, c, seq))},
			gateway.C("v", value))
		if err != nil {
			fail(err.Error())
		}
		return stmt
	}
	t0 := time.Now()
	w := window{start: t0.Add(time.Duration(*warmup * float64(time.Second)))}
	w.end = w.start.Add(time.Duration(*duration * float64(time.Second)))

	var tallies []*tally
	switch *mode {
	case "unary", "batch":
		stubs := make([]pb.GatewayClient, *conns)
		for i := range stubs {
			conn, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				fail(fmt.Sprintf("connect %s: %v", *target, err))
			}
			defer conn.Close()
			stubs[i] = pb.NewGatewayClient(conn)
		}
		call := func(c, seq int) (int, error) {
			stub := stubs[c%len(stubs)]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if *mode == "unary" {
				_, err := stub.Write(ctx, &pb.WriteRequest{Statements: []*pb.Statement{insert(c, seq)}})
				return 1, err
			}
			req := &pb.WriteBatchRequest{Writes: make([]*pb.WriteRequest, *batch)}
			for i := range req.Writes {
				req.Writes[i] = &pb.WriteRequest{Statements: []*pb.Statement{insert(c, seq**batch+i)}}
			}
			resp, err := stub.WriteBatch(ctx, req)
			return len(resp.GetResults()), err
		}
		tallies = closedLoop(w, *clients, call)
	case "stream":
		tallies = stream(w, *target, *inflight, *keyed, insert)
	case "coalesced":
		c, err := gateway.New([]string{*target}, gateway.WithWriteCoalescing(*batch))
		if err != nil {
			fail(err.Error())
		}
		defer c.Close()
		var opts []gateway.WriteOption
		if !*keyed {
			opts = append(opts, gateway.WithIdempotencyKey(""))
		}
		tallies = closedLoop(w, *clients, func(cl, seq int) (int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := c.Write(ctx, []*pb.Statement{insert(cl, seq)}, opts...)
			return 1, err
		})
	default:
		fail(fmt.Sprintf("unknown -mode %q (unary, batch, stream or coalesced)", *mode))
	}

	res := result{ErrorCodes: map[string]int{}, Seconds: *duration}
	var latencies []time.Duration
	for _, t := range tallies {
		res.Ops += t.ops
		res.Rows += t.rows
		res.AllRows += t.all
		latencies = append(latencies, t.latencies...)
		for k, n := range t.errs {
			res.ErrorCodes[k] += n
			res.Errors += n
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	res.P50Ms = percentile(latencies, 0.50)
	res.P99Ms = percentile(latencies, 0.99)
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		res.CPUSeconds = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

// closedLoop runs clients goroutines, each making call(c, seq) back to back until the window
// ends (seq from 1); a failed call is followed by a 10 ms pause. One tally per client.
func closedLoop(w window, clients int, call func(c, seq int) (int, error)) []*tally {
	tallies := make([]*tally, clients)
	var wg sync.WaitGroup
	for c := range clients {
		tallies[c] = &tally{errs: map[string]int{}}
		wg.Add(1)
		go func(c int, t *tally) {
			defer wg.Done()
			for seq := 1; ; seq++ {
				began := time.Now()
				if !began.Before(w.end) {
					return
				}
				rows, err := call(c, seq)
				w.done(t, began, time.Now(), rows, err)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}(c, tallies[c])
	}
	wg.Wait()
	return tallies
}

// stream keeps inflight one-row writes in flight on one WriteStream until the window ends:
// closedLoop with a client per slot, each sending a write and waiting for its ack; the keys
// follow one sequence (tag-0-1, tag-0-2, ...) in send order.
func stream(w window, target string, inflight int, keyed bool,
	insert func(c, seq int) *pb.Statement) []*tally {
	var opts []gateway.WriteOption
	if !keyed {
		opts = append(opts, gateway.WithIdempotencyKey("")) // none: as bench_node.py's writes
	}
	c, err := gateway.New([]string{target})
	if err != nil {
		fail(err.Error())
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Until(w.end)+30*time.Second)
	defer cancel()
	s, err := c.Stream(ctx, gateway.WithWindow(inflight))
	if err != nil {
		fail(fmt.Sprintf("open the stream on %s: %v", target, err))
	}
	var next atomic.Int64 // one sequence for the whole stream, as bench_stream numbers its keys
	tallies := closedLoop(w, inflight, func(int, int) (int, error) {
		p, err := s.Send(ctx, []*pb.Statement{insert(0, int(next.Add(1)))}, opts...)
		if err == nil {
			_, err = p.Result()
		}
		return 1, err
	})
	if err := s.Close(); err != nil { // its writes' errors are counted already
		fmt.Fprintln(os.Stderr, "loadgen: the stream broke:", err)
	}
	return tallies
}

// percentile of sorted latencies in milliseconds (0 when there are none), taken as
// bench_node.py's Result.pct takes it.
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)))
	if i > len(sorted)-1 {
		i = len(sorted) - 1
	}
	return float64(sorted[i].Microseconds()) / 1000
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "loadgen:", msg)
	os.Exit(2)
}
