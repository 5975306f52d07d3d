package http_test

import (
	"testing"

	"go.uber.org/zap"

	consoleapi "github.com/parleyhq/parley/pkg/api/console"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	httpport "github.com/parleyhq/parley/services/console/internal/ports/http"
)

// TestAdminServesTheDeclaredRoutes: the admin endpoint serves exactly
// consoleapi.AdminRoutes.
func TestAdminServesTheDeclaredRoutes(t *testing.T) {
	apicheck.CheckDeclaredRoutes(t, "console admin", httpport.NewAdmin(httpport.AdminDeps{Log: zap.NewNop()}), consoleapi.AdminRoutes)
}
