// Package observe is the gateway's Prometheus series, the only package of
// the gateway that imports Prometheus: what the Developer API answered,
// refused for rate and waited for from the services behind it. The names,
// labels and help texts are documented in docs/operations.md.
package observe

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/service"
	httpport "github.com/parleyhq/parley/services/gateway/internal/ports/http"
)

// Observer counts what the ports tell it.
type Observer struct {
	requests    *prometheus.CounterVec
	rateLimited prometheus.Counter
	upstream    *prometheus.HistogramVec
}

var _ httpport.Observer = (*Observer)(nil)

// New registers with reg every metric the gateway exports, the runtime's
// too: main registers nothing else, and the metrics test calls New as main
// does.
func New(reg prometheus.Registerer) *Observer {
	o := &Observer{
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
	reg.MustRegister(o.requests, o.rateLimited, o.upstream)
	service.RegisterRuntime(reg)
	return o
}

// Answered implements httpport.Observer.
func (o *Observer) Answered(group string, status int) {
	o.requests.WithLabelValues(group, strconv.Itoa(status)).Inc()
}

// RateLimited implements httpport.Observer.
func (o *Observer) RateLimited() { o.rateLimited.Inc() }

// Forwarded implements httpport.Observer.
func (o *Observer) Forwarded(service string, took time.Duration) {
	o.upstream.WithLabelValues(service).Observe(took.Seconds())
}
