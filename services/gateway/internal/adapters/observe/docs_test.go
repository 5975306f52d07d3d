package observe_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/gateway/internal/adapters/observe"
)

// The gateway registers the metrics docs/operations.md "Metrics" lists,
// names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "gateway", func(reg prometheus.Registerer) {
		observe.New(reg)
	})
}
