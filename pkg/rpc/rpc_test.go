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

	err = client.CallJSON(context.Background(), "nosuchsvc", rpc.EndpointAPI, "", http.MethodGet, "/", nil, nil)
	e3, ok := errs.As(err)
	if !ok || e3.Status != http.StatusServiceUnavailable || e3.Code != errs.CodeServiceUnavailable {
		t.Fatalf("no responders error = %v, want 503 service_unavailable", err)
	}
}
