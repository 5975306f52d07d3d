package observe_test

import (
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/messaging/internal/adapters/observe"
)

// TestMetricsAreTheDocumentedOnes: every metric messaging registers (main
// calls New and WatchWebchatStreams) is in its table in
// docs/operations.md "Metrics", under its name and type, and every metric
// of the table is registered.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	reg := metricsdoc.NewRegistry()
	observe.New(zap.NewNop(), reg).WatchWebchatStreams(func() int { return 0 })
	metricsdoc.Check(t, "messaging", reg)
}
