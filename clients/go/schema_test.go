package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	gateway "gateway/clients/go"
	pb "gateway/clients/go/gatewayv1"

	"google.golang.org/grpc/codes"
)

func TestSchemaCallsCreateAlterShowAndRefuse(t *testing.T) {
	admin := liveClient(t, cluster.APIs(), "admin")
	ctx := context.Background()
	tbl := table("schema")
	created, err := admin.CreateTable(ctx, tbl, []string{"id"},
		gateway.Column{Name: "id", Type: pb.FieldType_FIELD_TYPE_INTEGER, NotNull: true},
		gateway.Column{Name: "name", Type: pb.FieldType_FIELD_TYPE_VARCHAR})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetVersion() != 1 {
		t.Fatalf("create: version %d", created.GetVersion())
	}
	added, err := admin.AddColumn(ctx, tbl, gateway.Column{Name: "c", Type: pb.FieldType_FIELD_TYPE_INTEGER, Default: int64(0)})
	if err != nil {
		t.Fatal(err)
	}
	if added.GetVersion() != 2 || len(added.GetDefinition().GetColumns()) != 3 {
		t.Fatalf("add column: %v", added)
	}
	if _, err := admin.RenameColumn(ctx, tbl, "name", "title"); err != nil {
		t.Fatal(err)
	}
	// A type change cannot be applied everywhere: refused before it commits.
	_, err = admin.ChangeSchema(ctx, &pb.SchemaChangeRequest{Table: tbl,
		Kind:   pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_CHANGE_TYPE,
		Column: &pb.ColumnDef{Name: "c", Type: pb.FieldType_FIELD_TYPE_VARCHAR}})
	var gerr *gateway.GatewayError
	if !errors.As(err, &gerr) || gerr.Code != codes.FailedPrecondition {
		t.Fatalf("change type: %v", err)
	}
	_, err = admin.AddColumn(ctx, tbl, gateway.Column{Name: "", Type: pb.FieldType_FIELD_TYPE_INTEGER})
	if !errors.As(err, &gerr) || gerr.Code != codes.InvalidArgument {
		t.Fatalf("add unnamed column: %v", err)
	}
	// Without the admin token the change is refused.
	writer := liveClient(t, cluster.APIs(), "writer")
	if _, err := writer.DropColumn(ctx, tbl, "c"); !errors.As(err, &gerr) || gerr.Code != codes.PermissionDenied {
		t.Fatalf("drop column as writer: %v", err)
	}
	// The node targeted may be a follower that has not applied the last change yet.
	var shown *pb.ShowTableResponse
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if shown, err = writer.ShowTable(ctx, tbl); err == nil && shown.GetDefinition().GetVersion() == 3 {
			break
		}
	}
	if err != nil || shown.GetDefinition().GetVersion() != 3 {
		t.Fatalf("show table: %v %v", shown, err)
	}
	var names []string
	for _, col := range shown.GetDefinition().GetColumns() {
		names = append(names, col.GetName())
	}
	if len(names) != 3 || names[0] != "id" || names[1] != "title" || names[2] != "c" {
		t.Fatalf("columns %v", names)
	}
	history, err := writer.SchemaHistory(ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []pb.SchemaChangeKind
	for _, ev := range history.GetEvents() {
		kinds = append(kinds, ev.GetKind())
	}
	if len(kinds) != 3 || kinds[0] != pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_CREATE ||
		kinds[1] != pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_ADD_COLUMN ||
		kinds[2] != pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_RENAME_COLUMN {
		t.Fatalf("history %v", kinds)
	}
	if _, err := admin.DropTable(ctx, tbl); err != nil {
		t.Fatal(err)
	}
}
