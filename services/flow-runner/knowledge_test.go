package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

// policy reads one of the store policies the knowledge tests share.
func policy(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("internal", "domain", "knowledge", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// addKB adds a document over the admin route and wants 201.
func (h *harness) addKB(ws, title, markdown string) flowrunnerapi.KnowledgeDocument {
	h.t.Helper()
	status, body := h.admin(http.MethodPost, "/admin/workspaces/"+ws+"/kb/documents", flowrunnerapi.AddKnowledgeDocumentRequest{Title: title, Markdown: markdown})
	if status != http.StatusCreated {
		h.t.Fatalf("add document: %d %s", status, body)
	}
	return apicheck.Body[flowrunnerapi.KnowledgeDocumentResponse](h.t, body).Document
}

func (h *harness) listKB(ws string) []flowrunnerapi.KnowledgeDocument {
	h.t.Helper()
	status, body := h.admin(http.MethodGet, "/admin/workspaces/"+ws+"/kb/documents", nil)
	if status != http.StatusOK {
		h.t.Fatalf("list documents: %d %s", status, body)
	}
	out := apicheck.Body[flowrunnerapi.KnowledgeDocumentsResponse](h.t, body)
	if out.Documents == nil {
		h.t.Fatalf("list documents: %s, want a list", body)
	}
	return out.Documents
}

// TestKnowledgeBase adds the store policies over the admin routes, asks
// them through a flow's knowledge node in English and in Mongolian, and
// deletes them.
func TestKnowledgeBase(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()

	en := h.addKB(ws, "Store policy", policy(t, "store_policy_en.md"))
	mn := h.addKB(ws, "  Дэлгүүрийн\n журам ", policy(t, "store_policy_mn.md"))
	if en.Passages != 15 || en.Title != "Store policy" || en.CreatedAt == "" || mn.Title != "Дэлгүүрийн журам" || mn.Passages != 13 {
		t.Fatalf("added %+v and %+v", en, mn)
	}
	if list := h.listKB(ws); len(list) != 2 || list[0] != mn || list[1] != en {
		t.Fatalf("list %+v", list)
	}
	if list := h.listKB(other); len(list) != 0 {
		t.Fatalf("another workspace's list %+v", list)
	}

	// The knowledge node saves [{title, text, score}], best first.
	flowID := h.publish(ws, "", doc("Ask the policy", apiOnly, "kb",
		`{"id": "kb", "type": "knowledge", "query": "{{vars.input.q}}", "top_k": 2, "save_as": "found", "next": "done"}`,
		`{"id": "done", "type": "end", "output": {"found": "{{vars.found}}"}}`))
	ask := func(q string) []map[string]any {
		t.Helper()
		res := h.invoke(ws, flowID, map[string]any{"input": map[string]any{"q": q}})
		found, ok := res.Output["found"].([]any)
		if res.Status != "completed" || !ok {
			t.Fatalf("ask %q: %+v", q, res)
		}
		out := make([]map[string]any, len(found))
		for i, f := range found {
			out[i] = f.(map[string]any)
		}
		return out
	}
	found := ask("How many days do I have to return an item?")
	if len(found) != 2 || found[0]["title"] != "Store policy › Returns › Return window" ||
		!strings.Contains(found[0]["text"].(string), "within 30 days") || found[0]["score"].(float64) <= found[1]["score"].(float64) {
		t.Fatalf("English: %v", found)
	}
	found = ask("Бараагаа хэдэн хоногийн дотор буцааж болох вэ?")
	if len(found) != 2 || found[0]["title"] != "Дэлгүүрийн журам › Буцаалт › Буцаах хугацаа" {
		t.Fatalf("Mongolian: %v", found)
	}
	if found = ask("?"); len(found) != 0 {
		t.Fatalf("nothing to ask: %v", found)
	}

	// Refusals name the field.
	refusals := []struct {
		name, path string
		body       any
		want       string
	}{
		{"no title", "/admin/workspaces/" + ws + "/kb/documents", map[string]string{"markdown": "text"}, "title: is required"},
		{"no text", "/admin/workspaces/" + ws + "/kb/documents", map[string]string{"title": "T", "markdown": "# Only a heading\n"}, "markdown: has no text"},
		{"too large", "/admin/workspaces/" + ws + "/kb/documents", map[string]string{"title": "T", "markdown": strings.Repeat("word ", 110_000)}, "markdown: is 550000 bytes, over the limit of 524288"},
		{"a NUL", "/admin/workspaces/" + ws + "/kb/documents", map[string]string{"title": "T", "markdown": "a\x00b"}, "NUL character"},
		{"title not a string", "/admin/workspaces/" + ws + "/kb/documents", map[string]any{"title": 1, "markdown": "x"}, "title must be a string"},
		{"not JSON", "/admin/workspaces/" + ws + "/kb/documents", "# Markdown itself", "not valid JSON"},
		{"workspace", "/admin/workspaces/nope/kb/documents", map[string]string{"title": "T", "markdown": "x"}, "workspace must be a workspace id (UUID)"},
	}
	for _, r := range refusals {
		status, body := h.admin(http.MethodPost, r.path, r.body)
		if msg := wantError(t, status, body, http.StatusBadRequest, "invalid_request"); !strings.Contains(msg, r.want) {
			t.Errorf("%s: %q, want it to say %q", r.name, msg, r.want)
		}
	}
	status, body := h.admin(http.MethodGet, "/admin/workspaces/nope/kb/documents", nil)
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")

	// Delete: not through another workspace; then gone, passages and all.
	status, body = h.admin(http.MethodDelete, "/admin/kb/documents/"+en.ID+"?workspace="+other, nil)
	wantError(t, status, body, http.StatusNotFound, "document_not_found")
	status, body = h.admin(http.MethodDelete, "/admin/kb/documents/"+en.ID+"?workspace=nope", nil)
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")
	status, body = h.admin(http.MethodDelete, "/admin/kb/documents/"+en.ID+"?workspace="+ws, nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"deleted":true`) || !strings.Contains(string(body), en.ID) {
		t.Fatalf("delete: %d %s", status, body)
	}
	for _, id := range []string{en.ID, "nope"} {
		status, body = h.admin(http.MethodDelete, "/admin/kb/documents/"+id, nil)
		wantError(t, status, body, http.StatusNotFound, "document_not_found")
	}
	if found = ask("How many days do I have to return an item?"); len(found) != 0 {
		t.Fatalf("a deleted document answered: %v", found)
	}
	status, _ = h.admin(http.MethodDelete, "/admin/kb/documents/"+mn.ID, nil)
	if list := h.listKB(ws); status != http.StatusOK || len(list) != 0 {
		t.Fatalf("after deleting both: %d %+v", status, list)
	}
}
