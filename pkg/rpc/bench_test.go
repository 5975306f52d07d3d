package rpc_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
)

// BenchmarkForwardedRequest measures the gateway-to-service hop: a JSON
// request through NATS request/reply into an echo handler and back.
func BenchmarkForwardedRequest(b *testing.B) {
	env := testenv.New(b)
	log := env.Logger(b)
	e := httpx.NewEcho(log)
	e.GET("/v1/ping", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) })
	srv, err := rpc.NewServer(env.NATS(b), env.RPCPrefix, "benchsvc", "1.0.0", log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	if err := srv.Handle(rpc.EndpointAPI, e); err != nil {
		b.Fatal(err)
	}
	client := rpc.NewClient(env.NATS(b), env.RPCPrefix)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var out map[string]bool
			if err := client.CallJSON(ctx, "benchsvc", rpc.EndpointAPI, "ws", http.MethodGet, "/v1/ping", nil, &out); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
