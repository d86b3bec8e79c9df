package gateway_test

// Against a live 3-node cluster (TLS and bearer tokens on the API) started by TestMain
// through clients/testing/cluster.py.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"
	"gateway/clients/go/internal/testcluster"
	"google.golang.org/protobuf/proto"

	"google.golang.org/grpc/codes"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	var err error
	cluster, err = testcluster.Start(3, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Stop()
	os.Exit(code)
}

func liveClient(t *testing.T, targets []string, token string, opts ...gateway.Option) *gateway.Client {
	t.Helper()
	ca, err := os.ReadFile(cluster.CA)
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]gateway.Option{gateway.WithTLSRootCertificates(ca), gateway.WithToken(cluster.Tokens[token]),
		gateway.WithAttemptTimeout(2 * time.Second), gateway.WithTimeout(60 * time.Second)}, opts...)
	c, err := gateway.New(targets, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func table(name string) string { return fmt.Sprintf("gotest.%s_%d", name, time.Now().UnixNano()) }

func mustInsert(t *testing.T, tbl string, id int64, values ...gateway.Col) []*pb.Statement {
	t.Helper()
	st, err := gateway.Insert(tbl, []gateway.Col{gateway.C("id", id)}, values...)
	if err != nil {
		t.Fatal(err)
	}
	return []*pb.Statement{st}
}

// insertOf is the (table, id) of a change event's single-row insert, or "" for others.
func insertOf(ev *pb.ChangeEvent) (string, int64) {
	sts := ev.GetTransaction().GetStatements()
	if len(sts) != 1 || sts[0].GetInsert() == nil {
		return "", 0
	}
	ins := sts[0].GetInsert()
	name := ins.GetTable().GetSchemaName() + "." + ins.GetTable().GetTableName()
	return name, ins.GetRecords()[0].GetKeyValues()[0].GetIntValue()
}

func TestWriteThenReadReturnsTheRow(t *testing.T) {
	c := liveClient(t, cluster.APIs(), "writer")
	ctx := context.Background()
	tbl := table("roundtrip")
	ts := time.Date(2024, 5, 1, 12, 0, 0, 5, time.UTC)
	res, err := c.Write(ctx, mustInsert(t, tbl, 1, gateway.C("name", "a"), gateway.C("price", 2.5),
		gateway.C("paid", true), gateway.C("blob", []byte{0, 255}), gateway.C("at", ts),
		gateway.C("amount", gateway.Decimal("12.50")), gateway.C("note", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if res.GetGtid().GetTransId() == 0 || res.GetLogIndex() == 0 || res.GetDuplicate() {
		t.Fatalf("write result %v", res)
	}
	row, found, err := c.Get(ctx, tbl, int64(1))
	if err != nil || !found {
		t.Fatalf("get: found=%v err=%v", found, err)
	}
	want := gateway.Row{"id": int64(1), "name": "a", "price": 2.5, "paid": true, "at": ts,
		"amount": gateway.Decimal("12.50"), "note": nil}
	for k, v := range want {
		if row[k] != v {
			t.Fatalf("row[%s] = %v (%T), want %v; row %v", k, row[k], row[k], v, row)
		}
	}
	if b := row["blob"].([]byte); len(b) != 2 || b[1] != 255 {
		t.Fatalf("blob = %v", row["blob"])
	}
	read, err := c.Read(ctx, tbl, int64(1), gateway.WithConsistency(pb.Consistency_CONSISTENCY_LEASE))
	if err != nil {
		t.Fatal(err)
	}
	if read.GetRow().GetGtid().GetTransId() != res.GetGtid().GetTransId() || read.GetRow().GetLogIndex() != res.GetLogIndex() {
		t.Fatalf("read row gtid %v @%d, write %v @%d", read.GetRow().GetGtid(), read.GetRow().GetLogIndex(), res.GetGtid(), res.GetLogIndex())
	}
	if _, found, err := c.Get(ctx, tbl, int64(2)); err != nil || found {
		t.Fatalf("missing row: found=%v err=%v", found, err)
	}
}

func TestReadBatchReturnsEveryKeysRowInOrder(t *testing.T) {
	c := liveClient(t, cluster.APIs(), "writer")
	ctx := context.Background()
	tbl := table("readbatch")
	for _, id := range []int64{1, 2} {
		if _, err := c.Write(ctx, mustInsert(t, tbl, id, gateway.C("name", fmt.Sprint("n", id)))); err != nil {
			t.Fatal(err)
		}
	}
	for _, level := range []pb.Consistency{pb.Consistency_CONSISTENCY_LINEARIZABLE, pb.Consistency_CONSISTENCY_STALE} {
		resp, err := c.ReadBatch(ctx, tbl, []any{int64(2), int64(9), int64(1)}, gateway.WithConsistency(level))
		if err != nil {
			t.Fatal(err)
		}
		got := resp.GetResults()
		if level == pb.Consistency_CONSISTENCY_STALE { // a follower may not have applied them yet
			continue
		}
		if len(got) != 3 || !got[0].GetFound() || got[1].GetFound() || !got[2].GetFound() ||
			gateway.RowOf(got[0].GetRow())["name"] != "n2" || gateway.RowOf(got[2].GetRow())["name"] != "n1" {
			t.Fatalf("read batch: %v", got)
		}
	}
}

func TestWriteBatchResultsInOrderAndScanInKeyOrder(t *testing.T) {
	c := liveClient(t, cluster.APIs(), "writer")
	ctx := context.Background()
	tbl := table("batch")
	var writes [][]*pb.Statement
	for _, id := range []int64{3, 1, 2, 5, 4} {
		writes = append(writes, mustInsert(t, tbl, id, gateway.C("v", fmt.Sprint("v", id))))
	}
	results, err := c.WriteBatch(ctx, writes)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 5 {
		t.Fatalf("%d results", len(results))
	}
	for i := 1; i < len(results); i++ {
		if results[i].GetLogIndex() <= results[i-1].GetLogIndex() {
			t.Fatalf("results out of order: %v", results)
		}
	}
	scan, err := c.Scan(ctx, tbl, gateway.StartKey(int64(2)), gateway.EndKey(int64(5)))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range scan.GetRows() {
		ids = append(ids, gateway.RowOf(r)["id"].(int64))
	}
	if fmt.Sprint(ids) != "[2 3 4]" || scan.GetMore() {
		t.Fatalf("scan ids = %v more=%v", ids, scan.GetMore())
	}
	for i, r := range scan.GetRows() { // the shared shape read back: each row whole
		one, err := c.Read(ctx, tbl, []any{ids[i]})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(r, one.GetRow()) {
			t.Fatalf("scanned row %v, read %v", r, one.GetRow())
		}
	}
	limited, err := c.Scan(ctx, tbl, gateway.Limit(2), gateway.WithConsistency(pb.Consistency_CONSISTENCY_STALE))
	if err != nil {
		t.Fatal(err)
	}
	if len(limited.GetRows()) > 2 || (len(limited.GetRows()) == 2 && !limited.GetMore()) {
		t.Fatalf("limit 2: %d rows, more=%v", len(limited.GetRows()), limited.GetMore())
	}
	// pages of 2, each after the last key of the one before: every row once, in order
	var paged []int64
	page, err := c.Scan(ctx, tbl, gateway.Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	for {
		for _, r := range page.GetRows() {
			paged = append(paged, gateway.RowOf(r)["id"].(int64))
		}
		if !page.GetMore() {
			break
		}
		last := page.GetRows()[len(page.GetRows())-1].GetKeyValues()
		if page, err = c.Scan(ctx, tbl, gateway.StartAfter(last), gateway.Limit(2)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(paged) != "[1 2 3 4 5]" {
		t.Fatalf("paged ids = %v", paged)
	}
	after, err := c.Scan(ctx, tbl, gateway.StartAfter(int64(3)))
	if err != nil {
		t.Fatal(err)
	}
	if len(after.GetRows()) != 2 || gateway.RowOf(after.GetRows()[0])["id"].(int64) != 4 {
		t.Fatalf("after 3: %v", after.GetRows())
	}
}

func TestTheSameIdempotencyKeyAppliesOnce(t *testing.T) {
	c := liveClient(t, cluster.APIs(), "writer")
	ctx := context.Background()
	tbl := table("idem")
	key := gateway.NewIdempotencyKey()
	first, err := c.Write(ctx, mustInsert(t, tbl, 1, gateway.C("v", "first")), gateway.WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Write(ctx, mustInsert(t, tbl, 1, gateway.C("v", "second")), gateway.WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	if !again.GetDuplicate() || again.GetLogIndex() != first.GetLogIndex() || again.GetGtid().GetTransId() != first.GetGtid().GetTransId() {
		t.Fatalf("first %v, again %v", first, again)
	}
	row, _, err := c.Get(ctx, tbl, int64(1))
	if err != nil || row["v"] != "first" {
		t.Fatalf("row %v err %v", row, err)
	}
}

func TestABadRequestNamesTheOffendingField(t *testing.T) {
	c := liveClient(t, cluster.APIs(), "writer")
	// the key column repeated among the value columns (docs/node.md, "Validation")
	_, err := c.Write(context.Background(), mustInsert(t, table("bad"), 1, gateway.C("id", int64(1))))
	var gerr *gateway.GatewayError
	if !errors.As(err, &gerr) {
		t.Fatalf("err = %v, want *GatewayError", err)
	}
	if gerr.Code != codes.InvalidArgument || gerr.Field != "statements[0].insert.fields[0].name" {
		t.Fatalf("err = %+v", gerr)
	}
}

func TestTokensAreChecked(t *testing.T) {
	ctx := context.Background()
	reader := liveClient(t, cluster.APIs(), "reader")
	_, err := reader.Write(ctx, mustInsert(t, table("perm"), 1, gateway.C("v", "x")))
	if status := (*gateway.GatewayError)(nil); !errors.As(err, &status) || status.Code != codes.PermissionDenied {
		t.Fatalf("reader token writing: %v, want PERMISSION_DENIED", err)
	}
	if _, err := reader.Status(ctx); err != nil {
		t.Fatalf("reader token status: %v", err)
	}
	stranger := liveClient(t, cluster.APIs(), "none", gateway.WithToken("not-a-token"))
	_, err = stranger.Write(ctx, mustInsert(t, table("perm"), 1, gateway.C("v", "x")))
	if status := (*gateway.GatewayError)(nil); !errors.As(err, &status) || status.Code != codes.Unauthenticated {
		t.Fatalf("unknown token: %v, want UNAUTHENTICATED", err)
	}
}

// collect subscribes from index from and returns the events of table tbl up to index until.
func collect(t *testing.T, c *gateway.Client, tbl string, from, until uint64) []*pb.ChangeEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []*pb.ChangeEvent
	for ev, err := range c.Subscribe(ctx, gateway.FromLogIndex(from)) {
		if err != nil {
			t.Fatalf("subscribe: %v", err)
		}
		if name, _ := insertOf(ev); name == tbl {
			out = append(out, ev)
		}
		if ev.GetLogIndex() >= until {
			break
		}
	}
	return out
}

func TestLeaderKillDuringAWriteLoopLosesAndDuplicatesNothing(t *testing.T) {
	lead, err := cluster.Leader()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Restart(lead); err != nil {
			t.Errorf("restarting node %d: %v", lead, err)
		}
		if _, err := cluster.Leader(); err != nil {
			t.Error(err)
		}
	})
	c := liveClient(t, cluster.APIs(), "writer")
	tbl := table("leaderkill")
	const writers, perWriter, killAfter = 4, 40, 40
	results := make([][]*pb.WriteResult, writers)
	errs := make(chan error, writers)
	killNow := make(chan struct{})
	var done atomic.Int32
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				id := int64(w*perWriter + i)
				res, err := c.Write(context.Background(), mustInsert(t, tbl, id, gateway.C("writer", int64(w))))
				if err != nil {
					errs <- fmt.Errorf("write %d: %w", id, err)
					return
				}
				results[w] = append(results[w], res)
				if done.Add(1) == killAfter {
					close(killNow)
				}
			}
		}()
	}
	<-killNow
	if err := cluster.Kill(lead); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	byID := map[int64]*pb.WriteResult{}
	lo, hi, dups := ^uint64(0), uint64(0), 0
	for w, rs := range results {
		for i, r := range rs {
			byID[int64(w*perWriter+i)] = r
			lo, hi = min(lo, r.GetLogIndex()), max(hi, r.GetLogIndex())
			if r.GetDuplicate() {
				dups++
			}
		}
	}
	t.Logf("killed leader %d after %d writes; %d retries answered as duplicates", lead, killAfter, dups)
	seen := map[int64]int{}
	for _, ev := range collect(t, c, tbl, lo, hi) {
		_, id := insertOf(ev)
		seen[id]++
		if r := byID[id]; r == nil || r.GetGtid().GetTransId() != ev.GetTransaction().GetGtid().GetTransId() {
			t.Fatalf("event for id %d has gtid %v, the write returned %v", id, ev.GetTransaction().GetGtid(), r.GetGtid())
		}
	}
	for id := range int64(writers * perWriter) {
		if seen[id] != 1 {
			t.Fatalf("id %d was committed %d times (want exactly once)", id, seen[id])
		}
		row, found, err := c.Get(context.Background(), tbl, id)
		if err != nil || !found || row["writer"] != id/perWriter {
			t.Fatalf("id %d: row %v found=%v err=%v", id, row, found, err)
		}
	}
}

func TestSubscribeResumesAfterItsNodeDies(t *testing.T) {
	lead, err := cluster.Leader()
	if err != nil {
		t.Fatal(err)
	}
	victim := lead%3 + 1 // a follower: the cluster keeps its leader and takes writes
	t.Cleanup(func() {
		if err := cluster.Restart(victim); err != nil {
			t.Errorf("restarting node %d: %v", victim, err)
		}
		// The next test may write through the restarted node: it must know the leader.
		if _, err := cluster.Leader(); err != nil {
			t.Error(err)
		}
	})
	writer := liveClient(t, cluster.Others(victim), "writer")
	sub := liveClient(t, append([]string{cluster.API(victim)}, cluster.Others(victim)...), "reader")
	tbl := table("resume")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var want []uint64
	write := func(id int64) {
		res, err := writer.Write(ctx, mustInsert(t, tbl, id, gateway.C("v", "x")))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.GetLogIndex())
	}
	write(0)
	events := make(chan *pb.ChangeEvent)
	failed := make(chan error, 1)
	var reconnects atomic.Int32
	go func() {
		for ev, err := range sub.Subscribe(ctx, gateway.FromLogIndex(want[0]), gateway.OnReconnect(func(string, error) { reconnects.Add(1) })) {
			if err != nil {
				failed <- err
				return
			}
			if name, _ := insertOf(ev); name == tbl {
				events <- ev
			}
		}
	}()
	var got []uint64
	receive := func(n int) {
		for len(got) < n {
			select {
			case ev := <-events:
				got = append(got, ev.GetLogIndex())
			case err := <-failed:
				t.Fatalf("subscription ended: %v", err)
			case <-ctx.Done():
				t.Fatalf("got %d of %d events", len(got), n)
			}
		}
	}
	for id := int64(1); id < 5; id++ {
		write(id)
	}
	receive(5)
	if err := cluster.Kill(victim); err != nil {
		t.Fatal(err)
	}
	for id := int64(5); id < 10; id++ {
		write(id)
	}
	receive(10)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("event log indices %v, writes %v", got, want)
	}
	if reconnects.Load() == 0 {
		t.Fatal("the subscription never reconnected, yet its node was killed")
	}
}

func TestStreamedWritesCommitAndABadOneFailsAlone(t *testing.T) {
	// Through every node: a follower forwards each write to the leader (each on its own, so
	// in any order); on the leader log order is send order (one proposal queue). A stream is
	// not retried, so every node must know the leader first.
	if _, err := cluster.Leader(); err != nil {
		t.Fatal(err)
	}
	for i, api := range cluster.APIs() {
		c := liveClient(t, []string{api}, "writer")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leader := st.GetRole() == "leader"
		tbl := table(fmt.Sprintf("stream%d", i))
		s, err := c.Stream(ctx, gateway.WithWindow(64), gateway.WithMaxPerRequest(16))
		if err != nil {
			t.Fatal(err)
		}
		const n = 300
		var writes []*gateway.PendingWrite
		var bad *gateway.PendingWrite
		for id := range int64(n) {
			p, err := s.Send(ctx, mustInsert(t, tbl, id, gateway.C("v", fmt.Sprint(id))))
			if err != nil {
				t.Fatal(err)
			}
			writes = append(writes, p)
			if id == n/2 { // the key column repeated among the values
				if bad, err = s.Send(ctx, mustInsert(t, tbl, 10_000, gateway.C("id", int64(1)))); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Close(); err != nil {
			t.Fatalf("node %s: close: %v", api, err)
		}
		var last uint64
		ids := map[uint64]bool{}
		for id, p := range writes {
			res, err := p.Result()
			if err != nil {
				t.Fatalf("node %s: write %d: %v", api, id, err)
			}
			if leader && res.GetLogIndex() <= last {
				t.Fatalf("node %s: write %d at log index %d after %d", api, id, res.GetLogIndex(), last)
			}
			last = res.GetLogIndex()
			ids[res.GetGtid().GetTransId()] = true
		}
		if len(ids) != n {
			t.Fatalf("node %s: %d distinct trans ids for %d writes", api, len(ids), n)
		}
		var gerr *gateway.GatewayError
		if _, err := bad.Result(); !errors.As(err, &gerr) || gerr.Code != codes.InvalidArgument {
			t.Fatalf("node %s: bad write: %v, want INVALID_ARGUMENT", api, err)
		}
		if _, found, err := c.Get(ctx, tbl, int64(10_000)); err != nil || found {
			t.Fatalf("node %s: the refused row: found=%v err=%v", api, found, err)
		}
		row, found, err := c.Get(ctx, tbl, int64(n-1))
		if err != nil || !found || row["v"] != fmt.Sprint(n-1) {
			t.Fatalf("node %s: last row %v found=%v err=%v", api, row, found, err)
		}
		// The same key again is a duplicate of the streamed write.
		again, err := c.Write(ctx, mustInsert(t, tbl, 0, gateway.C("v", "again")), gateway.WithIdempotencyKey(writes[0].IdempotencyKey))
		first, _ := writes[0].Result()
		if err != nil || !again.GetDuplicate() || again.GetLogIndex() != first.GetLogIndex() {
			t.Fatalf("node %s: write again with a streamed key: %v %v", api, again, err)
		}
	}
}
