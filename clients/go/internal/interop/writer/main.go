// The Go side of the cross-language test (clients/testing/test_cross_language.py): writes
// rows 0..count-1 of a table one after another and prints one JSON line per write result.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"os"
	"strings"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"
)

func main() {
	targets := flag.String("targets", "", "comma-separated node API addresses")
	table := flag.String("table", "", "schema.table")
	count := flag.Int("count", 10, "rows to write")
	flag.Parse()
	client, err := gateway.New(strings.Split(*targets, ","))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	out := json.NewEncoder(os.Stdout)
	for i := range *count {
		stmt, err := gateway.Insert(*table, []gateway.Col{gateway.C("id", int64(i))},
			gateway.C("name", "row-"+string(rune('a'+i%26))), gateway.C("qty", int64(i*10)))
		if err != nil {
			log.Fatal(err)
		}
		res, err := client.Write(context.Background(), []*pb.Statement{stmt})
		if err != nil {
			log.Fatal(err)
		}
		_ = out.Encode(map[string]any{"id": i, "server_id": res.GetGtid().GetServerId(),
			"trans_id": res.GetGtid().GetTransId(), "log_index": res.GetLogIndex(),
			"name": "row-" + string(rune('a'+i%26)), "qty": i * 10})
	}
}
