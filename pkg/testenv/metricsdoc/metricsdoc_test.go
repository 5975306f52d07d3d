package metricsdoc_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
)

// Every registered metric is read with its type: vectors without a
// series, plain metrics, gauge funcs registered once per const label.
func TestExportedReadsEveryRegisteredMetric(t *testing.T) {
	t.Parallel()
	gauge := func(queue string) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "parley", Subsystem: "x", Name: "in_flight", Help: "h", ConstLabels: prometheus.Labels{"queue": queue},
		}, func() float64 { return 1 })
	}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped_total", Help: "h"})
	register := func(reg prometheus.Registerer) {
		reg.MustRegister(
			prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "parley", Subsystem: "x", Name: "requests_total", Help: "h"}, []string{"status"}),
			prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "parley_x_lag", Help: "h"}, []string{"queue", "state"}),
			prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "parley_x_duration_seconds", Help: "h"}, []string{"result"}),
			prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: "parley_x_size_bytes", Help: "h"}, []string{"kind"}),
			prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_x_limited_total", Help: "h"}),
			prometheus.NewGauge(prometheus.GaugeOpts{Name: "parley_x_backlog", Help: "h"}),
			prometheus.NewHistogram(prometheus.HistogramOpts{Name: "parley_x_wait_seconds", Help: "h"}),
			gauge("events"), gauge("replay"),
			dropped,
		)
		if !reg.Unregister(dropped) {
			t.Fatal("not unregistered")
		}
	}
	want := map[string]string{
		"parley_x_requests_total":   "counter",
		"parley_x_lag":              "gauge",
		"parley_x_duration_seconds": "histogram",
		"parley_x_size_bytes":       "summary",
		"parley_x_limited_total":    "counter",
		"parley_x_backlog":          "gauge",
		"parley_x_wait_seconds":     "histogram",
		"parley_x_in_flight":        "gauge",
	}
	if got := metricsdoc.Exported(t, register); !maps.Equal(got, want) {
		t.Errorf("exported %v, want %v", got, want)
	}
}

// A metric exported and not documented, documented and not exported, or
// of another type is named; the Go runtime's and the process's are not
// the tables' to list, but must be exported.
func TestCompareNamesEachDifference(t *testing.T) {
	t.Parallel()
	documented := map[string]string{"parley_x_a_total": "counter", "parley_x_b": "gauge", "parley_x_gone_total": "counter"}
	exported := map[string]string{"parley_x_a_total": "counter", "parley_x_b": "histogram", "parley_x_new_total": "counter",
		"go_goroutines": "gauge", "process_cpu_seconds_total": "counter"}
	got := metricsdoc.Compare("x", documented, exported)
	want := []string{
		`parley_x_b is a histogram, but docs/operations.md "Metrics" "x" says gauge`,
		`parley_x_gone_total is documented in docs/operations.md "Metrics" "x" but not exported`,
		`parley_x_new_total (counter) is exported but not documented in docs/operations.md "Metrics" "x"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	same := map[string]string{"parley_x_a_total": "counter", "parley_x_b": "gauge", "parley_x_gone_total": "counter",
		"go_goroutines": "gauge", "process_cpu_seconds_total": "counter"}
	if got := metricsdoc.Compare("x", documented, same); len(got) != 0 {
		t.Errorf("the same metrics differ: %q", got)
	}
	delete(same, "process_cpu_seconds_total")
	want = []string{`no process_* metric is exported: docs/operations.md says every service exports the Go runtime's and the process's (service.RegisterRuntime)`}
	if got := metricsdoc.Compare("x", documented, same); !slices.Equal(got, want) {
		t.Errorf("without the process's metrics: %q, want %q", got, want)
	}
}

// A service's table is read from docs/operations.md "Metrics", names and
// types.
func TestDocumentedReadsTheServicesTable(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"parley_gateway_requests_total":            "counter",
		"parley_gateway_rate_limited_total":        "counter",
		"parley_gateway_upstream_duration_seconds": "histogram",
	}
	if got := metricsdoc.Documented(t, "gateway"); !maps.Equal(got, want) {
		t.Errorf("gateway's table: %v, want %v", got, want)
	}
}
