package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/replaystream"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/replay"
)

// postbackEvent is a postback.received event as messaging publishes it.
func postbackEvent(ws string) *eventsv1.Event {
	ev := messageEvent(ws, false)
	ev.Type = "postback.received"
	m := ev.GetMessageReceived()
	ev.Data = &eventsv1.Event_PostbackReceived{PostbackReceived: &eventsv1.PostbackReceived{
		WorkspaceId: ws, ConversationId: m.GetConversationId(), Platform: m.GetPlatform(), Channel: m.GetChannel(),
		Contact: m.GetContact(), Message: m.GetMessage(),
		Postback: &eventsv1.Postback{Payload: "ORDER_42", ReceivedAt: ev.GetCreatedAt()},
	}}
	return ev
}

// storedAt is when the events stream stored the message with sequence seq:
// the time a replay selects by.
func (h *harness) storedAt(seq uint64) time.Time {
	h.t.Helper()
	st, err := h.js.Stream(context.Background(), h.env.Stream.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	msg, err := st.GetMsg(context.Background(), seq)
	if err != nil {
		h.t.Fatalf("read stream message %d: %v", seq, err)
	}
	return msg.Time
}

// startReplay asks for a replay the way parleyctl does and returns the
// 202 answer's replay object.
func (h *harness) startReplay(req dispatcherapi.ReplayRequest) dispatcherapi.Replay {
	h.t.Helper()
	out := call[dispatcherapi.ReplayResponse](h, "", http.MethodPost, "/admin/replays", req, http.StatusAccepted)
	if out.Next != nil {
		h.t.Fatalf("a small replay needed a continuation: %s", jsonOf(out))
	}
	return out.Replay
}

// replaysSettled waits until every queued replay request is delivered and
// acked: the work queue is empty.
func (h *harness) replaysSettled() {
	h.t.Helper()
	name := replaystream.Stream(h.env.Stream).Name
	wait.For(h.t, 20*time.Second, "replay queue drained", func() error {
		st, err := h.js.Stream(context.Background(), name)
		if err != nil {
			return err
		}
		c, err := h.js.Consumer(context.Background(), name, h.cfg.Consumer)
		if err != nil {
			return err
		}
		info, err := c.Info(context.Background())
		if err != nil {
			return err
		}
		if n := st.CachedInfo().State.Msgs; n != 0 || info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("%d requests stored, %d pending, %d unacked", n, info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// deliveryIDs are the X-Service-Delivery ids of hits, sorted.
func deliveryIDs(hits []receiver.Request) []string {
	ids := make([]string, 0, len(hits))
	for _, h := range hits {
		ids = append(ids, h.Header.Get("X-Service-Delivery"))
	}
	sort.Strings(ids)
	return ids
}

func eventIDs(evs ...*eventsv1.Event) []string {
	ids := make([]string, 0, len(evs))
	for _, ev := range evs {
		ids = append(ids, ev.GetId())
	}
	sort.Strings(ids)
	return ids
}

// An SRE replays a time range: the events stored in it are sent again
// under their original delivery ids with the bodies first sent, signed
// with the current secret and a fresh timestamp; the new attempts are
// added to each delivery's history. Events before since, at or after
// until, of another workspace or of another kind (with event set) are not
// sent.
func TestReplayByTimeRangeAndKind(t *testing.T) {
	t.Parallel()
	var tick atomic.Int64 // each clock reading a second later: fresh timestamps are visible
	clock := func() time.Time { return time.Now().Add(time.Duration(tick.Add(1)) * time.Second) }
	h := start(t, nil, clock)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws, other := uuid.NewString(), uuid.NewString()
	secret := h.saveWebhook(ws, rcv.URL)
	otherRcv := receiver.New(t, receiver.Status(http.StatusOK))
	h.saveWebhook(other, otherRcv.URL)

	// Stream sequences: 1-2 before the range, 3-6 in it (one of them
	// another workspace's), 7 after it.
	before := []*eventsv1.Event{messageEvent(ws, false), postbackEvent(ws)}
	inRange := []*eventsv1.Event{messageEvent(ws, true), postbackEvent(ws), messageEvent(ws, false)}
	foreign := messageEvent(other, false)
	after := postbackEvent(ws)
	for _, ev := range before {
		h.publish(ev)
	}
	h.publish(inRange[0])
	h.publish(foreign)
	h.publish(inRange[1])
	h.publish(inRange[2])
	h.publish(after)
	h.consumerSettled(7)
	first := rcv.Wait(t, 6)
	bodies := map[string][]byte{}
	for _, got := range first {
		bodies[got.Header.Get("X-Service-Delivery")] = got.Body
	}
	since, until := h.storedAt(3), h.storedAt(7)

	// The receiver lost them; the SRE replays [since, until).
	r := h.startReplay(dispatcherapi.ReplayRequest{WorkspaceID: ws, Since: rfc3339(since), Until: new(rfc3339(until))})
	if r.Queued != 3 || r.WorkspaceID != ws || r.Since != rfc3339(since) || !is(r.Until, rfc3339(until)) || r.Event != nil || r.DeliveryID != nil {
		t.Fatalf("replay %s", jsonOf(r))
	}
	if _, err := uuid.Parse(r.ID); err != nil {
		t.Errorf("replay id %v", r.ID)
	}
	h.replaysSettled()
	replayed := rcv.Requests()[6:]
	if got, want := deliveryIDs(replayed), eventIDs(inRange...); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %v, want %v", got, want)
	}
	for _, got := range replayed {
		id := got.Header.Get("X-Service-Delivery")
		if !bytes.Equal(got.Body, bodies[id]) {
			t.Errorf("%s: replayed body differs from the first:\n%s\n%s", id, got.Body, bodies[id])
		}
		if err := got.Verify(secret, clock()); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		if got.Header.Get("X-Service-Timestamp") == firstHit(first, id).Header.Get("X-Service-Timestamp") {
			t.Errorf("%s: replay reused the first attempt's timestamp", id)
		}
		history := h.history(id)
		if len(history) != 2 || history[0]["number"] != 1.0 || history[1]["number"] != 2.0 || history[1]["response_status"] != 200.0 {
			t.Errorf("%s: history %v", id, history)
		}
	}
	for _, d := range h.deliveries(ws) {
		replayedNow := strings.Contains(fmt.Sprint(eventIDs(inRange...)), d.ID)
		wantAttempts := 1
		if replayedNow {
			wantAttempts = 2
		}
		if d.Status != "delivered" || d.Attempts != wantAttempts || !is(d.ResponseStatus, 200) || d.DeliveredAt == nil {
			t.Errorf("log entry %s", jsonOf(d))
		}
	}
	if n := len(otherRcv.Requests()); n != 1 {
		t.Errorf("the other workspace's receiver got %d requests, want its one event only", n)
	}

	// Only postbacks, from the start, with no until: up to the last event.
	r = h.startReplay(dispatcherapi.ReplayRequest{WorkspaceID: ws, Since: rfc3339(h.storedAt(1)), Event: new("postback.received")})
	if r.Queued != 3 || !is(r.Event, "postback.received") || r.Until != nil {
		t.Fatalf("postback replay %s", jsonOf(r))
	}
	h.replaysSettled()
	if got, want := deliveryIDs(rcv.Requests()[9:]), eventIDs(before[1], inRange[1], after); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("postback replay sent %v, want %v", got, want)
	}

	// A range with nothing in it queues nothing.
	r = h.startReplay(dispatcherapi.ReplayRequest{WorkspaceID: ws, Since: rfc3339(time.Now().Add(time.Hour))})
	if r.Queued != 0 {
		t.Errorf("future replay %s", jsonOf(r))
	}
}

func firstHit(hits []receiver.Request, id string) receiver.Request {
	for _, h := range hits {
		if h.Header.Get("X-Service-Delivery") == id {
			return h
		}
	}
	return receiver.Request{}
}

// Events that arrived while the webhook was paused are recorded skipped;
// a replay is refused until the webhook is saved again, after which the
// replay delivers them (and the failed one that paused it) with the new
// secret.
func TestReplayDeliversWhatArrivedWhilePaused(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) {
		c.PauseAfter = 1
		c.RetryDelays = nil
	}, nil)
	var healthy atomic.Bool
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		if healthy.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	failed := messageEvent(ws, false)
	h.publish(failed)
	if d := h.waitDelivery(ws, failed.GetId()); d.Status != "failed" {
		t.Fatalf("first delivery %s", jsonOf(d))
	}
	skipped := []*eventsv1.Event{messageEvent(ws, false), postbackEvent(ws)}
	for _, ev := range skipped {
		h.publish(ev)
		if d := h.waitDelivery(ws, ev.GetId()); d.Status != "skipped" {
			t.Fatalf("while paused %s", jsonOf(d))
		}
	}
	h.consumerSettled(3)
	since := rfc3339(h.storedAt(1))

	h.wantError("", http.MethodPost, "/admin/replays", map[string]any{"workspace_id": ws, "since": since}, http.StatusConflict, "webhook_paused", "resave")

	secret := call[dispatcherapi.SavedWebhook](h, "", http.MethodPost, "/admin/webhooks/"+ws+"/resave", nil, http.StatusOK).Secret
	healthy.Store(true)
	if r := h.startReplay(dispatcherapi.ReplayRequest{WorkspaceID: ws, Since: since}); r.Queued != 3 {
		t.Fatalf("replay %s", jsonOf(r))
	}
	h.replaysSettled()
	hits := rcv.Requests()
	if got, want := deliveryIDs(hits[1:]), eventIDs(append(skipped, failed)...); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replay sent %v, want %v", got, want)
	}
	logged := map[string]dispatcherapi.Delivery{}
	for _, d := range h.deliveries(ws) {
		logged[d.ID] = d
	}
	for _, got := range hits[1:] {
		id := got.Header.Get("X-Service-Delivery")
		if err := got.Verify(secret, time.Now()); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		d := logged[id]
		if string(got.Body) != d.Payload {
			t.Errorf("%s: body differs from the logged payload", id)
		}
		wantAttempts := 1
		if id == failed.GetId() {
			wantAttempts = 2
			if !bytes.Equal(got.Body, hits[0].Body) {
				t.Errorf("replayed body differs from the first attempt's")
			}
		}
		if d.Status != "delivered" || d.Attempts != wantAttempts || !is(d.ResponseStatus, 204) || d.LastError != nil || d.DeliveredAt == nil {
			t.Errorf("log entry %s", jsonOf(d))
		}
	}
	if st, failures := h.webhookRow(ws); st != "active" || failures != 0 {
		t.Errorf("webhook %s with %d failures after a successful replay", st, failures)
	}
}

// A replay whose receiver keeps failing gets the full retry schedule, and
// the failures are recorded like any delivery's.
func TestReplayRetriesAndRecordsFailures(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	var failing atomic.Bool
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	ev := messageEvent(ws, false)
	h.publish(ev)
	h.waitDelivery(ws, ev.GetId())
	h.consumerSettled(1)

	failing.Store(true)
	h.startReplay(dispatcherapi.ReplayRequest{WorkspaceID: ws, Since: rfc3339(h.storedAt(1))})
	h.replaysSettled()
	if n := len(rcv.Requests()); n != 1+4 {
		t.Fatalf("receiver got %d requests, want 1 then 4 replay attempts", n)
	}
	d := h.waitDelivery(ws, ev.GetId())
	if d.Status != "failed" || d.Attempts != 5 || !is(d.ResponseStatus, 502) || d.DeliveredAt != nil {
		t.Errorf("log entry %s", jsonOf(d))
	}
	if history := h.history(ev.GetId()); len(history) != 5 || history[4]["number"] != 5.0 {
		t.Errorf("history %v", history)
	}
	if _, failures := h.webhookRow(ws); failures != 1 {
		t.Errorf("webhook counts %d failures, want the replay's 1", failures)
	}
}

// Bad replay requests are 4xx in {code, message} form, naming the field.
func TestReplayRefusals(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	ws := uuid.NewString()
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	h.saveWebhook(ws, rcv.URL)
	now := time.Now().UTC()
	tests := []struct {
		name    string
		body    any
		status  int
		code    string
		mention string
	}{
		{"no webhook", map[string]any{"workspace_id": uuid.NewString(), "since": rfc3339(now)}, 404, "webhook_not_found", "webhook"},
		{"workspace not a uuid", map[string]any{"workspace_id": "acme", "since": rfc3339(now)}, 400, "invalid_request", "workspace_id"},
		{"no since", map[string]any{"workspace_id": ws}, 400, "invalid_request", "since"},
		{"since unparsable", map[string]any{"workspace_id": ws, "since": "yesterday"}, 400, "invalid_request", "since"},
		{"until unparsable", map[string]any{"workspace_id": ws, "since": rfc3339(now), "until": "2026-13-01"}, 400, "invalid_request", "until"},
		{"until before since", map[string]any{"workspace_id": ws, "since": rfc3339(now), "until": rfc3339(now.Add(-time.Hour))}, 400, "invalid_request", "until"},
		{"test events", map[string]any{"workspace_id": ws, "since": rfc3339(now), "event": "test"}, 400, "invalid_request", "event"},
		{"bad resume", map[string]any{"workspace_id": ws, "since": rfc3339(now), "resume": map[string]any{"replay_id": uuid.NewString(), "from_seq": 5, "end_seq": 2}}, 400, "invalid_request", "resume"},
		{"not json", "{", 400, "invalid_request", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.wantError("", http.MethodPost, "/admin/replays", tt.body, tt.status, tt.code, tt.mention)
		})
	}
}

// A replay request whose delivery is under way elsewhere, long enough for
// the log to show it pending, waits for it, then goes out: the live round
// and the replay never interleave on one delivery's record.
func TestReplayWaitsForADeliveryUnderWay(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	release := make(chan struct{})
	rcv := receiver.New(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	ev := messageEvent(ws, false)
	h.publish(ev)
	rcv.Wait(t, 1) // the live attempt is under way
	wait.For(t, 10*time.Second, "the live delivery shown pending", func() error {
		for _, d := range h.deliveries(ws) {
			if d.ID == ev.GetId() && d.Status == "pending" {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	h.startReplay(dispatcherapi.ReplayRequest{WorkspaceID: ws, Since: rfc3339(h.storedAt(1))})
	time.Sleep(300 * time.Millisecond)
	if n := len(rcv.Requests()); n != 1 {
		close(release)
		t.Fatalf("the replay went out (%d requests) while the live round was under way", n)
	}
	close(release)
	h.replaysSettled()
	hits := rcv.Requests()
	if len(hits) != 2 || hits[1].Header.Get("X-Service-Delivery") != ev.GetId() {
		t.Fatalf("receiver got %d requests", len(hits))
	}
	history := h.history(ev.GetId())
	if len(history) != 2 || history[0]["number"] != 1.0 || history[1]["number"] != 2.0 {
		t.Errorf("history %v", history)
	}
}

// The replay consumer is durable and shared: requests queued while no
// dispatcher runs are delivered once one starts.
func TestQueuedReplaysSurviveARestart(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	rcv := receiver.New(t, receiver.Status(http.StatusOK))
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)
	evs := []*eventsv1.Event{messageEvent(ws, false), messageEvent(ws, false)}
	for _, ev := range evs {
		h.publish(ev)
	}
	h.consumerSettled(2)
	rcv.Wait(t, 2)
	since := h.storedAt(1)
	h.stop()

	// Queue directly, as a stopped dispatcher's admin call had done.
	js := h.env.JetStream(t)
	src := replaystream.NewSource(js, h.env.Stream)
	var queued []uint64
	for ev, err := range src.Events(context.Background(), scanAll(ws, since)) {
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, ev.Seq)
		if err := replaystream.NewQueue(js, replaystream.Stream(h.env.Stream)).Put(context.Background(), uuid.NewString(), ws, []replayEvent{ev}); err != nil {
			t.Fatal(err)
		}
	}
	if len(queued) != 2 {
		t.Fatalf("queued %v", queued)
	}
	again := startOn(t, h.env, nil, nil)
	again.replaysSettled()
	if got := deliveryIDs(rcv.Requests()[2:]); fmt.Sprint(got) != fmt.Sprint(eventIDs(evs...)) {
		t.Fatalf("after restart the receiver got %v", got)
	}
}

type replayEvent = replay.Event

// scanAll selects every event of ws stored since since.
func scanAll(ws string, since time.Time) replay.Scan {
	return replay.Scan{Request: replay.Request{WorkspaceID: ws, Since: since}, End: math.MaxUint64}
}
