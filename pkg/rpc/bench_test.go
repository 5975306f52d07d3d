package rpc_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/rpcserver"
)

// BenchmarkForwardedRequest measures the gateway-to-service hop: a JSON
// request through NATS request/reply into an echo handler and back.
func BenchmarkForwardedRequest(b *testing.B) {
	client := serveEcho(b, "benchsvc", func(e *echo.Echo) {
		e.GET("/v1/ping", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) })
	})
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

// BenchmarkForwardedPage is BenchmarkForwardedRequest for a page of the
// API's size (17 KB, GET /v1/conversations at limit 50), one call at a
// time: the server's recorder and reply encoding copy every byte of it.
func BenchmarkForwardedPage(b *testing.B) {
	page := append(bytes.Repeat([]byte(`{"id":"0123456789abcdef0123456789abcdef"},`), 17*1024/42), '\n')
	client := serveEcho(b, "benchpage", func(e *echo.Echo) {
		e.GET("/v1/conversations", func(c echo.Context) error {
			return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, page)
		})
	})
	req := &rpcv1.Request{Method: http.MethodGet, Path: "/v1/conversations", RawQuery: "limit=50", WorkspaceId: "ws"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(ctx, "benchpage", rpc.EndpointAPI, req)
		if err != nil || resp.GetStatus() != http.StatusOK || len(resp.GetBody()) != len(page) {
			b.Fatalf("%v: status %d, %d bytes", err, resp.GetStatus(), len(resp.GetBody()))
		}
	}
}

// serveEcho serves the routes route adds as service's api endpoint and
// returns a client of it.
func serveEcho(b *testing.B, service string, route func(*echo.Echo)) *rpc.Client {
	env := testenv.New(b)
	log := env.Logger(b)
	e := httpx.NewEcho(log)
	route(e)
	rpcserver.Serve(b, env.NATS(b), env.RPCPrefix, service, log, map[string]http.Handler{rpc.EndpointAPI: e})
	return rpc.NewClient(env.NATS(b), env.RPCPrefix)
}
