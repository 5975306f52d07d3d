package rpc_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
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

	srv, err := rpc.NewServer(nc, env.RPCPrefix, "testsvc", "1.0.0", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := srv.Handle(rpc.EndpointAPI, e); err != nil {
		t.Fatal(err)
	}

	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	var out map[string]string
	if err := client.CallJSON(context.Background(), "testsvc", rpc.EndpointAPI, "ws_1", http.MethodPost, "/v1/echo?q=1", map[string]string{"text": "hi"}, &out); err != nil {
		t.Fatalf("call: %v", err)
	}
	if out["workspace"] != "ws_1" || out["text"] != "hi" || out["q"] != "1" {
		t.Fatalf("handler saw %v", out)
	}

	err = client.CallJSON(context.Background(), "testsvc", rpc.EndpointAPI, "ws_1", http.MethodGet, "/v1/fail", nil, nil)
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
