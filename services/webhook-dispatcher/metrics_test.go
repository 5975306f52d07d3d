package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/observe"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
)

// scrape reads the dispatcher's /metrics and returns each sample line's
// value by its series (name and labels, as written).
func (h *harness) scrape() map[string]float64 {
	h.t.Helper()
	resp, err := http.Get("http://" + h.cfg.Addr + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^(parley_dispatcher_[^ ]+) ([^ \n]+)$`).FindAllStringSubmatch(string(raw), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			h.t.Fatalf("metric %s value %q", m[1], m[2])
		}
		out[m[1]] = v
	}
	return out
}

// waitMetrics scrapes until check accepts the values.
func (h *harness) waitMetrics(what string, check func(m map[string]float64) error) map[string]float64 {
	h.t.Helper()
	var m map[string]float64
	wait.For(h.t, 15*time.Second, what, func() error {
		m = h.scrape()
		return check(m)
	})
	return m
}

const (
	eventsPending    = `parley_dispatcher_consumer_lag{queue="events",state="pending"}`
	eventsAckPending = `parley_dispatcher_consumer_lag{queue="events",state="ack_pending"}`
	replayPending    = `parley_dispatcher_consumer_lag{queue="replay",state="pending"}`
	replayAckPending = `parley_dispatcher_consumer_lag{queue="replay",state="ack_pending"}`
	pausedWebhooks   = `parley_dispatcher_paused_webhooks`
)

// /metrics shows the consumer lag while a receiver holds deliveries up and
// its return to zero after, the paused webhooks, deliveries by outcome and
// the attempt latency histogram.
func TestMetricsShowLagPausedWebhooksAndOutcomes(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) {
		c.Concurrency, c.WebhookConcurrency = 1, 1
		c.PauseAfter = 3
		c.RetryDelays = nil
	}, nil)
	release := make(chan struct{})
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		<-release
		w.WriteHeader(http.StatusInternalServerError)
	})
	ws := uuid.NewString()
	h.saveWebhook(ws, rcv.URL)

	m := h.waitMetrics("idle gauges", func(m map[string]float64) error {
		for _, s := range []string{eventsPending, eventsAckPending, replayPending, replayAckPending, pausedWebhooks} {
			if v, ok := m[s]; !ok || v != 0 {
				return fmt.Errorf("%s = %v (present %v), want 0", s, v, ok)
			}
		}
		return nil
	})

	// Three events, the receiver holding the first: none is settled.
	for range 3 {
		h.publish(messageEvent(ws, false))
	}
	rcv.Wait(t, 1)
	m = h.waitMetrics("lag of 3", func(m map[string]float64) error {
		if m[eventsPending]+m[eventsAckPending] != 3 || m[eventsAckPending] < 1 {
			return fmt.Errorf("pending %v, ack pending %v", m[eventsPending], m[eventsAckPending])
		}
		return nil
	})

	// Released: all three fail, which pauses the webhook.
	close(release)
	m = h.waitMetrics("settled and paused", func(m map[string]float64) error {
		if m[eventsPending] != 0 || m[eventsAckPending] != 0 || m[pausedWebhooks] != 1 {
			return fmt.Errorf("pending %v, ack pending %v, paused %v", m[eventsPending], m[eventsAckPending], m[pausedWebhooks])
		}
		return nil
	})
	if v := m[`parley_dispatcher_deliveries_total{event="message.received",outcome="failed"}`]; v != 3 {
		t.Errorf("failed deliveries %v, want 3", v)
	}
	if v := m[`parley_dispatcher_attempt_duration_seconds_count{result="failure"}`]; v != 3 {
		t.Errorf("failed attempts %v, want 3", v)
	}
	if v := m[`parley_dispatcher_attempt_duration_seconds_sum{result="failure"}`]; v <= 0 || v > 30 {
		t.Errorf("attempt durations sum to %vs", v)
	}
	if v := m[`parley_dispatcher_attempt_duration_seconds_bucket{result="failure",le="+Inf"}`]; v != 3 {
		t.Errorf("+Inf bucket %v, want 3", v)
	}

	// An event while paused is counted as skipped; saving again unpauses.
	skipped := `parley_dispatcher_deliveries_total{event="message.received",outcome="skipped"}`
	h.publish(messageEvent(ws, false))
	h.waitMetrics("skipped while paused", func(m map[string]float64) error {
		if m[skipped] != 1 {
			return fmt.Errorf("skipped %v", m[skipped])
		}
		return nil
	})
	call[dispatcherapi.SavedWebhook](h, "", http.MethodPost, "/admin/webhooks/"+ws+"/resave", nil, http.StatusOK)
	h.waitMetrics("no paused webhook", func(m map[string]float64) error {
		if m[pausedWebhooks] != 0 {
			return fmt.Errorf("paused %v", m[pausedWebhooks])
		}
		return nil
	})
}

// TestMetricsAreTheDocumentedOnes: what main registers is what
// docs/operations.md "Metrics" lists, names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "webhook-dispatcher", func(reg prometheus.Registerer) { observe.Register(reg, zap.NewNop(), observe.Sources{}) })
}
