package apicheck

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/parleyhq/parley/pkg/openapi"
)

// BasePath is where the document's paths are served; LegacyBasePath is the
// deprecated address that answers the same operations.
const (
	BasePath       = "/v1"
	LegacyBasePath = "/api/v1"
)

// Document is the loaded OpenAPI document with a router over its paths.
type Document struct {
	T      *openapi3.T
	router routers.Router
}

// loadDocument parses the embedded document once per test binary: a
// parsed document is only read by the validators, so every checker can
// share it.
var loadDocument = sync.OnceValues(func() (*Document, error) {
	doc, err := openapi.Load()
	if err != nil {
		return nil, err
	}
	return NewDocument(doc)
})

// Load returns the embedded document of pkg/openapi, parsed once.
func Load() (*Document, error) { return loadDocument() }

// NewDocument routes requests over doc's paths. Paths are matched without
// the servers' base (BasePath): the caller strips it (see apiPath), which is
// how one operation answers under both /v1 and /api/v1.
func NewDocument(doc *openapi3.T) (*Document, error) {
	unbased := *doc
	unbased.Servers = nil
	router, err := legacy.NewRouter(&unbased)
	if err != nil {
		return nil, fmt.Errorf("apicheck: router: %w", err)
	}
	return &Document{T: &unbased, router: router}, nil
}

// apiPath is p without its public base (/v1 or /api/v1), and whether p is
// on the public API at all.
func apiPath(p string) (rest string, legacyBase, ok bool) {
	for _, base := range []string{BasePath, LegacyBasePath} {
		if r, found := strings.CutPrefix(p, base); found && (r == "" || r[0] == '/') {
			return r, base == LegacyBasePath, true
		}
	}
	return "", false, false
}

// find returns the operation req (already stripped of its base) is for.
func (d *Document) find(req *http.Request) (*routers.Route, map[string]string, error) {
	return d.router.FindRoute(req)
}

// schema returns the component schema called name, nil if there is none.
func (d *Document) schema(name string) *openapi3.SchemaRef {
	if d.T.Components == nil {
		return nil
	}
	return d.T.Components.Schemas[name]
}
