package main

import (
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

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// stuckReceiver is a broken receiver: it accepts every request and never
// answers, holding each until the dispatcher gives up on it (its attempt
// timeout closes the connection). Recover drops the held requests'
// connections (no answer either) and makes it answer 200 from then on.
type stuckReceiver struct {
	URL string
	// inFlight is the requests held now, most the most held at once,
	// total every request that came, gaveUp those the dispatcher closed.
	inFlight, most, total, gaveUp atomic.Int64

	recovered chan struct{}
	once      sync.Once
}

func newStuckReceiver(t testing.TB) *stuckReceiver {
	t.Helper()
	s := &stuckReceiver{recovered: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(s.Recover) // before Close, which waits for the handlers
	s.URL = srv.URL + "/hooks/stuck"
	return s
}

func (s *stuckReceiver) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.total.Add(1)
	select {
	case <-s.recovered:
		w.WriteHeader(http.StatusOK)
		return
	default:
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	select {
	case <-r.Context().Done():
		s.gaveUp.Add(1)
	case <-s.recovered:
		panic(http.ErrAbortHandler) // the connection drops, unanswered
	}
}

// Recover ends the hang (see stuckReceiver).
func (s *stuckReceiver) Recover() { s.once.Do(func() { close(s.recovered) }) }

// gauge is a number of things at once and the most of it seen.
type gauge struct{ now, most atomic.Int64 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// newCountingReceiver answers 200 after a pause, counting the requests it
// works on at once, alone (the gauge it returns) and together with others
// sharing all.
func newCountingReceiver(t *testing.T, pause time.Duration, all *gauge) (*receiver.Receiver, *gauge) {
	t.Helper()
	var own gauge
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		own.enter()
		all.enter()
		time.Sleep(pause) // a receiver's work, not a wait for an event
		all.leave()
		own.leave()
		w.WriteHeader(http.StatusOK)
	})
	return rcv, &own
}

// brokenAndHealthy saves two workspaces' webhooks: bad's at a stuck
// receiver, good's at one that answers 200 at once.
func (h *harness) brokenAndHealthy() (stuck *stuckReceiver, healthy *receiver.Receiver, bad, good string) {
	h.t.Helper()
	stuck = newStuckReceiver(h.t)
	healthy = receiver.New(h.t, receiver.Status(http.StatusOK))
	bad, good = uuid.NewString(), uuid.NewString()
	h.saveWebhook(bad, stuck.URL)
	h.saveWebhook(good, healthy.URL)
	return stuck, healthy, bad, good
}

// countRows counts the workspace's delivery log rows by status.
func (h *harness) countRows(ws string) map[string]int {
	h.t.Helper()
	rows, err := h.db.Raw(`SELECT status, count(*) FROM dispatch.deliveries WHERE workspace_id = ? GROUP BY status`, ws).Rows()
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			h.t.Fatal(err)
		}
		out[status] = n
	}
	return out
}

// The measurement, as a test: a workspace whose receiver accepts
// connections and never answers, with events waiting for it, cannot keep
// another workspace's deliveries waiting. The broken webhook holds its
// share of places (2 of 8) and no more; its other events wait in hand,
// for its own places, holding none of the instance's slots; the healthy
// workspace's deliveries all arrive while the broken receiver's first
// attempts are still hanging (the attempt timeout is far off), so none of
// them waited for it. Stopped, the instance hands the waiting events back;
// another delivers every one, once.
func TestHangingReceiverHoldsOnlyItsShare(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	share := func(c *svcconfig.Config) {
		c.Concurrency, c.WebhookConcurrency, c.InHand = 8, 2, 256
		c.AttemptTimeout = 30 * time.Second // hangs outlast the test's first half
	}
	h := startOn(t, env, share, nil)
	stuck, healthy, bad, good := h.brokenAndHealthy()

	const nBad, nGood = 20, 40
	for range nBad {
		h.publish(messageEvent(bad, false))
	}
	// Two attempts hang; the other 18 events are in hand, waiting for
	// the broken webhook's places, not for the instance's.
	h.waitMetrics("the broken webhook's share in use", func(m map[string]float64) error {
		inFlight := m[`parley_dispatcher_attempts_in_flight{queue="events"}`]
		forWebhook := m[`parley_dispatcher_attempts_waiting{for="webhook"}`]
		forInstance := m[`parley_dispatcher_attempts_waiting{for="instance"}`]
		if stuck.inFlight.Load() != 2 || inFlight != 2 || forWebhook != nBad-2 || forInstance != 0 {
			return fmt.Errorf("receiver holds %d; in flight %v, waiting for the webhook %v, for the instance %v",
				stuck.inFlight.Load(), inFlight, forWebhook, forInstance)
		}
		return nil
	})

	for range nGood {
		h.publish(messageEvent(good, false))
	}
	wait.For(t, 20*time.Second, "the healthy workspace's deliveries", func() error {
		if rows := h.countRows(good); rows["delivered"] != nGood {
			return fmt.Errorf("log of the healthy workspace: %v", rows)
		}
		return nil
	})
	if n := stuck.gaveUp.Load(); n != 0 {
		t.Fatalf("%d hanging attempts ended before the healthy deliveries did; they were not needed to", n)
	}
	if most, total := stuck.most.Load(), stuck.total.Load(); most != 2 || total != 2 {
		t.Fatalf("the broken receiver got %d requests, %d at once; want 2 (its share), 2", total, most)
	}
	// In hand past app.DefaultPendingAfter, every one is shown pending.
	wait.For(t, 10*time.Second, "the broken workspace's deliveries shown pending", func() error {
		if rows := h.countRows(bad); rows["pending"] != nBad || len(rows) != 1 {
			return fmt.Errorf("broken workspace's log %v, want all %d pending, in hand", rows, nBad)
		}
		return nil
	})
	if n := healthy.Distinct(); n != nGood || len(healthy.Requests()) != nGood {
		t.Fatalf("healthy receiver got %d distinct of %d requests, want %d once each", n, len(healthy.Requests()), nGood)
	}

	// The receiver comes back (the held connections drop unanswered) as
	// the instance stops: the events it still holds go back to the stream,
	// whether waiting for a place or between attempts.
	stuck.Recover()
	stopped := time.Now()
	h.stop()
	if took := time.Since(stopped); took > 10*time.Second {
		t.Errorf("stopping took %s; events waiting for a place must not hold it", took)
	}
	next := startOn(t, env, share, nil)
	info := next.consumerSettled(nBad + nGood)
	if info.NumPending != 0 {
		t.Errorf("%d events not handed out", info.NumPending)
	}
	if rows := next.countRows(bad); rows["delivered"] != nBad || len(rows) != 1 {
		t.Errorf("broken workspace's log %v, want all %d delivered", rows, nBad)
	}
}

// A receiver that hangs to the timeout opens its circuit after
// DISPATCHER_CIRCUIT_AFTER attempts without answer: its further attempts
// are recorded as failed at once, unsent, with duration 0 and the reason,
// so every delivery still makes its 4 attempts and the webhook pauses
// after WEBHOOK_PAUSE_AFTER failed deliveries, in a fraction of the time
// the timeouts would take. Nothing is lost: every event has one settled
// row, each acked only once settled. Saving the webhook again starts it
// with a closed circuit.
func TestHangingReceiverFailsFastOnceItsCircuitOpens(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	h := start(t, func(c *svcconfig.Config) {
		c.AttemptTimeout = timeout
		c.RetryDelays = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
		c.WebhookConcurrency = 2
		c.CircuitAfter = 3
		c.CircuitCoolDown = time.Minute // no probe within the test
		c.PauseAfter = 4
	}, nil)
	stuck, healthy, bad, good := h.brokenAndHealthy()

	const nBad, nGood = 6, 30
	var badIDs []string
	for i := range nGood {
		if i%5 == 0 {
			ev := messageEvent(bad, false)
			badIDs = append(badIDs, ev.GetId())
			h.publish(ev)
		}
		h.publish(messageEvent(good, false))
	}
	h.consumerSettled(nBad + nGood)
	// Acked only once settled: nothing acked is still pending.
	if rows := h.countRows(bad); rows["failed"] != nBad || len(rows) != 1 {
		t.Fatalf("broken workspace's log %v, want %d failed", rows, nBad)
	}
	if rows := h.countRows(good); rows["delivered"] != nGood || len(rows) != 1 || len(healthy.Requests()) != nGood {
		t.Fatalf("healthy workspace's log %v, receiver %d requests; want %d delivered at once", rows, len(healthy.Requests()), nGood)
	}

	sent, notSent := 0, 0
	for _, id := range badIDs {
		history := h.history(id)
		if len(history) != 4 {
			t.Fatalf("%s: %d attempts, want 4", id, len(history))
		}
		for _, a := range history {
			e, _ := a["error"].(string)
			switch {
			case strings.HasPrefix(e, "not sent: "):
				notSent++
				if a["duration_ms"] != 0.0 || a["response_status"] != nil ||
					!strings.Contains(e, "the receiver gave no answer to the last") ||
					!strings.Contains(e, "(no complete response within 300ms); circuit open until ") {
					t.Errorf("%s: attempt not sent %v", id, a)
				}
			case e == "no complete response within 300ms":
				sent++
			default:
				t.Errorf("%s: attempt %v", id, a)
			}
		}
	}
	// Three attempts without answer open the circuit; one more may have
	// been on its way in the other place. (How many were in flight at
	// once is not counted here: a receiver notices the dispatcher giving
	// up on a request a moment after it has, so it may see the next
	// attempt overlap the last; the tests whose receivers answer, or hang
	// past the test, count it.)
	if sent < 3 || sent > 4 || int64(sent) != stuck.total.Load() {
		t.Errorf("%d attempts sent, receiver got %d; want 3 or 4", sent, stuck.total.Load())
	}
	if st, failures := h.webhookRow(bad); st != "paused" || failures != nBad {
		t.Errorf("webhook %s with %d failures, want paused with %d", st, failures, nBad)
	}
	m := h.scrape()
	for series, want := range map[string]float64{
		`parley_dispatcher_circuits_opened_total`:                            1,
		`parley_dispatcher_open_circuits`:                                    1,
		`parley_dispatcher_attempts_not_sent_total`:                          float64(notSent),
		`parley_dispatcher_attempt_duration_seconds_count{result="failure"}`: float64(sent),
		`parley_dispatcher_attempts_in_flight{queue="events"}`:               0,
		`parley_dispatcher_attempts_waiting{for="webhook"}`:                  0,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}

	// Paused: skipped, never sent.
	before := stuck.total.Load()
	h.publish(messageEvent(bad, false))
	h.consumerSettled(nBad + nGood + 1)
	if rows := h.countRows(bad); rows["skipped"] != 1 {
		t.Errorf("log while paused %v, want 1 skipped", rows)
	}

	// Saved again: a new setup, whose circuit is closed though the old
	// one's cool-down has most of a minute to go.
	call[dispatcherapi.SavedWebhook](h, "", http.MethodPost, "/admin/webhooks/"+bad+"/resave", nil, http.StatusOK)
	ev := messageEvent(bad, false)
	h.publish(ev)
	d := h.waitDelivery(bad, ev.GetId())
	first := h.history(ev.GetId())[0]
	if d.Status != "failed" || first["error"] != "no complete response within 300ms" || stuck.total.Load() <= before {
		t.Errorf("after saving again: %s, first attempt %v; want it sent", jsonOf(d), first)
	}
}

// A receiver that hung and recovers is sent to again without saving: after
// the cool-down one probe goes, its answer closes the circuit, and later
// deliveries go at the first attempt. Its failed deliveries (below the
// pause threshold) are forgiven by the first success.
func TestCircuitClosesWhenTheReceiverAnswersAgain(t *testing.T) {
	t.Parallel()
	const coolDown = 500 * time.Millisecond
	h := start(t, func(c *svcconfig.Config) {
		c.AttemptTimeout = 200 * time.Millisecond
		// A round spans the cool-down, so a delivery that starts with the
		// circuit open ends with an attempt past it: the probe.
		c.RetryDelays = []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
		c.WebhookConcurrency = 2
		c.CircuitAfter = 2
		c.CircuitCoolDown = coolDown
	}, nil)
	stuck := newStuckReceiver(t)
	ws := uuid.NewString()
	h.saveWebhook(ws, stuck.URL)
	for range 3 {
		h.publish(messageEvent(ws, false))
	}
	h.consumerSettled(3)
	if rows := h.countRows(ws); rows["failed"] != 3 {
		t.Fatalf("log while hanging %v, want 3 failed", rows)
	}
	if m := h.scrape(); m[`parley_dispatcher_circuits_opened_total`] < 1 || m[`parley_dispatcher_attempts_not_sent_total`] < 1 {
		t.Fatalf("the circuit never opened: %v", m)
	}

	stuck.Recover()
	// One at a time: the first is delivered by the probe, the rest at
	// once.
	for i := range 4 {
		ev := messageEvent(ws, false)
		h.publish(ev)
		d := h.waitDelivery(ws, ev.GetId())
		if d.Status != "delivered" || (i > 0 && d.Attempts != 1) {
			t.Fatalf("delivery %d after the receiver recovered: %s", i+1, jsonOf(d))
		}
	}
	if st, failures := h.webhookRow(ws); st != "active" || failures != 0 {
		t.Errorf("webhook %s with %d failures, want active with 0", st, failures)
	}
	if m := h.scrape(); m[`parley_dispatcher_open_circuits`] != 0 {
		t.Errorf("open circuits %v, want 0", m[`parley_dispatcher_open_circuits`])
	}
}

// However many events wait, no webhook ever has more than
// DISPATCHER_WEBHOOK_CONCURRENCY attempts in flight on an instance, live
// and replayed together, and the instance no more than
// DISPATCHER_CONCURRENCY (counted at the receivers).
func TestAttemptsInFlightAreCapped(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) {
		c.Concurrency, c.WebhookConcurrency, c.ReplayConcurrency = 4, 2, 4
	}, nil)
	var all gauge
	const hooks, each = 3, 20
	var wss []string
	var own []*gauge
	for range hooks {
		rcv, g := newCountingReceiver(t, 20*time.Millisecond, &all)
		ws := uuid.NewString()
		h.saveWebhook(ws, rcv.URL)
		wss, own = append(wss, ws), append(own, g)
	}
	for range each {
		for _, ws := range wss {
			h.publish(messageEvent(ws, false))
		}
	}
	h.consumerSettled(hooks * each)
	for i, g := range own {
		if g.most.Load() != 2 {
			t.Errorf("webhook %d: %d attempts at once, want its share of 2", i+1, g.most.Load())
		}
	}
	if n := all.most.Load(); n > 4 || n < 3 {
		t.Errorf("%d attempts at once on the instance, want at most 4 (and the share of more than one webhook)", n)
	}

	// A replay of the first webhook's events while its live events flow:
	// together they keep to its share.
	own[0].most.Store(0)
	h.startReplay(dispatcherapi.ReplayRequest{WorkspaceID: wss[0], Since: rfc3339(h.storedAt(1))})
	for range each {
		h.publish(messageEvent(wss[0], false))
	}
	h.consumerSettled(hooks*each + each)
	h.replaysSettled()
	if n := own[0].most.Load(); n != 2 {
		t.Errorf("live and replayed together: %d attempts at once, want the share of 2", n)
	}
	if rows := h.countRows(wss[0]); rows["delivered"] != 2*each {
		t.Errorf("log %v, want %d delivered", rows, 2*each)
	}
}
