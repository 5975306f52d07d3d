package rpc_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
)

// A call that reached no service says so (rpc.ErrNotSent), still its 503
// or 413 to show: none running, a request over one message. A call the
// service took and did not answer in time is 503 too, but not ErrNotSent:
// the service may have done its work.
func TestCallThatReachedNoServiceIsNotSent(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	client, nc := serveBytes(t, env, []byte("ok"))
	do := func(ctx context.Context, service string, body []byte) error {
		_, err := client.Do(ctx, service, rpc.EndpointAPI, &rpcv1.Request{Method: http.MethodPost, Path: "/", Body: body})
		return err
	}

	err := do(context.Background(), "nosuchsvc", nil)
	if e, ok := errs.As(err); !ok || e.Status != http.StatusServiceUnavailable || !errors.Is(err, rpc.ErrNotSent) {
		t.Fatalf("a call to no instance = %v, want 503 and ErrNotSent", err)
	}
	err = do(context.Background(), "bigsvc", make([]byte, nc.MaxPayload()))
	if e, ok := errs.As(err); !ok || e.Status != http.StatusRequestEntityTooLarge || !errors.Is(err, rpc.ErrNotSent) {
		t.Fatalf("a request over one message = %v, want 413 and ErrNotSent", err)
	}

	took, release := make(chan struct{}, 2), make(chan struct{})
	defer close(release)
	serveAPI(t, env.NATS(t), env.RPCPrefix, "slowsvc", env.Logger(t), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		took <- struct{}{}
		<-release
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-took
		cancel() // the caller gives up once the service has the request
	}()
	err = do(ctx, "slowsvc", nil)
	if err == nil || errors.Is(err, rpc.ErrNotSent) {
		t.Fatalf("a call the service took = %v, want an error without ErrNotSent", err)
	}
	deadline, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = do(deadline, "slowsvc", nil)
	if e, ok := errs.As(err); !ok || e.Status != http.StatusServiceUnavailable || errors.Is(err, rpc.ErrNotSent) {
		t.Fatalf("a call not answered in time = %v, want 503 without ErrNotSent", err)
	}
}
