package observe_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/observe"
)

// The flow-runner's runs and chat turns count in the metrics
// docs/operations.md "Metrics" lists, names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "flow-runner", func(reg prometheus.Registerer) {
		observe.New(zap.NewNop(), reg)
	})
}
