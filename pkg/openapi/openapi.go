// Package openapi holds Parley's OpenAPI 3.1 document of the /v1 API:
// the hand-written openapi.yaml, the same document as JSON (what the
// gateway serves at GET /v1/openapi.json) and a loader for tests that
// validate requests and responses against it.
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	yaml "go.yaml.in/yaml/v4"
)

//go:embed openapi.yaml
var document []byte

// YAML returns the document as written. The slice is shared: do not modify it.
func YAML() []byte { return document }

var documentJSON = sync.OnceValue(func() []byte {
	var tree any
	if err := yaml.Unmarshal(document, &tree); err != nil {
		panic(fmt.Sprintf("openapi: embedded openapi.yaml is not YAML: %v", err))
	}
	out, err := json.Marshal(tree)
	if err != nil {
		panic(fmt.Sprintf("openapi: embedded openapi.yaml has no JSON form: %v", err))
	}
	return out
})

// JSON returns the document converted to JSON, converted once on first use.
// The slice is shared: do not modify it. The embedded document is checked by
// this package's tests, so a conversion failure is a build defect and panics.
func JSON() []byte { return documentJSON() }

// Load parses the document with kin-openapi, resolves its $refs and validates
// it. Each call returns a fresh *openapi3.T that the caller may keep.
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(document)
	if err != nil {
		return nil, fmt.Errorf("openapi: load: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("openapi: validate: %w", err)
	}
	return doc, nil
}
