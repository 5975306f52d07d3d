package http_test

import (
	"testing"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	porthttp "github.com/parleyhq/parley/services/messaging/internal/ports/http"
)

func surfaces() (public, api, admin *echo.Echo) {
	log := zap.NewNop()
	return porthttp.NewPublic(porthttp.PublicDeps{Log: log}), porthttp.NewAPI(porthttp.APIDeps{Log: log}), porthttp.NewAdmin(porthttp.AdminDeps{Log: log})
}

// TestPublicRoutesAreDocumented: every /v1 route messaging serves is in
// pkg/openapi/openapi.yaml, and every operation documented under its
// segments is served.
func TestPublicRoutesAreDocumented(t *testing.T) {
	_, api, _ := surfaces()
	apicheck.CheckServiceRoutes(t, "messaging", api)
}

// TestRoutesAreDeclared: each surface serves exactly the routes
// pkg/api/messaging declares for it.
func TestRoutesAreDeclared(t *testing.T) {
	public, api, admin := surfaces()
	apicheck.CheckDeclaredRoutes(t, "messaging public", public, messagingapi.PublicRoutes)
	apicheck.CheckDeclaredRoutes(t, "messaging api", api, messagingapi.APIRoutes)
	apicheck.CheckDeclaredRoutes(t, "messaging admin", admin, messagingapi.AdminRoutes)
}
