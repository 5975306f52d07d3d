package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"gorm.io/gorm"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// harness is one dispatcher, wired by serve exactly as in production, on
// the test's own database, stream and rpc prefix.
type harness struct {
	t   *testing.T
	env *testenv.Env
	cfg svcconfig.Config
	rpc *rpc.Client
	js  jetstream.JetStream
	db  *gorm.DB
	// stop shuts the dispatcher down and waits until serve returned.
	stop func()
}

// start runs a dispatcher with private targets allowed (receivers are
// httptest servers on loopback), tiny retry delays and the given changes,
// in a fresh test environment.
func start(t *testing.T, mutate func(*svcconfig.Config), clock func() time.Time) *harness {
	t.Helper()
	return startOn(t, testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS)), mutate, clock)
}

// startOn runs a dispatcher in env, beside any already running there.
func startOn(t *testing.T, env *testenv.Env, mutate func(*svcconfig.Config), clock func() time.Time) *harness {
	t.Helper()
	return startWith(t, env, mutate, seams{clock: clock})
}

// startWith is startOn with every seam of serve.
func startWith(t *testing.T, env *testenv.Env, mutate func(*svcconfig.Config), w seams) *harness {
	t.Helper()
	cfg := svcconfig.Config{
		Connections:         env.Connections(),
		Addr:                ports.FreeAddr(t),
		AllowPrivateTargets: true,
		RetryDelays:         []time.Duration{5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond},
		AttemptTimeout:      3 * time.Second,
		PauseAfter:          20,
		DeliveryRetention:   336 * time.Hour,
		Consumer:            "webhook-dispatcher",
		Concurrency:         8,
		InHand:              256,
		WebhookConcurrency:  8,
		CircuitAfter:        5,
		CircuitCoolDown:     3 * time.Second,
		ReplayConcurrency:   4,
		MetricsInterval:     50 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	if w.clock == nil {
		w.clock = time.Now
	}
	bg := testenv.Serve(t, "dispatcher", func(ctx context.Context) error { return serve(ctx, cfg, env.Logger(t), w) })
	h := &harness{t: t, env: env, cfg: cfg, rpc: rpc.NewClient(env.NATS(t), env.RPCPrefix), js: env.JetStream(t), stop: bg.Stop}
	// This instance's own readiness first: another instance of the test
	// may have made the consumer and may answer the rpc already, while
	// this one is still migrating.
	bg.WaitReady("http://"+cfg.Addr, 20*time.Second)
	wait.For(t, 20*time.Second, "dispatcher ready", func() error {
		bg.Early()
		if _, err := h.js.Consumer(context.Background(), env.Stream.Name, cfg.Consumer); err != nil {
			return err
		}
		status, _ := h.do("", http.MethodGet, "/healthz-does-not-exist", nil)
		if status == http.StatusServiceUnavailable {
			return fmt.Errorf("rpc not serving")
		}
		return nil
	})
	h.db = env.DB(t, "dispatch", migrations.FS)
	return h
}

// do sends a request the way the gateway (/v1, "api") or parleyctl
// (/admin, "admin") does and returns the status and raw body.
func (h *harness) do(workspaceID, method, path string, body any) (int, []byte) {
	h.t.Helper()
	req := &rpcv1.Request{WorkspaceId: workspaceID, Method: method, RequestId: uuid.NewString()}
	req.Path, req.RawQuery, _ = strings.Cut(path, "?")
	switch b := body.(type) {
	case nil:
	case string:
		req.Body = []byte(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		req.Body = raw
	}
	if req.Body != nil {
		req.Headers = []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}}
	}
	endpoint := rpc.EndpointAPI
	if strings.HasPrefix(path, "/admin/") {
		endpoint = rpc.EndpointAdmin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := h.rpc.Do(ctx, rpc.ServiceDispatcher, endpoint, req)
	if err != nil {
		return http.StatusServiceUnavailable, []byte(err.Error())
	}
	return int(resp.GetStatus()), resp.GetBody()
}

// doJSON is do for a 2xx JSON answer, decoded into a map.
func (h *harness) doJSON(workspaceID, method, path string, body any, wantStatus int) map[string]any {
	h.t.Helper()
	status, raw := h.do(workspaceID, method, path, body)
	if status != wantStatus {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, status, raw, wantStatus)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		h.t.Fatalf("%s %s: body %q: %v", method, path, raw, err)
	}
	return out
}

// call is do for a 2xx answer, decoded strictly into the route's
// pkg/api/dispatcher body T: a field the answer carries and T lacks fails
// the test.
func call[T any](h *harness, workspaceID, method, path string, body any, wantStatus int) T {
	h.t.Helper()
	status, raw := h.do(workspaceID, method, path, body)
	if status != wantStatus {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, status, raw, wantStatus)
	}
	return apicheck.Body[T](h.t, raw)
}

// wantError checks an error answer: status, code, and a message that
// contains mention.
func (h *harness) wantError(workspaceID, method, path string, body any, status int, code, mention string) {
	h.t.Helper()
	got, raw := h.do(workspaceID, method, path, body)
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || got != status || e.Code != code || !strings.Contains(e.Message, mention) {
		h.t.Fatalf("%s %s = %d %s, want %d %s mentioning %q", method, path, got, raw, status, code, mention)
	}
}

// saveWebhook saves url for the workspace and returns the secret.
func (h *harness) saveWebhook(ws, url string) string {
	h.t.Helper()
	out := call[dispatcherapi.SavedWebhook](h, ws, http.MethodPut, "/v1/webhook", dispatcherapi.SaveWebhookRequest{URL: url}, http.StatusOK)
	if !strings.HasPrefix(out.Secret, "whsec_") {
		h.t.Fatalf("PUT /v1/webhook secret = %q", out.Secret)
	}
	return out.Secret
}

// publish publishes ev as its producer would and returns its stream
// sequence.
func (h *harness) publish(ev *eventsv1.Event) uint64 {
	h.t.Helper()
	return h.publishRaw(h.env.Stream.Subject(ev.GetWorkspaceId(), ev.GetType()), mustMarshal(h.t, ev), ev.GetId())
}

// publishRaw publishes data on subject, with msgID when it is set, and
// returns its stream sequence.
func (h *harness) publishRaw(subject string, data []byte, msgID string) uint64 {
	h.t.Helper()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := h.js.Publish(context.Background(), subject, data, opts...)
	if err != nil {
		h.t.Fatalf("publish: %v", err)
	}
	return ack.Sequence
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deliveries returns the workspace's delivery log (newest first).
func (h *harness) deliveries(ws string) []dispatcherapi.Delivery {
	h.t.Helper()
	return call[dispatcherapi.DeliveryPage](h, ws, http.MethodGet, "/v1/webhook/deliveries?limit=100", nil, http.StatusOK).Deliveries
}

// waitDelivery waits until the log shows delivery id with a final status.
func (h *harness) waitDelivery(ws, id string) dispatcherapi.Delivery {
	h.t.Helper()
	var found dispatcherapi.Delivery
	wait.For(h.t, 15*time.Second, "delivery "+id+" settled", func() error {
		for _, d := range h.deliveries(ws) {
			if d.ID == id && d.Status != dispatcherapi.DeliveryPending {
				found = d
				return nil
			}
		}
		return fmt.Errorf("not in the log yet")
	})
	return found
}

// is reports whether p is set to want: a nullable field of a body.
func is[T comparable](p *T, want T) bool { return p != nil && *p == want }

// text is *p, or "" for null.
func text(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// jsonOf is v as JSON, for a failure's message.
func jsonOf(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// consumerSettled waits until the consumer has acked (or terminated)
// every message up to stream sequence seq.
func (h *harness) consumerSettled(seq uint64) *jetstream.ConsumerInfo {
	h.t.Helper()
	var info *jetstream.ConsumerInfo
	wait.For(h.t, 15*time.Second, "consumer settled", func() error {
		c, err := h.js.Consumer(context.Background(), h.env.Stream.Name, h.cfg.Consumer)
		if err != nil {
			return err
		}
		info, err = c.Info(context.Background())
		if err != nil {
			return err
		}
		if info.AckFloor.Stream < seq || info.NumAckPending != 0 {
			return fmt.Errorf("ack floor %d, %d pending", info.AckFloor.Stream, info.NumAckPending)
		}
		return nil
	})
	return info
}

// messageEvent is a message.received event as messaging publishes it.
func messageEvent(ws string, withAttachment bool) *eventsv1.Event {
	at := time.Date(2026, 11, 22, 10, 0, 0, 123_000_000, time.UTC)
	msg := &eventsv1.Message{
		Id: uuid.NewString(), Text: "Hi! Do you ship to Darkhan?", Type: "text", ExternalId: "1042",
		CreatedAt: timestamppb.New(at.Add(-time.Second)),
	}
	if withAttachment {
		msg.Type = "image"
		msg.Attachment = &eventsv1.Attachment{Url: "https://cdn.example.com/p.jpg", Type: "image"}
	}
	return &eventsv1.Event{
		Id:          uuid.Must(uuid.NewV7()).String(), // as messaging makes them
		Type:        "message.received",
		WorkspaceId: ws,
		CreatedAt:   timestamppb.New(at),
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId:    ws,
			ConversationId: "3f1e9a52-5c4e-4bde-9a8e-2f0c6f1d7b11",
			Platform:       "telegram",
			Channel:        &eventsv1.Channel{Kind: "telegram", ExternalId: "parley_demo_bot"},
			Contact:        &eventsv1.Contact{Id: "8d7b1c2e-0f4a-4e59-b1a3-6c5d4e3f2a10", SenderId: "551234567", Name: "Bat-Erdene", ProfilePic: ""},
			Message:        msg,
		}},
	}
}

// webhookRow reads the stored webhook, for what the API does not show.
func (h *harness) webhookRow(ws string) (status string, failures int) {
	h.t.Helper()
	row := h.db.Raw(`SELECT status, consecutive_failures FROM dispatch.webhooks WHERE workspace_id = ?`, ws).Row()
	if err := row.Scan(&status, &failures); err != nil {
		h.t.Fatalf("read webhook: %v", err)
	}
	return status, failures
}

// history reads a delivery's stored attempt history.
func (h *harness) history(id string) []map[string]any {
	h.t.Helper()
	var raw string
	if err := h.db.Raw(`SELECT attempt_history FROM dispatch.deliveries WHERE id = ?`, id).Row().Scan(&raw); err != nil {
		h.t.Fatalf("read history: %v", err)
	}
	var out []map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		h.t.Fatal(err)
	}
	return out
}
