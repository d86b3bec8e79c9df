// Command loadgen is benchmarks/bench_node.py's Go load generator: closed-loop unary Write
// calls against one node, the way etcd's own benchmark tool drives etcd, so that the two are
// measured with a client of the same kind (compiled, one process, goroutines) on the same
// machine.
//
//	go run ./internal/loadgen -target 127.0.0.1:7070 -clients 64 -conns 8 -duration 3 -size 10
//
// Every client goroutine writes one-row transactions (INSERT into bench.kv, key column k, value
// column v, as bench_node.py's put_request builds them) back to back over one of -conns
// connections (client i uses connection i % conns), each call waiting for its reply. Calls that
// start in the first -warmup seconds and those that end after the measured -duration are not
// counted. Prints one JSON object: ops, rows and errors counted, seconds measured, p50/p99
// latency in milliseconds, the gRPC codes of the errors, and this process's CPU seconds
// (user + system) over the whole run.
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

func main() {
	target := flag.String("target", "127.0.0.1:7070", "the node's API address")
	clients := flag.Int("clients", 1, "concurrent closed-loop clients")
	conns := flag.Int("conns", 1, "gRPC connections shared by the clients")
	duration := flag.Float64("duration", 3, "measured seconds")
	warmup := flag.Float64("warmup", 0.5, "seconds before the measured ones")
	size := flag.Int("size", 10, "bytes of each row's value")
	tag := flag.String("tag", "g", "key prefix (distinct per run, so every write inserts)")
	flag.Parse()
	if *clients < 1 || *conns < 1 || *duration <= 0 {
		fail("clients and conns must be >= 1 and duration > 0")
	}

	stubs := make([]pb.GatewayClient, *conns)
	for i := range stubs {
		conn, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fail(fmt.Sprintf("connect %s: %v", *target, err))
		}
		defer conn.Close()
		stubs[i] = pb.NewGatewayClient(conn)
	}
	value := strings.Repeat("x", *size)
	t0 := time.Now()
	start := t0.Add(time.Duration(*warmup * float64(time.Second)))
	end := start.Add(time.Duration(*duration * float64(time.Second)))

	var mu sync.Mutex
	res := result{ErrorCodes: map[string]int{}}
	var latencies []time.Duration
	var wg sync.WaitGroup
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			stub := stubs[c%len(stubs)]
			var mine []time.Duration
			ops, all, errs := 0, 0, map[string]int{}
			for seq := 1; ; seq++ {
				began := time.Now()
				if !began.Before(end) {
					break
				}
				stmt, err := gateway.Insert("bench.kv",
					[]gateway.Col{gateway.C("k", fmt.Sprintf("%s-%d-%d", *tag, c, seq))},
					gateway.C("v", value))
				if err != nil {
					fail(err.Error())
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err = stub.Write(ctx, &pb.WriteRequest{Statements: []*pb.Statement{stmt}})
				cancel()
				done := time.Now()
				if err != nil {
					if !began.Before(start) {
						errs[status.Code(err).String()]++
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				all++
				if !began.Before(start) && !done.After(end) {
					ops++
					mine = append(mine, done.Sub(began))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.Ops += ops
			res.AllRows += all
			latencies = append(latencies, mine...)
			for k, n := range errs {
				res.ErrorCodes[k] += n
				res.Errors += n
			}
		}(c)
	}
	wg.Wait()

	res.Rows = res.Ops
	res.Seconds = *duration
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
