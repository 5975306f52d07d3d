package observe_test

import (
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/observe"
)

// TestMetricsAreTheDocumentedOnes: every metric the flow-runner registers
// is in its table in docs/operations.md "Metrics", under its name and
// type, and every metric of the table is registered.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	reg := metricsdoc.NewRegistry()
	observe.New(zap.NewNop(), reg)
	metricsdoc.Check(t, "flow-runner", reg)
}
