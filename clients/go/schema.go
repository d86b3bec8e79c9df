package gateway

// Typed calls of the Schema service (docs/schema.md): table definitions as replicated,
// versioned log events.

import (
	"context"

	pb "gateway/clients/go/gatewayv1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Column is a column definition for CreateTable and AddColumn: its name, type, default
// (nil = NULL; else a value Insert accepts for the type) and whether NULL is refused.
type Column struct {
	Name    string
	Type    pb.FieldType
	Default any
	NotNull bool
}

func (col Column) def() (*pb.ColumnDef, error) {
	d := &pb.ColumnDef{Name: col.Name, Type: col.Type, NotNull: col.NotNull}
	if col.Default != nil {
		v, _, err := ToValue(col.Default)
		if err != nil {
			return nil, &GatewayError{Code: codes.InvalidArgument, Message: "column " + col.Name + " default: " + err.Error(),
				Field: "column.default_value"}
		}
		d.DefaultValue = v
	}
	return d, nil
}

// ChangeSchema commits one table-definition change (Schema.ChangeSchema; admin token) and
// returns the definition after it, its version and the log index of the event. A malformed
// change is a *GatewayError with code InvalidArgument (Field names the request field); one
// that cannot be applied everywhere (a type or primary-key change, a base version that is
// not the table's) has code FailedPrecondition and the reason. The typed helpers below
// build the request.
func (c *Client) ChangeSchema(ctx context.Context, req *pb.SchemaChangeRequest) (*pb.SchemaChangeResponse, error) {
	return call(ctx, c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.SchemaChangeResponse, error) {
		return s.(pb.SchemaClient).ChangeSchema(ctx, req, o...)
	})
}

// CreateTable declares table ("schema.table") with columns (key columns first) and its
// primary key: version 1.
func (c *Client) CreateTable(ctx context.Context, table string, primaryKey []string, columns ...Column) (*pb.SchemaChangeResponse, error) {
	req := &pb.SchemaChangeRequest{Table: table, Kind: pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_CREATE,
		PrimaryKey: primaryKey}
	for _, col := range columns {
		d, err := col.def()
		if err != nil {
			return nil, err
		}
		req.Columns = append(req.Columns, d)
	}
	return c.ChangeSchema(ctx, req)
}

// AddColumn adds column to table (ALTER TABLE ... ADD COLUMN, with its default).
func (c *Client) AddColumn(ctx context.Context, table string, column Column) (*pb.SchemaChangeResponse, error) {
	d, err := column.def()
	if err != nil {
		return nil, err
	}
	return c.ChangeSchema(ctx, &pb.SchemaChangeRequest{Table: table,
		Kind: pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_ADD_COLUMN, Column: d})
}

// DropColumn drops the column name of table.
func (c *Client) DropColumn(ctx context.Context, table, name string) (*pb.SchemaChangeResponse, error) {
	return c.ChangeSchema(ctx, &pb.SchemaChangeRequest{Table: table,
		Kind: pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_DROP_COLUMN, Column: &pb.ColumnDef{Name: name}})
}

// RenameColumn renames the column oldName of table to newName.
func (c *Client) RenameColumn(ctx context.Context, table, oldName, newName string) (*pb.SchemaChangeResponse, error) {
	return c.ChangeSchema(ctx, &pb.SchemaChangeRequest{Table: table,
		Kind: pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_RENAME_COLUMN, OldName: oldName, NewName: newName})
}

// DropTable drops table (its definition keeps its last version in SchemaHistory).
func (c *Client) DropTable(ctx context.Context, table string) (*pb.SchemaChangeResponse, error) {
	return c.ChangeSchema(ctx, &pb.SchemaChangeRequest{Table: table,
		Kind: pb.SchemaChangeKind_SCHEMA_CHANGE_KIND_DROP_TABLE})
}

// ShowTable is table's definition and version on the node that answers (read token; a
// follower may not have applied the latest change yet).
func (c *Client) ShowTable(ctx context.Context, table string) (*pb.ShowTableResponse, error) {
	return call(ctx, c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.ShowTableResponse, error) {
		return s.(pb.SchemaClient).ShowTable(ctx, &pb.ShowTableRequest{Table: table}, o...)
	})
}

// SchemaHistory is table's applied schema events, oldest first, and the concurrent changes
// that lost with their causes, on the node that answers (read token).
func (c *Client) SchemaHistory(ctx context.Context, table string) (*pb.SchemaHistoryResponse, error) {
	return call(ctx, c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.SchemaHistoryResponse, error) {
		return s.(pb.SchemaClient).SchemaHistory(ctx, &pb.SchemaHistoryRequest{Table: table}, o...)
	})
}
