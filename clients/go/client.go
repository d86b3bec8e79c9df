// Package gateway is a Go client for the Gateway gRPC API (service gateway.v1.Gateway), a thin
// layer over the generated stubs in gateway/clients/go/gatewayv1 with the contract of the
// Python client (docs/node.md, "Python client"):
//
//   - every write carries an idempotency key (random unless WithIdempotencyKey gives one) that
//     is sent unchanged on every retry, so a retry after a timeout or a failover never applies
//     a write twice;
//   - UNAVAILABLE and an attempt's DEADLINE_EXCEEDED are retried with exponential backoff
//     (jittered, capped by WithMaxBackoff) until the call's overall deadline: the context's, or
//     WithTimeout's default when the context has none; each attempt has its own deadline
//     (WithAttemptTimeout);
//   - on UNAVAILABLE the client moves to the node named by the gateway-leader-api trailer, or
//     to the next target;
//   - other errors are returned at once as *GatewayError (code, message, offending field);
//   - Subscribe resumes after a broken stream from the last delivered log index + 1;
//   - Stream keeps many writes in flight on one StreamWrite call (WriteStream), each
//     acknowledged on its own and not retried there.
//
// A Client is safe for concurrent use.
package gateway

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	pb "gateway/clients/go/gatewayv1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Client talks to a Gateway cluster through any of its nodes.
type Client struct {
	opts options

	mu      sync.Mutex
	targets []string
	current int
	conns   map[string]*grpc.ClientConn
	closed  bool

	reads  readGatherer  // WithReadCoalescing's waiting Reads
	writes writeGatherer // WithWriteCoalescing's waiting Writes
}

type options struct {
	token          string
	creds          credentials.TransportCredentials
	timeout        time.Duration
	attemptTimeout time.Duration
	maxBackoff     time.Duration
	dialOptions    []grpc.DialOption
	readBatch      int // WithReadCoalescing's batch size; 0: off
	writeBatch     int // WithWriteCoalescing's batch size; 0: off
	err            error
}

// Option configures a Client.
type Option func(*options)

// WithToken sends "authorization: Bearer token" on every call.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTLSRootCertificates speaks TLS and trusts the CA certificates in pemCerts.
func WithTLSRootCertificates(pemCerts []byte) Option {
	return func(o *options) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemCerts) {
			o.err = errors.New("gateway: WithTLSRootCertificates: no PEM certificate found")
			return
		}
		o.creds = credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
}

// WithTLSConfig speaks TLS with cfg (client certificates, system roots, ...).
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) { o.creds = credentials.NewTLS(cfg) }
}

// WithTimeout is the overall deadline of a call whose context has none (default 30 s).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithAttemptTimeout is the deadline of one attempt of a call (default 5 s).
func WithAttemptTimeout(d time.Duration) Option {
	return func(o *options) { o.attemptTimeout = d }
}

// WithMaxBackoff caps the pause between retries (default 1 s; the first is 20 ms).
func WithMaxBackoff(d time.Duration) Option { return func(o *options) { o.maxBackoff = d } }

// WithDialOptions adds gRPC dial options to every connection.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

const firstBackoff = 20 * time.Millisecond

// New makes a client for the nodes at targets ("host:port" each). Connections are made
// lazily, on the first call to each node.
func New(targets []string, opts ...Option) (*Client, error) {
	if len(targets) == 0 {
		return nil, errors.New("gateway: at least one target host:port is needed")
	}
	o := options{creds: insecure.NewCredentials(), timeout: 30 * time.Second,
		attemptTimeout: 5 * time.Second, maxBackoff: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return nil, o.err
	}
	if o.timeout <= 0 || o.attemptTimeout <= 0 || o.maxBackoff <= 0 {
		return nil, errors.New("gateway: timeouts and backoff must be positive")
	}
	return &Client{opts: o, targets: slices.Clone(targets), conns: map[string]*grpc.ClientConn{}}, nil
}

// Close closes every connection; calls in progress fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	clear(c.conns)
	return errors.Join(errs...)
}

// Targets are the node addresses the client knows (leaders it was redirected to included).
func (c *Client) Targets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.targets)
}

// stub is the stub for target (the current one when target is "").
func (c *Client) stub(target string) (string, pb.GatewayClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return "", nil, &GatewayError{Code: codes.Canceled, Message: "client is closed"}
	}
	if target == "" {
		target = c.targets[c.current]
	}
	cc, ok := c.conns[target]
	if !ok {
		dial := append([]grpc.DialOption{grpc.WithTransportCredentials(c.opts.creds)},
			c.opts.dialOptions...)
		var err error
		if cc, err = grpc.NewClient(target, dial...); err != nil {
			return "", nil, &GatewayError{Code: codes.InvalidArgument,
				Message: fmt.Sprintf("target %q: %v", target, err)}
		}
		c.conns[target] = cc
	}
	return target, stubs{pb.NewGatewayClient(cc), pb.NewReadsClient(cc), pb.NewSchemaClient(cc)}, nil
}

// stubs are a connection's Gateway stub and the stubs of the public API's other services
// (Reads, Schema), one value passed as the Gateway stub.
type stubs struct {
	pb.GatewayClient
	pb.ReadsClient
	pb.SchemaClient
}

// moveOn picks the next target after a failure on failed: the leader the server named, or
// the target after failed (unless another call moved on already).
func (c *Client) moveOn(failed, leaderAPI string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if leaderAPI != "" {
		i := slices.Index(c.targets, leaderAPI)
		if i < 0 {
			c.targets = append(c.targets, leaderAPI)
			i = len(c.targets) - 1
		}
		c.current = i
		return
	}
	if c.targets[c.current] == failed {
		c.current = (c.current + 1) % len(c.targets)
	}
}

func (c *Client) outgoing(ctx context.Context) context.Context {
	if c.opts.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.opts.token)
}

func retryable(code codes.Code) bool {
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}

// sleep waits d with ±50% jitter; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(time.Duration(float64(d) * (0.5 + mrand.Float64())))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// call runs one unary RPC with the retry rules of the package comment.
func call[Resp any](ctx context.Context, c *Client,
	rpc func(context.Context, pb.GatewayClient, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.timeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	backoff := firstBackoff
	for {
		var zero Resp
		target, stub, err := c.stub("")
		if err != nil {
			return zero, err
		}
		actx, cancel := context.WithTimeout(c.outgoing(ctx), c.opts.attemptTimeout)
		var trailer metadata.MD
		resp, err := rpc(actx, stub, grpc.Trailer(&trailer))
		cancel()
		if err == nil {
			return resp, nil
		}
		gerr := toError(err, trailer)
		if !retryable(gerr.Code) || ctx.Err() != nil {
			return zero, withContext(gerr, ctx)
		}
		if time.Now().Add(backoff).After(deadline) {
			// The deadline ends the retries (the next attempt would start past it).
			return zero, withCause(gerr, context.DeadlineExceeded)
		}
		c.moveOn(target, gerr.LeaderAPI)
		if !sleep(ctx, backoff) {
			return zero, withContext(gerr, ctx)
		}
		backoff = min(2*backoff, c.opts.maxBackoff)
	}
}

// NewIdempotencyKey is a random key (32 hex digits), what Write uses when given none.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WriteOption configures one Write.
type WriteOption func(*pb.WriteRequest)

// WithIdempotencyKey sets the write's idempotency key (at most 128 bytes): a write with a
// key already used returns the first write's result with Duplicate set. An empty key sends
// the write without one: it is not deduplicated, so a retry after a lost reply may apply it
// twice (it saves the server the key's records).
func WithIdempotencyKey(key string) WriteOption {
	return func(r *pb.WriteRequest) { r.IdempotencyKey = key }
}

// WithConditions makes the write conditional (docs/node.md, "Conditional writes"): it is
// applied only if every condition holds when the write is applied, else it is refused whole
// with a *GatewayError of code FailedPrecondition whose Field names the condition
// ("conditions[i]"; ConditionIndex gives i) and whose message names its table and key.
// Build conditions with ConditionAbsent, ConditionGtid and ConditionValues.
func WithConditions(conditions ...*pb.Condition) WriteOption {
	return func(r *pb.WriteRequest) { r.Conditions = append(r.Conditions, conditions...) }
}

// Write commits one transaction and returns where it landed (GTID, epoch, commit timestamp,
// log index; Duplicate when its idempotency key had been used). With WithWriteCoalescing it
// shares a WriteBatch call with the Writes waiting beside it.
func (c *Client) Write(ctx context.Context, statements []*pb.Statement, opts ...WriteOption) (*pb.WriteResult, error) {
	req := &pb.WriteRequest{Statements: statements, IdempotencyKey: NewIdempotencyKey()}
	for _, o := range opts {
		o(req)
	}
	if c.opts.writeBatch > 0 {
		return gather(ctx, &c.writes, struct{}{}, req, c.opts.writeBatch, c.writeBatchOf)
	}
	return c.writeOne(ctx, req)
}

// writeOne is one Gateway.Write call of req, with the retry rules.
func (c *Client) writeOne(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResult, error) {
	return call(ctx, c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.WriteResult, error) {
		return s.Write(ctx, req, o...)
	})
}

// WriteBatch commits many transactions in one round trip, each with its own idempotency
// key; the results are in the same order. One invalid write fails the whole batch.
func (c *Client) WriteBatch(ctx context.Context, writes [][]*pb.Statement) ([]*pb.WriteResult, error) {
	reqs := make([]*pb.WriteRequest, 0, len(writes))
	for _, w := range writes {
		reqs = append(reqs, &pb.WriteRequest{Statements: w})
	}
	return c.WriteBatchRequests(ctx, reqs)
}

// WriteBatchRequests is WriteBatch of whole write requests (statements, conditions, an
// idempotency key: a fresh one where it is empty). A write whose conditions fail is refused
// alone: the others are applied, every result is returned (nil where refused) and the error
// is a *BatchError listing the refusals.
func (c *Client) WriteBatchRequests(ctx context.Context, writes []*pb.WriteRequest) ([]*pb.WriteResult, error) {
	req := &pb.WriteBatchRequest{}
	for _, w := range writes {
		if w.IdempotencyKey == "" {
			w.IdempotencyKey = NewIdempotencyKey()
		}
		req.Writes = append(req.Writes, w)
	}
	resp, err := call(ctx, c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.WriteBatchResponse, error) {
		return s.WriteBatch(ctx, req, o...)
	})
	if err != nil {
		return nil, err
	}
	results := resp.GetResults()
	if len(resp.GetErrors()) == 0 {
		return results, nil
	}
	berr := &BatchError{Refused: map[int]*GatewayError{}}
	for _, e := range resp.GetErrors() {
		i := int(e.GetIndex())
		berr.Refused[i] = refusalOf(e)
		if i < len(results) {
			results[i] = nil
		}
	}
	return results, berr
}

// refusalOf is the error of a write a WriteBatch refused (its conditions failed).
func refusalOf(e *pb.WriteError) *GatewayError {
	return &GatewayError{Code: codes.Code(e.GetCode()), Message: e.GetError(), Field: e.GetField()}
}

// ReadOption configures Read and Get.
type ReadOption interface{ applyRead(*pb.ReadRequest) }

// ScanOption configures Scan.
type ScanOption interface{ applyScan(*scanRequest) }

type scanRequest struct {
	req *pb.ScanRequest
	err error
}

type consistencyOption pb.Consistency

func (o consistencyOption) applyRead(r *pb.ReadRequest) { r.Consistency = pb.Consistency(o) }
func (o consistencyOption) applyScan(s *scanRequest)    { s.req.Consistency = pb.Consistency(o) }

// WithConsistency sets a read's or scan's consistency (default CONSISTENCY_LINEARIZABLE).
func WithConsistency(c pb.Consistency) interface {
	ReadOption
	ScanOption
} {
	return consistencyOption(c)
}

type scanFunc func(*scanRequest)

func (f scanFunc) applyScan(s *scanRequest) { f(s) }

// StartKey starts a scan at key (inclusive; a value or a []any of key values).
func StartKey(key any) ScanOption {
	return scanFunc(func(s *scanRequest) {
		v, err := keyValues(key)
		s.req.StartKey, s.err = v, errors.Join(s.err, err)
	})
}

// StartAfter starts a scan after key (exclusive): a value, a []any of key values, or a row's
// KeyValues. A scan whose response had More continues with StartAfter(the last row's
// KeyValues): every page moves on, however few rows the response's size let through.
func StartAfter(key any) ScanOption {
	return scanFunc(func(s *scanRequest) {
		if kv, ok := key.([]*pb.Value); ok {
			s.req.StartKey, s.req.StartAfter = kv, true
			return
		}
		v, err := keyValues(key)
		s.req.StartKey, s.req.StartAfter, s.err = v, true, errors.Join(s.err, err)
	})
}

// EndKey ends a scan before key (exclusive).
func EndKey(key any) ScanOption {
	return scanFunc(func(s *scanRequest) {
		v, err := keyValues(key)
		s.req.EndKey, s.err = v, errors.Join(s.err, err)
	})
}

// Limit caps the rows of a scan (0 = the server's 1000; at most 10000).
func Limit(n uint32) ScanOption { return scanFunc(func(s *scanRequest) { s.req.Limit = n }) }

// Read reads the row of table ("schema.table") with primary key key (a value, or a []any of
// the key columns' values in key order). With WithReadCoalescing it shares a ReadBatch call
// with the Reads waiting beside it.
func (c *Client) Read(ctx context.Context, table string, key any, opts ...ReadOption) (*pb.ReadResponse, error) {
	kv, err := keyValues(key)
	if err != nil {
		return nil, err
	}
	req := &pb.ReadRequest{Table: table, Key: kv}
	for _, o := range opts {
		o.applyRead(req)
	}
	if c.opts.readBatch > 0 {
		return gather(ctx, &c.reads, req.GetConsistency(), req, c.opts.readBatch, c.readBatchOf)
	}
	return c.readOne(ctx, req)
}

// readOne is one Gateway.Read call of req, with the retry rules.
func (c *Client) readOne(ctx context.Context, req *pb.ReadRequest) (*pb.ReadResponse, error) {
	return call(ctx, c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.ReadResponse, error) {
		return s.Read(ctx, req, o...)
	})
}

// Get is Read returning the row as a Row; found is false when there is no such row.
func (c *Client) Get(ctx context.Context, table string, key any, opts ...ReadOption) (row Row, found bool, err error) {
	resp, err := c.Read(ctx, table, key, opts...)
	if err != nil || !resp.GetFound() {
		return nil, false, err
	}
	return RowOf(resp.GetRow()), true, nil
}

// ReadBatch reads the rows of many keys of table in one call (Reads.ReadBatch): one result
// per key in order, all read at one applied index after one read point. Each key is a value
// or a []any of key values, as in Read; WithConsistency applies.
func (c *Client) ReadBatch(ctx context.Context, table string, keys []any, opts ...ReadOption) (*pb.ReadBatchResponse, error) {
	req := &pb.ReadBatchRequest{Table: table, Keys: make([]*pb.ReadKey, len(keys))}
	for i, k := range keys {
		kv, err := keyValues(k)
		if err != nil {
			return nil, err
		}
		req.Keys[i] = &pb.ReadKey{Key: kv}
	}
	one := &pb.ReadRequest{} // the options set a ReadRequest's consistency
	for _, o := range opts {
		o.applyRead(one)
	}
	req.Consistency = one.Consistency
	return call(ctx, c, func(ctx context.Context, s pb.GatewayClient, o ...grpc.CallOption) (*pb.ReadBatchResponse, error) {
		return s.(pb.ReadsClient).ReadBatch(ctx, req, o...)
	})
}

// Scan reads rows of table in key order (StartKey <= key < EndKey); More is set when the
// limit or the response's size stopped it (continue with StartAfter(the last row's
// KeyValues)). Rows of one shape share their
// Table, KeyFields and Fields (sent once per response): read them, do not change them in
// place.
func (c *Client) Scan(ctx context.Context, table string, opts ...ScanOption) (*pb.ScanResponse, error) {
	s := &scanRequest{req: &pb.ScanRequest{Table: table}}
	for _, o := range opts {
		o.applyScan(s)
	}
	if s.err != nil {
		return nil, s.err
	}
	// The rows' common table and columns come once (shared_shape) and are decoded from
	// slabs (rows_decode.go); WholeRows hands back whole rows that share them.
	s.req.SharedShape = true
	resp, err := call(ctx, c, func(ctx context.Context, st pb.GatewayClient, o ...grpc.CallOption) (*pb.ScanResponse, error) {
		return st.Scan(ctx, s.req, append(o[:len(o):len(o)], FastRows())...)
	})
	if err != nil {
		return nil, err
	}
	WholeRows(resp)
	return resp, nil
}

// Status is the status of the node the client currently targets (one attempt, no failover;
// the attempt deadline applies unless ctx has an earlier one).
func (c *Client) Status(ctx context.Context) (*pb.StatusResponse, error) {
	return c.StatusOf(ctx, "")
}

// StatusOf is the status of the node at target (one attempt, no failover).
func (c *Client) StatusOf(ctx context.Context, target string) (*pb.StatusResponse, error) {
	_, stub, err := c.stub(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.outgoing(ctx), c.opts.attemptTimeout)
	defer cancel()
	var trailer metadata.MD
	resp, err := stub.Status(ctx, &pb.StatusRequest{}, grpc.Trailer(&trailer))
	if err != nil {
		return nil, withContext(toError(err, trailer), ctx)
	}
	return resp, nil
}
