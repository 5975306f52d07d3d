package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

var (
	inFlightMetric    = regexp.MustCompile(`(?m)^parley_dispatcher_attempts_in_flight\{queue="events"\} (\d+)$`)
	waitingForWebhook = regexp.MustCompile(`(?m)^parley_dispatcher_attempts_waiting\{for="webhook"\} (\d+)$`)
)

// TestDispatcherIsolationEndToEnd (issue 11): through the built binaries,
// with one dispatcher and with three sharing the consumer, a workspace
// whose receiver accepts requests and never answers cannot hold up
// another's deliveries. Its attempts in flight stay within its share
// (DISPATCHER_WEBHOOK_CONCURRENCY=2 of DISPATCHER_CONCURRENCY=8 on each
// instance, as each instance's /metrics and the receiver agree); its
// other events wait in hand for its places; the healthy workspace's
// deliveries all arrive while its first attempts still hang (the attempt
// timeout is far off). When the receiver answers again, every one of its
// events is delivered: nothing was lost.
func TestDispatcherIsolationEndToEnd(t *testing.T) {
	t.Parallel()
	for _, instances := range []int{1, 3} {
		t.Run(fmt.Sprintf("instances=%d", instances), func(t *testing.T) {
			t.Parallel()
			isolationEndToEnd(t, instances)
		})
	}
}

func isolationEndToEnd(t *testing.T, instances int) {
	const (
		share       = 2
		nBad, nGood = 20, 40
	)
	s := startSuite(t,
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOK_RETRY_DELAYS=10ms,10ms,10ms",
		"WEBHOOK_ATTEMPT_TIMEOUT=25s", // no attempt times out while the healthy ones go
		"DISPATCHER_CONCURRENCY=8",
		fmt.Sprintf("DISPATCHER_WEBHOOK_CONCURRENCY=%d", share),
	)
	dispatchers := []*proc{s.procs["webhook-dispatcher"]}
	for range instances - 1 {
		dispatchers = append(dispatchers, s.startDispatcher(t))
	}
	// The broken receiver holds every request (up to 30 s) until Release.
	broken := receiver.New(t, receiver.Status(http.StatusOK), checkDeliveries(t))
	broken.Hold()
	healthy := receiver.New(t, receiver.Status(http.StatusOK), checkDeliveries(t))
	bad, badKey := s.developer(t)
	good, goodKey := s.developer(t)
	badSecret := s.saveWebhook(t, badKey, broken.URL)
	goodSecret := s.saveWebhook(t, goodKey, healthy.URL)

	events := func(ws string, n int) []*eventsv1.Event {
		evs := make([]*eventsv1.Event, n)
		for i := range evs {
			evs[i] = messageReceived(ws, i)
		}
		return evs
	}
	s.publishEvents(t, events(bad, nBad)...)
	// Every broken event is in hand: some in flight, the rest waiting for
	// the broken webhook's places, on whichever instances took them.
	sum := func(re *regexp.Regexp) int {
		n := 0
		for _, d := range dispatchers {
			n += int(metric(d.addr, re))
		}
		return n
	}
	wait.For(t, 30*time.Second, "the broken webhook's events in hand", func() error {
		inFlight, waiting := sum(inFlightMetric), sum(waitingForWebhook)
		if held := broken.Waiting(); held < share || inFlight != held || inFlight+waiting != nBad {
			return fmt.Errorf("receiver holds %d; instances: %d in flight, %d waiting for the webhook's places", held, inFlight, waiting)
		}
		return nil
	})

	s.publishEvents(t, events(good, nGood)...)
	wait.For(t, 30*time.Second, "the healthy workspace's deliveries", func() error {
		delivered := 0
		for _, r := range s.deliveryLog(t, good) {
			if r.Status == "delivered" {
				delivered++
			}
		}
		if delivered != nGood {
			return fmt.Errorf("%d of %d delivered", delivered, nGood)
		}
		return nil
	})
	// None of the hanging attempts ended meanwhile, and none went past the
	// webhook's share on any instance.
	if held, got := broken.Waiting(), len(broken.Requests()); held != got || held > share*instances {
		t.Fatalf("broken receiver holds %d of the %d requests it got; want all of them, at most %d (%d per instance)", held, got, share*instances, share)
	}
	t.Logf("%d healthy deliveries arrived while the broken receiver held %d requests", nGood, broken.Waiting())
	for _, h := range healthy.Requests() {
		if err := checkHook(h, goodSecret); err != nil {
			t.Errorf("healthy delivery %s: %v", h.Delivery(), err)
		}
	}
	if n := healthy.Distinct(); n != nGood || len(healthy.Requests()) != nGood {
		t.Errorf("healthy receiver got %d distinct deliveries in %d requests, want %d once each", n, len(healthy.Requests()), nGood)
	}

	// The receiver answers again: every broken event is delivered, once.
	broken.Release()
	wait.For(t, 60*time.Second, "the broken workspace's deliveries", func() error {
		log := s.deliveryLog(t, bad)
		delivered := 0
		for _, r := range log {
			if r.Status == "delivered" {
				delivered++
			}
		}
		if len(log) != nBad || delivered != nBad {
			return fmt.Errorf("%d rows, %d delivered; want %d delivered", len(log), delivered, nBad)
		}
		return nil
	})
	if n := broken.Distinct(); n != nBad {
		t.Errorf("broken receiver got %d distinct deliveries, want %d", n, nBad)
	}
	for _, h := range broken.Requests() {
		if err := checkHook(h, badSecret); err != nil {
			t.Errorf("delivery %s: %v", h.Delivery(), err)
		}
	}
}
