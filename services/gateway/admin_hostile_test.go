package main

import (
	"encoding/json"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"net/http"
	"strings"
	"testing"
)

// TestAdminRoutesRefuseHostileInput sends every gateway admin route what a
// careless or hostile operator (or a broken caller) might: ids that are no
// ids (the urn:uuid: form uuid.Parse takes and PostgreSQL refuses among
// them), a NUL, 2,000 characters, values past what a column holds, bodies
// of the wrong shape. Each is refused with its documented status and code
// in the error shape, never a 500, and a refused change changes nothing.
func TestAdminRoutesRefuseHostileInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws, _ := h.workspace(t, map[string]any{"name": "Acme", "rate_per_minute": 60})
	urn := "urn:uuid:" + ws
	long := strings.Repeat("a", 2000)
	type refusal apicheck.Refusal // a local type: its table is unkeyed
	tests := []refusal{
		{"slug with a NUL", "GET", "/admin/workspaces?slug=%00", "", 400, "invalid_request"},
		{"slug no workspace can have", "GET", "/admin/workspaces?slug=Acme%20Inc", "", 400, "invalid_request"},
		{"slug of 2,000 characters", "GET", "/admin/workspaces?slug=" + long, "", 400, "invalid_request"},
		{"id not an id", "GET", "/admin/workspaces/not-a-uuid", "", 404, "workspace_not_found"},
		{"id with a NUL", "GET", "/admin/workspaces/%00", "", 404, "workspace_not_found"},
		{"id as a URN", "GET", "/admin/workspaces/" + urn, "", 404, "workspace_not_found"},
		{"id of 2,000 characters", "GET", "/admin/workspaces/" + long, "", 404, "workspace_not_found"},
		{"keys of a URN id", "GET", "/admin/workspaces/" + urn + "/api-keys", "", 404, "workspace_not_found"},
		{"revoke a URN id", "DELETE", "/admin/api-keys/" + urn, "", 404, "api_key_not_found"},
		{"revoke a NUL", "DELETE", "/admin/api-keys/%00", "", 404, "api_key_not_found"},
		{"update a URN id", "PATCH", "/admin/workspaces/" + urn, `{"ai_limit":1}`, 404, "workspace_not_found"},
		{"AI units of a URN id", "POST", "/admin/ai-units", `{"uses":[{"workspace_id":"` + urn + `","units":1}]}`, 400, "invalid_request"},
		{"key for a URN id", "POST", "/admin/workspaces/" + urn + "/api-keys", `{"name":"k"}`, 404, "workspace_not_found"},
		{"feature of a URN id", "PUT", "/admin/workspaces/" + urn + "/features/flows_api", `{"on":true}`, 404, "workspace_not_found"},
		{"rate past int32", "PATCH", "/admin/workspaces/" + ws, `{"rate_per_minute":9223372036854775807}`, 400, "invalid_request"},
		{"rate past the bound", "PATCH", "/admin/workspaces/" + ws, `{"rate_per_minute":1000001}`, 400, "invalid_request"},
		{"rate not a whole number", "PATCH", "/admin/workspaces/" + ws, `{"rate_per_minute":1.5}`, 400, "invalid_request"},
		{"AI limit past int64", "PATCH", "/admin/workspaces/" + ws, `{"ai_limit":99999999999999999999}`, 400, "invalid_request"},
		{"modules not a list", "PATCH", "/admin/workspaces/" + ws, `{"modules":"flows"}`, 400, "invalid_request"},
		{"new workspace's rate past int32", "POST", "/admin/workspaces", `{"name":"Big","rate_per_minute":99999999999}`, 400, "invalid_request"},
		{"new workspace's name with a NUL", "POST", "/admin/workspaces", `{"name":"a\u0000b"}`, 400, "invalid_request"},
		{"new workspace's name of 2,000", "POST", "/admin/workspaces", `{"name":"` + long + `"}`, 400, "invalid_request"},
		{"new workspace's slug a path", "POST", "/admin/workspaces", `{"name":"x","slug":"../x"}`, 400, "invalid_request"},
		{"new workspace as an array", "POST", "/admin/workspaces", `[]`, 400, "invalid_request"},
		{"feature with a NUL", "PUT", "/admin/workspaces/" + ws + "/features/%00", `{"on":true}`, 400, "invalid_request"},
		{"feature switch not a boolean", "PUT", "/admin/workspaces/" + ws + "/features/flows_api", `{"on":"yes"}`, 400, "invalid_request"},
		{"AI units not a number", "POST", "/admin/ai-units", `{"uses":[{"workspace_id":"` + ws + `","units":1e30}]}`, 400, "invalid_request"},
		{"AI units not a list", "POST", "/admin/ai-units", `{"uses":{"workspace_id":"` + ws + `","units":1}}`, 400, "invalid_request"},
		{"key name of 2,000", "POST", "/admin/workspaces/" + ws + "/api-keys", `{"name":"` + long + `"}`, 400, "invalid_request"},
		{"key not a key", "POST", "/admin/workspaces/" + ws + "/api-keys", `{"name":"k","key":"` + long + `"}`, 400, "invalid_request"},
	}
	for _, tt := range tests {
		var body any
		if tt.Body != "" {
			body = json.RawMessage(tt.Body)
		}
		status, raw := h.adminBytes(t, tt.Method, tt.Path, body)
		apicheck.CheckRefusal(t, apicheck.Refusal(tt), status, raw)
	}
	// Nothing refused changed the workspace.
	out := h.mustAdmin(t, http.StatusOK, http.MethodGet, "/admin/workspaces/"+ws, nil)
	if rl := out["workspace"].(map[string]any)["rate_limit"]; rl.(map[string]any)["per_minute"] != float64(60) {
		t.Errorf("the workspace's rate limit changed: %v", rl)
	}
}
