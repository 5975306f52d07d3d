package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/errs"
)

func TestKnowledgeBase(t *testing.T) {
	t.Parallel()
	s := newFlowsSetup(t)
	base := "/workspaces/" + s.ws
	docID := s.fr.addDocument(s.ws, "Returns <policy>", 4)

	list := s.b.get(base + "/kb")
	if list.status != http.StatusOK {
		t.Fatalf("GET kb = %d: %s", list.status, list.body)
	}
	mustContain(t, list, `<th scope="row">Returns &lt;policy&gt;</th>`, `<td data-label="Passages">4</td>`,
		`datetime="2026-11-24T04:00:00Z"`, `href="`+base+`/kb/`+docID+`/delete"`, `aria-current="page">Knowledge base</a>`,
		`<label for="title">Title</label>`, `<label for="markdown">Text (Markdown)</label>`, `<label for="kb-file">`)

	// From the textarea.
	r := s.b.postMultipart(base+"/kb", map[string]string{"csrf_token": s.csr, "title": " Журам ", "markdown": "# Журам\n\nТекст."}, nil)
	if r.status != http.StatusSeeOther || r.location() != base+"/kb?done=added" {
		t.Fatalf("add = %d %q: %s", r.status, r.location(), r.body)
	}
	assertDocumentSent(t, s, "Журам", "# Журам\n\nТекст.")
	mustContain(t, s.b.get(r.location()), `role="status">The document was added`, "<th scope=\"row\">Журам</th>")

	// From a Markdown file, which wins over the textarea.
	r = s.b.postMultipart(base+"/kb", map[string]string{"csrf_token": s.csr, "title": "FAQ", "markdown": "ignored"},
		&upload{field: "file", name: "faq.md", content: []byte("# FAQ\n\nQ?")})
	if r.status != http.StatusSeeOther {
		t.Fatalf("add a file = %d: %s", r.status, r.body)
	}
	assertDocumentSent(t, s, "FAQ", "# FAQ\n\nQ?")

	// Without the CSRF token: refused, nothing sent.
	calls := len(s.fr.received())
	if r := s.b.postMultipart(base+"/kb", map[string]string{"title": "FAQ", "markdown": "text"}, nil); r.status != http.StatusForbidden {
		t.Fatalf("add without the CSRF token = %d", r.status)
	}
	if got := len(s.fr.received()); got != calls {
		t.Fatalf("an add without the CSRF token reached the flow-runner: %+v", s.fr.received()[calls:])
	}

	// Without a title: said so, what was typed kept, nothing sent.
	r = s.b.postMultipart(base+"/kb", map[string]string{"csrf_token": s.csr, "title": "  ", "markdown": "kept <text>"}, nil)
	if r.status != http.StatusBadRequest {
		t.Fatalf("no title = %d", r.status)
	}
	mustContain(t, r, "Give the document a title", ">kept &lt;text&gt;</textarea>")
	for _, c := range s.fr.received()[calls:] {
		if c.method == http.MethodPost {
			t.Fatalf("a document without a title was sent: %+v", c)
		}
	}

	// The flow-runner's refusal, in words, the form kept.
	s.fr.mu.Lock()
	s.fr.refuse["POST /admin/workspaces/:ws/kb/documents"] = errs.InvalidRequest("markdown: larger than 1048576 bytes")
	s.fr.mu.Unlock()
	r = s.b.postMultipart(base+"/kb", map[string]string{"csrf_token": s.csr, "title": "Big", "markdown": "text"}, nil)
	if r.status != http.StatusBadRequest {
		t.Fatalf("a refused document = %d", r.status)
	}
	mustContain(t, r, "Markdown: larger than 1048576 bytes.", `value="Big"`, ">text</textarea>")

	// Delete: a confirmation, CSRF required, then the flow-runner's call
	// with the workspace guard.
	confirm := s.b.get(base + "/kb/" + docID + "/delete")
	if confirm.status != http.StatusOK {
		t.Fatalf("the confirmation = %d", confirm.status)
	}
	mustContain(t, confirm, "<h1>Delete Returns &lt;policy&gt;?</h1>", "Its 4 passages", `action="`+base+`/kb/`+docID+`/delete"`)
	path := "/admin/kb/documents/" + docID
	if r := s.b.do(http.MethodPost, base+"/kb/"+docID+"/delete", url.Values{}, nil); r.status != http.StatusForbidden {
		t.Fatalf("without the CSRF token = %d", r.status)
	}
	if s.fr.receivedAny(http.MethodDelete, path) {
		t.Fatal("a post without the CSRF token reached the flow-runner")
	}
	r = s.b.do(http.MethodPost, base+"/kb/"+docID+"/delete", url.Values{"csrf_token": {s.csr}}, nil)
	if r.status != http.StatusSeeOther || r.location() != base+"/kb?done=deleted" {
		t.Fatalf("delete = %d %q: %s", r.status, r.location(), r.body)
	}
	if c := s.fr.lastCall(t, http.MethodDelete, path); c.query != "workspace="+s.ws {
		t.Fatalf("delete query = %q", c.query)
	}
	after := s.b.get(r.location())
	mustContain(t, after, "The document was deleted.")
	if strings.Contains(after.body, "Returns &lt;policy&gt;") {
		t.Fatal("the deleted document is still listed")
	}
	// Deleting it again: not found, in words.
	r = s.b.do(http.MethodPost, base+"/kb/"+docID+"/delete", url.Values{"csrf_token": {s.csr}}, nil)
	if r.status != http.StatusNotFound || !strings.Contains(r.body, "This workspace has no such document") {
		t.Fatalf("a second delete = %d: %s", r.status, r.body)
	}
	// An id that is no id (urn:uuid:, 2,000 characters, a NUL, ../) is the
	// same 404, and the flow-runner is not asked.
	asked := len(s.fr.received())
	for _, bad := range []string{"urn:uuid:" + docID, strings.Repeat("a", 2000), "x%00y", "..%2F.."} {
		r = s.b.do(http.MethodPost, base+"/kb/"+bad+"/delete", url.Values{"csrf_token": {s.csr}}, nil)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "This workspace has no such document") {
			t.Fatalf("delete of %.40s = %d: %.300s", bad, r.status, r.body)
		}
	}
	if got := s.fr.received(); len(got) != asked {
		t.Fatalf("ids that are no ids reached the flow-runner: %+v", got[asked:])
	}
}

func assertDocumentSent(t *testing.T, s flowsSetup, title, markdown string) {
	t.Helper()
	c := s.fr.lastCall(t, http.MethodPost, "/admin/workspaces/"+s.ws+"/kb/documents")
	var body map[string]string
	if err := json.Unmarshal(c.body, &body); err != nil || body["title"] != title || body["markdown"] != markdown {
		t.Fatalf("add sent %s (%v)", c.body, err)
	}
}
