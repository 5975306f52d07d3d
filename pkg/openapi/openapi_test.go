package openapi

import (
	"encoding/json"
	"testing"
)

func TestDocumentLoadsAndValidates(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
}

func TestJSONIsTheSameDocument(t *testing.T) {
	var tree map[string]any
	if err := json.Unmarshal(JSON(), &tree); err != nil {
		t.Fatal(err)
	}
	if tree["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v", tree["openapi"])
	}
}
