package main

import (
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestAdminRoutesRefuseHostileInput sends every flow-runner admin route
// what a careless or hostile operator (or a broken caller) might: ids that
// are no ids (the urn:uuid: form uuid.Parse takes and PostgreSQL refuses
// among them), a NUL, 2,000 characters, bodies of the wrong shape. Each
// is refused with its documented status and code in the error shape,
// never a 500, and nothing refused is published.
func TestAdminRoutesRefuseHostileInput(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	urn := "urn:uuid:" + ws
	long := strings.Repeat("a", 2000)
	minimal := `{"name":"ab","triggers":["api"],"nodes":[{"id":"start","type":"start","next":"end"},{"id":"end","type":"end"}]}`
	type refusal apicheck.Refusal // a local type: its table is unkeyed
	tests := []refusal{
		{"flows of no workspace id", "GET", "/admin/workspaces/not-a-uuid/flows", "", 400, "invalid_request"},
		{"flows of a URN", "GET", "/admin/workspaces/" + urn + "/flows", "", 400, "invalid_request"},
		{"flows of a NUL", "GET", "/admin/workspaces/%00/flows", "", 400, "invalid_request"},
		{"flows of 2,000 characters", "GET", "/admin/workspaces/" + long + "/flows", "", 400, "invalid_request"},
		{"flows of ..", "GET", "/admin/workspaces/../flows", "", 400, "invalid_request"},
		{"runs of a URN", "GET", "/admin/workspaces/" + urn + "/runs", "", 400, "invalid_request"},
		{"runs of a URN flow", "GET", "/admin/workspaces/" + ws + "/runs?flow_id=urn:uuid:" + id, "", 400, "invalid_request"},
		{"runs of a URN conversation", "GET", "/admin/workspaces/" + ws + "/runs?conversation_id=urn:uuid:" + id, "", 400, "invalid_request"},
		{"runs, limit given twice", "GET", "/admin/workspaces/" + ws + "/runs?limit=1&limit=2", "", 400, "invalid_request"},
		{"runs, limit too large", "GET", "/admin/workspaces/" + ws + "/runs?limit=1000000", "", 400, "invalid_request"},
		{"runs, before not a time", "GET", "/admin/workspaces/" + ws + "/runs?before=" + long, "", 400, "invalid_request"},
		{"run of a URN", "GET", "/admin/workspaces/" + ws + "/runs/" + urn, "", 404, "run_not_found"},
		{"run of a NUL", "GET", "/admin/workspaces/" + ws + "/runs/%00", "", 404, "run_not_found"},
		{"versions of a URN flow", "GET", "/admin/flows/urn:uuid:" + id + "/versions?workspace_id=" + ws, "", 404, "flow_not_found"},
		{"versions for a URN workspace", "GET", "/admin/flows/" + id + "/versions?workspace_id=" + urn, "", 400, "invalid_request"},
		{"version not a number", "GET", "/admin/flows/" + id + "/versions/abc?workspace_id=" + ws, "", 400, "invalid_request"},
		{"version past int64", "GET", "/admin/flows/" + id + "/versions/99999999999999999999?workspace_id=" + ws, "", 400, "invalid_request"},
		{"version 0", "GET", "/admin/flows/" + id + "/versions/0?workspace_id=" + ws, "", 400, "invalid_request"},
		{"version past the last", "GET", "/admin/flows/" + id + "/versions/2?workspace_id=" + ws, "", 404, "flow_version_not_found"},
		{"chat flow of a URN channel", "GET", "/admin/channels/" + urn + "/chat-flow", "", 400, "invalid_request"},
		{"knowledge of a URN", "GET", "/admin/workspaces/" + urn + "/kb/documents", "", 400, "invalid_request"},
		{"publish to a URN", "POST", "/admin/workspaces/" + urn + "/flows", minimal, 400, "invalid_request"},
		{"publish a version of a URN flow", "POST", "/admin/workspaces/" + ws + "/flows?flow_id=urn:uuid:" + id, minimal, 404, "flow_not_found"},
		{"publish a version of no flow id", "POST", "/admin/workspaces/" + ws + "/flows?flow_id=not-a-uuid", minimal, 404, "flow_not_found"},
		{"publish an array", "POST", "/admin/workspaces/" + ws + "/flows", `[]`, 400, "invalid_request"},
		{"publish nothing", "POST", "/admin/workspaces/" + ws + "/flows", "", 400, "invalid_request"},
		{"deactivate a URN flow", "POST", "/admin/flows/urn:uuid:" + id + "/deactivate", "", 404, "flow_not_found"},
		{"deactivate for a URN workspace", "POST", "/admin/flows/" + id + "/deactivate?workspace_id=" + urn, "", 400, "invalid_request"},
		{"chat flow of a URN channel set", "PUT", "/admin/channels/" + urn + "/chat-flow", `{"flow_id":"` + id + `","workspace_id":"` + ws + `"}`, 400, "invalid_request"},
		{"chat flow for a URN workspace", "PUT", "/admin/channels/" + ws + "/chat-flow", `{"flow_id":"` + id + `","workspace_id":"` + urn + `"}`, 400, "invalid_request"},
		{"chat flow a URN flow", "PUT", "/admin/channels/" + ws + "/chat-flow", `{"flow_id":"urn:uuid:` + id + `","workspace_id":"` + ws + `"}`, 404, "flow_not_found"},
		{"chat flow id not a string", "PUT", "/admin/channels/" + ws + "/chat-flow", `{"flow_id":1}`, 400, "invalid_request"},
		{"chat flow id a NUL", "PUT", "/admin/channels/" + ws + "/chat-flow", `{"flow_id":"\u0000","workspace_id":"` + ws + `"}`, 400, "invalid_request"},
		{"clear the chat flow of a URN", "DELETE", "/admin/channels/" + urn + "/chat-flow", "", 400, "invalid_request"},
		{"add knowledge to a URN", "POST", "/admin/workspaces/" + urn + "/kb/documents", `{"title":"a","markdown":"b"}`, 400, "invalid_request"},
		{"knowledge title of 4,000", "POST", "/admin/workspaces/" + ws + "/kb/documents", `{"title":"` + long + long + `","markdown":"b"}`, 400, "invalid_request"},
		{"knowledge title a number", "POST", "/admin/workspaces/" + ws + "/kb/documents", `{"title":1}`, 400, "invalid_request"},
		{"delete knowledge of a URN", "DELETE", "/admin/kb/documents/" + urn, "", 404, "document_not_found"},
		{"delete knowledge for a URN workspace", "DELETE", "/admin/kb/documents/" + ws + "?workspace=" + urn, "", 400, "invalid_request"},
	}
	for _, tt := range tests {
		var body any
		if tt.Body != "" {
			body = tt.Body
		}
		status, raw := h.admin(tt.Method, tt.Path, body)
		apicheck.CheckRefusal(t, apicheck.Refusal(tt), status, raw)
	}
	// The public routes read their ids through the same check: a URN run id
	// was a 500 there too.
	for _, path := range []string{"/v1/flows/" + id + "/runs/urn:uuid:" + id, "/v1/flows/urn:uuid:" + id + "/runs/urn:uuid:" + id} {
		status, raw := h.api(ws, full, http.MethodGet, path, nil)
		apicheck.CheckRefusal(t, apicheck.Refusal{What: "public run of a URN", Method: "GET", Path: path, Status: 404, Code: "run_not_found"}, status, raw)
	}
	// Nothing refused was published: the workspace has its one flow, at
	// its first version, still active.
	status, raw := h.admin(http.MethodGet, "/admin/workspaces/"+ws+"/flows", nil)
	var list struct {
		Flows []struct {
			ID, Status       string
			PublishedVersion int `json:"published_version"`
		}
	}
	decode(t, raw, &list)
	if status != http.StatusOK || len(list.Flows) != 1 || list.Flows[0].ID != id || list.Flows[0].PublishedVersion != 1 || list.Flows[0].Status != "active" {
		t.Errorf("flows after the refusals: %d %s", status, raw)
	}
}

// TestAdminNoIDWording: an id the admin routes refuse is named in the
// words every service uses ("workspace_id must be a workspace id
// (UUID)"), and what was sent is not echoed back (an operator's 2,000
// characters were).
func TestAdminNoIDWording(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	long := strings.Repeat("a", 2000)
	for _, tt := range []struct{ method, path, body, message string }{
		{"GET", "/admin/workspaces/" + long + "/flows", "", "workspace must be a workspace id (UUID)"},
		{"GET", "/admin/workspaces/" + ws + "/runs?flow_id=" + long, "", "flow_id must be a flow id (UUID)"},
		{"GET", "/admin/workspaces/" + ws + "/runs?conversation_id=" + long, "", "conversation_id must be a conversation id (UUID)"},
		{"GET", "/admin/flows/" + ws + "/versions?workspace_id=" + long, "", "workspace_id must be a workspace id (UUID)"},
		{"GET", "/admin/channels/" + long + "/chat-flow", "", "channel_id must be a channel id (UUID)"},
		{"PUT", "/admin/channels/" + ws + "/chat-flow", `{"flow_id":"` + ws + `","workspace_id":"` + long + `"}`, "workspace_id must be a workspace id (UUID)"},
		{"DELETE", "/admin/kb/documents/" + ws + "?workspace=" + long, "", "workspace must be a workspace id (UUID)"},
	} {
		var body any
		if tt.body != "" {
			body = tt.body
		}
		status, raw := h.admin(tt.method, tt.path, body)
		var e struct{ Code, Message string }
		decode(t, raw, &e)
		if status != http.StatusBadRequest || e.Code != "invalid_request" || e.Message != tt.message {
			t.Errorf("%s %.60s: %d %q %q, want 400 invalid_request %q", tt.method, tt.path, status, e.Code, e.Message, tt.message)
		}
	}
}
