package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
	"github.com/parleyhq/parley/services/webhook-dispatcher/migrations"
)

// Three dispatchers against one stream share the one durable consumer:
// every event is delivered exactly once (no faults, so no redelivery), and
// each instance did part of the work, as its own /metrics shows.
func TestThreeInstancesShareTheWork(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	// Few slots each and a receiver that takes a little while, so that no
	// instance can drain the stream before the others pull.
	small := func(c *svcconfig.Config) { c.Concurrency, c.WebhookConcurrency, c.InHand = 4, 4, 4 }
	instances := []*harness{startOn(t, env, small, nil), startOn(t, env, small, nil), startOn(t, env, small, nil)}
	h := instances[0]
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		time.Sleep(3 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	})
	ws := uuid.NewString()
	secret := h.saveWebhook(ws, rcv.URL)
	const n = 300
	want := map[string]bool{}
	for range n {
		ev := messageEvent(ws, false)
		want[ev.GetId()] = true
		h.publish(ev)
	}
	info := h.consumerSettled(n)
	if info.NumRedelivered != 0 {
		t.Errorf("%d messages redelivered without any fault", info.NumRedelivered)
	}

	seen := map[string]int{}
	for _, got := range rcv.Requests() {
		id := got.Header.Get("X-Service-Delivery")
		seen[id]++
		if !want[id] {
			t.Errorf("receiver got unknown delivery %q", id)
		}
		if err := got.Verify(secret, time.Now()); err != nil {
			t.Errorf("delivery %s: %v", id, err)
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("delivery %s arrived %d times, want once", id, seen[id])
		}
	}
	var rows, delivered int
	_ = h.db.Raw(`SELECT count(*), count(*) FILTER (WHERE status = 'delivered' AND attempts = 1) FROM dispatch.deliveries WHERE workspace_id = ?`, ws).Row().Scan(&rows, &delivered)
	if rows != n || delivered != n {
		t.Errorf("log has %d rows, %d delivered at the first attempt; want %d of each", rows, delivered, n)
	}

	// Each instance's own counter: all did some, together all.
	total := 0
	for i, inst := range instances {
		c := deliveredCount(t, inst.metrics())
		if c == 0 {
			t.Errorf("instance %d delivered nothing; the consumer is not shared", i+1)
		}
		total += c
		t.Logf("instance %d delivered %d", i+1, c)
	}
	if total != n {
		t.Errorf("instances' metrics add up to %d deliveries, want %d", total, n)
	}
}

var deliveredMetric = regexp.MustCompile(`(?m)^parley_dispatcher_deliveries_total\{event="message\.received",outcome="delivered"\} (\d+)$`)

// deliveredCount reads the delivered message.received counter from a
// /metrics page (0 when absent).
func deliveredCount(t *testing.T, metrics string) int {
	t.Helper()
	m := deliveredMetric.FindStringSubmatch(metrics)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(fmt.Errorf("metric value %q: %w", m[1], err))
	}
	return n
}
