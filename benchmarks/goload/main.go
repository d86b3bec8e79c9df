// Command goload is benchmarks/bench_reads.py's Go load generator: closed-loop reads against
// one gateway node through the project's Go client package (clients/go, by a replace
// directive), and the etcd cells etcd's own benchmark tool has no command for, through etcd's
// clientv3 -- so that both systems are read by a compiled client of the same kind.
//
//	goload -mode gw-fill -target 127.0.0.1:7070 -keys 1000 -size 10
//	goload -mode gw-read -target 127.0.0.1:7070 -clients 64 -consistency linearizable
//	goload -mode gw-readbatch -target ... -clients 16 -batch 100
//	goload -mode gw-scan -target ... -clients 16 -limit 1000
//	goload -mode etcd-fill -target 127.0.0.1:2379 -keys 1000 -size 10
//	goload -mode etcd-txn -target 127.0.0.1:2379 -clients 16 -batch 100 -consistency s
//	goload -mode echo -target 127.0.0.1:7000 -clients 64
//	goload -mode gw-read -target 127.0.0.1:7070 -clients 64 -coalesce 256
//
// Keys: gateway rows k = "r-%06d" of table bench.kv (value column v), etcd keys the same
// strings; -keys of them are written by the fill modes and read by the others (client c's
// n-th call reads key (c*7919 + n) mod -keys; a batch reads -batch keys from there on; a scan
// starts at key 0). Calls that start in the first -warmup seconds and those that end after
// the measured -duration are not counted. Prints one JSON object: ops (calls), rows read,
// errors, seconds measured, p50/p99 latency in milliseconds, the gRPC codes of the errors and
// this process's CPU seconds.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

type window struct{ start, end time.Time }

type tally struct {
	ops, rows, all int
	latencies      []time.Duration
	errs           map[string]int
}

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

func keyOf(i int) string { return fmt.Sprintf("r-%06d", i) }

func main() {
	mode := flag.String("mode", "gw-read", "gw-fill, gw-read, gw-readbatch, gw-scan, etcd-fill, etcd-txn or echo")
	target := flag.String("target", "127.0.0.1:7070", "the node's (or etcd member's) address")
	clients := flag.Int("clients", 64, "concurrent closed-loop clients")
	conns := flag.Int("conns", 8, "gRPC connections shared by the clients")
	keys := flag.Int("keys", 1000, "keys written (fill) and read")
	batch := flag.Int("batch", 100, "keys per ReadBatch / range ops per etcd txn")
	limit := flag.Int("limit", 1000, "rows per Scan")
	consistency := flag.String("consistency", "linearizable", "linearizable or stale (gateway); l or s (etcd)")
	duration := flag.Float64("duration", 3, "measured seconds")
	warmup := flag.Float64("warmup", 0.5, "seconds before the measured ones")
	size := flag.Int("size", 10, "bytes of each value (fill)")
	coalesce := flag.Int("coalesce", 0, "gw-read through the Go client's WithReadCoalescing(N) (0: raw stubs)")
	cpuProfile := flag.String("cpuprofile", "", "write this process's CPU profile here (where the client's time goes)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err.Error())
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err.Error())
		}
		defer pprof.StopCPUProfile()
	}
	if *clients < 1 || *conns < 1 || *keys < 1 || *batch < 1 || *duration <= 0 {
		fail("clients, conns, keys and batch must be >= 1 and duration > 0")
	}
	value := strings.Repeat("x", *size)
	switch *mode {
	case "gw-fill":
		gwFill(*target, *keys, value)
		return
	case "etcd-fill":
		etcdFill(*target, *keys, value)
		return
	}
	t0 := time.Now()
	w := window{start: t0.Add(time.Duration(*warmup * float64(time.Second)))}
	w.end = w.start.Add(time.Duration(*duration * float64(time.Second)))
	var call func(c, seq int) (int, error)
	switch *mode {
	case "gw-read", "gw-readbatch", "gw-scan":
		level := pb.Consistency_CONSISTENCY_LINEARIZABLE
		if *consistency == "stale" {
			level = pb.Consistency_CONSISTENCY_STALE
		}
		call = gwCall(*mode, *target, *conns, *keys, *batch, *limit, *coalesce, level)
	case "etcd-txn":
		call = etcdTxn(*target, *conns, *keys, *batch, *consistency == "s")
	case "echo":
		call = echo(*target, *conns, value)
	default:
		fail(fmt.Sprintf("unknown -mode %q", *mode))
	}
	tallies := closedLoop(w, *clients, call)
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

func dial(target string, conns int) []*grpc.ClientConn {
	out := make([]*grpc.ClientConn, conns)
	for i := range out {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			fail(fmt.Sprintf("connect %s: %v", target, err))
		}
		out[i] = conn
	}
	return out
}

// gwFill writes the keys through the Go client, 500 rows per WriteBatch.
func gwFill(target string, keys int, value string) {
	c, err := gateway.New([]string{target})
	if err != nil {
		fail(err.Error())
	}
	defer c.Close()
	for from := 0; from < keys; from += 500 {
		var writes []*pb.WriteRequest
		for i := from; i < keys && i < from+500; i++ {
			stmt, err := gateway.Insert("bench.kv", []gateway.Col{gateway.C("k", keyOf(i))},
				gateway.C("v", value))
			if err != nil {
				fail(err.Error())
			}
			writes = append(writes, &pb.WriteRequest{Statements: []*pb.Statement{stmt}})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn := dial(target, 1)[0]
		_, err := pb.NewGatewayClient(conn).WriteBatch(ctx, &pb.WriteBatchRequest{Writes: writes})
		cancel()
		conn.Close()
		if err != nil {
			fail(fmt.Sprintf("fill: %v", err))
		}
	}
}

// gwCall is the call of a gw-* mode; with coalesce > 0, gw-read goes through the Go client made
// with WithReadCoalescing(coalesce): the Reads the clients have waiting at one moment reach
// the node as one Reads.ReadBatch.
func gwCall(mode, target string, conns, keys, batch, limit, coalesce int, level pb.Consistency) func(c, seq int) (int, error) {
	cs := dial(target, conns)
	stubs := make([]pb.GatewayClient, len(cs))
	reads := make([]pb.ReadsClient, len(cs))
	for i, conn := range cs {
		stubs[i] = pb.NewGatewayClient(conn)
		reads[i] = pb.NewReadsClient(conn)
	}
	key := func(i int) []*pb.Value {
		return []*pb.Value{{Kind: &pb.Value_StringValue{StringValue: keyOf(i % keys)}}}
	}
	read := func(ctx context.Context, c, first int) (*pb.ReadResponse, error) {
		return stubs[c%len(stubs)].Read(ctx, &pb.ReadRequest{Table: "bench.kv", Key: key(first), Consistency: level})
	}
	if coalesce > 0 {
		cl, err := gateway.New([]string{target}, gateway.WithReadCoalescing(coalesce))
		if err != nil {
			fail(err.Error())
		}
		read = func(ctx context.Context, _, first int) (*pb.ReadResponse, error) {
			return cl.Read(ctx, "bench.kv", keyOf(first%keys), gateway.WithConsistency(level))
		}
	}
	return func(c, seq int) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		first := c*7919 + seq
		switch mode {
		case "gw-read":
			resp, err := read(ctx, c, first)
			if err == nil && !resp.GetFound() {
				err = fmt.Errorf("key %s not found", keyOf(first%keys))
			}
			return 1, err
		case "gw-readbatch":
			req := &pb.ReadBatchRequest{Table: "bench.kv", Consistency: level, Keys: make([]*pb.ReadKey, batch)}
			for i := range req.Keys {
				req.Keys[i] = &pb.ReadKey{Key: key(first + i)}
			}
			resp, err := reads[c%len(reads)].ReadBatch(ctx, req)
			n := 0
			for _, r := range resp.GetResults() {
				if r.GetFound() {
					n++
				}
			}
			if err == nil && n != batch {
				err = fmt.Errorf("%d of %d keys found", n, batch)
			}
			return n, err
		default: // gw-scan
			// asked and decoded as the Go client's Scan asks and decodes it: the rows' shape
			// once per response, rows from slabs (clients/go/rows_decode.go), whole rows
			req := &pb.ScanRequest{Table: "bench.kv", Limit: uint32(limit), Consistency: level, SharedShape: true}
			resp, err := stubs[c%len(stubs)].Scan(ctx, req, gateway.FastRows())
			if err == nil {
				gateway.WholeRows(resp)
			}
			if err == nil && len(resp.GetRows()) != limit {
				err = fmt.Errorf("scan returned %d rows, not %d", len(resp.GetRows()), limit)
			}
			return len(resp.GetRows()), err
		}
	}
}

// echo calls /bench.Echo/Echo (a server returning the request's bytes) with the serialized
// WriteRequest of one row: the cost of one unary gRPC call to a server model
// (benchmarks/bench_server_models.py).
func echo(target string, conns int, value string) func(c, seq int) (int, error) {
	cs := dial(target, conns)
	stmt, err := gateway.Insert("bench.kv", []gateway.Col{gateway.C("k", "echo")}, gateway.C("v", value))
	if err != nil {
		fail(err.Error())
	}
	req := &pb.WriteRequest{Statements: []*pb.Statement{stmt}}
	return func(c, seq int) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var resp pb.WriteRequest
		return 1, cs[c%len(cs)].Invoke(ctx, "/bench.Echo/Echo", req, &resp)
	}
}

func etcdClients(target string, conns int) []*clientv3.Client {
	out := make([]*clientv3.Client, conns)
	for i := range out {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{target}, DialTimeout: 5 * time.Second,
			MaxCallRecvMsgSize: 64 << 20})
		if err != nil {
			fail(fmt.Sprintf("etcd %s: %v", target, err))
		}
		out[i] = c
	}
	return out
}

func etcdFill(target string, keys int, value string) {
	c := etcdClients(target, 1)[0]
	defer c.Close()
	for from := 0; from < keys; from += 100 { // etcd's default --max-txn-ops is 128
		var ops []clientv3.Op
		for i := from; i < keys && i < from+100; i++ {
			ops = append(ops, clientv3.OpPut(keyOf(i), value))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			fail(fmt.Sprintf("etcd fill: %v", err))
		}
	}
}

// etcdTxn: one txn of batch one-key range ops per call, as etcd serves a multi-key read.
func etcdTxn(target string, conns, keys, batch int, serializable bool) func(c, seq int) (int, error) {
	cs := etcdClients(target, conns)
	return func(c, seq int) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		first := c*7919 + seq
		ops := make([]clientv3.Op, batch)
		for i := range ops {
			var o []clientv3.OpOption
			if serializable {
				o = append(o, clientv3.WithSerializable())
			}
			ops[i] = clientv3.OpGet(keyOf((first+i)%keys), o...)
		}
		resp, err := cs[c%len(cs)].Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return 0, err
		}
		n := 0
		for _, r := range resp.Responses {
			n += len(r.GetResponseRange().Kvs)
		}
		if n != batch {
			return n, fmt.Errorf("%d of %d keys found", n, batch)
		}
		return n, nil
	}
}

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
	fmt.Fprintln(os.Stderr, "goload:", msg)
	os.Exit(2)
}
