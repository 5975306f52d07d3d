package observe_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/adapters/observe"
	"github.com/parleyhq/parley/services/webhook-dispatcher/internal/app"
)

// What main registers, New, WatchCapacity and NewSampler, is the metrics
// docs/operations.md "Metrics" lists, names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "webhook-dispatcher", func(reg prometheus.Registerer) {
		observe.New(zap.NewNop(), reg)
		observe.WatchCapacity(reg, func() app.Capacity { return app.Capacity{} })
		observe.NewSampler(reg, map[string]observe.LagFunc{"events": nil, "replay": nil}, nil, zap.NewNop())
	})
}
