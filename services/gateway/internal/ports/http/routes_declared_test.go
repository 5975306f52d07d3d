package http_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/api"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
	httpport "github.com/parleyhq/parley/services/gateway/internal/ports/http"
)

// TestAdminServesTheDeclaredRoutes: the admin endpoint serves exactly
// gatewayapi.AdminRoutes.
func TestAdminServesTheDeclaredRoutes(t *testing.T) {
	apicheck.CheckDeclaredRoutes(t, "gateway admin", httpport.NewAdmin(httpport.AdminDeps{Log: zap.NewNop()}), gatewayapi.AdminRoutes)
}

// TestPublicServesTheDeclaredRoutes: the gateway's listener serves
// gatewayapi.PublicRoutes under /v1 and the deprecated /api/v1, and
// beside them only the API's description; every other /v1 route is
// forwarded through its wildcard (TestRoutingMatchesTheDocument).
func TestPublicServesTheDeclaredRoutes(t *testing.T) {
	var want []api.Route
	for _, r := range gatewayapi.PublicRoutes {
		legacy := r
		legacy.Path = "/api/v1" + strings.TrimPrefix(r.Path, "/v1")
		want = append(want, r, legacy)
	}
	// The document under both bases, for every method so that one other
	// than GET or HEAD is 405 there; the reference page and its assets.
	for _, base := range []string{"/v1", "/api/v1"} {
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			want = append(want, api.Route{Method: m, Path: base + "/openapi.json"})
		}
	}
	for _, path := range []string{"/docs", "/docs/", "/docs/assets/:name"} {
		want = append(want, api.Route{Method: http.MethodGet, Path: path}, api.Route{Method: http.MethodHead, Path: path})
	}
	apicheck.CheckDeclaredRoutes(t, "gateway public", httpport.NewPublic(httpport.PublicDeps{Log: zap.NewNop()}), want)
}

// TestWireNamesAreTheDomains: the module and feature names pkg/api/gateway
// gives the gateway's clients are the account domain's, in its order.
func TestWireNamesAreTheDomains(t *testing.T) {
	var modules, features []string
	for _, m := range account.Modules {
		modules = append(modules, string(m))
	}
	for _, f := range account.Features {
		features = append(features, f.Name)
	}
	if !slices.Equal(modules, gatewayapi.Modules) {
		t.Errorf("account.Modules %v, gatewayapi.Modules %v", modules, gatewayapi.Modules)
	}
	if !slices.Equal(features, gatewayapi.Features) {
		t.Errorf("account.Features %v, gatewayapi.Features %v", features, gatewayapi.Features)
	}
}
