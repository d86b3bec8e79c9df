package gateway_test

// Conditional writes against the live cluster of cluster_test.go (docs/node.md,
// "Conditional writes").

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"

	"google.golang.org/grpc/codes"
)

// must is a condition built without error (the builders only fail on unsupported values).
func must(c *pb.Condition, err error) *pb.Condition {
	if err != nil {
		panic(err)
	}
	return c
}

func TestConditionRefusalNamesTheRowAndIsAloneInABatch(t *testing.T) {
	c := liveClient(t, cluster.APIs(), "writer")
	ctx := context.Background()
	tbl := table("cond")
	first, err := c.Write(ctx, mustInsert(t, tbl, 1, gateway.C("balance", int64(100))),
		gateway.WithConditions(must(gateway.ConditionAbsent(tbl, int64(1)))))
	if err != nil {
		t.Fatal(err)
	}
	upd, err := gateway.Update(tbl, []gateway.Col{gateway.C("id", int64(1))}, gateway.C("balance", int64(90)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ctx, []*pb.Statement{upd}, gateway.WithConditions(
		must(gateway.ConditionGtid(tbl, int64(1), first.GetGtid())),
		must(gateway.ConditionValues(tbl, int64(1), gateway.C("balance", int64(100)))))); err != nil {
		t.Fatal(err)
	}
	// the same read-modify-write again: the row changed since
	_, err = c.Write(ctx, []*pb.Statement{upd}, gateway.WithConditions(
		must(gateway.ConditionAbsent(tbl, int64(2))),
		must(gateway.ConditionGtid(tbl, int64(1), first.GetGtid()))))
	var gerr *gateway.GatewayError
	if !errors.As(err, &gerr) || gerr.Code != codes.FailedPrecondition || gerr.ConditionIndex() != 1 ||
		!strings.Contains(gerr.Message, tbl+" key (1)") || !gateway.IsPreconditionFailed(err) {
		t.Fatalf("stale write: %v", err)
	}
	results, err := c.WriteBatchRequests(ctx, []*pb.WriteRequest{
		{Statements: mustInsert(t, tbl, 2)},
		{Statements: mustInsert(t, tbl, 3), Conditions: []*pb.Condition{
			must(gateway.ConditionAbsent(tbl, int64(1)))}},
		{Statements: mustInsert(t, tbl, 4)},
	})
	var berr *gateway.BatchError
	if !errors.As(err, &berr) || len(berr.Refused) != 1 || berr.Refused[1].ConditionIndex() != 0 {
		t.Fatalf("batch: %v", err)
	}
	if results[0] == nil || results[1] != nil || results[2] == nil {
		t.Fatalf("batch results %v", results)
	}
	if _, found, _ := c.Get(ctx, tbl, int64(3)); found {
		t.Fatal("the refused write of the batch was applied")
	}
	s, err := c.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Send(ctx, mustInsert(t, tbl, 5), gateway.WithConditions(must(gateway.ConditionAbsent(tbl, int64(4)))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); !errors.As(err, &gerr) || gerr.ConditionIndex() != 0 {
		t.Fatalf("stream: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestConditionTwoClientsIncrementingLoseNoUpdate(t *testing.T) {
	ctx := context.Background()
	tbl := table("counter")
	a := liveClient(t, cluster.APIs()[:1], "writer")
	if _, err := a.Write(ctx, mustInsert(t, tbl, 1, gateway.C("n", int64(0)))); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, api := range cluster.APIs()[:2] {
		c := liveClient(t, []string{api}, "writer")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < 10; {
				r, err := c.Read(ctx, tbl, int64(1))
				if err != nil {
					errs <- err
					return
				}
				n := r.GetRow().GetValues()[0].GetIntValue()
				upd, _ := gateway.Update(tbl, []gateway.Col{gateway.C("id", int64(1))}, gateway.C("n", n+1))
				cond, _ := gateway.ConditionGtid(tbl, int64(1), r.GetRow().GetGtid())
				_, err = c.Write(ctx, []*pb.Statement{upd}, gateway.WithConditions(cond))
				if gateway.IsPreconditionFailed(err) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				done++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	row, _, err := a.Get(ctx, tbl, int64(1))
	if err != nil || row["n"] != int64(20) {
		t.Fatalf("counter %v (%v), want 20", row, err)
	}
}
