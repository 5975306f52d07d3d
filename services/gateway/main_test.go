package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/services/gateway/internal/adapters/observe"
)

// TestRunServesAndStops starts the gateway as main does, from the
// environment, drives it through its admin endpoint and public port, and
// stops it. Not parallel: it sets process environment variables.
func TestRunServesAndStops(t *testing.T) {
	// A fresh, empty database (no testenv.Migrated), so run migrates it as
	// in production.
	env := testenv.New(t)
	env.Setenv(t)
	addr := ports.FreeAddr(t)
	t.Setenv("GATEWAY_ADDR", addr)
	t.Setenv("RATE_LIMIT_PER_MINUTE", "2")

	bg := testenv.Serve(t, "gateway", func(ctx context.Context) error { return run(ctx, env.Logger(t)) })
	base := "http://" + addr
	bg.WaitReady(base, 20*time.Second)
	ctx := context.Background()

	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	var ws struct {
		Workspace struct {
			ID string `json:"id"`
		} `json:"workspace"`
	}
	if err := client.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodPost, "/admin/workspaces", map[string]any{"name": "Run"}, &ws); err != nil {
		t.Fatal(err)
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := client.CallJSON(ctx, rpc.ServiceGateway, rpc.EndpointAdmin, "", http.MethodPost, "/admin/workspaces/"+ws.Workspace.ID+"/api-keys", nil, &key); err != nil {
		t.Fatal(err)
	}

	// No messaging runs here: authenticated, limited, then 503.
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/channels", nil)
	req.Header.Set("Authorization", "Bearer "+key.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || body["code"] != "service_unavailable" || resp.Header.Get("RateLimit-Limit") != "2" {
		t.Fatalf("GET /v1/channels = %d %v, RateLimit-Limit %q", resp.StatusCode, body, resp.Header.Get("RateLimit-Limit"))
	}

	bg.Stop()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after stop")
	}
}

// TestMetricsAreTheDocumentedOnes: what main registers is what
// docs/operations.md "Metrics" lists, names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "gateway", func(reg prometheus.Registerer) { observe.New(reg) })
}
