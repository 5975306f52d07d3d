package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/observe"
)

// TestRunServesAndStops runs the service as main does, from the
// environment, and drives it over real HTTP and NATS.
func TestRunServesAndStops(t *testing.T) {
	// A fresh, empty database (no testenv.Migrated), so run migrates it as
	// in production.
	env := testenv.New(t)
	_, tgURL := newTelegram(t)
	addr := ports.FreeAddr(t)
	env.Setenv(t)
	t.Setenv("MESSAGING_ADDR", addr)
	t.Setenv("TELEGRAM_API_BASE", tgURL)

	bg := testenv.Serve(t, "messaging", func(ctx context.Context) error { return run(ctx, env.Logger(t)) })
	base := "http://" + addr
	bg.WaitReady(base, 15*time.Second)
	ctx := context.Background()
	var ready struct {
		Ready     bool
		Checks    map[string]string
		JetStream []natsx.Placement
	}
	getJSON(t, base+"/readyz", &ready)
	if !ready.Ready || ready.Checks["postgres"] != "ok" || ready.Checks["nats"] != "ok" {
		t.Fatalf("readyz = %+v", ready)
	}
	// It shows where the streams it ensured are.
	if js := ready.JetStream; len(js) != 2 || js[0].Stream != env.Stream.Name || js[1].Stream != natsx.ChatStream(env.Stream).Name ||
		js[0].Replicas != 1 || js[0].Leader == "" || js[1].Replicas != 1 {
		t.Fatalf("readyz shows the streams as %+v", js)
	}
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v", err)
	}

	// parleyctl creates an external channel; Telegram delivers; the gateway
	// sends a reply.
	client := rpc.NewClient(env.NATS(t), env.RPCPrefix)
	ws := uuid.NewString()
	var created messagingapi.AdminChannelAnswer
	if err := client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAdmin, "", http.MethodPost, "/admin/channels",
		map[string]any{"workspace_id": ws, "kind": "telegram", "token": "42:AAH-run"}, &created); err != nil {
		t.Fatal(err)
	}
	if err := client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAdmin, "", http.MethodPatch, "/admin/channels/"+created.Channel.ID,
		map[string]any{"ai_mode": "external"}, nil); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/ingress/telegram/"+created.Channel.ID,
		strings.NewReader(tgUpdate{UpdateID: 1, MessageID: 1, FromID: 3, First: "Rin", Date: t0.Unix(), Text: "hi"}.JSON()))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", created.Channel.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ingress: %v %v", err, resp)
	}
	var convs messagingapi.ConversationPage
	if err := client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAPI, ws, http.MethodGet, "/v1/conversations", nil, &convs); err != nil || len(convs.Conversations) != 1 {
		t.Fatalf("conversations: %v %+v", err, convs)
	}
	if err := client.CallJSON(ctx, rpc.ServiceMessaging, rpc.EndpointAPI, ws, http.MethodPost, "/v1/messages",
		map[string]any{"conversation_id": convs.Conversations[0].ID, "text": "hello"}, nil); err != nil {
		t.Fatal(err)
	}
	js := env.JetStream(t)
	wait.Until(t, 5*time.Second, "the event", func() bool { return len(streamMessages(t, js, env.Stream.Name)) == 1 })

	// The relay counts what it published once the stream has acknowledged
	// it, so the count may follow the event by a moment.
	wait.For(t, 5*time.Second, "the metrics", func() error {
		metrics := getText(t, base+"/metrics")
		for _, want := range []string{
			`parley_messaging_ingress_updates_total{outcome="stored",platform="telegram"} 1`,
			`parley_messaging_sends_total{outcome="sent",platform="telegram"} 1`,
			`parley_messaging_outbox_published_total 1`,
			`parley_messaging_outbox_backlog`,
			`parley_messaging_webchat_streams 0`,
			`go_goroutines`,
		} {
			if !strings.Contains(metrics, want) {
				return fmt.Errorf("/metrics lacks %s", want)
			}
		}
		return nil
	})

	bg.Stop()
}

func TestRunFailsFastOnBadConfig(t *testing.T) {
	t.Setenv("TELEGRAM_API_BASE", "ftp://telegram")
	err := run(context.Background(), zaptest.NewLogger(t))
	if err == nil || !strings.Contains(err.Error(), "TELEGRAM_API_BASE") {
		t.Fatalf("run = %v", err)
	}
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, url)), out); err != nil {
		t.Fatal(err)
	}
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestMetricsAreTheDocumentedOnes: what main registers is what
// docs/operations.md "Metrics" lists, names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "messaging", func(reg prometheus.Registerer) { observe.New(zap.NewNop(), reg, nil) })
}
