package observe_test

import (
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/observe"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
)

// TestMetricsAreTheDocumentedOnes: every metric the dispatcher registers
// (main calls New, WatchCapacity and NewSampler) is in its table in
// docs/operations.md "Metrics", under its name and type, and every metric
// of the table is registered.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	reg := metricsdoc.NewRegistry()
	observe.New(zap.NewNop(), reg)
	observe.WatchCapacity(reg, func() app.Capacity { return app.Capacity{} })
	observe.NewSampler(reg, map[string]observe.LagFunc{"events": nil, "replay": nil}, nil, zap.NewNop())
	metricsdoc.Check(t, "webhook-dispatcher", reg)
}
