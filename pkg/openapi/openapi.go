// Package openapi holds Parley's OpenAPI 3.1 document of the /v1 API:
// the hand-written openapi.yaml, the same document as JSON (what the
// gateway serves at GET /v1/openapi.json) and a loader for tests that
// validate requests and responses against it.
package openapi

import (
	"bytes"
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
	var root yaml.Node
	if err := yaml.Unmarshal(document, &root); err != nil {
		panic(fmt.Sprintf("openapi: embedded openapi.yaml is not YAML: %v", err))
	}
	var out bytes.Buffer
	if err := writeJSON(&out, &root); err != nil {
		panic(fmt.Sprintf("openapi: embedded openapi.yaml has no JSON form: %v", err))
	}
	return out.Bytes()
})

// writeJSON writes n as JSON with its mappings' keys in the order written
// (openapi, info, servers, … as in the YAML), not sorted as encoding/json
// sorts a map's, so the served document reads like the file.
func writeJSON(out *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: want one document, got %d", n.Line, len(n.Content))
		}
		return writeJSON(out, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(out, n.Alias)
	case yaml.MappingNode:
		out.WriteByte('{')
		for i := 0; i < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if key.Kind != yaml.ScalarNode || key.Tag == "!!merge" {
				return fmt.Errorf("line %d: only plain keys have a JSON form", key.Line)
			}
			if i > 0 {
				out.WriteByte(',')
			}
			k, err := json.Marshal(key.Value)
			if err != nil {
				return err
			}
			out.Write(k)
			out.WriteByte(':')
			if err := writeJSON(out, value); err != nil {
				return err
			}
		}
		out.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		out.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := writeJSON(out, item); err != nil {
				return err
			}
		}
		out.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		out.Write(b)
		return nil
	}
	return fmt.Errorf("line %d: a YAML node of kind %v has no JSON form", n.Line, n.Kind)
}

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
