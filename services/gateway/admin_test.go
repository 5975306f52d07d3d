package main

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	gatewayapi "github.com/parleyhq/parley/pkg/api/gateway"
	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

func wsOf(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	w, ok := out["workspace"].(map[string]any)
	if !ok {
		t.Fatalf("no workspace in %v", out)
	}
	return w
}

func TestAdminWorkspaceLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	created := wsOf(t, h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces", map[string]any{"name": "Café Düsseldorf"}))
	id := created["id"].(string)
	createdAt, err := time.Parse(time.RFC3339Nano, created["created_at"].(string))
	if err != nil || time.Since(createdAt) > time.Minute || !strings.HasSuffix(created["created_at"].(string), "Z") {
		t.Fatalf("created_at %v: %v", created["created_at"], err)
	}
	delete(created, "created_at")
	want := map[string]any{
		"id": id, "name": "Café Düsseldorf", "slug": "cafe-dusseldorf",
		"plan":       map[string]any{"name": "api", "modules": []any{"developer_api"}, "ai_used": 0.0, "ai_limit": 0.0},
		"rate_limit": map[string]any{"per_minute": float64(defaultRate)},
		// flows_api is on unless switched off: flow invoke is generally
		// available.
		"features": []any{"flows_api"},
	}
	if !reflect.DeepEqual(created, want) {
		t.Fatalf("created\n got %v\nwant %v", created, want)
	}

	got := wsOf(t, h.mustAdmin(t, http.StatusOK, http.MethodGet, "/admin/workspaces/"+id, nil))
	if got["id"] != id || got["slug"] != "cafe-dusseldorf" || got["created_at"] != createdAt.Format(time.RFC3339Nano) {
		t.Fatalf("get = %v", got)
	}

	updated := wsOf(t, h.mustAdmin(t, http.StatusOK, http.MethodPatch, "/admin/workspaces/"+id,
		map[string]any{"modules": []string{"flow_script", "developer_api", "flows"}, "ai_limit": 250, "rate_per_minute": 9}))
	if !reflect.DeepEqual(updated["plan"], map[string]any{"name": "api", "modules": []any{"developer_api", "flows", "flow_script"}, "ai_used": 0.0, "ai_limit": 250.0}) ||
		updated["rate_limit"].(map[string]any)["per_minute"] != 9.0 {
		t.Fatalf("updated = %v", updated)
	}
	// A partial update leaves the rest alone.
	updated = wsOf(t, h.mustAdmin(t, http.StatusOK, http.MethodPatch, "/admin/workspaces/"+id, map[string]any{"ai_limit": 0}))
	if updated["plan"].(map[string]any)["ai_limit"] != 0.0 || len(updated["plan"].(map[string]any)["modules"].([]any)) != 3 ||
		updated["rate_limit"].(map[string]any)["per_minute"] != 9.0 {
		t.Fatalf("partial update = %v", updated)
	}

	off := wsOf(t, h.mustAdmin(t, http.StatusOK, http.MethodPut, "/admin/workspaces/"+id+"/features/flows_api", map[string]any{"on": false}))
	if !reflect.DeepEqual(off["features"], []any{}) {
		t.Fatalf("feature off = %v", off["features"])
	}
	// Switched off, it stays off through other changes and reads.
	got = wsOf(t, h.mustAdmin(t, http.StatusOK, http.MethodPatch, "/admin/workspaces/"+id, map[string]any{"ai_limit": 1}))
	if !reflect.DeepEqual(got["features"], []any{}) {
		t.Fatalf("features after another change = %v", got["features"])
	}
	on := wsOf(t, h.mustAdmin(t, http.StatusOK, http.MethodPut, "/admin/workspaces/"+id+"/features/flows_api", map[string]any{"on": true}))
	if !reflect.DeepEqual(on["features"], []any{"flows_api"}) {
		t.Fatalf("feature on = %v", on["features"])
	}

	// Lookup by slug, as parleyctl demo finds its workspace.
	list := h.mustAdmin(t, http.StatusOK, http.MethodGet, "/admin/workspaces?slug=cafe-dusseldorf", nil)
	if ws := list["workspaces"].([]any); len(ws) != 1 || ws[0].(map[string]any)["id"] != id {
		t.Fatalf("list by slug = %v", list)
	}
	list = h.mustAdmin(t, http.StatusOK, http.MethodGet, "/admin/workspaces?slug=nobody", nil)
	if ws, ok := list["workspaces"].([]any); !ok || len(ws) != 0 {
		t.Fatalf("list of unknown slug = %v, want []", list)
	}
	h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces", map[string]any{"name": "Second"})
	if ws := h.mustAdmin(t, http.StatusOK, http.MethodGet, "/admin/workspaces", nil)["workspaces"].([]any); len(ws) != 2 {
		t.Fatalf("list all = %v", ws)
	}
}

func TestAdminValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := wsOf(t, h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces", map[string]any{"name": "Demo", "slug": "demo"}))["id"].(string)

	tests := []struct {
		name        string
		method      string
		path        string
		body        any
		status      int
		code        string
		wantMention string
	}{
		{"name missing", http.MethodPost, "/admin/workspaces", map[string]any{"slug": "x"}, 400, "invalid_request", "name"},
		{"name blank", http.MethodPost, "/admin/workspaces", map[string]any{"name": "   "}, 400, "invalid_request", "name"},
		{"name wrong type", http.MethodPost, "/admin/workspaces", map[string]any{"name": 5}, 400, "invalid_request", "name"},
		{"bad slug", http.MethodPost, "/admin/workspaces", map[string]any{"name": "X", "slug": "Not A Slug"}, 400, "invalid_request", "slug"},
		{"underivable slug", http.MethodPost, "/admin/workspaces", map[string]any{"name": "Монгол"}, 400, "invalid_request", "slug"},
		{"slug taken", http.MethodPost, "/admin/workspaces", map[string]any{"name": "Other", "slug": "demo"}, 409, "slug_taken", "slug"},
		{"derived slug taken", http.MethodPost, "/admin/workspaces", map[string]any{"name": "DEMO!"}, 409, "slug_taken", "slug"},
		{"unknown module", http.MethodPost, "/admin/workspaces", map[string]any{"name": "X", "modules": []string{"developer_api", "crm"}}, 400, "invalid_request", "modules"},
		{"rate zero", http.MethodPost, "/admin/workspaces", map[string]any{"name": "X", "rate_per_minute": 0}, 400, "invalid_request", "rate_per_minute"},
		{"negative ai_limit", http.MethodPost, "/admin/workspaces", map[string]any{"name": "X", "ai_limit": -1}, 400, "invalid_request", "ai_limit"},
		{"not json", http.MethodPost, "/admin/workspaces", "{", 400, "invalid_request", "JSON"},
		{"get unknown", http.MethodGet, "/admin/workspaces/0190d1b2-0000-7000-8000-000000000000", nil, 404, "workspace_not_found", "workspace"},
		{"get malformed id", http.MethodGet, "/admin/workspaces/not-a-uuid", nil, 404, "workspace_not_found", "workspace"},
		{"patch unknown module", http.MethodPatch, "/admin/workspaces/" + id, map[string]any{"modules": []string{"x"}}, 400, "invalid_request", "modules"},
		{"patch rate zero", http.MethodPatch, "/admin/workspaces/" + id, map[string]any{"rate_per_minute": 0}, 400, "invalid_request", "rate_per_minute"},
		{"patch negative ai_limit", http.MethodPatch, "/admin/workspaces/" + id, map[string]any{"ai_limit": -5}, 400, "invalid_request", "ai_limit"},
		{"patch unknown workspace", http.MethodPatch, "/admin/workspaces/0190d1b2-0000-7000-8000-000000000000", map[string]any{"ai_limit": 1}, 404, "workspace_not_found", "workspace"},
		{"unknown feature", http.MethodPut, "/admin/workspaces/" + id + "/features/teleport", map[string]any{"on": true}, 400, "invalid_request", "feature"},
		{"feature without on", http.MethodPut, "/admin/workspaces/" + id + "/features/flows_api", map[string]any{}, 400, "invalid_request", "on"},
		{"feature of unknown workspace", http.MethodPut, "/admin/workspaces/0190d1b2-0000-7000-8000-000000000000/features/flows_api", map[string]any{"on": true}, 404, "workspace_not_found", "workspace"},
		{"key for unknown workspace", http.MethodPost, "/admin/workspaces/0190d1b2-0000-7000-8000-000000000000/api-keys", map[string]any{}, 404, "workspace_not_found", "workspace"},
		{"given key too short", http.MethodPost, "/admin/workspaces/" + id + "/api-keys", map[string]any{"key": "pk_short"}, 400, "invalid_request", "key"},
		{"given key without prefix", http.MethodPost, "/admin/workspaces/" + id + "/api-keys", map[string]any{"key": strings.Repeat("a", 40)}, 400, "invalid_request", "key"},
		{"given key not url-safe", http.MethodPost, "/admin/workspaces/" + id + "/api-keys", map[string]any{"key": "pk_" + strings.Repeat("a", 31) + "+"}, 400, "invalid_request", "key"},
		{"revoke unknown", http.MethodDelete, "/admin/api-keys/0190d1b2-0000-7000-8000-000000000000", nil, 404, "api_key_not_found", "key"},
		{"revoke malformed id", http.MethodDelete, "/admin/api-keys/xyz", nil, 404, "api_key_not_found", "key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var status int
			var out map[string]any
			if s, ok := tt.body.(string); ok {
				status, out = h.adminRaw(t, tt.method, tt.path, []byte(s))
			} else {
				status, out = h.admin(t, tt.method, tt.path, tt.body)
			}
			if status != tt.status || out["code"] != tt.code {
				t.Fatalf("= %d %v, want %d %s", status, out, tt.status, tt.code)
			}
			if msg, _ := out["message"].(string); !strings.Contains(strings.ToLower(msg), strings.ToLower(tt.wantMention)) {
				t.Fatalf("message %q does not mention %q", msg, tt.wantMention)
			}
		})
	}
	// Nothing above created a workspace.
	if ws := h.mustAdmin(t, http.StatusOK, http.MethodGet, "/admin/workspaces", nil)["workspaces"].([]any); len(ws) != 1 {
		t.Fatalf("%d workspaces after refused requests", len(ws))
	}
}

var keyFormat = regexp.MustCompile(`^pk_[A-Za-z0-9_-]{43}$`)

func TestAdminAPIKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fakeService(t, "messaging", echoBack)
	wsA := wsOf(t, h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces", map[string]any{"name": "A"}))["id"].(string)
	wsB := wsOf(t, h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces", map[string]any{"name": "B"}))["id"].(string)

	// Generated keys: shown once, in the documented format, each different.
	k1 := h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+wsA+"/api-keys", map[string]any{"name": "ci"})
	k2 := h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+wsA+"/api-keys", nil)
	if !keyFormat.MatchString(k1["key"].(string)) || !keyFormat.MatchString(k2["key"].(string)) || k1["key"] == k2["key"] || k1["id"] == k2["id"] || len(k1) != 2 {
		t.Fatalf("generated keys %v, %v", k1, k2)
	}

	// The demo's fixed key: idempotent for its workspace.
	const demoKey = "pk_demo_parley_local_development_key_2026"
	d1 := h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+wsA+"/api-keys", map[string]any{"name": "demo", "key": demoKey})
	d2 := h.mustAdmin(t, http.StatusOK, http.MethodPost, "/admin/workspaces/"+wsA+"/api-keys", map[string]any{"name": "demo", "key": demoKey})
	if d1["key"] != demoKey || d2["id"] != d1["id"] || d2["key"] != demoKey {
		t.Fatalf("demo key twice: %v, %v", d1, d2)
	}
	if r := h.call(t, http.MethodGet, "/v1/channels", demoKey, nil, nil); r.status != http.StatusOK {
		t.Fatalf("demo key = %d %s", r.status, r.body)
	}
	// ...but never another workspace's.
	status, out := h.admin(t, http.MethodPost, "/admin/workspaces/"+wsB+"/api-keys", map[string]any{"key": demoKey})
	if status != http.StatusConflict || out["code"] != "api_key_taken" {
		t.Fatalf("demo key for B = %d %v", status, out)
	}

	// Revocation is immediate and idempotent.
	r1 := h.mustAdmin(t, http.StatusOK, http.MethodDelete, "/admin/api-keys/"+d1["id"].(string), nil)
	revokedAt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r1["revoked_at"]))
	if r1["id"] != d1["id"] || err != nil || time.Since(revokedAt) > time.Minute {
		t.Fatalf("revoke = %v (%v)", r1, err)
	}
	r2 := h.mustAdmin(t, http.StatusOK, http.MethodDelete, "/admin/api-keys/"+d1["id"].(string), nil)
	if r2["revoked_at"] != r1["revoked_at"] {
		t.Fatalf("second revoke moved revoked_at: %v -> %v", r1["revoked_at"], r2["revoked_at"])
	}
	h.call(t, http.MethodGet, "/v1/channels", demoKey, nil, nil).expectError(t, http.StatusUnauthorized, "unauthorized")
	// A revoked given key cannot be brought back.
	status, out = h.admin(t, http.MethodPost, "/admin/workspaces/"+wsA+"/api-keys", map[string]any{"key": demoKey})
	if status != http.StatusConflict || out["code"] != "api_key_revoked" {
		t.Fatalf("revoked demo key again = %d %v", status, out)
	}
	// Other keys of the workspace still work.
	if r := h.call(t, http.MethodGet, "/v1/channels", k1["key"].(string), nil, nil); r.status != http.StatusOK {
		t.Fatalf("other key after revocation = %d", r.status)
	}
}

func TestKeysAreStoredOnlyHashed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := wsOf(t, h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces", map[string]any{"name": "Acme"}))["id"].(string)
	var plaintexts []string
	for _, body := range []map[string]any{{"name": "generated"}, {"name": "given", "key": "pk_given_key_for_the_hashing_test_0123456789"}} {
		plaintexts = append(plaintexts, h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+ws+"/api-keys", body)["key"].(string))
	}

	// Every text-like column of every table in the accounts schema, cast to
	// text, searched for each plaintext key (and for its random part alone).
	ctx := context.Background()
	var cols []struct{ TableName, ColumnName string }
	if err := h.gdb.WithContext(ctx).Raw(`SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = 'accounts' AND table_name <> 'goose_db_version'
		  AND (data_type IN ('text', 'character varying', 'character', 'bytea', 'json', 'jsonb') OR udt_name IN ('_text', '_varchar'))`).
		Scan(&cols).Error; err != nil {
		t.Fatal(err)
	}
	tables := map[string]bool{}
	for _, c := range cols {
		tables[c.TableName] = true
	}
	if !tables["workspaces"] || !tables["api_keys"] || len(cols) < 6 {
		t.Fatalf("columns scanned: %v", cols)
	}
	for _, key := range plaintexts {
		for _, needle := range []string{key, strings.TrimPrefix(key, "pk_")} {
			for _, c := range cols {
				var n int64
				q := fmt.Sprintf(`SELECT count(*) FROM accounts.%q WHERE %q::text LIKE '%%' || ? || '%%'`, c.TableName, c.ColumnName)
				if err := h.gdb.WithContext(ctx).Raw(q, needle).Scan(&n).Error; err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Fatalf("plaintext key found in accounts.%s.%s", c.TableName, c.ColumnName)
				}
			}
		}
	}
	// What is stored is the SHA-256, and a display prefix.
	var rows []struct{ KeyHash, DisplayPrefix string }
	if err := h.gdb.WithContext(ctx).Raw(`SELECT key_hash, display_prefix FROM accounts.api_keys`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d keys stored", len(rows))
	}
	for _, r := range rows {
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(r.KeyHash) || len(r.DisplayPrefix) != 8 || !strings.HasPrefix(r.DisplayPrefix, "pk_") {
			t.Fatalf("stored %+v", r)
		}
	}
}

// TestAdminListsAPIKeys: GET /admin/workspaces/:id/api-keys lists a
// workspace's keys oldest first, revoked ones included, with their prefix
// and times and never the key; last_used_at follows authentication.
func TestAdminListsAPIKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fakeService(t, "messaging", echoBack)
	var wsA, wsB string
	for name, ws := range map[string]*string{"A": &wsA, "B": &wsB} {
		*ws = wsOf(t, h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces", map[string]any{"name": name}))["id"].(string)
	}
	k1 := h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+wsA+"/api-keys", map[string]any{"name": "ci"})
	k2 := h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+wsA+"/api-keys", nil)
	k3 := h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+wsB+"/api-keys", map[string]any{"name": "b"})

	list := func(ws string) []map[string]any {
		t.Helper()
		out := h.mustAdmin(t, http.StatusOK, http.MethodGet, "/admin/workspaces/"+ws+"/api-keys", nil)
		raw, ok := out["api_keys"].([]any)
		if !ok || len(out) != 1 {
			t.Fatalf("list = %v", out)
		}
		keys := make([]map[string]any, len(raw))
		for i, k := range raw {
			keys[i] = k.(map[string]any)
		}
		return keys
	}

	keys := list(wsA)
	if len(keys) != 2 || keys[0]["id"] != k1["id"] || keys[1]["id"] != k2["id"] {
		t.Fatalf("keys of A = %v, want k1 then k2", keys)
	}
	for i, created := range []map[string]any{k1, k2} {
		k := keys[i]
		createdAt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(k["created_at"]))
		if len(k) != 6 || k["prefix"] != created["key"].(string)[:8] || err != nil || time.Since(createdAt) > time.Minute ||
			k["last_used_at"] != nil || k["revoked_at"] != nil {
			t.Errorf("listed key %d = %v", i, k)
		}
	}
	if keys[0]["name"] != "ci" || keys[1]["name"] != "" {
		t.Errorf("names = %q, %q", keys[0]["name"], keys[1]["name"])
	}
	if b := list(wsB); len(b) != 1 || b[0]["id"] != k3["id"] {
		t.Fatalf("keys of B = %v", b)
	}

	// A request authenticated by k1 is its use; k2 stays unused.
	if r := h.call(t, http.MethodGet, "/v1/channels", k1["key"].(string), nil, nil); r.status != http.StatusOK {
		t.Fatalf("call with k1 = %d %s", r.status, r.body)
	}
	keys = list(wsA)
	usedAt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(keys[0]["last_used_at"]))
	if err != nil || time.Since(usedAt) > time.Minute || time.Since(usedAt) < 0 || keys[1]["last_used_at"] != nil {
		t.Fatalf("after a use: %v (%v)", keys, err)
	}
	// Within the minute another use writes nothing: the time stays.
	if r := h.call(t, http.MethodGet, "/v1/channels", k1["key"].(string), nil, nil); r.status != http.StatusOK {
		t.Fatalf("second call with k1 = %d %s", r.status, r.body)
	}
	if again := list(wsA); again[0]["last_used_at"] != keys[0]["last_used_at"] {
		t.Errorf("a use within the minute moved last_used_at: %v -> %v", keys[0]["last_used_at"], again[0]["last_used_at"])
	}

	revoked := h.mustAdmin(t, http.StatusOK, http.MethodDelete, "/admin/api-keys/"+k2["id"].(string), nil)
	if keys = list(wsA); keys[1]["revoked_at"] != revoked["revoked_at"] || keys[0]["revoked_at"] != nil {
		t.Errorf("after revoking k2: %v", keys)
	}

	// An unknown or malformed workspace is not found, not an empty list.
	for _, ws := range []string{"0193a3c4-0000-7000-8000-000000000000", "nope"} {
		status, out := h.admin(t, http.MethodGet, "/admin/workspaces/"+ws+"/api-keys", nil)
		if status != http.StatusNotFound || out["code"] != "workspace_not_found" {
			t.Errorf("keys of %q = %d %v", ws, status, out)
		}
	}
}

// adminAs calls the admin endpoint with body (a gatewayapi request, nil
// for none) and decodes its answer into T strictly, failing the test
// unless the status is want or the answer has a field T lacks.
func adminAs[T any](t *testing.T, h *harness, want int, method, path string, body any) T {
	t.Helper()
	status, raw := h.adminBytes(t, method, path, body)
	if status != want {
		t.Fatalf("admin %s %s = %d %s, want %d", method, path, status, raw, want)
	}
	return apicheck.Body[T](t, raw)
}

// TestAnswersAreTheDeclaredBodies: every admin route and GET /v1/me
// answer their gatewayapi body field for field, and the admin routes take
// their gatewayapi requests as pkg/adminclient sends them.
func TestAnswersAreTheDeclaredBodies(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, []byte(`{"channels":[{"id":"c1","kind":"webchat","external_id":"site","ai_mode":"auto","status":"active"}]}`))
	})
	limit, rate := int64(5), 30
	created := adminAs[gatewayapi.WorkspaceAnswer](t, h, http.StatusCreated, http.MethodPost, "/admin/workspaces", gatewayapi.NewWorkspace{
		Name: "Typed", Modules: []string{gatewayapi.ModuleFlows, gatewayapi.ModuleDeveloperAPI}, AILimit: &limit, RatePerMinute: &rate,
	}).Workspace
	id := created.ID
	want := gatewayapi.Workspace{
		ID: id, Name: "Typed", Slug: "typed",
		Plan:      gatewayapi.Plan{Name: "api", Modules: []string{gatewayapi.ModuleDeveloperAPI, gatewayapi.ModuleFlows}, AILimit: 5},
		RateLimit: gatewayapi.RateLimit{PerMinute: 30}, Features: []string{gatewayapi.FeatureFlowsAPI}, CreatedAt: created.CreatedAt,
	}
	if !reflect.DeepEqual(created, want) {
		t.Fatalf("created %+v\nwant %+v", created, want)
	}
	if got := adminAs[gatewayapi.WorkspaceAnswer](t, h, http.StatusOK, http.MethodGet, "/admin/workspaces/"+id, nil).Workspace; !reflect.DeepEqual(got, want) {
		t.Fatalf("get %+v\nwant %+v", got, want)
	}
	if got := adminAs[gatewayapi.WorkspaceList](t, h, http.StatusOK, http.MethodGet, "/admin/workspaces?slug=typed", nil); len(got.Workspaces) != 1 || !reflect.DeepEqual(got.Workspaces[0], want) {
		t.Fatalf("list %+v", got)
	}
	unknown := "00000000-0000-0000-0000-000000000000"
	wantUsed := gatewayapi.AIUnitsAnswer{Uses: []gatewayapi.AIUnitsUsed{
		{WorkspaceID: unknown, Error: &gatewayapi.AIUnitsRefusal{Code: "workspace_not_found", Message: "workspace not found"}},
		{WorkspaceID: id, AIUsed: 2, AILimit: 5},
	}}
	if got := adminAs[gatewayapi.AIUnitsAnswer](t, h, http.StatusOK, http.MethodPost, "/admin/ai-units", gatewayapi.UseAIUnits{Uses: []gatewayapi.AIUnitsUse{{WorkspaceID: unknown, Units: 1}, {WorkspaceID: id, Units: 2}}}); !reflect.DeepEqual(got, wantUsed) {
		t.Fatalf("ai units %+v", got)
	}
	key := adminAs[gatewayapi.CreatedAPIKey](t, h, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+id+"/api-keys", gatewayapi.NewAPIKey{Name: "typed"})
	if !keyFormat.MatchString(key.Key) || key.ID == "" {
		t.Fatalf("created key %+v", key)
	}

	r := h.call(t, http.MethodGet, "/v1/me", key.Key, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/me = %d %s", r.status, r.body)
	}
	wantMe := gatewayapi.Me{
		Workspace:  gatewayapi.MeWorkspace{ID: id, Name: "Typed", Slug: "typed"},
		Plan:       gatewayapi.MePlan{Name: "api", AIUsed: 2, AILimit: 5},
		Channels:   []messagingapi.Channel{{ID: "c1", Kind: "webchat", ExternalID: "site", AIMode: "auto", Status: "active"}},
		RateLimit:  gatewayapi.RateLimit{PerMinute: 30},
		APIVersion: "v1",
	}
	if me := apicheck.Body[gatewayapi.Me](t, r.body); !reflect.DeepEqual(me, wantMe) {
		t.Fatalf("me %+v\nwant %+v", me, wantMe)
	}

	keys := adminAs[gatewayapi.APIKeyList](t, h, http.StatusOK, http.MethodGet, "/admin/workspaces/"+id+"/api-keys", nil).APIKeys
	if len(keys) != 1 || keys[0].ID != key.ID || keys[0].Name != "typed" || keys[0].Prefix != key.Key[:8] || keys[0].LastUsedAt == nil || keys[0].RevokedAt != nil {
		t.Fatalf("keys %+v", keys)
	}
	revoked := adminAs[gatewayapi.RevokedAPIKey](t, h, http.StatusOK, http.MethodDelete, "/admin/api-keys/"+key.ID, nil)
	if revoked.ID != key.ID || revoked.RevokedAt == "" {
		t.Fatalf("revoked %+v", revoked)
	}

	// An empty module list is a plan without modules, not "leave them".
	changed := adminAs[gatewayapi.WorkspaceAnswer](t, h, http.StatusOK, http.MethodPatch, "/admin/workspaces/"+id, gatewayapi.WorkspaceChanges{Modules: []string{}}).Workspace
	if changed.Plan.Modules == nil || len(changed.Plan.Modules) != 0 || changed.Plan.AILimit != 5 {
		t.Fatalf("changed %+v", changed)
	}
	off := false
	switched := adminAs[gatewayapi.WorkspaceAnswer](t, h, http.StatusOK, http.MethodPut, "/admin/workspaces/"+id+"/features/"+gatewayapi.FeatureFlowsAPI, gatewayapi.FeatureSwitch{On: &off}).Workspace
	if switched.Features == nil || len(switched.Features) != 0 {
		t.Fatalf("switched off %+v", switched)
	}
}
