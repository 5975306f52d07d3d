// Package metricsdoc holds a service's Prometheus metrics to their one
// list, its table in docs/operations.md "Metrics": every metric the
// service registers is in its table under its name and type, and every
// metric of its table is registered, so that a renamed, added or dropped
// metric fails the service's observe test instead of a dashboard.
package metricsdoc

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/parleyhq/parley/pkg/testenv/opsdoc"
)

// registry is a prometheus.Registry that keeps the collectors registered
// on it, to read every metric's name from their descriptors: a vector's
// too before it has a series, which a scrape would not show.
type registry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

// Register implements prometheus.Registerer.
func (r *registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister implements prometheus.Registerer.
func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r *registry) Unregister(c prometheus.Collector) bool {
	if !r.Registry.Unregister(c) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = slices.DeleteFunc(r.collectors, func(k prometheus.Collector) bool { return k == c })
	return true
}

// The types of the documents' tables, as Prometheus names them.
const (
	Counter   = "counter"
	Gauge     = "gauge"
	Histogram = "histogram"
	Summary   = "summary"
	unknown   = "metric of unknown type (no series to read it from)"
)

// Exported reads the metrics register registers (a service's observe
// adapter's New, say): their types by name. A vector's type is its
// collector's; any other collector's is read from the series it collects
// (a gauge func's, a counter's).
func Exported(t testing.TB, register func(prometheus.Registerer)) map[string]string {
	t.Helper()
	r := &registry{Registry: prometheus.NewRegistry()}
	register(r)
	r.mu.Lock()
	collectors := slices.Clone(r.collectors)
	r.mu.Unlock()
	out := map[string]string{}
	for _, c := range collectors {
		kind := vectorType(c)
		collected := map[string]string{}
		if kind == "" {
			collected = collect(t, c)
		}
		for _, d := range drain(c.Describe) {
			name := fqName(t, d)
			switch {
			case kind != "":
				out[name] = kind
			case collected[name] != "":
				out[name] = collected[name]
			default:
				out[name] = unknown
			}
		}
	}
	return out
}

func vectorType(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return Counter
	case *prometheus.GaugeVec:
		return Gauge
	case *prometheus.HistogramVec:
		return Histogram
	case *prometheus.SummaryVec:
		return Summary
	}
	return ""
}

// drain returns what send (a collector's Describe or Collect) sends.
func drain[T any](send func(chan<- T)) []T {
	ch := make(chan T)
	go func() { send(ch); close(ch) }()
	var out []T
	for v := range ch {
		out = append(out, v)
	}
	return out
}

// collect reads the types of the series c collects, by name.
func collect(t testing.TB, c prometheus.Collector) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range drain(c.Collect) {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Errorf("collect %s: %v", m.Desc(), err)
			continue
		}
		kind := unknown
		switch {
		case pb.Counter != nil:
			kind = Counter
		case pb.Gauge != nil:
			kind = Gauge
		case pb.Histogram != nil:
			kind = Histogram
		case pb.Summary != nil:
			kind = Summary
		}
		out[fqName(t, m.Desc())] = kind
	}
	return out
}

// descName is the start of a descriptor's String(): client_golang gives
// no other way to read a descriptor's name.
var descName = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*")`)

func fqName(t testing.TB, d *prometheus.Desc) string {
	t.Helper()
	m := descName.FindStringSubmatch(d.String())
	if m == nil {
		t.Fatalf("no metric name in the descriptor %s: has client_golang changed Desc.String?", d)
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		t.Fatalf("descriptor %s: %v", d, err)
	}
	return name
}

// cell is a table's first cell: the metric's name, backquoted.
var cell = regexp.MustCompile("^`([a-zA-Z_:][a-zA-Z0-9_:]*)`$")

// Documented reads the metrics of service's table in "Metrics"
// ("gateway", "messaging", ...): their types by name.
func Documented(t testing.TB, service string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, row := range opsdoc.Rows(t, "Metrics", service)[service] {
		m := cell.FindStringSubmatch(row[0])
		if m == nil || len(row) < 2 {
			t.Fatalf("%s \"Metrics\" %q: row %q does not start with a metric's name and type", opsdoc.Guide, service, row)
		}
		out[m[1]] = row[1]
	}
	return out
}

// runtimePrefixes name the Go runtime's and the process's metrics, which
// every service exports (service.RegisterRuntime) and no table lists.
var runtimePrefixes = []string{"go_", "process_"}

// Compare lists, sorted, how the exported metrics differ from the
// documented ones of service: exported and not documented, documented and
// not exported, or of another type. The Go runtime's and the process's
// (go_*, process_*) are not the table's: they must be exported, whatever
// their names.
func Compare(service string, documented, exported map[string]string) []string {
	var problems []string
	where := fmt.Sprintf("%s \"Metrics\" %q", opsdoc.Guide, service)
	runtime := map[string]bool{}
	for name, kind := range exported {
		if i := slices.IndexFunc(runtimePrefixes, func(p string) bool { return strings.HasPrefix(name, p) }); i >= 0 {
			runtime[runtimePrefixes[i]] = true
			continue
		}
		doc, ok := documented[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s (%s) is exported but not documented in %s", name, kind, where))
		case doc != kind:
			problems = append(problems, fmt.Sprintf("%s is a %s, but %s says %s", name, kind, where, doc))
		}
	}
	for name := range documented {
		if _, ok := exported[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s is documented in %s but not exported", name, where))
		}
	}
	for _, p := range runtimePrefixes {
		if !runtime[p] {
			problems = append(problems, fmt.Sprintf("no %s* metric is exported: %s says every service exports the Go runtime's and the process's (service.RegisterRuntime)", p, opsdoc.Guide))
		}
	}
	slices.Sort(problems)
	return problems
}

// Check holds the metrics register registers to service's table:
// register calls the one function that registers every collector the
// service exports, the one its main calls, so that a metric added there is
// seen.
func Check(t testing.TB, service string, register func(prometheus.Registerer)) {
	t.Helper()
	for _, p := range Compare(service, Documented(t, service), Exported(t, register)) {
		t.Error(p)
	}
}
