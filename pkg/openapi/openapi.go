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
//
// kin-openapi v0.153.0 reads everything the document uses of 3.1: webhooks,
// type arrays for null, const, $ref with sibling keywords, schema-level
// examples. Where it falls short, the document or the tests work around it:
//   - Validate checks media-type examples, but some with its OpenAPI 3.0
//     rules, which refuse null for a schema without "type"; schemas of any
//     JSON value therefore list every type, "null" included.
//   - Validate does not check schema-level "examples", nor the "uuid"
//     format unless a validator is given: the tests check both.
//   - Streamed answers: OpenAPI 3.1 has no schema for the items of a
//     text/event-stream (3.2's itemSchema), so the invoke's stream is a
//     string whose events the RunEvent schema describes.
//
// To validate requests and responses, use openapi3filter, which applies
// JSON Schema 2020-12 to a 3.1 document.
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
