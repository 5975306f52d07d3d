package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

// TestAdminRoutesRefuseHostileInput sends every dispatcher admin route
// what a careless or hostile operator (or a broken caller) might: ids that
// are no ids (the urn:uuid: form uuid.Parse takes and PostgreSQL refuses
// among them), a NUL, 2,000 characters, bodies of the wrong shape. Each
// is refused with its documented status and code in the error shape,
// never a 500.
func TestAdminRoutesRefuseHostileInput(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	ws := uuid.NewString()
	h.saveWebhook(ws, "https://example.com/hook")
	urn := "urn:uuid:" + ws
	long := strings.Repeat("a", 2000)
	since := `"since":"2026-01-01T00:00:00Z"`
	type refusal apicheck.Refusal // a local type: its table is unkeyed
	tests := []refusal{
		{"webhook of no id", "GET", "/admin/webhooks/not-a-uuid", "", 400, "invalid_request"},
		{"webhook of a URN", "GET", "/admin/webhooks/" + urn, "", 400, "invalid_request"},
		{"webhook of braces", "GET", "/admin/webhooks/{" + ws + "}", "", 400, "invalid_request"},
		{"webhook of a NUL", "GET", "/admin/webhooks/%00", "", 400, "invalid_request"},
		{"webhook of 2,000 characters", "GET", "/admin/webhooks/" + long, "", 400, "invalid_request"},
		{"delivery of no id", "GET", "/admin/webhooks/" + ws + "/deliveries/not-a-uuid", "", 400, "invalid_request"},
		{"delivery of a URN", "GET", "/admin/webhooks/" + ws + "/deliveries/" + urn, "", 400, "invalid_request"},
		{"delivery not found", "GET", "/admin/webhooks/" + ws + "/deliveries/" + uuid.NewString(), "", 404, "delivery_not_found"},
		{"resave a URN", "POST", "/admin/webhooks/" + urn + "/resave", "", 400, "invalid_request"},
		{"replay for a URN", "POST", "/admin/replays", `{"workspace_id":"` + urn + `",` + since + `}`, 400, "invalid_request"},
		{"replay of a URN delivery", "POST", "/admin/replays", `{"workspace_id":"` + ws + `","delivery_id":"` + urn + `"}`, 400, "invalid_request"},
		{"replay resuming a URN", "POST", "/admin/replays", `{"workspace_id":"` + ws + `",` + since + `,"resume":{"replay_id":"` + urn + `","from_seq":1,"end_seq":2}}`, 400, "invalid_request"},
		{"replay since no time", "POST", "/admin/replays", `{"workspace_id":"` + ws + `","since":"` + long + `"}`, 400, "invalid_request"},
		{"replay until before since", "POST", "/admin/replays", `{"workspace_id":"` + ws + `",` + since + `,"until":"2020-01-01T00:00:00Z"}`, 400, "invalid_request"},
		{"replay of a wildcard event", "POST", "/admin/replays", `{"workspace_id":"` + ws + `",` + since + `,"event":">"}`, 400, "invalid_request"},
		{"replay resuming from a negative", "POST", "/admin/replays", `{"workspace_id":"` + ws + `",` + since + `,"resume":{"replay_id":"` + ws + `","from_seq":-1,"end_seq":1}}`, 400, "invalid_request"},
		{"replay workspace a number", "POST", "/admin/replays", `{"workspace_id":5}`, 400, "invalid_request"},
		{"replay of nothing", "POST", "/admin/replays", ``, 400, "invalid_request"},
		{"replay with a NUL", "POST", "/admin/replays", `{"workspace_id":"` + ws + `",` + since + `,"event":"\u0000"}`, 400, "invalid_request"},
	}
	for _, tt := range tests {
		var body any
		if tt.Body != "" {
			body = tt.Body
		}
		status, raw := h.do("", tt.Method, tt.Path, body)
		apicheck.CheckRefusal(t, apicheck.Refusal(tt), status, raw)
	}
}

// TestAdminNoIDWording: an id in a form the services refuse, the urn:uuid:
// form of a UUID among them, is refused in the words every service uses
// for it ("workspace_id must be a workspace id (UUID)"), not as no UUID.
func TestAdminNoIDWording(t *testing.T) {
	t.Parallel()
	h := start(t, nil, nil)
	ws := uuid.NewString()
	urn := "urn:uuid:" + ws
	since := `"since":"2026-01-01T00:00:00Z"`
	for _, tt := range []struct{ method, path, body, mention string }{
		{"GET", "/admin/webhooks/" + urn, "", "workspace_id must be a workspace id (UUID)"},
		{"GET", "/admin/webhooks/" + ws + "/deliveries/" + urn, "", "id must be a delivery id (UUID)"},
		{"POST", "/admin/replays", `{"workspace_id":"` + urn + `",` + since + `}`, "workspace_id must be a workspace id (UUID)"},
		{"POST", "/admin/replays", `{"workspace_id":"` + ws + `","delivery_id":"` + urn + `"}`, "delivery_id must be a delivery id (UUID)"},
		{"POST", "/admin/replays", `{"workspace_id":"` + ws + `",` + since + `,"resume":{"replay_id":"` + urn + `","from_seq":1,"end_seq":2}}`, "resume.replay_id must be a replay id (UUID)"},
	} {
		var body any
		if tt.body != "" {
			body = tt.body
		}
		h.wantError("", tt.method, tt.path, body, http.StatusBadRequest, "invalid_request", tt.mention)
	}
}
