package rpc_test

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/errs"
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

// TestCallRawCarriesBodyModulesAndFeatures: a request built by the caller
// arrives with its body byte for byte, as JSON, and the handler reads the
// modules and features it carries.
func TestCallRawCarriesBodyModulesAndFeatures(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	log := env.Logger(t)

	e := httpx.NewEcho(log)
	e.POST("/v1/account", func(c echo.Context) error {
		ctx := c.Request().Context()
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{
			"body":         string(body),
			"content_type": c.Request().Header.Get("Content-Type"),
			"q":            c.QueryParam("q"),
			"flows":        rpc.HasModule(ctx, "flows"),
			"flow_script":  rpc.HasModule(ctx, "flow_script"),
			"flows_api":    rpc.HasFeature(ctx, "flows_api"),
		})
	})
	serveAPI(t, env.NATS(t), env.RPCPrefix, "testsvc", log, e)

	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	doc := "{ \"b\": 1,\n  \"a\" : [ ] }"
	req := &rpcv1.Request{
		WorkspaceId: "ws_1", Method: http.MethodPost, Path: "/v1/account", RawQuery: "q=1", Body: []byte(doc),
		Modules: []string{"developer_api", "flows"}, Features: []string{"flows_api"},
	}
	var got map[string]any
	if err := client.CallRaw(context.Background(), "testsvc", rpc.EndpointAPI, req, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"body": doc, "content_type": "application/json", "q": "1", "flows": true, "flow_script": false, "flows_api": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("handler saw %v, want %v", got, want)
	}
	if len(req.GetHeaders()) != 0 {
		t.Fatalf("CallRaw changed the caller's request: %v", req.GetHeaders())
	}

	// Admin calls carry no workspace, so nothing is granted.
	if err := client.CallJSON(context.Background(), "testsvc", rpc.EndpointAPI, "", http.MethodPost, "/v1/account", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got["flows"] != false || got["flows_api"] != false || got["content_type"] != "" {
		t.Fatalf("a call without an account or body saw %v", got)
	}
}

// TestAuthenticatedWorkspace: a request the gateway authenticated names
// its workspace as ids are compared; one without a workspace id (none, or
// a string that is no id) is 401 unauthorized, as every service answers it.
func TestAuthenticatedWorkspace(t *testing.T) {
	t.Parallel()
	ws, err := rpc.AuthenticatedWorkspace(rpc.WithWorkspace(context.Background(), "5F1C0B3A-9D2E-4B7A-8C6D-0E1F2A3B4C5D"))
	if err != nil || ws != "5f1c0b3a-9d2e-4b7a-8c6d-0e1f2a3b4c5d" {
		t.Errorf("authenticated: %q, %v", ws, err)
	}
	for _, ctx := range []context.Context{context.Background(), rpc.WithWorkspace(context.Background(), "urn:uuid:5f1c0b3a-9d2e-4b7a-8c6d-0e1f2a3b4c5d")} {
		_, err := rpc.AuthenticatedWorkspace(ctx)
		if e, ok := errs.As(err); !ok || e.Status != http.StatusUnauthorized || e.Code != errs.CodeUnauthorized {
			t.Errorf("no workspace: %v", err)
		}
	}
}
