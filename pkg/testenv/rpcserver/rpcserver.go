// Package rpcserver serves handlers as a service's instance over NATS for a
// test: a fake of another service, or an instance of the one under test.
package rpcserver

import (
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/rpc"
)

// version is the version a test's instance announces; nothing reads it.
const version = "0.0.1"

// Serve serves each endpoint's handler (rpc.EndpointAPI, rpc.EndpointAdmin)
// as an instance of service on nc under prefix until the test ends, and
// returns the instance.
func Serve(t testing.TB, nc *nats.Conn, prefix, service string, log *zap.Logger, endpoints map[string]http.Handler) *rpc.Server {
	t.Helper()
	srv, err := rpc.NewServer(nc, prefix, service, version, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	for endpoint, h := range endpoints {
		if err := srv.Handle(endpoint, h); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}
