package adminclient_test

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/pkg/adminclient"
	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
)

const workspaceJSON = `{"workspace":{"id":"w1","name":"Acme","slug":"acme","plan":{"name":"api","modules":["developer_api","flows"],"ai_used":3,"ai_limit":100},"rate_limit":{"per_minute":60},"features":["flows_api"],"created_at":"2026-11-24T04:00:00.000Z"}}`

func TestWorkspaceCalls(t *testing.T) {
	t.Parallel()
	client, s := newClient(t, map[string]answer{
		"gateway POST /admin/workspaces":                      {http.StatusCreated, workspaceJSON},
		"gateway GET /admin/workspaces":                       {http.StatusOK, `{"workspaces":[` + workspaceJSON[len(`{"workspace":`):len(workspaceJSON)-1] + `]}`},
		"gateway GET /admin/workspaces/w1":                    {http.StatusOK, workspaceJSON},
		"gateway PATCH /admin/workspaces/w1":                  {http.StatusOK, workspaceJSON},
		"gateway PUT /admin/workspaces/w1/features/flows_api": {http.StatusOK, workspaceJSON},
	})
	want := gatewayapi.Workspace{
		ID: "w1", Name: "Acme", Slug: "acme",
		Plan:      gatewayapi.Plan{Name: "api", Modules: []string{"developer_api", "flows"}, AIUsed: 3, AILimit: 100},
		RateLimit: gatewayapi.RateLimit{PerMinute: 60}, Features: []string{"flows_api"}, CreatedAt: "2026-11-24T04:00:00.000Z",
	}
	limit := int64(100)
	got, err := client.CreateWorkspace(ctx, gatewayapi.NewWorkspace{Name: "Acme", Modules: []string{"developer_api", "flows"}, AILimit: &limit})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("CreateWorkspace = %+v, %v", got, err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"name": "Acme", "modules": []any{"developer_api", "flows"}, "ai_limit": float64(100)}) {
		t.Errorf("create body = %v: unset fields must not be sent", body)
	}
	if ct := s.last(t).contentType; ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}

	rate := 10
	if _, err := client.UpdateWorkspace(ctx, "w1", gatewayapi.WorkspaceChanges{RatePerMinute: &rate}); err != nil {
		t.Fatal(err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"rate_per_minute": float64(10)}) {
		t.Errorf("update body = %v", body)
	}
	// An empty module list is a change (a plan without modules), not
	// "leave them".
	if _, err := client.UpdateWorkspace(ctx, "w1", gatewayapi.WorkspaceChanges{Modules: []string{}}); err != nil {
		t.Fatal(err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"modules": []any{}}) {
		t.Errorf("update body = %v", body)
	}

	if got, err := client.GetWorkspace(ctx, "w1"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("GetWorkspace = %+v, %v", got, err)
	}
	if got, err := client.ListWorkspaces(ctx); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("ListWorkspaces = %+v, %v", got, err)
	}
	if r := s.last(t); r.query != "" {
		t.Errorf("list all sent query %q", r.query)
	}
	if got, found, err := client.FindWorkspaceBySlug(ctx, "acme"); err != nil || !found || got.ID != "w1" {
		t.Fatalf("FindWorkspaceBySlug = %+v, %v, %v", got, found, err)
	}
	if r := s.last(t); r.query != "slug=acme" {
		t.Errorf("find by slug sent query %q", r.query)
	}
	if _, err := client.SetFeature(ctx, "w1", "flows_api", false); err != nil {
		t.Fatal(err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"on": false}) {
		t.Errorf("feature body = %v", body)
	}
	// Every admin call went to the admin endpoint, as no workspace.
	for _, r := range s.all() {
		if r.service != "gateway" || r.endpoint != "admin" || r.workspaceID != "" {
			t.Errorf("request %+v", r)
		}
	}
}

func TestAPIKeyCalls(t *testing.T) {
	t.Parallel()
	client, s := newClient(t, map[string]answer{
		"gateway POST /admin/workspaces/w1/api-keys": {http.StatusCreated, `{"id":"k1","key":"pk_x"}`},
		"gateway GET /admin/workspaces/w1/api-keys": {http.StatusOK, `{"api_keys":[
			{"id":"k1","name":"ci","prefix":"pk_abcde","created_at":"2026-11-24T04:00:00.000Z","last_used_at":"2026-11-24T04:05:00.000Z","revoked_at":null},
			{"id":"k2","name":"","prefix":"pk_fghij","created_at":"2026-11-24T04:01:00.000Z","last_used_at":null,"revoked_at":"2026-11-24T04:02:00.000Z"}]}`},
		"gateway DELETE /admin/api-keys/k1": {http.StatusOK, `{"id":"k1","revoked_at":"2026-11-24T04:03:00.000Z"}`},
	})
	created, err := client.CreateAPIKey(ctx, "w1", gatewayapi.NewAPIKey{Name: "ci"})
	if err != nil || created != (gatewayapi.CreatedAPIKey{ID: "k1", Key: "pk_x"}) {
		t.Fatalf("CreateAPIKey = %+v, %v", created, err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"name": "ci"}) {
		t.Errorf("create body = %v: no key given, none sent", body)
	}
	keys, err := client.ListAPIKeys(ctx, "w1")
	if err != nil || len(keys) != 2 {
		t.Fatalf("ListAPIKeys = %+v, %v", keys, err)
	}
	if k := keys[0]; k.Prefix != "pk_abcde" || k.LastUsedAt == nil || *k.LastUsedAt != "2026-11-24T04:05:00.000Z" || k.RevokedAt != nil {
		t.Errorf("first key = %+v", k)
	}
	if k := keys[1]; k.LastUsedAt != nil || k.RevokedAt == nil {
		t.Errorf("second key = %+v", k)
	}
	revoked, err := client.RevokeAPIKey(ctx, "k1")
	if err != nil || revoked.RevokedAt != "2026-11-24T04:03:00.000Z" {
		t.Fatalf("RevokeAPIKey = %+v, %v", revoked, err)
	}
	if r := s.last(t); r.body != nil && len(r.body) > 0 {
		t.Errorf("revoke sent a body %q", r.body)
	}
}

func TestChannelCalls(t *testing.T) {
	t.Parallel()
	const channelJSON = `{"id":"c1","workspace_id":"w1","kind":"webchat","external_id":"site","ai_mode":"auto","status":"active","secret":"s","created_at":"2026-11-24T04:00:00.000Z"}`
	client, s := newClient(t, map[string]answer{
		"messaging POST /admin/channels":     {http.StatusCreated, `{"channel":` + channelJSON + `}`},
		"messaging GET /admin/channels":      {http.StatusOK, `{"channels":[` + channelJSON + `]}`},
		"messaging PATCH /admin/channels/c1": {http.StatusOK, `{"channel":` + channelJSON + `}`},
	})
	want := messagingapi.AdminChannel{
		Channel:     messagingapi.Channel{ID: "c1", Kind: "webchat", ExternalID: "site", AIMode: "auto", Status: "active"},
		WorkspaceID: "w1", Secret: "s", CreatedAt: "2026-11-24T04:00:00.000Z",
	}
	got, err := client.CreateChannel(ctx, messagingapi.NewChannel{WorkspaceID: "w1", Kind: "webchat", ExternalID: "site"})
	if err != nil || got != want {
		t.Fatalf("CreateChannel = %+v, %v", got, err)
	}
	if body := bodyOf(t, s.last(t)); body["workspace_id"] != "w1" || body["kind"] != "webchat" || body["external_id"] != "site" {
		t.Errorf("create body = %v", body)
	}
	list, err := client.ListChannels(ctx, "w 1")
	if err != nil || len(list) != 1 || list[0] != want {
		t.Fatalf("ListChannels = %+v, %v", list, err)
	}
	if q := s.last(t).query; q != "workspace_id=w+1" {
		t.Errorf("list query = %q", q)
	}
	if _, err := client.SetChannelAIMode(ctx, "c1", "suggest"); err != nil {
		t.Fatal(err)
	}
	if body := bodyOf(t, s.last(t)); !reflect.DeepEqual(body, map[string]any{"ai_mode": "suggest"}) {
		t.Errorf("set mode body = %v", body)
	}
}

// TestRefusalsAreTypedErrors: every answer outside 2xx is an *Error with
// the status, code and message the service gave, so it can be shown in
// words; one that is not the documented shape still keeps its status.
func TestRefusalsAreTypedErrors(t *testing.T) {
	t.Parallel()
	client, _ := newClient(t, map[string]answer{
		"gateway GET /admin/workspaces/w1":   {http.StatusNotFound, `{"code":"workspace_not_found","message":"workspace not found"}`},
		"messaging PATCH /admin/channels/c1": {http.StatusBadRequest, `{"code":"invalid_request","message":"ai_mode must be auto, suggest or external"}`},
		"gateway DELETE /admin/api-keys/k1":  {http.StatusBadGateway, `upstream broke`},
	})
	cases := []struct {
		name   string
		call   func() error
		status int
		code   string
		msg    string
	}{
		{"not found", func() error { _, err := client.GetWorkspace(ctx, "w1"); return err }, 404, "workspace_not_found", "workspace not found"},
		{"invalid", func() error { _, err := client.SetChannelAIMode(ctx, "c1", "loud"); return err }, 400, "invalid_request", "ai_mode must be auto, suggest or external"},
		{"not the documented shape", func() error { _, err := client.RevokeAPIKey(ctx, "k1"); return err }, 502, "internal_error", "upstream broke"},
		{"no such route", func() error { _, err := client.ListAPIKeys(ctx, "w2"); return err }, 404, "not_found", "no such route"},
	}
	for _, tc := range cases {
		err := tc.call()
		e, ok := adminclient.AsError(fmt.Errorf("wrapped: %w", err))
		if !ok || e.Status != tc.status || e.Code != tc.code || e.Message != tc.msg {
			t.Errorf("%s: err = %#v", tc.name, err)
		}
		var typed *adminclient.Error
		if !errors.As(err, &typed) {
			t.Errorf("%s: %T is not an *adminclient.Error", tc.name, err)
		}
	}
}
