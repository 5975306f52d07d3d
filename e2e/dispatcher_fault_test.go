package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// TestDispatcherSurvivesSIGKILL is issue 4's fault test. 10,000 customer
// events are published to the stream for a workspace whose webhook is a
// recording receiver. Two dispatchers run: the suite's own (A), which runs
// throughout, and a second one (B), which is killed with SIGKILL twice in
// the middle of delivering and started again each time. Each kill happens
// while the receiver holds every request both instances have in flight
// (so B dies with all its slots mid-attempt: the receiver has the
// requests, B never learns the answers). At the end:
//
//   - every event reached the receiver at least once, nothing else did;
//   - every copy of a delivery carries its X-Service-Delivery (the
//     envelope id) and a byte-identical body, and every signature verifies
//     with the webhook's secret;
//   - the deliveries B held when killed were sent again (by A or the
//     restarted B, after the consumer's ack wait);
//   - the delivery log has exactly one row per event, all delivered, and
//     the durable consumer has nothing pending.
//
// The dispatchers are tuned through the environment for speed: tiny retry
// delays and a 1 s attempt timeout, which also shortens the ack wait after
// which JetStream hands a dead instance's messages to a live one (the
// dispatcher sets it to the longest round of attempts plus 30 s).
func TestDispatcherSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	const (
		events      = 10_000
		concurrency = 32
		// budget bounds the whole test; the ack wait after the last kill
		// (about 34 s) is most of it.
		budget = 4 * time.Minute
	)
	started := time.Now()
	deadline := started.Add(budget)
	tuning := []string{
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOK_RETRY_DELAYS=10ms,10ms,10ms",
		"WEBHOOK_ATTEMPT_TIMEOUT=1s",
		"DISPATCHER_CONCURRENCY=" + strconv.Itoa(concurrency),
		// Every event goes to one webhook here: let it have the whole
		// instance, so the kill finds the slots full.
		"DISPATCHER_WEBHOOK_CONCURRENCY=" + strconv.Itoa(concurrency),
		// A killed instance's events stay unacknowledged until the ack
		// wait, and the consumer hands out at most 8,192 across all
		// instances: with the default 4,096 in hand, the first dead B
		// and A together held them all and the restarted B got none.
		"DISPATCHER_IN_HAND=512",
	}
	s := startSuite(t, tuning...) // its dispatcher is instance A
	// Each answer takes 10 ms, as a receiver doing some work would: the two
	// instances then deliver at most 6,400 a second, so thousands of events
	// are still waiting at each kill however fast the machine (answered at
	// once, a fast machine delivered all 10,000 before the first kill).
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		time.Sleep(10 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	}, checkDeliveries(t))
	ws, key := s.developer(t)
	secret := s.saveWebhook(t, key, rcv.URL)
	b := s.startDispatcher(t)

	evs := make([]*eventsv1.Event, events)
	want := make(map[string]bool, events)
	for i := range evs {
		evs[i] = messageReceived(ws, i)
		want[evs[i].GetId()] = true
	}
	// Both instances are frozen while the events are published: on a
	// loaded machine publishing takes seconds, and two instances that
	// deliver as the events come had delivered all 10,000 before the
	// first kill. Frozen, they start with the whole backlog waiting.
	a := s.procs["webhook-dispatcher"]
	a.signal(t, syscall.SIGSTOP)
	b.signal(t, syscall.SIGSTOP)
	s.publishEvents(t, evs...)
	a.signal(t, syscall.SIGCONT)
	b.signal(t, syscall.SIGCONT)
	t.Logf("published %d events by %s", events, time.Since(started).Round(time.Millisecond))

	// until polls cond (every 20 ms) until it holds, failing the test with
	// cond's account of where things stand if the budget runs out first.
	until := func(what string, by time.Time, cond func() (bool, string)) {
		t.Helper()
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(by) {
				t.Fatalf("fault test: %s: not reached %s after the start (%s)", what, time.Since(started).Round(time.Second), state)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// killMidDelivery waits until `after` deliveries have arrived and b
	// has delivered at least 50 itself, holds the receiver's answers until
	// both instances have every slot in flight, SIGKILLs b, and releases.
	// It returns the deliveries that were in flight at the kill.
	killMidDelivery := func(b *proc, after int) map[string]bool {
		t.Helper()
		until(fmt.Sprintf("%d deliveries arrived, 50 by instance B", after), deadline, func() (bool, string) {
			n, mine := rcv.Distinct(), b.delivered()
			return n >= after && mine >= 50, fmt.Sprintf("%d of %d arrived, instance B delivered %d", n, events, mine)
		})
		hold := rcv.Hold()
		// Both instances' slots fill within milliseconds with thousands of
		// events waiting; the wait stays under the attempt timeout, so
		// that A's held attempts do not time out.
		for end := time.Now().Add(900 * time.Millisecond); rcv.Waiting() < 2*concurrency && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		b.kill(t)
		held := map[string]bool{}
		for _, h := range rcv.Requests() {
			if h.HeldIn == hold {
				held[h.Delivery()] = true
			}
		}
		rcv.Release()
		t.Logf("SIGKILLed instance B at %s with %d requests in flight, %d of %d delivered", time.Since(started).Round(time.Millisecond), len(held), rcv.Distinct(), events)
		// A has at most `concurrency` of them; the rest were B's.
		if len(held) <= concurrency {
			t.Fatalf("only %d requests in flight at the kill: instance B was not mid-delivery", len(held))
		}
		return held
	}

	// The second kill comes as soon as the restarted B is at work, so
	// that thousands of events are still waiting however fast delivery is.
	held1 := killMidDelivery(b, events/5)
	b = s.startDispatcher(t)
	held2 := killMidDelivery(b, 0)
	b = s.startDispatcher(t)

	// The end: every event delivered and acked. The deliveries B held come
	// back after the ack wait.
	nc, err := nats.Connect(s.env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	until("every event delivered and acked", deadline, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, s.env.Stream.Name, "webhook-dispatcher")
		if err != nil {
			return false, err.Error()
		}
		info, err := c.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		n := rcv.Distinct()
		state := fmt.Sprintf("%d of %d arrived; consumer: %d pending, %d awaiting ack, %d redelivered",
			n, events, info.NumPending, info.NumAckPending, info.NumRedelivered)
		return n >= events && info.NumPending == 0 && info.NumAckPending == 0, state
	})
	elapsed := time.Since(started)

	// What the receiver got.
	hits := rcv.Requests()
	first := map[string][]byte{}
	copies := map[string]int{}
	var bad []string
	for _, h := range hits {
		if !want[h.Delivery()] {
			bad = append(bad, "unknown delivery "+h.Delivery())
			continue
		}
		copies[h.Delivery()]++
		if body, ok := first[h.Delivery()]; !ok {
			first[h.Delivery()] = h.Body
		} else if !bytes.Equal(body, h.Body) {
			bad = append(bad, fmt.Sprintf("delivery %s: a copy's body differs from the first:\n%s\n%s", h.Delivery(), body, h.Body))
		}
		if err := checkHook(h, secret); err != nil {
			bad = append(bad, fmt.Sprintf("delivery %s: %v", h.Delivery(), err))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d bad requests; the first: %s", len(bad), bad[:min(5, len(bad))])
	}
	var missing []string
	duplicated := 0
	for id := range want {
		switch {
		case copies[id] == 0:
			missing = append(missing, id)
		case copies[id] > 1:
			duplicated++
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("%d events never reached the receiver, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	// Of the requests in flight at a kill, at most `concurrency` were A's;
	// the others were B's, whose answers nobody recorded, so each of
	// those was sent again.
	for i, held := range []map[string]bool{held1, held2} {
		again := 0
		for id := range held {
			if copies[id] > 1 {
				again++
			}
		}
		if again < len(held)-concurrency {
			t.Errorf("kill %d: %d of the %d deliveries in flight were sent again, want at least instance B's %d", i+1, again, len(held), len(held)-concurrency)
		}
	}

	// The delivery log: one row per event, all delivered.
	log := s.deliveryLog(t, ws)
	if len(log) != events {
		t.Errorf("delivery log has %d rows, want %d", len(log), events)
	}
	notDelivered := map[string]int{}
	for id, row := range log {
		if !want[id] {
			t.Errorf("delivery log has unknown delivery %s", id)
		}
		if row.Status != "delivered" {
			notDelivered[row.Status]++
		}
	}
	if len(notDelivered) > 0 {
		t.Errorf("delivery log rows not delivered, by status: %v", notDelivered)
	}
	t.Logf("%d events delivered in %s through 2 SIGKILLs: %d requests, %d deliveries sent more than once",
		events, elapsed.Round(time.Millisecond), len(hits), duplicated)
}
