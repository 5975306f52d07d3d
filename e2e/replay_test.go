package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/telegramfake"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// replayShop is a workspace with a Telegram channel in external mode whose
// webhook receiver can be made to fail (503 before recording anything),
// in a suite where one failed delivery pauses the webhook.
type replayShop struct {
	*tgShop
	failing atomic.Bool
	updates int64
}

func newReplayShop(t *testing.T) *replayShop {
	t.Helper()
	bot, botAPI := telegramfake.Start(t)
	s := startSuite(t, "TELEGRAM_API_BASE="+botAPI, "WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOK_PAUSE_AFTER=1", "WEBHOOK_RETRY_DELAYS=20ms")
	sh := &replayShop{tgShop: &tgShop{s: s, bot: bot, botToken: "700100300:AAH-replay-e2e-token"}}

	sh.ws, sh.key = s.developer(t)
	sh.channel = s.addChannel(t, sh.ws, "external", "--kind", "telegram", "--token", sh.botToken)

	// Replays come after a pause and a resume, later than a live delivery.
	sh.rcv = newReceiver(t, receiver.Within(20*time.Second))
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sh.failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		sh.rcv.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	sh.secret = s.saveWebhook(t, sh.key, front.URL+"/hooks")
	return sh
}

// message has a customer write; tap has one tap a button (a postback).
func (sh *replayShop) message(t *testing.T, text string) {
	t.Helper()
	sh.updates++
	sh.customerWrites(t, sh.updates, 5150, "Ada", time.Now().Add(-time.Second), text)
}

func (sh *replayShop) tap(t *testing.T, payload string) {
	t.Helper()
	sh.updates++
	sh.update(t, fmt.Sprintf(`{"update_id": %d, "callback_query": {"id": "cb-%d",
		"from": {"id": 5150, "is_bot": false, "first_name": "Ada", "language_code": "en"},
		"message": {"message_id": 9001, "from": {"id": 700100300, "is_bot": true, "first_name": "Shop", "username": "shop_bot"},
			"chat": {"id": 5150, "first_name": "Ada", "type": "private"}, "date": %d, "text": "Anything else?",
			"reply_markup": {"inline_keyboard": [[{"text": "Talk to us", "callback_data": %q}]]}},
		"chat_instance": "-8172631123", "data": %q}}`, sh.updates, sh.updates, time.Now().Add(-time.Minute).Unix(), payload, payload))
}

func idsOf(reqs []receiver.Request) []string {
	ids := make([]string, 0, len(reqs))
	for _, r := range reqs {
		ids = append(ids, r.Header.Get("X-Service-Delivery"))
	}
	sort.Strings(ids)
	return ids
}

func sorted(ids ...string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

// replayDrained waits until the dispatcher has delivered and acked every
// queued replay request (its work queue is empty), so that what the
// receiver holds then is everything the replay sent.
func (sh *replayShop) replayDrained(t *testing.T) {
	t.Helper()
	js := sh.s.env.JetStream(t)
	name := sh.s.env.Stream.Name + "_REPLAY"
	wait.For(t, 20*time.Second, "replay queue "+name+" drained", func() error {
		st, err := js.Stream(context.Background(), name)
		if err != nil {
			return err
		}
		if n := st.CachedInfo().State.Msgs; n != 0 {
			return fmt.Errorf("%d requests left", n)
		}
		return nil
	})
}

// deliveryLog is the workspace's delivery log by id.
func (sh *replayShop) deliveryLog(t *testing.T) map[string]map[string]any {
	t.Helper()
	status, _, out := sh.s.api(t, sh.key, http.MethodGet, "/v1/webhook/deliveries?limit=100", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/webhook/deliveries = %d %v", status, out)
	}
	log := map[string]map[string]any{}
	for _, d := range out["deliveries"].([]any) {
		d := d.(map[string]any)
		log[d["id"].(string)] = d
	}
	return log
}

// replayOutput is what `parleyctl deliveries replay` prints: the
// dispatcher's replay, whole.
type replayOutput struct {
	Replay dispatcherapi.Replay `json:"replay"`
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// TestReplayEndToEnd is an SRE's replay through the built binaries: the
// receiver loses delivered events, `parleyctl deliveries replay` by time
// range sends exactly those again under their original X-Service-Delivery
// ids with identical, freshly signed bodies; --event narrows it to one
// kind; events that arrived while the webhook was paused are delivered
// after a resave and a replay; bad input is one line on stderr and a
// non-zero exit.
func TestReplayEndToEnd(t *testing.T) {
	t.Parallel()
	sh := newReplayShop(t)
	s := sh.s
	start := time.Now()

	// Before the range: one message. In it: a message, a tap, a message.
	// After it: a message. Each boundary is taken once the events before
	// it reached the receiver (so the stream stored them before it).
	sh.message(t, "before the range")
	sh.rcv.Wait(t, 1)
	since := time.Now()
	sh.message(t, "in the range 1")
	sh.tap(t, "HUMAN")
	sh.message(t, "in the range 2")
	sh.rcv.Wait(t, 4)
	until := time.Now()
	sh.message(t, "after the range")
	first := sh.rcv.Wait(t, 5)
	bodies := map[string][]byte{}
	for _, r := range first {
		bodies[r.Header.Get("X-Service-Delivery")] = r.Body
	}
	inRange := idsOf(first[1:4])
	postbackID := ""
	for _, r := range first {
		if r.Header.Get("X-Service-Event") == "postback.received" {
			postbackID = r.Header.Get("X-Service-Delivery")
		}
	}
	if len(bodies) != 5 || postbackID == "" {
		t.Fatalf("first deliveries: %d distinct, postback %q", len(bodies), postbackID)
	}

	// The receiver loses them; the SRE replays the range, maybe before
	// the log holds the first outcomes: the log then counts both rounds'
	// attempts all the same (docs/webhooks.md "Replaying events").
	sh.rcv.Forget()
	var out replayOutput
	s.ctl(t, &out, "deliveries", "replay", "--workspace", sh.ws, "--since", rfc(since), "--until", rfc(until))
	if out.Replay.Queued != 3 || out.Replay.WorkspaceID != sh.ws || out.Replay.ID == "" || out.Replay.Until == nil || out.Replay.Event != nil {
		t.Fatalf("replay output %+v", out)
	}
	got := sh.rcv.Wait(t, 3)
	sh.replayDrained(t)
	got = sh.rcv.Wait(t, 3)
	if fmt.Sprint(idsOf(got)) != fmt.Sprint(inRange) {
		t.Fatalf("replay sent %v, want exactly the range's %v", idsOf(got), inRange)
	}
	for _, r := range got {
		id := r.Header.Get("X-Service-Delivery")
		if !bytes.Equal(r.Body, bodies[id]) {
			t.Errorf("%s: replayed body differs:\n%s\n%s", id, r.Body, bodies[id])
		}
		verifySignature(t, r, sh.secret)
		checkDeliveryHeaders(t, r, r.Header.Get("X-Service-Event"))
	}
	// A replayed delivery's row is written once its attempt has settled,
	// just after the receiver answered: the log is waited for.
	wait.For(t, 10*time.Second, "the delivery log to count the replays", func() error {
		log := sh.deliveryLog(t)
		for id := range bodies {
			want := 1.0
			if strings.Contains(fmt.Sprint(inRange), id) {
				want = 2.0
			}
			if d := log[id]; d["status"] != "delivered" || d["attempts"] != want {
				return fmt.Errorf("log entry %v, want %v attempts", d, want)
			}
		}
		return nil
	})

	// Only the postbacks, from the very start, up to the last event.
	sh.rcv.Forget()
	s.ctl(t, &out, "deliveries", "replay", "--workspace", sh.ws, "--since", rfc(start), "--event", "postback.received")
	if out.Replay.Queued != 1 || out.Replay.Event == nil || *out.Replay.Event != "postback.received" {
		t.Fatalf("postback replay output %+v", out)
	}
	sh.replayDrained(t)
	got = sh.rcv.Wait(t, 1)
	if len(got) != 1 || got[0].Header.Get("X-Service-Delivery") != postbackID || !bytes.Equal(got[0].Body, bodies[postbackID]) {
		t.Fatalf("postback replay sent %v", idsOf(got))
	}
	verifySignature(t, got[0], sh.secret)

	// One delivery by its id: only that event goes again, not the
	// messages stored around it.
	sh.rcv.Forget()
	one := first[2].Header.Get("X-Service-Delivery")
	s.ctl(t, &out, "deliveries", "replay", "--workspace", sh.ws, "--delivery", one)
	if out.Replay.Queued != 1 || out.Replay.DeliveryID == nil || *out.Replay.DeliveryID != one {
		t.Fatalf("replay of one delivery output %+v", out)
	}
	sh.replayDrained(t)
	got = sh.rcv.Wait(t, 1)
	if len(got) != 1 || got[0].Header.Get("X-Service-Delivery") != one || !bytes.Equal(got[0].Body, bodies[one]) {
		t.Fatalf("replay of %s sent %v", one, idsOf(got))
	}
	verifySignature(t, got[0], sh.secret)

	// The receiver fails: one failed delivery pauses the webhook, and the
	// next events are recorded as skipped.
	sh.rcv.Forget()
	sh.failing.Store(true)
	pausedFrom := time.Now()
	sh.message(t, "while failing")
	wait.For(t, 20*time.Second, "webhook paused", func() error {
		_, _, w := s.api(t, sh.key, http.MethodGet, "/v1/webhook", nil)
		if w["webhook"].(map[string]any)["status"] != "paused" {
			return fmt.Errorf("webhook %v", w)
		}
		return nil
	})
	sh.message(t, "while paused 1")
	sh.tap(t, "ORDER_7")
	var paused []string
	wait.For(t, 20*time.Second, "three deliveries failed or skipped", func() error {
		paused = paused[:0]
		for id, d := range sh.deliveryLog(t) {
			if _, old := bodies[id]; !old && (d["status"] == "skipped" || d["status"] == "failed") {
				paused = append(paused, id)
			}
		}
		if len(paused) < 3 {
			return fmt.Errorf("deliveries while failing and paused: %v", paused)
		}
		return nil
	})

	// Replaying to a paused webhook is refused; after a resave the replay
	// delivers all three, signed with the new secret.
	stdout, stderr, err := s.ctlRaw("deliveries", "replay", "--workspace", sh.ws, "--since", rfc(pausedFrom))
	wantFailure(t, "paused webhook", stdout, stderr, err, 1, "paused")
	var resaved struct {
		Secret string `json:"secret"`
	}
	s.ctl(t, &resaved, "webhook", "resave", "--workspace", sh.ws)
	sh.failing.Store(false)
	s.ctl(t, &out, "deliveries", "replay", "--workspace", sh.ws, "--since", rfc(pausedFrom))
	if out.Replay.Queued != 3 {
		t.Fatalf("replay after resave %+v", out)
	}
	sh.replayDrained(t)
	got = sh.rcv.Wait(t, 3)
	if fmt.Sprint(idsOf(got)) != fmt.Sprint(sorted(paused...)) {
		t.Fatalf("after resave the replay sent %v, want %v", idsOf(got), sorted(paused...))
	}
	for _, r := range got {
		verifySignature(t, r, resaved.Secret)
	}
	wait.For(t, 10*time.Second, "the delivery log to show the replays delivered", func() error {
		log := sh.deliveryLog(t)
		for _, r := range got {
			id := r.Header.Get("X-Service-Delivery")
			if d := log[id]; d["status"] != "delivered" || d["payload"] != string(r.Body) || d["last_error"] != nil || d["delivered_at"] == nil {
				return fmt.Errorf("log entry after replay %v", d)
			}
		}
		return nil
	})

	// Bad input: one line on stderr, nothing on stdout, a non-zero exit.
	now := time.Now().UTC()
	tests := []struct {
		name     string
		args     []string
		wantExit int
		wantErr  string
	}{
		{"until before since", []string{"--workspace", sh.ws, "--since", rfc(now), "--until", rfc(now.Add(-time.Hour))}, 2, "--until must be after --since"},
		{"unparsable since", []string{"--workspace", sh.ws, "--since", "last tuesday"}, 2, "not an RFC 3339 time"},
		{"unparsable until", []string{"--workspace", sh.ws, "--since", rfc(now), "--until", "2026-02-30T25:00:00Z"}, 2, "not an RFC 3339 time"},
		{"missing since", []string{"--workspace", sh.ws}, 2, "--since or --delivery is required"},
		{"delivery and since", []string{"--workspace", sh.ws, "--delivery", one, "--since", rfc(now)}, 2, "not both"},
		{"unknown delivery", []string{"--workspace", sh.ws, "--delivery", uuid.NewString()}, 1, "no delivery with this id"},
		{"unknown workspace", []string{"--workspace", uuid.NewString(), "--since", rfc(now)}, 1, "workspace not found"},
		{"unknown event kind", []string{"--workspace", sh.ws, "--since", rfc(now), "--event", "message.sent"}, 1, "event must be one of"},
	}
	for _, tt := range tests {
		stdout, stderr, err := s.ctlRaw(append([]string{"deliveries", "replay"}, tt.args...)...)
		wantFailure(t, tt.name, stdout, stderr, err, tt.wantExit, tt.wantErr)
	}
}

// wantFailure checks parleyctl's failure contract.
func wantFailure(t *testing.T, name string, stdout, stderr []byte, err error, wantExit int, mention string) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != wantExit {
		t.Errorf("%s: exit = %v, want %d; stderr %s", name, err, wantExit, stderr)
		return
	}
	if len(stdout) != 0 {
		t.Errorf("%s: stdout on failure: %s", name, stdout)
	}
	line := bytes.TrimRight(stderr, "\n")
	if bytes.Contains(line, []byte("\n")) || !bytes.HasPrefix(line, []byte("parleyctl: ")) {
		t.Errorf("%s: stderr is not one line: %q", name, stderr)
	}
	if !strings.Contains(string(line), mention) {
		t.Errorf("%s: stderr %q does not mention %q", name, line, mention)
	}
}
