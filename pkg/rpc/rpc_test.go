package rpc_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/rpcserver"
)

func TestForwardedRequestReachesHandlerWithWorkspace(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	log := env.Logger(t)
	nc := env.NATS(t)

	e := httpx.NewEcho(log)
	e.POST("/v1/echo", func(c echo.Context) error {
		var in struct {
			Text string `json:"text"`
		}
		if err := httpx.BindJSON(c, &in); err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, map[string]string{
			"workspace": rpc.WorkspaceID(c.Request().Context()),
			"text":      in.Text,
			"q":         c.QueryParam("q"),
		})
	})
	e.GET("/v1/fail", func(c echo.Context) error { return errs.NotFound("thing_not_found", "no such thing") })
	e.GET("/v1/fail-extra", func(c echo.Context) error {
		return errs.New(http.StatusBadRequest, "invalid_request", "bad node").WithExtra("node_id", "ask").WithExtra("field", "next")
	})
	e.GET("/v1/fail-bare", func(c echo.Context) error { return c.String(http.StatusBadGateway, "upstream fell over") })

	serveAPI(t, nc, env.RPCPrefix, "testsvc", log, e)

	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	var out map[string]string
	if err := client.CallJSON(context.Background(), "testsvc", rpc.EndpointAPI, "ws_1", http.MethodPost, "/v1/echo?q=1", map[string]string{"text": "hi"}, &out); err != nil {
		t.Fatalf("call: %v", err)
	}
	if out["workspace"] != "ws_1" || out["text"] != "hi" || out["q"] != "1" {
		t.Fatalf("handler saw %v", out)
	}

	err := client.CallJSON(context.Background(), "testsvc", rpc.EndpointAPI, "ws_1", http.MethodGet, "/v1/fail", nil, nil)
	e2, ok := errs.As(err)
	if !ok || e2.Status != http.StatusNotFound || e2.Code != "thing_not_found" {
		t.Fatalf("error = %v, want 404 thing_not_found", err)
	}
	if e2.Message != "no such thing" || e2.Extra != nil {
		t.Fatalf("error = %#v, want its message and no extra fields", e2)
	}
	// The body's further fields come back as Extra.
	err = client.CallJSON(context.Background(), "testsvc", rpc.EndpointAPI, "ws_1", http.MethodGet, "/v1/fail-extra", nil, nil)
	if e, ok := errs.As(err); !ok || e.Status != http.StatusBadRequest || e.Code != "invalid_request" || e.Message != "bad node" ||
		len(e.Extra) != 2 || e.Extra["node_id"] != "ask" || e.Extra["field"] != "next" {
		t.Fatalf("error with extra fields = %#v", err)
	}
	// A body that is no error object is internal_error carrying the body.
	err = client.CallJSON(context.Background(), "testsvc", rpc.EndpointAPI, "ws_1", http.MethodGet, "/v1/fail-bare", nil, nil)
	if e, ok := errs.As(err); !ok || e.Status != http.StatusBadGateway || e.Code != errs.CodeInternal || e.Message != "upstream fell over" {
		t.Fatalf("bare error = %#v", err)
	}

	err = client.CallJSON(context.Background(), "nosuchsvc", rpc.EndpointAPI, "", http.MethodGet, "/", nil, nil)
	e3, ok := errs.As(err)
	if !ok || e3.Status != http.StatusServiceUnavailable || e3.Code != errs.CodeServiceUnavailable {
		t.Fatalf("no responders error = %v, want 503 service_unavailable", err)
	}
}

// serveAPI registers an instance of service on nc with h as its API
// endpoint, stopped when the test ends.
func serveAPI(t *testing.T, nc *nats.Conn, prefix, service string, log *zap.Logger, h http.Handler) *rpc.Server {
	t.Helper()
	return rpcserver.Serve(t, nc, prefix, service, log, map[string]http.Handler{rpc.EndpointAPI: h})
}

// Instances of one service share its requests (docs/architecture.md: each
// service is a NATS micro service in a queue group): every request is
// handled by exactly one of them, and each takes a part.
func TestInstancesShareTheRequests(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	log := env.Logger(t)
	var handled [2]atomic.Int64
	for i := range handled {
		e := httpx.NewEcho(log)
		e.GET("/v1/who", func(c echo.Context) error {
			handled[i].Add(1)
			return c.NoContent(http.StatusNoContent)
		})
		serveAPI(t, env.NATS(t), env.RPCPrefix, "sharedsvc", log, e)
	}
	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	const calls = 40
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			if err := client.CallJSON(context.Background(), "sharedsvc", rpc.EndpointAPI, "ws_1", http.MethodGet, "/v1/who", nil, nil); err != nil {
				t.Errorf("call: %v", err)
			}
		})
	}
	wg.Wait()
	a, b := handled[0].Load(), handled[1].Load()
	if a+b != calls || a == 0 || b == 0 {
		t.Fatalf("instances handled %d and %d of %d requests; want each request once, shared by both", a, b, calls)
	}
}
