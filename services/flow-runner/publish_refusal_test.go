package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestARefusedDocumentNamesNodeAndField: a document the parser refuses is
// 400 invalid_request with the parser's one line, and that line's parts
// also stand as fields of their own: the reason always, the node and the
// field only when the problem has one.
func TestARefusedDocumentNamesNodeAndField(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	tests := []struct {
		name, document                  string
		wantNode, wantField, wantReason string
	}{
		{"a node's field", doc("Bad", apiOnly, "hi", `{"id": "hi", "type": "send_message", "message": {"type": "text", "text": "x"}, "next": "nowhere"}`),
			"hi", "next", `unknown node "nowhere"`},
		{"a node's id, by its place (doc puts a start node first)", doc("Bad", apiOnly, "done", endNode, `{"id": "a/b", "type": "end"}`),
			"", "nodes[2].id", `"a/b" is not a node id (1-128 characters, no / or newline)`},
		{"no node and no field", "not json", "", "", ""},
		{"a name too long", doc(strings.Repeat("n", 201), apiOnly, "done", endNode),
			"", "name", "must be at most 200 characters (got 201)"},
	}
	for _, tt := range tests {
		status, body := h.admin(http.MethodPost, "/admin/workspaces/"+ws+"/flows", tt.document)
		wantError(t, status, body, http.StatusBadRequest, "invalid_request")
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %s", tt.name, body)
		}
		node, hasNode := got["node_id"]
		field, hasField := got["field"]
		if hasNode != (tt.wantNode != "") || hasNode && node != tt.wantNode ||
			hasField != (tt.wantField != "") || hasField && field != tt.wantField {
			t.Errorf("%s: body %s, want node_id %q and field %q", tt.name, body, tt.wantNode, tt.wantField)
		}
		reason, ok := got["reason"].(string)
		if !ok || reason == "" || tt.wantReason != "" && reason != tt.wantReason || got["message"] != prefix(tt.wantNode, tt.wantField)+reason {
			t.Errorf("%s: body %s, want reason %q ending the message", tt.name, body, tt.wantReason)
		}
	}
}

// prefix is how the parser's line names a node and a field before the
// reason.
func prefix(node, field string) string {
	var b strings.Builder
	if node != "" {
		b.WriteString("node " + strconv.Quote(node) + ": ")
	}
	if field != "" {
		b.WriteString("field " + strconv.Quote(field) + ": ")
	}
	return b.String()
}
