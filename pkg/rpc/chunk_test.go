package rpc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/proxy"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// serveBytes registers a service whose "api" endpoint answers every request
// with body (nil: writes nothing at all) and returns a client for it.
func serveBytes(t *testing.T, env *testenv.Env, body []byte) (*rpc.Client, *nats.Conn) {
	t.Helper()
	nc := env.NATS(t)
	serveAPI(t, nc, env.RPCPrefix, "bigsvc", env.Logger(t), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if body != nil {
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(body)
		}
	}))
	return rpc.NewClient(env.NATS(t), env.RPCPrefix), nc
}

// encodedSize is the size of the reply serveBytes sends for a body of n.
func encodedSize(n int) int {
	return proto.Size(&rpcv1.Response{Status: 200, Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/octet-stream"}}, Body: make([]byte, n)})
}

// bodyFor returns the largest body whose reply is at most size bytes.
func bodyFor(size int) int {
	n := size
	for encodedSize(n) > size {
		n--
	}
	return n
}

func TestRepliesOfAnySizeArriveWholeAndQuickly(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	maxPayload := int(env.NATS(t).MaxPayload())
	tests := []struct {
		name string
		body int
	}{
		{"just under max payload", bodyFor(maxPayload - 1)},
		{"exactly max payload", bodyFor(maxPayload)},
		{"one byte over max payload", bodyFor(maxPayload) + 1},
		{"well over max payload", 3*maxPayload + 12345},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := make([]byte, tt.body)
			_, _ = rand.Read(body)
			client, _ := serveBytes(t, testenv.New(t), body)
			start := time.Now()
			resp, err := client.Do(context.Background(), "bigsvc", rpc.EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/v1/big"})
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("a reply of %d bytes took %s", tt.body, took)
			}
			if resp.GetStatus() != http.StatusOK || !bytes.Equal(resp.GetBody(), body) {
				t.Fatalf("status %d, %d body bytes (equal: %v), want 200 and the %d sent", resp.GetStatus(), len(resp.GetBody()), bytes.Equal(resp.GetBody(), body), len(body))
			}
		})
	}
}

func TestHandlerThatWritesNothingIs200WithNoBody(t *testing.T) {
	t.Parallel()
	client, _ := serveBytes(t, testenv.New(t), nil)
	resp, err := client.Do(context.Background(), "bigsvc", rpc.EndpointAPI, &rpcv1.Request{Method: http.MethodDelete, Path: "/v1/x"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != http.StatusOK || len(resp.GetBody()) != 0 {
		t.Fatalf("status %d, body %q; want 200 and nothing", resp.GetStatus(), resp.GetBody())
	}
}

// A caller that does not accept chunks (`nats req`, an older client) is
// told at once that the reply cannot be sent, rather than given part of it
// or left waiting.
func TestOversizedReplyToACallerWithoutChunksFailsAtOnce(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	nc := env.NATS(t)
	_, _ = serveBytes(t, env, make([]byte, 2*int(nc.MaxPayload())))
	data, _ := proto.Marshal(&rpcv1.Request{Method: http.MethodGet, Path: "/v1/big"})
	start := time.Now()
	msg, err := nc.Request(rpc.Subject(env.RPCPrefix, "bigsvc", rpc.EndpointAPI), data, 10*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusal took %s", took)
	}
	if msg.Header.Get("Nats-Service-Error-Code") != "500" || !strings.Contains(msg.Header.Get("Nats-Service-Error"), "does not accept chunked replies") {
		t.Fatalf("reply headers %v, want a service error naming the cause", msg.Header)
	}
}

// The client's side of the protocol against a responder that breaks it: a
// lost chunk, an oversized announcement, a missing last chunk.
func TestBrokenChunkedRepliesFailWithoutWaitingOutTheCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		chunks []nats.Header
		within time.Duration
	}{
		{"a chunk lost", []nats.Header{{rpc.HeaderChunk: {"1/3"}, rpc.HeaderReplySize: {"6"}}, {rpc.HeaderChunk: {"3/3"}}}, time.Second},
		{"over the bound", []nats.Header{{rpc.HeaderChunk: {"1/2"}, rpc.HeaderReplySize: {"999999999999"}}}, time.Second},
		{"malformed", []nats.Header{{rpc.HeaderChunk: {"one of two"}}}, time.Second},
		{"last chunk never comes", []nats.Header{{rpc.HeaderChunk: {"1/2"}, rpc.HeaderReplySize: {"6"}}}, rpc.ChunkGap + 2*time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t)
			nc := env.NATS(t)
			sub, err := nc.Subscribe(rpc.Subject(env.RPCPrefix, "brokensvc", rpc.EndpointAPI), func(m *nats.Msg) {
				for _, h := range tt.chunks {
					_ = m.RespondMsg(&nats.Msg{Header: h, Data: []byte("abc")})
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
			start := time.Now()
			_, err = client.Do(context.Background(), "brokensvc", rpc.EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/"})
			if err == nil {
				t.Fatal("a broken reply was accepted")
			}
			if _, isAPIError := errs.As(err); isAPIError {
				t.Fatalf("error %v is shown to the caller; want an internal error", err)
			}
			if took := time.Since(start); took > tt.within {
				t.Fatalf("failed after %s (%v), want within %s", took, err, tt.within)
			}
		})
	}
}

// With NATS unreachable the call is refused at once, 503 with Retry-After,
// and calls succeed again by themselves once NATS is back.
func TestNATSDownIs503AtOnceAndRecovers(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	_, _ = serveBytes(t, env, []byte("ok"))
	conn := env.Connections()
	p, natsURL := proxy.Front(t, env.NATSURL)
	conn.NATSURL = natsURL
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := natsx.Connect(ctx, conn, "proxied", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	client := rpc.NewClient(nc, env.RPCPrefix)
	call := func() error {
		_, err := client.Do(context.Background(), "bigsvc", rpc.EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/"})
		return err
	}
	if err := call(); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	// A call under way when NATS goes: its reply could only be lost.
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	snc := env.NATS(t)
	serveAPI(t, snc, env.RPCPrefix, "slowsvc", env.Logger(t), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	}))
	inFlight := make(chan error, 1)
	go func() {
		_, err := client.Do(context.Background(), "slowsvc", rpc.EndpointAPI, &rpcv1.Request{Method: http.MethodGet, Path: "/"})
		inFlight <- err
	}()
	select {
	case <-entered:
	case err := <-inFlight:
		t.Fatalf("the slow call ended before the outage: %v", err)
	}

	p.Cut()
	select {
	case err := <-inFlight:
		if e, ok := errs.As(err); !ok || e.Status != http.StatusServiceUnavailable || errors.Is(err, rpc.ErrNotSent) {
			t.Fatalf("the call under way ended with %v, want 503, not rpc.ErrNotSent (it was sent)", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the call under way still waits 2 s after NATS went")
	}
	wait.Until(t, 15*time.Second, "the client to notice", func() bool { return !nc.IsConnected() })
	for range 3 {
		start := time.Now()
		err := call()
		e, ok := errs.As(err)
		if !ok || e.Status != http.StatusServiceUnavailable || e.Code != errs.CodeServiceUnavailable || e.Header.Get("Retry-After") == "" || !errors.Is(err, rpc.ErrNotSent) {
			t.Fatalf("during the outage: %v, want 503 service_unavailable with Retry-After, rpc.ErrNotSent", err)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Fatalf("the refusal took %s", took)
		}
	}

	p.Restore()
	wait.For(t, 15*time.Second, "calls to succeed again", call)
}

// Replies have no size cliff; requests must fit one message, and one that
// does not is refused at once as too large, never sent.
func TestRequestOverOneMessageIs413(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	client, nc := serveBytes(t, env, []byte("ok"))
	_, err := client.Do(context.Background(), "bigsvc", rpc.EndpointAPI, &rpcv1.Request{Method: http.MethodPost, Path: "/", Body: make([]byte, nc.MaxPayload())})
	if e, ok := errs.As(err); !ok || e.Status != http.StatusRequestEntityTooLarge || e.Code != errs.CodePayloadTooLarge {
		t.Fatalf("error = %v, want 413 payload_too_large", err)
	}
}
