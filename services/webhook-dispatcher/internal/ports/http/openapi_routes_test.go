package http_test

import (
	"testing"

	"go.uber.org/zap"

	dispatcherapi "github.com/parleyhq/parley/pkg/api/dispatcher"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	porthttp "github.com/parleyhq/parley/services/webhook-dispatcher/internal/ports/http"
)

// TestPublicRoutesAreDocumented: every /v1 route webhook-dispatcher serves
// is in pkg/openapi/openapi.yaml, and every operation documented under its
// segments is served.
func TestPublicRoutesAreDocumented(t *testing.T) {
	apicheck.CheckServiceRoutes(t, "webhook-dispatcher", porthttp.NewAPI(porthttp.APIDeps{Log: zap.NewNop()}))
}

// TestRoutesAreDeclared: each endpoint serves exactly the routes its
// pkg/api/dispatcher table declares.
func TestRoutesAreDeclared(t *testing.T) {
	apicheck.CheckDeclaredRoutes(t, "webhook-dispatcher api", porthttp.NewAPI(porthttp.APIDeps{Log: zap.NewNop()}), dispatcherapi.APIRoutes)
	apicheck.CheckDeclaredRoutes(t, "webhook-dispatcher admin", porthttp.NewAdmin(porthttp.AdminDeps{Log: zap.NewNop()}), dispatcherapi.AdminRoutes)
}
