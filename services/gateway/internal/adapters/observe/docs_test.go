package observe_test

import (
	"testing"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/gateway/internal/adapters/observe"
)

// TestMetricsAreTheDocumentedOnes: every metric the gateway registers is in
// its table in docs/operations.md "Metrics", under its name and type, and
// every metric of the table is registered.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	reg := metricsdoc.NewRegistry()
	observe.New(reg)
	metricsdoc.Check(t, "gateway", reg)
}
