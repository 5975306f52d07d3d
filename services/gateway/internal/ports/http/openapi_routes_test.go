package http

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

// TestRoutingMatchesTheDocument compares what the gateway serves under /v1
// with pkg/openapi/openapi.yaml. Every documented operation is either
// forwarded by the routing table (routes.go) or one of the gateway's own
// routes; every segment the table routes, and every path of the gateway's
// own, has documented operations — a segment or a route added without
// documentation fails here. Which routes each service serves under its
// segments is that service's TestPublicRoutesAreDocumented.
func TestRoutingMatchesTheDocument(t *testing.T) {
	doc, err := apicheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	documented := doc.DocumentedRoutes()

	e := NewPublic(PublicDeps{Log: zap.NewNop()})
	// The gateway's own routes under /v1; its /v1 wildcards go to serve,
	// which answers /v1/me or forwards by the routing table.
	own := apicheck.EchoRoutes(e)

	for _, r := range documented {
		path := strings.ReplaceAll(r.Path, "{}", "p1") // what a client would send
		if _, forwarded := resolve(path); !forwarded && !slices.Contains(own, r) {
			t.Errorf("pkg/openapi/openapi.yaml documents %s, which the gateway neither routes (routes.go) nor answers", r)
		}
	}
	for _, r := range own {
		if !slices.ContainsFunc(documented, func(d apicheck.Route) bool { return d.Path == r.Path }) {
			t.Errorf("the gateway serves %s, which pkg/openapi/openapi.yaml does not document", r.Path)
		}
	}
	segments := apicheck.Segments(documented)
	routed := []string{"me"} // resolve's own: the gateway answers it
	for segment := range owners {
		routed = append(routed, segment)
	}
	slices.Sort(routed)
	for _, segment := range routed {
		if !slices.Contains(segments, segment) {
			t.Errorf("the gateway routes /v1/%s, under which pkg/openapi/openapi.yaml documents nothing", segment)
		}
	}
}
