// Quickstart: write a row, read it back, then follow the change stream with Subscribe.
//
//	go run ./examples/quickstart -targets 127.0.0.1:7071,127.0.0.1:7072 [-token T] [-ca ca.pem] [-events 1]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"
)

func main() {
	targets := flag.String("targets", "127.0.0.1:7070", "comma-separated node API addresses")
	token := flag.String("token", os.Getenv("GATEWAY_TOKEN"), "bearer token")
	caFile := flag.String("ca", os.Getenv("GATEWAY_CA"), "CA certificate (PEM) for TLS")
	events := flag.Int("events", 0, "stop after this many change events (0: follow until Ctrl-C)")
	flag.Parse()

	opts := []gateway.Option{gateway.WithToken(*token)}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			log.Fatal(err)
		}
		opts = append(opts, gateway.WithTLSRootCertificates(pem))
	}
	client, err := gateway.New(strings.Split(*targets, ","), opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	id := time.Now().UnixNano()
	stmt, err := gateway.Insert("shop.items", []gateway.Col{gateway.C("id", id)},
		gateway.C("name", "widget"), gateway.C("price", gateway.Decimal("9.90")))
	if err != nil {
		log.Fatal(err)
	}
	res, err := client.Write(ctx, []*pb.Statement{stmt})
	if err != nil {
		log.Fatal(err) // a *gateway.GatewayError: errors.As(err, &gerr) gives Code and Field
	}
	fmt.Printf("wrote id %d: gtid %d:%d at log index %d\n", id, res.GetGtid().GetServerId(),
		res.GetGtid().GetTransId(), res.GetLogIndex())

	row, found, err := client.Get(ctx, "shop.items", id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read back (found=%v): %v\n", found, row)

	n := 0
	for ev, err := range client.Subscribe(ctx, gateway.FromLogIndex(res.GetLogIndex())) {
		if err != nil {
			if ctx.Err() != nil {
				return // Ctrl-C
			}
			log.Fatal(err)
		}
		g := ev.GetTransaction().GetGtid()
		fmt.Printf("event: log index %d, gtid %d:%d, %d statement(s)\n", ev.GetLogIndex(),
			g.GetServerId(), g.GetTransId(), len(ev.GetTransaction().GetStatements()))
		if n++; *events > 0 && n >= *events {
			return
		}
	}
}
