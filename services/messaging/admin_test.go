package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
)

func TestAdminChannels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := uuid.NewString()

	// Create: a telegram channel takes its external_id from the bot token
	// and gets a generated secret; the token is never returned.
	body := `{"workspace_id":"` + ws + `","kind":"telegram","token":"123456789:AAH-secret-token"}`
	resp, err := h.client.Do(context.Background(), rpc.ServiceMessaging, rpc.EndpointAdmin, &rpcv1.Request{
		Method: http.MethodPost, Path: "/admin/channels", Body: []byte(body),
		Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}},
	})
	if err != nil || resp.GetStatus() != http.StatusCreated {
		t.Fatalf("create: %v %d %s", err, resp.GetStatus(), resp.GetBody())
	}
	if strings.Contains(string(resp.GetBody()), "AAH-secret-token") || strings.Contains(string(resp.GetBody()), `"token"`) {
		t.Fatalf("create returns the token: %s", resp.GetBody())
	}
	var list messagingapi.AdminChannelList
	if err := h.admin(http.MethodGet, "/admin/channels?workspace_id="+ws, nil, &list); err != nil || len(list.Channels) != 1 {
		t.Fatalf("list: %v %+v", err, list)
	}
	c := list.Channels[0]
	if c.WorkspaceID != ws || c.Kind != "telegram" || c.ExternalID != "123456789" || c.AIMode != "auto" || c.Status != "active" ||
		!regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(c.Secret) {
		t.Fatalf("channel = %+v", c)
	}
	if _, err := time.Parse(time.RFC3339Nano, c.CreatedAt); err != nil {
		t.Fatalf("created_at %q", c.CreatedAt)
	}

	// A given secret and external_id are kept.
	var given messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodPost, "/admin/channels", map[string]any{"workspace_id": ws, "kind": "telegram", "token": "1:t", "external_id": "bot-2", "secret": "my_Secret-1-of-23-chars"}, &given); err != nil {
		t.Fatal(err)
	}
	if given.Channel.Secret != "my_Secret-1-of-23-chars" || given.Channel.ExternalID != "bot-2" {
		t.Fatalf("given = %+v", given.Channel)
	}

	// One channel, by its id, whatever its workspace.
	var one messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodGet, "/admin/channels/"+c.ID, nil, &one); err != nil || one.Channel != c {
		t.Fatalf("get = %+v, %v; want %+v", one.Channel, err, c)
	}

	// Set mode.
	var patched messagingapi.AdminChannelAnswer
	if err := h.admin(http.MethodPatch, "/admin/channels/"+c.ID, map[string]any{"ai_mode": "external"}, &patched); err != nil {
		t.Fatal(err)
	}
	if patched.Channel.AIMode != "external" || patched.Channel.ID != c.ID || patched.Channel.Secret != c.Secret {
		t.Fatalf("patched = %+v", patched.Channel)
	}
	var public struct{ Channels []map[string]string }
	if err := h.api(ws, http.MethodGet, "/v1/channels", nil, &public); err != nil || public.Channels[0]["ai_mode"] != "external" {
		t.Fatalf("public view after patch: %v %v", public, err)
	}

	tests := []struct {
		name, method, path string
		body               any
		status             int
		code, field        string
	}{
		{"no workspace", "POST", "/admin/channels", map[string]any{"kind": "webchat"}, 400, "invalid_request", "workspace_id"},
		{"workspace not an id", "POST", "/admin/channels", map[string]any{"workspace_id": "acme", "kind": "webchat"}, 400, "invalid_request", "workspace_id"},
		{"no kind", "POST", "/admin/channels", map[string]any{"workspace_id": ws}, 400, "invalid_request", "kind"},
		{"unknown kind", "POST", "/admin/channels", map[string]any{"workspace_id": ws, "kind": "sms"}, 400, "invalid_request", "kind"},
		{"telegram without token", "POST", "/admin/channels", map[string]any{"workspace_id": ws, "kind": "telegram"}, 400, "invalid_request", "token"},
		{"secret telegram cannot take", "POST", "/admin/channels", map[string]any{"workspace_id": ws, "kind": "telegram", "token": "1:t", "secret": "has spaces, sixteen!"}, 400, "invalid_request", "secret"},
		{"secret under 16 characters", "POST", "/admin/channels", map[string]any{"workspace_id": ws, "kind": "webchat", "secret": "0123456789abcde"}, 400, "invalid_request", "secret"},
		{"wrong type", "POST", "/admin/channels", map[string]any{"workspace_id": ws, "kind": 3}, 400, "invalid_request", "kind"},
		{"duplicate external_id", "POST", "/admin/channels", map[string]any{"workspace_id": uuid.NewString(), "kind": "telegram", "token": "123456789:other"}, 409, "channel_exists", "external_id"},
		{"list without workspace", "GET", "/admin/channels", nil, 400, "invalid_request", "workspace_id"},
		{"list with a bad workspace", "GET", "/admin/channels?workspace_id=x", nil, 400, "invalid_request", "workspace_id"},
		{"mode missing", "PATCH", "/admin/channels/" + c.ID, map[string]any{}, 400, "invalid_request", "ai_mode"},
		{"mode unknown", "PATCH", "/admin/channels/" + c.ID, map[string]any{"ai_mode": "manual"}, 400, "invalid_request", "ai_mode"},
		{"unknown channel", "PATCH", "/admin/channels/" + uuid.NewString(), map[string]any{"ai_mode": "auto"}, 404, "channel_not_found", ""},
		{"channel not an id", "PATCH", "/admin/channels/abc", map[string]any{"ai_mode": "auto"}, 404, "channel_not_found", ""},
		{"get an unknown channel", "GET", "/admin/channels/" + uuid.NewString(), nil, 404, "channel_not_found", ""},
		{"get no channel id", "GET", "/admin/channels/abc", nil, 404, "channel_not_found", ""},
	}
	for _, tt := range tests {
		err := h.admin(tt.method, tt.path, tt.body, nil)
		wantErr(t, err, tt.status, tt.code, tt.field)
	}
	if err := h.admin(http.MethodGet, "/admin/channels?workspace_id="+ws, nil, &list); err != nil || len(list.Channels) != 2 || list.Channels[0].AIMode != "external" {
		t.Fatalf("after errors: %v %+v", err, list)
	}
}
