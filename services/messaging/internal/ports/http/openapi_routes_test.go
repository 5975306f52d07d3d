package http_test

import (
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	porthttp "github.com/parleyhq/parley/services/messaging/internal/ports/http"
)

// TestPublicRoutesAreDocumented: every /v1 route messaging serves is in
// pkg/openapi/openapi.yaml, and every operation documented under its
// segments is served.
func TestPublicRoutesAreDocumented(t *testing.T) {
	e := httpx.NewEcho(zap.NewNop())
	porthttp.New(nil, nil, porthttp.Options{}, nil).RegisterAPI(e)
	apicheck.CheckServiceRoutes(t, "messaging", e)
}
