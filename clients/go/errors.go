package gateway

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Trailing metadata keys the server sets (docs/node.md, "API semantics").
const (
	// TrailerField names the request field a validation error is about (INVALID_ARGUMENT).
	TrailerField = "gateway-field"
	// TrailerLeaderAPI is the API address of the leader, sent with UNAVAILABLE when known.
	TrailerLeaderAPI = "gateway-leader-api"
)

// GatewayError is the error of every failed call: the gRPC status code, the server's
// message, the offending request field (INVALID_ARGUMENT; "" otherwise) and the leader's API
// address when the server named one. Match it with errors.As:
//
//	var gerr *gateway.GatewayError
//	if errors.As(err, &gerr) && gerr.Code == codes.InvalidArgument { ... gerr.Field ... }
//
// status.Code(err) also works: GatewayError implements GRPCStatus.
type GatewayError struct {
	Code      codes.Code
	Message   string
	Field     string
	LeaderAPI string
}

func (e *GatewayError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("gateway: %s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("gateway: %s: %s", e.Code, e.Message)
}

// GRPCStatus lets status.FromError and status.Code see the gRPC status.
func (e *GatewayError) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// toError turns what a call returned into a *GatewayError, reading the gateway trailers.
func toError(err error, trailer metadata.MD) *GatewayError {
	var gerr *GatewayError
	if errors.As(err, &gerr) {
		return gerr
	}
	if errors.Is(err, io.EOF) {
		return &GatewayError{Code: codes.Unavailable, Message: "the server ended the stream"}
	}
	st := status.Convert(err)
	out := &GatewayError{Code: st.Code(), Message: st.Message()}
	if v := trailer.Get(TrailerField); len(v) > 0 {
		out.Field = v[0]
	}
	if v := trailer.Get(TrailerLeaderAPI); len(v) > 0 {
		out.LeaderAPI = v[0]
	}
	return out
}
