package http_test

import (
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	porthttp "github.com/parleyhq/parley/services/flow-runner/internal/ports/http"
)

// TestPublicRoutesAreDocumented: every /v1 route flow-runner serves is in
// pkg/openapi/openapi.yaml, and every operation documented under its
// segments is served.
func TestPublicRoutesAreDocumented(t *testing.T) {
	apicheck.CheckServiceRoutes(t, "flow-runner", porthttp.NewAPI(porthttp.APIDeps{Log: zap.NewNop()}))
}
