package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/adminclient"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/messaging/internal/config"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// harness is a messaging service started by serve, as main starts it, on
// the test's own database, Redis prefix, stream and rpc subjects, and
// driven the way the gateway (rpc "api"), parleyctl (rpc "admin"),
// Telegram and Meta (HTTP ingress) and the widget (HTTP) drive it.
type harness struct {
	*instance
	env *testenv.Env
	cfg svcconfig.Config
	// db reads messaging's tables for assertions.
	db     *gorm.DB
	client *rpc.Client
	// js reads the streams messaging publishes to, on the service's NATS.
	js jetstream.JetStream
	tg *telegramfake.Server
	// tgTokens maps a channel id to its bot token, for assertions.
	tgTokens sync.Map
}

type harnessOption func(*svcconfig.Config)

func withNATS(url string) harnessOption {
	return func(c *svcconfig.Config) { c.NATSURL = url }
}

func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	tg, tgURL := newTelegram(t)
	cfg := testConfig(t, env, tgURL)
	for _, o := range opts {
		o(&cfg)
	}
	// The gateway's and parleyctl's side: a connection of their own to
	// the NATS server the service uses.
	nc, err := natsx.Connect(context.Background(), cfg.Connections, "messaging-test", zap.NewNop())
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return &harness{
		instance: startInstance(t, env, cfg),
		env:      env, cfg: cfg, db: env.DB(t, adapters.Schema, migrations.FS), tg: tg,
		client: rpc.NewClient(nc, cfg.RPCSubjectPrefix), js: js,
	}
}

// testConfig is messaging's configuration in env, its Bot API at tgURL,
// listening on a free address, with the bounds the tests expect unless
// they change them.
func testConfig(t *testing.T, env *testenv.Env, tgURL string) svcconfig.Config {
	return svcconfig.Config{
		Connections:           env.Connections(),
		Addr:                  ports.FreeAddr(t),
		TelegramAPIBase:       tgURL,
		MetaGraphAPIBase:      "http://127.0.0.1:9", // discard port: no Meta here unless a test sets one
		MessagingWindow:       24 * time.Hour,
		PrivateReplyWindow:    7 * 24 * time.Hour,
		PrivateReplyDailyCap:  200,
		PlatformTimeout:       5 * time.Second,
		IdempotencyTTL:        24 * time.Hour,
		IdempotencyStuckAfter: 5 * time.Minute,
		OutboxPollInterval:    200 * time.Millisecond,
		OutboxSweepAge:        time.Second,
		OutboxPublishTimeout:  time.Second,

		IngressDedupeRetention: 72 * time.Hour,

		SSEPingInterval:          15 * time.Second,
		WebchatMessagesPerMinute: 30,
		WebchatMaxStreams:        100,
		WebchatStreamsPerVisitor: 5,
		WebchatFrameAncestors:    "*",
		// Every widget call of a test comes from 127.0.0.1: the address
		// bounds are wide unless a test narrows them.
		WebchatAddressMessagesPerMinute: 1000,
		WebchatSessionsPerMinute:        1000,
		WebchatStreamsPerAddress:        1000,
		WebchatStreamsPerChannel:        1000,
		WebchatStreamLease:              30 * time.Second,
		WebchatTokenTTL:                 time.Hour,
	}
}

// instance is one running messaging, as a process of its own would be:
// its public listener at base, its rpc endpoints in the queue group of
// its configuration's prefix.
type instance struct {
	t    testing.TB
	base string
	bg   *testenv.Background
}

// startInstance serves messaging with cfg in env until the test ends, and
// waits until it is ready.
func startInstance(t testing.TB, env *testenv.Env, cfg svcconfig.Config) *instance {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	bg := testenv.Serve(t, "messaging", func(ctx context.Context) error { return serve(ctx, cfg, env.Logger(t), seams{}) })
	in := &instance{t: t, base: "http://" + cfg.Addr, bg: bg}
	bg.WaitReady(in.base, 20*time.Second)
	return in
}

// stop shuts the instance down as SIGTERM does and waits until it has.
func (in *instance) stop() { in.bg.Stop() }

// ready is whether the instance's /readyz answers 200: all its
// connections, NATS among them, work.
func (in *instance) ready() bool {
	resp, err := http.Get(in.base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// reply is an answer of the public listener.
type reply struct {
	Code   int
	Header http.Header
	Body   *bytes.Buffer
}

// post posts body to path on the public listener with header.
func (in *instance) post(path, body string, header map[string]string) reply {
	in.t.Helper()
	req, err := http.NewRequest(http.MethodPost, in.base+path, strings.NewReader(body))
	if err != nil {
		in.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return in.do(req)
}

// get gets path from the public listener.
func (in *instance) get(path string) reply {
	in.t.Helper()
	req, err := http.NewRequest(http.MethodGet, in.base+path, nil)
	if err != nil {
		in.t.Fatal(err)
	}
	return in.do(req)
}

func (in *instance) do(req *http.Request) reply {
	in.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		in.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	return reply{Code: resp.StatusCode, Header: resp.Header, Body: bytes.NewBuffer(raw)}
}

// metric sums the instance's series of the counter or gauge name, as its
// /metrics shows them, over those whose labels include labels (name,
// value pairs).
func (in *instance) metric(name string, labels ...string) float64 {
	in.t.Helper()
	resp, err := http.Get(in.base + "/metrics")
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		in.t.Fatalf("/metrics: %v", err)
	}
	var sum float64
	for _, m := range families[name].GetMetric() {
		if hasLabels(m, labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if have[pairs[i]] != pairs[i+1] {
			return false
		}
	}
	return true
}

// streams is the widget streams the instance holds.
func (in *instance) streams() int {
	return int(in.metric("parley_messaging_webchat_streams"))
}

// --- parleyctl's side: admin calls ---

func (h *harness) admin(method, path string, in, out any) error {
	h.t.Helper()
	return h.client.CallJSON(context.Background(), rpc.ServiceMessaging, rpc.EndpointAdmin, "", method, path, in, strictly(out))
}

// ops is pkg/adminclient on the harness's connection, as the flow-runner
// and the console call messaging's admin routes, its answers decoded
// strictly.
func (h *harness) ops() *adminclient.Client {
	return adminclient.New(strictCaller{h.client})
}

// strictCaller is an rpc client whose JSON answers are decoded strictly.
type strictCaller struct{ *rpc.Client }

func (c strictCaller) CallJSON(ctx context.Context, service, endpoint, workspaceID, method, path string, in, out any) error {
	return c.Client.CallJSON(ctx, service, endpoint, workspaceID, method, path, in, strictly(out))
}

// strictly has a 2xx answer decoded into out only when it has no field
// out's type lacks (apicheck.DecodeStrict): the bodies the tests read are
// pkg/api/messaging's, field for field.
func strictly(out any) any {
	if out == nil {
		return nil
	}
	return &strictBody{out: out}
}

type strictBody struct{ out any }

func (s *strictBody) UnmarshalJSON(raw []byte) error { return apicheck.DecodeStrict(raw, s.out) }

// telegramChannel creates a telegram channel in ws and sets its mode.
func (h *harness) telegramChannel(ws, mode string) messagingapi.AdminChannel {
	h.t.Helper()
	var out messagingapi.AdminChannelAnswer
	token := fmt.Sprintf("%d:AAH-%s", 100000+botIDs.Add(1), strings.ReplaceAll(uuid.NewString(), "-", ""))
	if err := h.admin(http.MethodPost, "/admin/channels", map[string]any{"workspace_id": ws, "kind": "telegram", "token": token}, &out); err != nil {
		h.t.Fatalf("create channel: %v", err)
	}
	if mode != "auto" {
		h.setMode(out.Channel.ID, mode)
		out.Channel.AIMode = mode
	}
	h.tgTokens.Store(out.Channel.ID, token)
	return out.Channel
}

// botToken is the bot token of a channel telegramChannel created.
func (h *harness) botToken(channelID string) string {
	token, _ := h.tgTokens.Load(channelID)
	s, _ := token.(string)
	return s
}

func (h *harness) setMode(channelID, mode string) {
	h.t.Helper()
	if err := h.admin(http.MethodPatch, "/admin/channels/"+channelID, map[string]any{"ai_mode": mode}, nil); err != nil {
		h.t.Fatalf("set mode: %v", err)
	}
}

// botIDs makes each test channel's bot id (its external_id) distinct.
var botIDs atomic.Int64

// --- Telegram's side: webhook updates ---

// postUpdate posts body to the channel's ingress as Telegram does.
func (h *harness) postUpdate(channelID, secret, body string) reply {
	h.t.Helper()
	header := map[string]string{}
	if secret != "" {
		header["X-Telegram-Bot-Api-Secret-Token"] = secret
	}
	return h.post("/ingress/telegram/"+channelID, body, header)
}

// deliver posts a text message update and requires 200.
func (h *harness) deliver(ch messagingapi.AdminChannel, u tgUpdate) {
	h.t.Helper()
	rec := h.postUpdate(ch.ID, ch.Secret, u.JSON())
	if rec.Code != http.StatusOK {
		h.t.Fatalf("ingress: %d %s", rec.Code, rec.Body)
	}
}

// tgUpdate is a private-chat text message, rendered as Telegram's JSON.
type tgUpdate struct {
	UpdateID  int64
	MessageID int64
	FromID    int64
	First     string
	Last      string
	Date      int64
	Text      string
}

func (u tgUpdate) JSON() string {
	from := map[string]any{"id": u.FromID, "is_bot": false, "first_name": u.First, "language_code": "en"}
	chat := map[string]any{"id": u.FromID, "first_name": u.First, "type": "private"}
	if u.Last != "" {
		from["last_name"] = u.Last
		chat["last_name"] = u.Last
	}
	b, _ := json.Marshal(map[string]any{
		"update_id": u.UpdateID,
		"message": map[string]any{
			"message_id": u.MessageID,
			"from":       from,
			"chat":       chat,
			"date":       u.Date,
			"text":       u.Text,
		},
	})
	return string(b)
}

// --- the gateway's side: the api endpoint ---

// api calls the api endpoint as the gateway does for workspace ws.
func (h *harness) api(ws, method, path string, in, out any) error {
	h.t.Helper()
	return h.client.CallJSON(context.Background(), rpc.ServiceMessaging, rpc.EndpointAPI, ws, method, path, in, strictly(out))
}

// apiRaw sends a raw body and returns status and body.
func (h *harness) apiRaw(ws, method, path, body string) (int, []byte) {
	h.t.Helper()
	req := &rpcv1.Request{WorkspaceId: ws, Method: method, Body: []byte(body),
		Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}}}
	req.Path, req.RawQuery, _ = strings.Cut(path, "?")
	resp, err := h.client.Do(context.Background(), rpc.ServiceMessaging, rpc.EndpointAPI, req)
	if err != nil {
		h.t.Fatalf("rpc: %v", err)
	}
	return int(resp.GetStatus()), resp.GetBody()
}

func wantErr(t *testing.T, err error, status int, code, messagePart string) {
	t.Helper()
	e, ok := errs.As(err)
	if !ok {
		t.Fatalf("error = %v, want %d %s", err, status, code)
	}
	if e.Status != status || e.Code != code || !strings.Contains(e.Message, messagePart) {
		t.Fatalf("error = %d %s %q, want %d %s containing %q", e.Status, e.Code, e.Message, status, code, messagePart)
	}
}

func (h *harness) conversations(ws, query string) messagingapi.ConversationPage {
	h.t.Helper()
	var out messagingapi.ConversationPage
	if err := h.api(ws, http.MethodGet, "/v1/conversations"+query, nil, &out); err != nil {
		h.t.Fatalf("list conversations: %v", err)
	}
	return out
}

func (h *harness) messages(ws, convID, query string) messagingapi.MessagePage {
	h.t.Helper()
	var out messagingapi.MessagePage
	if err := h.api(ws, http.MethodGet, "/v1/conversations/"+convID+"/messages"+query, nil, &out); err != nil {
		h.t.Fatalf("list messages: %v", err)
	}
	return out
}

// count returns the rows of a messaging table matching where.
func (h *harness) count(table, where string, args ...any) int64 {
	h.t.Helper()
	var n int64
	q := "SELECT count(*) FROM messaging." + table
	if where != "" {
		q += " WHERE " + where
	}
	if err := h.db.Raw(q, args...).Scan(&n).Error; err != nil {
		h.t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// writtenEvent is an event or chat turn messaging committed to its outbox.
type writtenEvent struct {
	subject string
	payload []byte
}

// written returns every event and chat turn messaging committed: what the
// events and chat streams hold, in their order, then the outbox rows not
// yet published. The rows are read first: a row is deleted only once its
// stream has it, so none falls between the two reads, and one seen in
// both (published, not yet deleted) counts once.
func (h *harness) written() []writtenEvent {
	h.t.Helper()
	var rows []struct {
		EventID string
		Subject string
		Payload []byte
	}
	if err := h.db.Raw(`SELECT event_id::text AS event_id, subject, payload FROM messaging.outbox ORDER BY seq`).Scan(&rows).Error; err != nil {
		h.t.Fatalf("read the outbox: %v", err)
	}
	seen := map[string]bool{}
	var out []writtenEvent
	for _, stream := range []string{h.env.Stream.Name, natsx.ChatStream(h.env.Stream).Name} {
		for _, m := range streamMessages(h.t, h.js, stream) {
			if id := m.Header.Get(jetstream.MsgIDHeader); !seen[id] {
				seen[id] = true
				out = append(out, writtenEvent{subject: m.Subject, payload: m.Data})
			}
		}
	}
	for _, r := range rows {
		if !seen[r.EventID] {
			seen[r.EventID] = true
			out = append(out, writtenEvent{subject: r.Subject, payload: r.Payload})
		}
	}
	return out
}

// writtenOn counts the written events whose subjects start with prefix.
func (h *harness) writtenOn(prefix string) int64 {
	h.t.Helper()
	n := int64(0)
	for _, w := range h.written() {
		if strings.HasPrefix(w.subject, prefix+".") {
			n++
		}
	}
	return n
}

// eventRows counts the customer events written: what the webhook hears
// of.
func (h *harness) eventRows() int64 {
	h.t.Helper()
	return h.writtenOn(h.env.Stream.SubjectPrefix)
}

// turnRows counts the chat turns written: what the built-in AI answers.
func (h *harness) turnRows() int64 {
	h.t.Helper()
	return h.writtenOn(natsx.ChatStream(h.env.Stream).SubjectPrefix)
}

// streamMessages returns what the test's events stream holds.
func streamMessages(t testing.TB, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get msg %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// newTelegram serves a fake Bot API until the test ends and returns it
// with its base URL.
func newTelegram(t *testing.T) (*telegramfake.Server, string) {
	tg := &telegramfake.Server{}
	srv := httptest.NewServer(tg)
	t.Cleanup(srv.Close)
	return tg, srv.URL
}
