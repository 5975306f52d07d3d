package rpc_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
)

func TestAccountAccessors(t *testing.T) {
	t.Parallel()
	ctx := rpc.WithAccount(context.Background(), []string{"developer_api", "flows"}, []string{"flows_api"})
	tests := []struct {
		name string
		ctx  context.Context
		give string
		want bool
	}{
		{name: "module in plan", ctx: ctx, give: "flows", want: true},
		{name: "module not in plan", ctx: ctx, give: "flow_script"},
		{name: "feature name is not a module", ctx: ctx, give: "flows_api"},
		{name: "no account in ctx", ctx: context.Background(), give: "flows"},
		{name: "empty name", ctx: ctx, give: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := rpc.HasModule(tt.ctx, tt.give); got != tt.want {
				t.Fatalf("HasModule(%q) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
	if !rpc.HasFeature(ctx, "flows_api") || rpc.HasFeature(ctx, "flows") || rpc.HasFeature(context.Background(), "flows_api") {
		t.Fatal("HasFeature does not answer from the account's features alone")
	}
}

func TestForwardedRequestCarriesModulesAndFeatures(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	log := env.Logger(t)

	e := httpx.NewEcho(log)
	e.GET("/v1/account", func(c echo.Context) error {
		ctx := c.Request().Context()
		return c.JSON(http.StatusOK, map[string]bool{
			"flows":       rpc.HasModule(ctx, "flows"),
			"flow_script": rpc.HasModule(ctx, "flow_script"),
			"flows_api":   rpc.HasFeature(ctx, "flows_api"),
		})
	})
	srv, err := rpc.NewServer(env.NATS(t), env.RPCPrefix, "testsvc", "1.0.0", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := srv.Handle(rpc.EndpointAPI, e); err != nil {
		t.Fatal(err)
	}

	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	resp, err := client.Do(context.Background(), "testsvc", rpc.EndpointAPI, &rpcv1.Request{
		WorkspaceId: "ws_1", Method: http.MethodGet, Path: "/v1/account",
		Modules: []string{"developer_api", "flows"}, Features: []string{"flows_api"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.GetBody()), `{"flow_script":false,"flows":true,"flows_api":true}`+"\n"; got != want {
		t.Fatalf("handler saw %s, want %s", got, want)
	}

	// Admin calls carry no workspace, so nothing is granted.
	var out map[string]bool
	if err := client.CallJSON(context.Background(), "testsvc", rpc.EndpointAPI, "", http.MethodGet, "/v1/account", nil, &out); err != nil {
		t.Fatal(err)
	}
	if out["flows"] || out["flows_api"] {
		t.Fatalf("a call without an account saw %v", out)
	}
}
