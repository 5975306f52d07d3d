// Package metrics exposes the dispatcher's Prometheus metrics: deliveries
// by outcome and the latency of every attempt.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/domain/delivery"
)

// Metrics implements app.Observer.
type Metrics struct {
	deliveries *prometheus.CounterVec
	attempts   *prometheus.HistogramVec
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
	reg.MustRegister(m.deliveries, m.attempts)
	return m
}

// AttemptFinished implements app.Observer.
func (m *Metrics) AttemptFinished(a delivery.Attempt) {
	result := "failure"
	if a.Succeeded() {
		result = "success"
	}
	m.attempts.WithLabelValues(result).Observe(a.Duration.Seconds())
}

// DeliveryFinished implements app.Observer.
func (m *Metrics) DeliveryFinished(event string, status delivery.Status) {
	m.deliveries.WithLabelValues(event, string(status)).Inc()
}
