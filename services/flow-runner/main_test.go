package main

import (
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/metricsdoc"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/observe"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/script"
)

// TestMain lets the flow-runner's script sandbox start this test binary as
// its workers, as production starts the flow-runner's own.
func TestMain(m *testing.M) {
	script.RunWorkerIfAsked()
	os.Exit(m.Run())
}

// TestMetricsAreTheDocumentedOnes: what main registers is what
// docs/operations.md "Metrics" lists, names and types.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	metricsdoc.Check(t, "flow-runner", func(reg prometheus.Registerer) { observe.New(zap.NewNop(), reg) })
}
