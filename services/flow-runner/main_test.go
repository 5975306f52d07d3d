package main

import (
	"os"
	"testing"

	"github.com/parleyhq/parley/services/flow-runner/internal/adapters/script"
)

// TestMain lets the flow-runner's script sandbox start this test binary as
// its workers, as production starts the flow-runner's own.
func TestMain(m *testing.M) {
	script.RunWorkerIfAsked()
	os.Exit(m.Run())
}
