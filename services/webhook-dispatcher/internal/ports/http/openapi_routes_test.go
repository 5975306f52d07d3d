package http_test

import (
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	porthttp "github.com/parleyhq/parley/services/webhook-dispatcher/internal/ports/http"
)

// TestPublicRoutesAreDocumented: every /v1 route webhook-dispatcher serves
// is in pkg/openapi/openapi.yaml, and every operation documented under its
// segments is served.
func TestPublicRoutesAreDocumented(t *testing.T) {
	apicheck.CheckServiceRoutes(t, "webhook-dispatcher", porthttp.NewAPI(nil, zap.NewNop()))
}
