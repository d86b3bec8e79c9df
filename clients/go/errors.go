package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

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
// status.Code(err) also works: GatewayError implements GRPCStatus. It unwraps to its Cause,
// and a Canceled or DeadlineExceeded one also to context.Canceled or
// context.DeadlineExceeded, so errors.Is(err, context.Canceled) tells a call the caller
// cancelled from a server's refusal.
type GatewayError struct {
	Code      codes.Code
	Message   string
	Field     string
	LeaderAPI string
	// Cause is the error this one reports: the gRPC status error of the call, joined with
	// the caller's context error (context.Cause) when that context ended the call, or with
	// context.DeadlineExceeded when the call's deadline ended its retries; nil for errors
	// the client makes itself.
	Cause error
}

// Unwrap gives errors.Is and errors.As the Cause and, for the codes Canceled and
// DeadlineExceeded, context.Canceled and context.DeadlineExceeded.
func (e *GatewayError) Unwrap() []error {
	out := make([]error, 0, 2)
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	if e.Code == codes.Canceled && !errors.Is(e.Cause, context.Canceled) {
		out = append(out, context.Canceled)
	}
	if e.Code == codes.DeadlineExceeded && !errors.Is(e.Cause, context.DeadlineExceeded) {
		out = append(out, context.DeadlineExceeded)
	}
	return out
}

// withContext is gerr, its Cause joined with ctx's cause when ctx has ended (the caller
// cancelled, or its deadline passed, while an attempt failed for another reason).
func withContext(gerr *GatewayError, ctx context.Context) *GatewayError {
	return withCause(gerr, context.Cause(ctx))
}

// withCause is gerr, its Cause joined with cause (unless nil or already there).
func withCause(gerr *GatewayError, cause error) *GatewayError {
	if cause != nil && !errors.Is(gerr, cause) {
		gerr.Cause = errors.Join(gerr.Cause, cause)
	}
	return gerr
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
		return &GatewayError{Code: codes.Unavailable, Message: "the server ended the stream", Cause: err}
	}
	st := status.Convert(err)
	out := &GatewayError{Code: st.Code(), Message: st.Message(), Cause: err}
	if v := trailer.Get(TrailerField); len(v) > 0 {
		out.Field = v[0]
	}
	if v := trailer.Get(TrailerLeaderAPI); len(v) > 0 {
		out.LeaderAPI = v[0]
	}
	return out
}

// ConditionIndex is i when the error is a conditional write's refusal (FailedPrecondition,
// Field "conditions[i]"), else -1.
func (e *GatewayError) ConditionIndex() int {
	if e.Code != codes.FailedPrecondition || !strings.HasPrefix(e.Field, "conditions[") || !strings.HasSuffix(e.Field, "]") {
		return -1
	}
	i, err := strconv.Atoi(e.Field[len("conditions[") : len(e.Field)-1])
	if err != nil {
		return -1
	}
	return i
}

// IsPreconditionFailed reports whether err is (or wraps) a conditional write's refusal.
func IsPreconditionFailed(err error) bool {
	var gerr *GatewayError
	if errors.As(err, &gerr) {
		return gerr.Code == codes.FailedPrecondition
	}
	var berr *BatchError
	return errors.As(err, &berr)
}

// BatchError is the error of a WriteBatchRequests some of whose writes were refused (their
// conditions failed); the other writes were applied. Refused maps a write's position to its
// refusal.
type BatchError struct {
	Refused map[int]*GatewayError
}

func (e *BatchError) Error() string {
	idx := make([]int, 0, len(e.Refused))
	for i := range e.Refused {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	parts := make([]string, 0, len(idx))
	for _, i := range idx {
		parts = append(parts, fmt.Sprintf("write %d: %s", i, e.Refused[i].Message))
	}
	return "gateway: writes refused: " + strings.Join(parts, "; ")
}
