package app

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the service's Prometheus series.
type Metrics struct {
	ingress         *prometheus.CounterVec
	sends           *prometheus.CounterVec
	outboxBacklog   prometheus.Gauge
	outboxPublished prometheus.Counter
	outboxFailures  prometheus.Counter
	outboxPruned    prometheus.Counter
}

// Ingress outcomes.
const (
	IngressStored       = "stored"
	IngressDuplicate    = "duplicate"
	IngressIgnored      = "ignored"
	IngressUnauthorized = "unauthorized"
	IngressNotFound     = "channel_not_found"
	IngressInvalid      = "invalid"
	IngressError        = "error"
)

// Send outcomes.
const (
	SendSent          = "sent"
	SendRefused       = "platform_error"
	SendOutsideWindow = "outside_window"
	SendInvalid       = "invalid"
	SendUnsupported   = "unsupported"
	SendError         = "error"
)

// NewMetrics creates the series and registers them with reg (nil: not
// exported, for tests that do not look).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ingress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "messaging_ingress_updates_total",
			Help: "Platform deliveries received, by platform and outcome.",
		}, []string{"platform", "outcome"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "messaging_sends_total",
			Help: "Messages sent through the API, by platform and outcome.",
		}, []string{"platform", "outcome"}),
		outboxBacklog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "messaging_outbox_backlog",
			Help: "Events written to the outbox and not yet published.",
		}),
		outboxPublished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "messaging_outbox_published_total",
			Help: "Events published to the stream by this process.",
		}),
		outboxFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "messaging_outbox_publish_failures_total",
			Help: "Relay passes that stopped on an error (NATS or the database).",
		}),
		outboxPruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "messaging_outbox_pruned_total",
			Help: "Published events deleted from the outbox.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.ingress, m.sends, m.outboxBacklog, m.outboxPublished, m.outboxFailures, m.outboxPruned)
	}
	return m
}

// Ingress counts one platform delivery.
func (m *Metrics) Ingress(platform, outcome string) {
	m.ingress.WithLabelValues(platform, outcome).Inc()
}

func (m *Metrics) send(platform, outcome string) {
	m.sends.WithLabelValues(platform, outcome).Inc()
}
