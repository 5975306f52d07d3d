package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// startDispatcher starts another webhook-dispatcher (startExtra), which
// joins the suite's durable consumer; by /readyz its consumer is running.
func (s *suite) startDispatcher(t *testing.T, extra ...string) *proc {
	t.Helper()
	return s.startExtra(t, "webhook-dispatcher", "DISPATCHER_ADDR", extra...)
}

var deliveredMetric = regexp.MustCompile(`(?m)^parley_dispatcher_deliveries_total\{event="message\.received",outcome="delivered"\} (\d+)$`)

// delivered reads a webhook-dispatcher's delivered message.received
// counter from /metrics (-1 when /metrics does not answer).
func (p *proc) delivered() int {
	return int(metric(p.addr, deliveredMetric))
}

// metric reads the number re's first group captures on the /metrics page
// of the service at addr: 0 when re does not match, -1 when /metrics does
// not answer.
func metric(addr string, re *regexp.Regexp) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := re.FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	return n
}

// developer creates a workspace with the developer API, a per-minute limit
// high enough for polling, and an API key.
func (s *suite) developer(t testing.TB) (workspaceID, key string) {
	t.Helper()
	return s.workspaceWithKey(t, "Hooks", "developer_api")
}

// workspaceWithKey creates a workspace named prefix and a random suffix,
// with modules (comma-separated) and a per-minute limit of 100,000, and an
// API key of it.
func (s *suite) workspaceWithKey(t testing.TB, prefix, modules string) (workspaceID, key string) {
	t.Helper()
	return s.workspaceWithRate(t, prefix, modules, 100_000)
}

// workspaceWithRate is workspaceWithKey with a per-minute limit of its own.
func (s *suite) workspaceWithRate(t testing.TB, prefix, modules string, perMinute int) (workspaceID, key string) {
	t.Helper()
	var ws struct {
		Workspace struct {
			ID string `json:"id"`
		} `json:"workspace"`
	}
	s.ctl(t, &ws, "workspace", "create", "--name", prefix+" "+uuid.NewString()[:8], "--modules", modules, "--rate-per-minute", strconv.Itoa(perMinute))
	var k struct {
		Key string `json:"key"`
	}
	s.ctl(t, &k, "apikey", "create", "--workspace", ws.Workspace.ID)
	if ws.Workspace.ID == "" || k.Key == "" {
		t.Fatalf("workspace %+v, key %+v", ws, k)
	}
	return ws.Workspace.ID, k.Key
}

// ctlChannel is a channel as parleyctl prints it.
type ctlChannel struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	ExternalID string `json:"external_id"`
	Secret     string `json:"secret"`
}

// addChannel creates a channel in workspace ws with parleyctl (flags are
// --kind and what that kind needs) and, unless mode is "auto", sets its
// mode: the operator's part of onboarding, after developer.
func (s *suite) addChannel(t testing.TB, ws, mode string, flags ...string) ctlChannel {
	t.Helper()
	var ch struct {
		Channel ctlChannel `json:"channel"`
	}
	s.ctl(t, &ch, append([]string{"channel", "create", "--workspace", ws}, flags...)...)
	if ch.Channel.ID == "" {
		t.Fatalf("channel create %v: %+v", flags, ch)
	}
	if mode != "auto" {
		s.ctl(t, nil, "channel", "set-mode", "--channel", ch.Channel.ID, "--mode", mode)
	}
	return ch.Channel
}

// saveWebhook saves url through the gateway and returns the secret.
func (s *suite) saveWebhook(t *testing.T, key, url string) string {
	t.Helper()
	status, _, out := s.api(t, key, http.MethodPut, "/v1/webhook", map[string]string{"url": url})
	secret, _ := out["secret"].(string)
	if status != http.StatusOK || secret == "" {
		t.Fatalf("PUT /v1/webhook %s = %d %v", url, status, out)
	}
	return secret
}

// webhookStatus is the webhook's status as GET /v1/webhook shows it.
func (s *suite) webhookStatus(t *testing.T, key string) string {
	t.Helper()
	status, _, out := s.api(t, key, http.MethodGet, "/v1/webhook", nil)
	w, _ := out["webhook"].(map[string]any)
	if status != http.StatusOK || w == nil {
		t.Fatalf("GET /v1/webhook = %d %v", status, out)
	}
	st, _ := w["status"].(string)
	return st
}

// deliveries is GET /v1/webhook/deliveries?<query> through the gateway.
func (s *suite) deliveries(t *testing.T, key, query string) []map[string]any {
	t.Helper()
	status, _, out := s.api(t, key, http.MethodGet, "/v1/webhook/deliveries?"+query, nil)
	list, ok := out["deliveries"].([]any)
	if status != http.StatusOK || !ok {
		t.Fatalf("GET /v1/webhook/deliveries?%s = %d %v", query, status, out)
	}
	ds := make([]map[string]any, len(list))
	for i, d := range list {
		ds[i], _ = d.(map[string]any)
	}
	return ds
}

// settledDelivery waits until the log shows delivery id with an outcome.
func (s *suite) settledDelivery(t *testing.T, key, id string) map[string]any {
	t.Helper()
	var found map[string]any
	wait.For(t, 20*time.Second, "delivery "+id+" settled", func() error {
		for _, d := range s.deliveries(t, key, "limit=100") {
			if d["id"] == id && d["status"] != "pending" {
				found = d
				return nil
			}
		}
		return fmt.Errorf("no outcome in the log")
	})
	return found
}

// messageReceived is a customer's message as messaging's relay publishes
// it: a message.received event with the channel, contact and message.
func messageReceived(workspaceID string, i int) *eventsv1.Event {
	now := time.Now().UTC()
	return &eventsv1.Event{
		Id:          uuid.NewString(),
		Type:        "message.received",
		WorkspaceId: workspaceID,
		CreatedAt:   timestamppb.New(now),
		Data: &eventsv1.Event_MessageReceived{MessageReceived: &eventsv1.MessageReceived{
			WorkspaceId:    workspaceID,
			ConversationId: uuid.NewString(),
			Platform:       "telegram",
			Channel:        &eventsv1.Channel{Kind: "telegram", ExternalId: "parley_shop_bot"},
			Contact:        &eventsv1.Contact{Id: uuid.NewString(), SenderId: strconv.Itoa(700000 + i), Name: "Customer " + strconv.Itoa(i)},
			Message: &eventsv1.Message{
				Id: uuid.NewString(), Text: "Order #" + strconv.Itoa(i) + ": is it shipped? Сайн байна уу", Type: "text",
				ExternalId: strconv.Itoa(i), CreatedAt: timestamppb.New(now.Add(-time.Second)),
			},
		}},
	}
}

// publishEvents publishes evs to the suite's EVENTS stream the way
// messaging's relay does (subject <prefix>.<workspace>.<event>, protobuf
// body, Nats-Msg-Id = event id), asynchronously, and waits for every ack.
func (s *suite) publishEvents(t *testing.T, evs ...*eventsv1.Event) {
	t.Helper()
	nc, err := nats.Connect(s.env.NATSURL)
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	if err != nil {
		t.Fatal(err)
	}
	futures := make([]jetstream.PubAckFuture, 0, len(evs))
	for _, ev := range evs {
		body, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(s.env.Stream.Subject(ev.GetWorkspaceId(), ev.GetType()))
		msg.Data = body
		msg.Header.Set(jetstream.MsgIDHeader, ev.GetId())
		// With 1,024 publishes unacknowledged the next one waits for a
		// free place; the default wait (200 ms) is shorter than acks take
		// on a loaded machine, and its end fails the publish.
		f, err := js.PublishMsgAsync(msg, jetstream.WithExpectStream(s.env.Stream.Name), jetstream.WithStallWait(30*time.Second))
		if err != nil {
			t.Fatalf("publish event %s: %v", ev.GetId(), err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatalf("%d publishes not acknowledged within 60 s", js.PublishAsyncPending())
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("publish event %s: %v", evs[i].GetId(), err)
		}
	}
}

// logRow is one row of the dispatcher's delivery log as stored.
type logRow struct {
	Status   string
	Attempts int
}

// deliveryLog reads the workspace's rows of dispatch.deliveries, by id.
func (s *suite) deliveryLog(t *testing.T, workspaceID string) map[string]logRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.env.DatabaseURL)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT id::text, status, attempts FROM dispatch.deliveries WHERE workspace_id = $1`, workspaceID)
	if err != nil {
		t.Fatalf("read the delivery log: %v", err)
	}
	out := map[string]logRow{}
	for rows.Next() {
		var id string
		var r logRow
		if err := rows.Scan(&id, &r.Status, &r.Attempts); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[id]; dup {
			t.Errorf("delivery log: two rows for %s", id)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkHook verifies a request the way docs/webhooks.md "Verifying a
// delivery" tells receivers to (Request.Verify, the Go client's
// webhook.VerifyAt), the timestamp checked
// against when it arrived; and
// the envelope's id is X-Service-Delivery.
func checkHook(h receiver.Request, secret string) error {
	if err := h.Verify(secret, h.At); err != nil {
		return err
	}
	var env struct {
		ID    string `json:"id"`
		Event string `json:"event"`
	}
	if err := json.Unmarshal(h.Body, &env); err != nil || env.ID != h.Delivery() || env.Event != h.Event() {
		return fmt.Errorf("envelope %.80s does not match X-Service-Delivery %s / X-Service-Event %s", bytes.TrimSpace(h.Body), h.Delivery(), h.Event())
	}
	return nil
}
