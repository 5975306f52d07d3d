package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

// TestCommandsPrintTheAnswerAsReceived: a command that prints a service's
// answer prints the whole object the service sent, byte for byte as
// parleyctl printed it before pkg/adminclient decoded answers into structs
// (an indented JSON object, keys sorted). The answers are the services'
// full shapes, every field present.
func TestCommandsPrintTheAnswerAsReceived(t *testing.T) {
	t.Parallel()
	workspace := map[string]any{"workspace": map[string]any{
		"id": "w1", "name": "Acme <Shop> & Co", "slug": "acme",
		"plan":       map[string]any{"name": "api", "modules": []any{"developer_api"}, "ai_used": 0, "ai_limit": 9007199254740993},
		"rate_limit": map[string]any{"per_minute": 60}, "features": []any{}, "created_at": "2026-11-24T04:00:00.123456Z",
	}}
	channel := map[string]any{"channel": map[string]any{
		"id": "c1", "workspace_id": "w1", "kind": "telegram", "external_id": "bot", "ai_mode": "suggest",
		"status": "active", "secret": "s3cret", "created_at": "2026-11-24T04:00:00Z",
	}}
	webhook := map[string]any{"webhook": map[string]any{
		"id": "h1", "url": "https://example.com/hook?a=1&b=2", "status": "active",
		"created_at": "2026-11-24T04:00:00Z", "updated_at": "2026-11-24T04:01:00Z",
	}, "secret": "whsec_x"}
	tests := []struct {
		name   string
		args   []string
		route  string
		answer map[string]any
	}{
		{"workspace create", []string{"workspace", "create", "--name", "Acme"}, "POST /admin/workspaces", workspace},
		{"workspace update", []string{"workspace", "update", "--workspace", "w1", "--ai-limit", "5"}, "PATCH /admin/workspaces/w1", workspace},
		{"workspace feature", []string{"workspace", "feature", "--workspace", "w1", "--feature", "flows_api", "--on"}, "PUT /admin/workspaces/w1/features/flows_api", workspace},
		{"apikey create", []string{"apikey", "create", "--workspace", "w1"}, "POST /admin/workspaces/w1/api-keys", map[string]any{"id": "k1", "key": "pk_x"}},
		{"apikey revoke", []string{"apikey", "revoke", "--id", "k1"}, "DELETE /admin/api-keys/k1", map[string]any{"id": "k1", "revoked_at": "2026-11-24T04:00:00Z"}},
		{"channel create", []string{"channel", "create", "--workspace", "w1", "--kind", "telegram"}, "POST /admin/channels", channel},
		{"channel set-mode", []string{"channel", "set-mode", "--channel", "c1", "--mode", "suggest"}, "PATCH /admin/channels/c1", channel},
		{"webhook resave", []string{"webhook", "resave", "--workspace", "w1"}, "POST /admin/webhooks/w1/resave", webhook},
		{"flow deactivate", []string{"flow", "deactivate", "--flow", "f1"}, "POST /admin/flows/f1/deactivate", map[string]any{"id": "f1", "status": "inactive"}},
		{"kb list empty", []string{"kb", "list", "--workspace", "w1"}, "GET /admin/workspaces/w1/kb/documents", map[string]any{"documents": []any{}}},
		{
			"deliveries replay", []string{"deliveries", "replay", "--workspace", "w1", "--since", "2026-11-22T10:00:00Z"}, "POST /admin/replays",
			map[string]any{"replay": map[string]any{"id": "r1", "workspace_id": "w1", "since": "2026-11-22T10:00:00Z", "until": nil, "event": nil, "delivery_id": nil, "queued": 3}, "next": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{answers: map[string]any{tt.route: tt.answer, "GET /admin/workspaces/w1": workspace}}
			var out bytes.Buffer
			if err := cli.New(testConfig(), rec, &out).Run(context.Background(), tt.args); err != nil {
				t.Fatal(err)
			}
			// What parleyctl printed before: the answer decoded into a map.
			printed := tt.answer
			if tt.name == "deliveries replay" {
				printed = map[string]any{"replay": tt.answer["replay"]}
			}
			raw, _ := json.Marshal(printed)
			var asMap any
			if err := json.Unmarshal(raw, &asMap); err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			if err := enc.Encode(asMap); err != nil {
				t.Fatal(err)
			}
			if out.String() != want.String() {
				t.Errorf("printed\n%s\nwant\n%s", out.String(), want.String())
			}
		})
	}
}
