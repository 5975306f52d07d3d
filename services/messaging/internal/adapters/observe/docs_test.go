package observe_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/observe"
)

// What main registers, New and WatchWebchatStreams, is the metrics
// docs/operations.md "Metrics" lists, names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "messaging", func(reg prometheus.Registerer) {
		observe.New(zap.NewNop(), reg).WatchWebchatStreams(func() int { return 0 })
	})
}
