package rpc

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
)

// MaxInFlight bounds the requests one process serves at once; past it, NATS
// holds further requests until a slot frees.
const MaxInFlight = 256

// HandlerTimeout bounds one forwarded request; the gateway gives up a little
// later, so the service always answers first.
const HandlerTimeout = 25 * time.Second

// Server is a service's NATS micro service.
type Server struct {
	nc     *nats.Conn
	svc    micro.Service
	group  micro.Group
	log    *zap.Logger
	slots  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
}

// NewServer registers service (queue group of the same name) on nc.
func NewServer(nc *nats.Conn, prefix, service, version string, log *zap.Logger) (*Server, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        service,
		Version:     version,
		QueueGroup:  service,
		Description: "Parley " + service,
	})
	if err != nil {
		return nil, fmt.Errorf("register %s with nats: %w", service, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		nc:     nc,
		svc:    svc,
		group:  svc.AddGroup(prefix + "." + service),
		log:    log,
		slots:  make(chan struct{}, MaxInFlight),
		ctx:    ctx,
		cancel: cancel,
	}, nil
}

// Handle serves endpoint with h. Each request runs on its own goroutine:
// NATS calls a subscription's handler serially, and one slow platform call
// must not hold up the rest.
func (s *Server) Handle(endpoint string, h http.Handler) error {
	return s.group.AddEndpoint(endpoint, micro.HandlerFunc(func(req micro.Request) {
		s.slots <- struct{}{}
		go func() {
			defer func() { <-s.slots }()
			s.serve(req, h)
		}()
	}))
}

func (s *Server) serve(msg micro.Request, h http.Handler) {
	var in rpcv1.Request
	if err := proto.Unmarshal(msg.Data(), &in); err != nil {
		s.log.Warn("malformed rpc request", zap.String("subject", msg.Subject()), zap.Error(err))
		_ = msg.Error("400", "malformed request", nil)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, HandlerTimeout)
	defer cancel()
	ctx = WithWorkspace(ctx, in.GetWorkspaceId())
	target := in.GetPath()
	if in.GetRawQuery() != "" {
		target += "?" + in.GetRawQuery()
	}
	req, err := http.NewRequestWithContext(ctx, in.GetMethod(), "http://rpc"+target, bytes.NewReader(in.GetBody()))
	if err != nil {
		_ = msg.Error("400", "malformed request: "+err.Error(), nil)
		return
	}
	req.RequestURI = target
	for _, hd := range in.GetHeaders() {
		req.Header.Add(hd.GetName(), hd.GetValue())
	}
	if in.GetRequestId() != "" {
		req.Header.Set("X-Request-Id", in.GetRequestId())
	}
	rec := newRecorder()
	h.ServeHTTP(rec, req)
	out, err := proto.Marshal(rec.response())
	if err != nil {
		s.log.Error("encode rpc response", zap.Error(err))
		_ = msg.Error("500", "encode response", nil)
		return
	}
	s.reply(msg, out, in.GetRequestId())
}

// Stop deregisters the service and cancels requests still running.
func (s *Server) Stop() error {
	err := s.svc.Stop()
	s.cancel()
	return err
}

// recorder is the http.ResponseWriter a forwarded request is served into.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// Flush is a no-op: the response is sent when the handler returns, in one
// message or, when large, in chunks (see chunk.go).
func (r *recorder) Flush() {}

func (r *recorder) response() *rpcv1.Response {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	return &rpcv1.Response{Status: int32(status), Headers: toHeaders(r.header), Body: r.body.Bytes()}
}

func toHeaders(h http.Header) []*rpcv1.Header {
	out := make([]*rpcv1.Header, 0, len(h))
	for name, values := range h {
		for _, v := range values {
			out = append(out, &rpcv1.Header{Name: name, Value: v})
		}
	}
	return out
}
