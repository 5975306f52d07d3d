package adapters

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// Metrics are the run metrics on the process's registry.
type Metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var _ app.Metrics = (*Metrics)(nil)

// NewMetrics registers the run metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flow_runs_total",
			Help: "Invokes and continues that ran, by the status the run reached.",
		}, []string{"status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flow_run_duration_seconds",
			Help: "How long the engine took for one invoke or continue, by the status the run reached.",
			// From a few node runs without I/O to the 60 s budget.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"status"}),
	}
	reg.MustRegister(m.calls, m.duration)
	return m
}

// RunCall implements app.Metrics.
func (m *Metrics) RunCall(status run.Status, took time.Duration) {
	m.calls.WithLabelValues(string(status)).Inc()
	m.duration.WithLabelValues(string(status)).Observe(took.Seconds())
}
