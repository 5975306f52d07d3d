package http_test

import (
	"testing"

	"go.uber.org/zap"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	porthttp "github.com/parleyhq/parley/services/flow-runner/internal/ports/http"
)

// TestPublicRoutesAreDocumented: every /v1 route flow-runner serves is in
// pkg/openapi/openapi.yaml, and every operation documented under its
// segments is served.
func TestPublicRoutesAreDocumented(t *testing.T) {
	apicheck.CheckServiceRoutes(t, "flow-runner", porthttp.NewAPI(porthttp.APIDeps{Log: zap.NewNop()}))
}

// TestRoutesAreDeclared: each endpoint serves exactly the routes its
// pkg/api/flowrunner table declares.
func TestRoutesAreDeclared(t *testing.T) {
	apicheck.CheckDeclaredRoutes(t, "flow-runner api", porthttp.NewAPI(porthttp.APIDeps{Log: zap.NewNop()}), flowrunnerapi.APIRoutes)
	apicheck.CheckDeclaredRoutes(t, "flow-runner admin", porthttp.NewAdmin(porthttp.AdminDeps{Log: zap.NewNop()}), flowrunnerapi.AdminRoutes)
}
