package http

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's Prometheus series.
type Metrics struct {
	requests    *prometheus.CounterVec
	rateLimited prometheus.Counter
	upstream    *prometheus.HistogramVec
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "gateway", Name: "requests_total",
			Help: "API requests by route group (first path segment after /v1) and HTTP status.",
		}, []string{"group", "status"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "parley", Subsystem: "gateway", Name: "rate_limited_total",
			Help: "API requests refused with 429 rate_limited.",
		}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "parley", Subsystem: "gateway", Name: "upstream_duration_seconds",
			Help:    "Time a forwarded request spent in its owning service, by service.",
			Buckets: prometheus.DefBuckets,
		}, []string{"service"}),
	}
	reg.MustRegister(m.requests, m.rateLimited, m.upstream)
	return m
}
