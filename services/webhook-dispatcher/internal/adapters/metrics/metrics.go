// Package metrics exposes the dispatcher's Prometheus metrics: deliveries
// by outcome, the latency of every attempt, and how receivers share the
// instance (attempts in flight and waiting, circuits).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// Metrics implements app.Observer.
type Metrics struct {
	deliveries     *prometheus.CounterVec
	attempts       *prometheus.HistogramVec
	notSent        prometheus.Counter
	circuitsOpened prometheus.Counter
}

var _ app.Observer = (*Metrics)(nil)

// New registers the metrics on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley",
			Subsystem: "dispatcher",
			Name:      "deliveries_total",
			Help:      "Deliveries that reached an outcome (delivered, failed, skipped), by event kind.",
		}, []string{"event", "outcome"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "parley",
			Subsystem: "dispatcher",
			Name:      "attempt_duration_seconds",
			Help:      "Time from sending a delivery attempt to the receiver's complete answer (or the failure).",
			Buckets:   []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"result"}),
	}
	m.notSent = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "parley",
		Subsystem: "dispatcher",
		Name:      "attempts_not_sent_total",
		Help:      "Attempts recorded as failed without being sent, because the webhook's circuit was open (not in attempt_duration_seconds).",
	})
	m.circuitsOpened = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "parley",
		Subsystem: "dispatcher",
		Name:      "circuits_opened_total",
		Help:      "Times a webhook's circuit opened on this instance: after attempts in a row without answer, or a failed probe.",
	})
	reg.MustRegister(m.deliveries, m.attempts, m.notSent, m.circuitsOpened)
	return m
}

// CapacityFunc reads what the instance's places and circuits hold.
type CapacityFunc func() app.Capacity

// WatchCapacity registers the gauges read from capacity at each scrape:
// attempts in flight (by queue), attempts waiting for a place (for their
// webhook's share, or for a slot of the instance) and open circuits.
func WatchCapacity(reg prometheus.Registerer, capacity CapacityFunc) {
	gauge := func(name, help string, labels prometheus.Labels, read func(app.Capacity) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "parley", Subsystem: "dispatcher", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 { return float64(read(capacity())) })
	}
	const (
		inFlight = "HTTP attempts sent and not yet answered on this instance."
		waiting  = "Attempts waiting for a place: for=webhook waits for the webhook's share (DISPATCHER_WEBHOOK_CONCURRENCY), for=instance holds it and waits for a slot of the instance."
	)
	reg.MustRegister(
		gauge("attempts_in_flight", inFlight, prometheus.Labels{"queue": "events"}, func(c app.Capacity) int { return c.InFlight }),
		gauge("attempts_in_flight", inFlight, prometheus.Labels{"queue": "replay"}, func(c app.Capacity) int { return c.ReplayInFlight }),
		gauge("attempts_waiting", waiting, prometheus.Labels{"for": "webhook"}, func(c app.Capacity) int { return c.WaitingForWebhook }),
		gauge("attempts_waiting", waiting, prometheus.Labels{"for": "instance"}, func(c app.Capacity) int { return c.WaitingForInstance }),
		gauge("open_circuits", "Webhooks whose circuit is open or half-open on this instance.", nil, func(c app.Capacity) int { return c.OpenCircuits }),
	)
}

// AttemptFinished implements app.Observer.
func (m *Metrics) AttemptFinished(a delivery.Attempt) {
	result := "failure"
	if a.Succeeded() {
		result = "success"
	}
	m.attempts.WithLabelValues(result).Observe(a.Duration.Seconds())
}

// AttemptNotSent implements app.Observer.
func (m *Metrics) AttemptNotSent() { m.notSent.Inc() }

// CircuitOpened implements app.Observer.
func (m *Metrics) CircuitOpened() { m.circuitsOpened.Inc() }

// DeliveryFinished implements app.Observer.
func (m *Metrics) DeliveryFinished(event string, status delivery.Status) {
	m.deliveries.WithLabelValues(event, string(status)).Inc()
}
