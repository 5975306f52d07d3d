package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/parleyhq/parley/pkg/rpc"
	httpport "github.com/parleyhq/parley/services/gateway/internal/ports/http"
)

func TestAuthenticationFailuresAre401(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, echoBack)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	revokedWS, _ := h.workspace(t, map[string]any{"name": "Gone"})
	revokedID, revoked := h.newKey(t, revokedWS)
	if r := h.call(t, http.MethodGet, "/v1/channels", revoked, nil, nil); r.status != http.StatusOK {
		t.Fatalf("key before revocation = %d %s", r.status, r.body)
	}
	h.mustAdmin(t, http.StatusOK, http.MethodDelete, "/admin/api-keys/"+revokedID, nil)

	unknown := "pk_" + strings.Repeat("A", 43)
	tests := []struct {
		name          string
		path          string
		authorization []string
		wantInMessage string
	}{
		{name: "missing header", path: "/v1/me", wantInMessage: "Authorization: Bearer"},
		{name: "empty header", path: "/v1/me", authorization: []string{""}, wantInMessage: "Authorization: Bearer"},
		{name: "basic scheme", path: "/v1/me", authorization: []string{"Basic dXNlcjpwYXNz"}, wantInMessage: "Bearer"},
		{name: "key without scheme", path: "/v1/me", authorization: []string{key}, wantInMessage: "Bearer"},
		{name: "bearer with empty key", path: "/v1/me", authorization: []string{"Bearer "}, wantInMessage: "Bearer"},
		{name: "bearer with a non-key", path: "/v1/me", authorization: []string{"Bearer hunter2"}, wantInMessage: "unknown"},
		{name: "bearer with a short pk_ token", path: "/v1/me", authorization: []string{"Bearer pk_wrong"}, wantInMessage: "unknown"},
		{name: "bearer with a token outside RFC 6750", path: "/v1/me", authorization: []string{"Bearer pk_a,b"}, wantInMessage: "malformed"},
		{name: "two authorization headers", path: "/v1/me", authorization: []string{"Bearer " + key, "Bearer " + key}, wantInMessage: "Bearer"},
		{name: "unknown key", path: "/v1/me", authorization: []string{"Bearer " + unknown}, wantInMessage: "unknown"},
		{name: "revoked key", path: "/v1/me", authorization: []string{"Bearer " + revoked}, wantInMessage: "revoked"},
		{name: "key in query only", path: "/v1/me?api_key=" + key, wantInMessage: "Authorization header"},
		{name: "api_key in query beside a valid header", path: "/v1/channels?api_key=" + key, authorization: []string{"Bearer " + key}, wantInMessage: "Authorization header"},
		{name: "key in query beside a valid header", path: "/v1/conversations?limit=5&key=x", authorization: []string{"Bearer " + key}, wantInMessage: "\"key\""},
		{name: "access_token in query", path: "/v1/me?access_token=x", authorization: []string{"Bearer " + key}, wantInMessage: "Authorization header"},
		{name: "token in query", path: "/v1/me?token=", authorization: []string{"Bearer " + key}, wantInMessage: "Authorization header"},
		{name: "legacy base, query key", path: "/api/v1/me?api_key=" + key, authorization: []string{"Bearer " + key}, wantInMessage: "Authorization header"},
	}
	// A key that is refused is refused the same way whatever the reason:
	// unknown, revoked or never key-shaped, one body.
	uniform := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := http.Header{}
			for _, v := range tt.authorization {
				header.Add("Authorization", v)
			}
			r := h.call(t, http.MethodGet, tt.path, "", nil, header)
			if tt.wantInMessage == "unknown" || tt.wantInMessage == "revoked" {
				uniform[tt.name] = string(r.body)
			}
			message := r.expectError(t, http.StatusUnauthorized, "unauthorized")
			if !strings.Contains(message, tt.wantInMessage) {
				t.Errorf("message %q does not mention %q", message, tt.wantInMessage)
			}
			if r.header.Get("WWW-Authenticate") == "" {
				t.Error("no WWW-Authenticate header")
			}
			if r.header.Get("RateLimit-Limit") != "" {
				t.Error("an unauthenticated request was counted against a rate limit")
			}
		})
	}
	if n := len(msg.requests()); n != 1 {
		t.Fatalf("messaging received %d unauthenticated requests", n-1)
	}
	if len(uniform) != 4 {
		t.Fatalf("compared %d refused keys, want 4", len(uniform))
	}
	for name, body := range uniform {
		if body != uniform["unknown key"] {
			t.Errorf("%s: body %s, unknown key: %s", name, body, uniform["unknown key"])
		}
	}
	// The same key in the header alone is fine.
	if r := h.call(t, http.MethodGet, "/v1/channels?limit=5", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("valid request = %d %s", r.status, r.body)
	}
}

func TestPlanWithoutDeveloperAPIIs403(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, echoBack)
	id, key := h.workspace(t, map[string]any{"name": "Flows only", "modules": []string{"flows", "flow_ai"}})

	for _, path := range []string{"/v1/me", "/v1/channels", "/api/v1/conversations"} {
		r := h.call(t, http.MethodGet, path, key, nil, nil)
		message := r.expectError(t, http.StatusForbidden, "module_inactive")
		if !strings.Contains(message, "developer_api") {
			t.Errorf("%s: message %q does not name the module", path, message)
		}
	}
	if n := len(msg.requests()); n != 0 {
		t.Fatalf("messaging received %d requests of a workspace without the module", n)
	}

	// An upgrade applies at once.
	h.mustAdmin(t, http.StatusOK, http.MethodPatch, "/admin/workspaces/"+id, map[string]any{"modules": []string{"developer_api", "flows"}})
	if r := h.call(t, http.MethodGet, "/v1/channels", key, nil, nil); r.status != http.StatusOK {
		t.Fatalf("after upgrade = %d %s", r.status, r.body)
	}
}

// Every instance keeps the credentials of the keys it saw; a revocation, a
// plan change or a feature switched through the admin endpoint (answered
// by either instance) applies on both at their next request.
func TestChangesApplyOnEveryInstanceAtOnce(t *testing.T) {
	t.Parallel()
	a := newHarness(t)
	b := a.another(t)
	msg := a.fakeService(t, rpc.ServiceMessaging, echoBack)
	instances := map[string]*harness{"A": a, "B": b}
	id, kept := a.workspace(t, map[string]any{"name": "Acme", "modules": []string{"developer_api", "flows"}})
	revokedID, revoked := a.newKey(t, id)
	// each calls /v1/channels with key on both instances and checks the
	// status; the first call of a key reads it, the second is cached.
	each := func(t *testing.T, key string, status int, code string) {
		t.Helper()
		for name, h := range instances {
			r := h.call(t, http.MethodGet, "/v1/channels", key, nil, nil)
			if code != "" {
				r.expectError(t, status, code)
			} else if r.status != status {
				t.Fatalf("instance %s: %d %s, want %d", name, r.status, r.body, status)
			}
		}
	}
	each(t, revoked, http.StatusOK, "")
	each(t, revoked, http.StatusOK, "")
	each(t, kept, http.StatusOK, "")
	each(t, kept, http.StatusOK, "")

	a.mustAdmin(t, http.StatusOK, http.MethodDelete, "/admin/api-keys/"+revokedID, nil)
	each(t, revoked, http.StatusUnauthorized, "unauthorized")
	each(t, kept, http.StatusOK, "")

	a.mustAdmin(t, http.StatusOK, http.MethodPatch, "/admin/workspaces/"+id, map[string]any{"modules": []string{"flows"}})
	each(t, kept, http.StatusForbidden, "module_inactive")
	a.mustAdmin(t, http.StatusOK, http.MethodPatch, "/admin/workspaces/"+id, map[string]any{"modules": []string{"developer_api", "flows"}})
	each(t, kept, http.StatusOK, "")

	a.mustAdmin(t, http.StatusOK, http.MethodPut, "/admin/workspaces/"+id+"/features/flows_api", map[string]any{"on": false})
	for name, h := range instances {
		h.call(t, http.MethodGet, "/v1/channels", kept, nil, nil)
		if got := msg.last(t); got.features != nil {
			t.Fatalf("instance %s forwarded features %v after flows_api was switched off", name, got.features)
		}
	}
}

func TestRateLimitPerWorkspace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fakeService(t, rpc.ServiceMessaging, echoBack)
	_, key := h.workspace(t, map[string]any{"name": "Small", "rate_per_minute": 3})
	_, otherKey := h.workspace(t, map[string]any{"name": "Default"})

	for i, wantRemaining := range []string{"2", "1", "0"} {
		r := h.call(t, http.MethodGet, "/v1/channels", key, nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("request %d = %d %s", i+1, r.status, r.body)
		}
		if r.header.Get("RateLimit-Limit") != "3" || r.header.Get("RateLimit-Remaining") != wantRemaining {
			t.Fatalf("request %d: RateLimit-Limit %q, -Remaining %q; want 3, %s", i+1,
				r.header.Get("RateLimit-Limit"), r.header.Get("RateLimit-Remaining"), wantRemaining)
		}
		if reset, err := strconv.Atoi(r.header.Get("RateLimit-Reset")); err != nil || reset < 1 || reset > 60 {
			t.Fatalf("request %d: RateLimit-Reset %q, want 1..60 seconds", i+1, r.header.Get("RateLimit-Reset"))
		}
		if len(r.header.Values("RateLimit-Limit")) != 1 {
			t.Fatalf("request %d: RateLimit-Limit repeated: %v", i+1, r.header.Values("RateLimit-Limit"))
		}
	}

	// The fourth is refused, on any route, and the limit headers stay.
	for _, path := range []string{"/v1/channels", "/v1/me", "/api/v1/channels"} {
		r := h.call(t, http.MethodGet, path, key, nil, nil)
		r.expectError(t, http.StatusTooManyRequests, "rate_limited")
		retry, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || retry < 1 || retry > 60 {
			t.Fatalf("%s: Retry-After %q, want whole seconds in 1..60", path, r.header.Get("Retry-After"))
		}
		if r.header.Get("RateLimit-Limit") != "3" || r.header.Get("RateLimit-Remaining") != "0" || r.header.Get("RateLimit-Reset") == "" {
			t.Fatalf("%s: RateLimit headers %v", path, r.header)
		}
	}

	// Another workspace has its own window, at the default limit.
	r := h.call(t, http.MethodGet, "/v1/channels", otherKey, nil, nil)
	if r.status != http.StatusOK || r.header.Get("RateLimit-Limit") != strconv.Itoa(defaultRate) ||
		r.header.Get("RateLimit-Remaining") != strconv.Itoa(defaultRate-1) {
		t.Fatalf("other workspace = %d, headers %v", r.status, r.header)
	}
	// Errors from behind the limit carry the headers too.
	r = h.call(t, http.MethodGet, "/v1/nothing-here", otherKey, nil, nil)
	r.expectError(t, http.StatusNotFound, "not_found")
	if r.header.Get("RateLimit-Remaining") != strconv.Itoa(defaultRate-2) {
		t.Fatalf("404 RateLimit-Remaining = %q", r.header.Get("RateLimit-Remaining"))
	}

	// The counter lives under the test's REDIS_PREFIX.
	keys, err := h.env.Redis(t).Keys(t.Context(), "*ratelimit*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, h.env.ID) && !strings.HasPrefix(k, h.env.RedisPrefix) {
			t.Fatalf("key %q outside the prefix %q", k, h.env.RedisPrefix)
		}
	}
	if m := h.metrics(t); !strings.Contains(m, "parley_gateway_rate_limited_total 3\n") {
		t.Fatalf("metrics do not count the 3 refusals:\n%s", m)
	}
}

func TestMeIsExactlyAsSpecified(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		if c.Request().URL.Path != "/v1/channels" {
			return c.NoContent(http.StatusNotFound)
		}
		// Messaging's answer, with a field /v1/me does not show.
		return c.JSONBlob(http.StatusOK, []byte(`{"channels":[
			{"id":"c1","kind":"telegram","external_id":"parley_demo_bot","ai_mode":"external","status":"active","workspace_id":"x"},
			{"id":"c2","kind":"webchat","external_id":"","ai_mode":"auto","status":"active"}]}`))
	})
	id, key := h.workspace(t, map[string]any{"name": "Acme Shop", "ai_limit": 500, "rate_per_minute": 30})

	for _, path := range []string{"/v1/me", "/api/v1/me"} {
		r := h.call(t, http.MethodGet, path, key, nil, nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Fatalf("%s = %d %s", path, r.status, r.body)
		}
		var got any
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		var want any
		if err := json.Unmarshal([]byte(fmt.Sprintf(`{
			"workspace": {"id": %q, "name": "Acme Shop", "slug": "acme-shop"},
			"plan": {"name": "api", "ai_used": 0, "ai_limit": 500},
			"channels": [
				{"id":"c1","kind":"telegram","external_id":"parley_demo_bot","ai_mode":"external","status":"active"},
				{"id":"c2","kind":"webchat","external_id":"","ai_mode":"auto","status":"active"}],
			"rate_limit": {"per_minute": 30},
			"api_version": "v1"}`, id)), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s body\n got %s\nwant %v", path, r.body, want)
		}
	}
	got := msg.last(t)
	if got.workspaceID != id || got.method != http.MethodGet || got.path != "/v1/channels" {
		t.Fatalf("messaging saw %+v", got)
	}
	if r := h.call(t, http.MethodPost, "/v1/me", key, nil, nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("POST /v1/me = %d", r.status)
	}
}

func TestMeWithNoChannelsAndWithoutMessaging(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})

	// Messaging not running: the caller is told to retry.
	h.call(t, http.MethodGet, "/v1/me", key, nil, nil).expectError(t, http.StatusServiceUnavailable, "service_unavailable")

	h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, []byte(`{"channels":[]}`))
	})
	r := h.call(t, http.MethodGet, "/v1/me", key, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/me = %d %s", r.status, r.body)
	}
	if ch, ok := r.json(t)["channels"].([]any); !ok || len(ch) != 0 {
		t.Fatalf("channels = %v, want []", r.json(t)["channels"])
	}
	if rl := r.json(t)["rate_limit"].(map[string]any)["per_minute"]; rl != float64(defaultRate) {
		t.Fatalf("rate_limit.per_minute = %v, want the default %d", rl, defaultRate)
	}
}

func TestForwardingCarriesTheRequestAndReturnsTheAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		c.Response().Header().Set("X-Service-Note", "from messaging")
		c.Response().Header().Set("RateLimit-Limit", "999") // not the service's to set
		return c.JSONBlob(http.StatusCreated, []byte(`{"message":{"id":"m1"}}`))
	})
	// flows_api is on without a switch: it reaches the service.
	id, key := h.workspace(t, map[string]any{"name": "Acme", "modules": []string{"developer_api", "flows"}})

	body := []byte(`{"conversation_id":"c1","text":"hello"}`)
	header := http.Header{
		"Content-Type":    {"application/json"},
		"Accept":          {"application/json"},
		"Idempotency-Key": {"idem-1"},
		"User-Agent":      {"acme-bot/1.0"},
		"Cookie":          {"session=abc"},
		"X-Forwarded-For": {"10.0.0.1"},
		"X-Custom":        {"nope"},
		"X-Request-Id":    {"req-12345"},
	}
	r := h.call(t, http.MethodPost, "/v1/messages?dry=1&x=%2F", key, body, header)
	if r.status != http.StatusCreated || string(r.body) != `{"message":{"id":"m1"}}`+"\n" && string(r.body) != `{"message":{"id":"m1"}}` {
		t.Fatalf("response = %d %q", r.status, r.body)
	}
	if r.header.Get("X-Service-Note") != "from messaging" || r.header.Get("X-Request-Id") != "req-12345" ||
		!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("response headers %v", r.header)
	}
	if r.header.Get("RateLimit-Limit") != strconv.Itoa(defaultRate) || len(r.header.Values("RateLimit-Limit")) != 1 {
		t.Fatalf("RateLimit-Limit = %v, want the gateway's only", r.header.Values("RateLimit-Limit"))
	}

	got := msg.last(t)
	if got.workspaceID != id || got.method != http.MethodPost || got.path != "/v1/messages" || got.rawQuery != "dry=1&x=%2F" || !bytes.Equal(got.body, body) {
		t.Fatalf("messaging saw %+v", got)
	}
	if !reflect.DeepEqual(got.modules, []string{"developer_api", "flows"}) || !reflect.DeepEqual(got.features, []string{"flows_api"}) {
		t.Fatalf("service saw modules %v and features %v, want [developer_api flows] and [flows_api]", got.modules, got.features)
	}
	for name, want := range map[string]string{
		"Content-Type": "application/json", "Accept": "application/json", "Idempotency-Key": "idem-1",
		"User-Agent": "acme-bot/1.0", "X-Request-Id": "req-12345",
	} {
		if got.header.Get(name) != want {
			t.Errorf("service saw %s %q, want %q", name, got.header.Get(name), want)
		}
	}
	for name := range got.header {
		switch name {
		case "Content-Type", "Accept", "Idempotency-Key", "User-Agent", "X-Request-Id":
		default:
			t.Errorf("service saw header %s: %v", name, got.header.Values(name))
		}
	}
	if got.header.Get("Authorization") != "" {
		t.Fatal("Authorization reached the service")
	}

	// Without X-Request-Id the gateway makes one and the service sees it.
	r = h.call(t, http.MethodGet, "/v1/conversations", key, nil, nil)
	rid := r.header.Get("X-Request-Id")
	if rid == "" || msg.last(t).header.Get("X-Request-Id") != rid {
		t.Fatalf("generated request id %q, service saw %q", rid, msg.last(t).header.Get("X-Request-Id"))
	}

	// A downgrade and a feature switched off reach the next request.
	h.mustAdmin(t, http.StatusOK, http.MethodPatch, "/admin/workspaces/"+id, map[string]any{"modules": []string{"developer_api"}})
	h.mustAdmin(t, http.StatusOK, http.MethodPut, "/admin/workspaces/"+id+"/features/flows_api", map[string]any{"on": false})
	h.call(t, http.MethodGet, "/v1/conversations", key, nil, nil)
	if got := msg.last(t); !reflect.DeepEqual(got.modules, []string{"developer_api"}) || got.features != nil {
		t.Fatalf("after the downgrade the service saw modules %v and features %v", got.modules, got.features)
	}
}

func TestForwardingPassesServiceErrorsThrough(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		c.Response().Header().Set("Retry-After", "7")
		return c.JSONBlob(http.StatusConflict, []byte(`{"code":"outside_messaging_window","message":"24 hours passed"}`))
	})
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	r := h.call(t, http.MethodPost, "/v1/messages", key, []byte(`{}`), http.Header{"Content-Type": {"application/json"}})
	r.expectError(t, http.StatusConflict, "outside_messaging_window")
	if r.header.Get("Retry-After") != "7" || r.header.Get("RateLimit-Limit") == "" {
		t.Fatalf("headers %v", r.header)
	}
}

// A whole answer larger than net/http's buffer (a page of the API) is
// relayed byte for byte and said with its length, not cut into chunks.
func TestForwardedPageIsRelayedWithItsLength(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	page := []byte(`{"conversations":[` + strings.Repeat(`{"id":"c","name":"\u00e9 x"},`, 1000) + `{}],"next_before":null}`)
	h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, page)
	})
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	r := h.call(t, http.MethodGet, "/v1/conversations?limit=50", key, nil, nil)
	if r.status != http.StatusOK || !bytes.Equal(r.body, page) {
		t.Fatalf("GET = %d, %d bytes, want 200 and the service's %d bytes as they are", r.status, len(r.body), len(page))
	}
	// Go's client keeps Content-Length among the headers of an answer
	// sent with its length, and leaves it out of a chunked one.
	if got := r.header.Get("Content-Length"); got != strconv.Itoa(len(page)) {
		t.Fatalf("Content-Length %q, want %d: the answer went in chunks", got, len(page))
	}
	if r.header.Get("RateLimit-Limit") == "" || r.header.Get("X-Request-Id") == "" {
		t.Fatalf("headers %v", r.header)
	}
}

func TestRoutingTable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	fakes := map[string]*fakeService{
		rpc.ServiceMessaging:  h.fakeService(t, rpc.ServiceMessaging, echoBack),
		rpc.ServiceDispatcher: h.fakeService(t, rpc.ServiceDispatcher, echoBack),
		rpc.ServiceFlowRunner: h.fakeService(t, rpc.ServiceFlowRunner, echoBack),
	}
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	tests := []struct {
		method, path, service string
	}{
		{http.MethodGet, "/v1/channels", rpc.ServiceMessaging},
		{http.MethodGet, "/v1/conversations", rpc.ServiceMessaging},
		{http.MethodGet, "/v1/conversations/abc/messages", rpc.ServiceMessaging},
		{http.MethodPost, "/v1/messages", rpc.ServiceMessaging},
		{http.MethodPost, "/v1/image", rpc.ServiceMessaging},
		{http.MethodPost, "/v1/carousel", rpc.ServiceMessaging},
		{http.MethodPost, "/v1/typing", rpc.ServiceMessaging},
		{http.MethodPost, "/v1/comments/cm1/reply", rpc.ServiceMessaging},
		{http.MethodPost, "/v1/comments/cm1/private-reply", rpc.ServiceMessaging},
		{http.MethodGet, "/v1/webhook", rpc.ServiceDispatcher},
		{http.MethodPut, "/v1/webhook", rpc.ServiceDispatcher},
		{http.MethodDelete, "/v1/webhook", rpc.ServiceDispatcher},
		{http.MethodPost, "/v1/webhook/test", rpc.ServiceDispatcher},
		{http.MethodGet, "/v1/webhook/deliveries", rpc.ServiceDispatcher},
		{http.MethodGet, "/v1/flows", rpc.ServiceFlowRunner},
		{http.MethodPost, "/v1/flows/f1/invoke", rpc.ServiceFlowRunner},
		{http.MethodGet, "/v1/flows/f1/runs/r1", rpc.ServiceFlowRunner},
		{http.MethodGet, "/api/v1/conversations", rpc.ServiceMessaging},
		{http.MethodPost, "/api/v1/webhook/test", rpc.ServiceDispatcher},
	}
	for _, tt := range tests {
		before := map[string]int{}
		for name, f := range fakes {
			before[name] = len(f.requests())
		}
		r := h.call(t, tt.method, tt.path, key, nil, nil)
		wantPath := strings.TrimPrefix(tt.path, "/api")
		if r.status != http.StatusOK || r.json(t)["path"] != wantPath {
			t.Errorf("%s %s = %d %s, want 200 from %s at %s", tt.method, tt.path, r.status, r.body, tt.service, wantPath)
			continue
		}
		for name, f := range fakes {
			n := len(f.requests()) - before[name]
			if (name == tt.service) != (n == 1) || n > 1 {
				t.Errorf("%s %s: %s received %d requests", tt.method, tt.path, name, n)
			}
		}
		if got := fakes[tt.service].last(t); got.method != tt.method {
			t.Errorf("%s %s: %s saw method %s", tt.method, tt.path, tt.service, got.method)
		}
	}
}

func TestUnknownRoutesAre404(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, echoBack)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	for _, path := range []string{
		"/v1", "/v1/", "/v1/nope", "/v1/webhooks", "/v1/media", "/v1/me/more", "/v1/channelsx",
		"/v1/channels/", "/v1/channels/../me", "/v1/conversations//messages", "/v1/comments/./x", "/api/v1/nope",
	} {
		h.call(t, http.MethodGet, path, key, nil, nil).expectError(t, http.StatusNotFound, "not_found")
	}
	// A path of 100 KB is named by its start only, whatever the method.
	long := "/v1/" + strings.Repeat("a", 100<<10)
	r := h.call(t, http.MethodGet, long, key, nil, nil)
	if m := r.expectError(t, http.StatusNotFound, "not_found"); len(r.body) > 300 || m != "no such route: GET /v1/"+strings.Repeat("a", 60)+"…" {
		t.Fatalf("a 100 KB path: %d bytes: %s", len(r.body), r.body)
	}
	r = h.call(t, strings.Repeat("M", 10<<10), long, key, nil, nil)
	if r.expectError(t, http.StatusNotFound, "not_found"); len(r.body) > 300 {
		t.Fatalf("a 100 KB path with a 10 KB method: %d bytes: %.300s", len(r.body), r.body)
	}
	if n := len(msg.requests()); n != 0 {
		t.Fatalf("messaging received %d requests for unknown routes", n)
	}
}

func TestServiceNotRunningIs503(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	for _, path := range []string{"/v1/flows", "/v1/webhook", "/v1/conversations"} {
		r := h.call(t, http.MethodGet, path, key, nil, nil)
		r.expectError(t, http.StatusServiceUnavailable, "service_unavailable")
		if r.header.Get("RateLimit-Limit") == "" {
			t.Errorf("%s: 503 without RateLimit headers", path)
		}
	}
}

// TestBodyLimit: every /v1 body may be MaxBodyBytes (512 KiB); one byte
// more is 413 payload_too_large naming the limit, with or without a
// Content-Length, and the service never sees it. A valid JSON body over the
// limit is never called malformed.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	size := func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]int{"bytes": int(c.Request().ContentLength)})
	}
	msg := h.fakeService(t, rpc.ServiceMessaging, size)
	disp := h.fakeService(t, rpc.ServiceDispatcher, size)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})

	// At the limit: through whole.
	atLimit := jsonOfSize(httpport.MaxBodyBytes)
	for _, path := range []string{"/v1/messages", "/v1/webhook"} {
		method := http.MethodPost
		if path == "/v1/webhook" {
			method = http.MethodPut
		}
		r := h.call(t, method, path, key, atLimit, nil)
		if r.status != http.StatusOK || r.json(t)["bytes"] != float64(httpport.MaxBodyBytes) {
			t.Fatalf("%s %s at the limit = %d %s", method, path, r.status, r.body)
		}
	}

	// Just over it, and a 600 KB webhook: 413, never "not valid JSON".
	over := jsonOfSize(httpport.MaxBodyBytes + 1)
	for name, req := range map[string]*http.Request{
		"POST /v1/messages, one byte over": newRequest(t, http.MethodPost, h.url+"/v1/messages", key, bytes.NewReader(over)),
		"PUT /v1/webhook, 600 KB":          newRequest(t, http.MethodPut, h.url+"/v1/webhook", key, bytes.NewReader(jsonOfSize(600_000))),
		"one byte over, no Content-Length": newRequest(t, http.MethodPost, h.url+"/v1/messages", key, struct{ io.Reader }{bytes.NewReader(over)}),
		"legacy base, one byte over":       newRequest(t, http.MethodPost, h.url+"/api/v1/messages", key, bytes.NewReader(over)),
	} {
		r := do(t, req)
		message := r.expectError(t, http.StatusRequestEntityTooLarge, "payload_too_large")
		if !strings.Contains(message, "at most 524288 bytes") {
			t.Errorf("%s: message %q does not name the limit", name, message)
		}
	}
	if n := len(msg.requests()) + len(disp.requests()); n != 2 {
		t.Fatalf("the services received %d requests, want only the 2 within the limit", n)
	}
}

// A body is JSON (docs/api.md "Requests and keys"): one sent as another
// media type is refused at the gateway, 400 invalid_request naming the
// Content-Type, and never reaches the service; JSON with its parameters,
// a body without a Content-Type and a Content-Type without a body pass.
func TestBodyDeclaredAsAnotherMediaTypeIs400(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]bool{"ok": true})
	})
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	body := []byte(`{"conversation_id":"c1","text":"hi"}`)
	for _, ct := range []string{"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "nonsense;;"} {
		r := h.call(t, http.MethodPost, "/v1/messages", key, body, http.Header{"Content-Type": {ct}})
		if message := r.expectError(t, http.StatusBadRequest, "invalid_request"); !strings.Contains(message, "Content-Type") {
			t.Errorf("Content-Type %q: message %q does not name the header", ct, message)
		}
	}
	passes := []struct {
		ct   string
		body []byte
	}{
		{"application/json", body},
		{"application/json; charset=utf-8", body},
		{"Application/JSON", body},
		{"", body},
		{"text/plain", nil},
	}
	for _, p := range passes {
		header := http.Header{}
		if p.ct != "" {
			header.Set("Content-Type", p.ct)
		}
		if r := h.call(t, http.MethodPost, "/v1/messages", key, p.body, header); r.status != http.StatusOK {
			t.Errorf("Content-Type %q, %d bytes: %d %s, want it forwarded", p.ct, len(p.body), r.status, r.body)
		}
	}
	if n := len(msg.requests()); n != len(passes) {
		t.Fatalf("messaging received %d requests, want the %d that pass", n, len(passes))
	}
}

// A body holding a NUL character (\u0000) is forwarded as sent: whether
// it can be kept is the service's to say (messaging refuses one, a flow's
// input keeps it; docs/limits-and-errors.md "Error codes").
func TestBodyWithANULIsForwardedAsSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]bool{"ok": true})
	})
	_, key := h.workspace(t, map[string]any{"name": "Acme"})
	body := `{"conversation_id":"c1","text":"a\u0000b"}`
	if r := h.call(t, http.MethodPost, "/v1/messages", key, []byte(body), http.Header{"Content-Type": {"application/json"}}); r.status != http.StatusOK {
		t.Fatalf("%d %s, want it forwarded", r.status, r.body)
	}
	if got := msg.requests(); len(got) != 1 || string(got[0].body) != body {
		t.Fatalf("messaging received %+v, want the body as sent", got)
	}
}

// jsonOfSize is a valid JSON object of exactly n bytes.
func jsonOfSize(n int) []byte {
	return []byte(`{"url":"https://example.com/hook","pad":"` + strings.Repeat("x", n-len(`{"url":"https://example.com/hook","pad":""}`)) + `"}`)
}

func newRequest(t *testing.T, method, url, key string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func TestLegacyBaseIsDeprecated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, echoBack)
	id, key := h.workspace(t, map[string]any{"name": "Acme"})

	const deprecation = "@1789689600" // 2026-09-18T00:00:00Z
	r := h.call(t, http.MethodGet, "/api/v1/conversations/c1/messages?limit=5", key, nil, nil)
	if r.status != http.StatusOK || r.header.Get("Deprecation") != deprecation ||
		r.header.Get("Link") != `</v1/conversations/c1/messages>; rel="successor-version"` {
		t.Fatalf("legacy = %d, Deprecation %q, Link %q", r.status, r.header.Get("Deprecation"), r.header.Get("Link"))
	}
	if got := msg.last(t); got.path != "/v1/conversations/c1/messages" || got.rawQuery != "limit=5" || got.workspaceID != id {
		t.Fatalf("messaging saw %+v", got)
	}
	// Errors under the old base say so too.
	r = h.call(t, http.MethodGet, "/api/v1/me", "", nil, nil)
	r.expectError(t, http.StatusUnauthorized, "unauthorized")
	if r.header.Get("Deprecation") != deprecation || r.header.Get("Link") != `</v1/me>; rel="successor-version"` {
		t.Fatalf("legacy 401 headers %v", r.header)
	}
	// The current base is not deprecated.
	if r := h.call(t, http.MethodGet, "/v1/channels", key, nil, nil); r.header.Get("Deprecation") != "" || r.header.Get("Link") != "" {
		t.Fatalf("/v1 carries %q %q", r.header.Get("Deprecation"), r.header.Get("Link"))
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	msg := h.fakeService(t, rpc.ServiceMessaging, func(c echo.Context) error {
		if c.Request().URL.Path == "/v1/channels" {
			ws := rpc.WorkspaceID(c.Request().Context())
			return c.JSON(http.StatusOK, map[string]any{"channels": []map[string]string{{"id": "ch-of-" + ws}}})
		}
		return echoBack(c)
	})
	idA, keyA := h.workspace(t, map[string]any{"name": "Tenant A", "rate_per_minute": 3})
	idB, keyB := h.workspace(t, map[string]any{"name": "Tenant B"})
	// A second key of A is still A.
	_, keyA2 := h.newKey(t, idA)

	for _, tc := range []struct{ key, ws string }{{keyA, idA}, {keyB, idB}, {keyA2, idA}} {
		r := h.call(t, http.MethodGet, "/v1/me", tc.key, nil, nil)
		me := r.json(t)
		if me["workspace"].(map[string]any)["id"] != tc.ws || me["channels"].([]any)[0].(map[string]any)["id"] != "ch-of-"+tc.ws {
			t.Fatalf("key of %s sees %s", tc.ws, r.body)
		}
		h.call(t, http.MethodGet, "/v1/conversations", tc.key, nil, nil)
		if got := msg.last(t).workspaceID; got != tc.ws {
			t.Fatalf("key of %s forwarded as workspace %s", tc.ws, got)
		}
	}
	// A's limit is A's: it is spent (3 requests made), B goes on.
	h.call(t, http.MethodGet, "/v1/conversations", keyA, nil, nil).expectError(t, http.StatusTooManyRequests, "rate_limited")
	if r := h.call(t, http.MethodGet, "/v1/conversations", keyB, nil, nil); r.status != http.StatusOK {
		t.Fatalf("B after A is limited = %d", r.status)
	}
}

func TestProbesAndMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fakeService(t, rpc.ServiceMessaging, echoBack)
	_, key := h.workspace(t, map[string]any{"name": "Acme"})

	if r := h.call(t, http.MethodGet, "/healthz", "", nil, nil); r.status != http.StatusOK {
		t.Fatalf("healthz = %d", r.status)
	}
	r := h.call(t, http.MethodGet, "/readyz", "", nil, nil)
	checks, _ := r.json(t)["checks"].(map[string]any)
	if r.status != http.StatusOK || checks["postgres"] != "ok" || checks["redis"] != "ok" || checks["nats"] != "ok" {
		t.Fatalf("readyz = %d %s", r.status, r.body)
	}

	h.call(t, http.MethodGet, "/v1/channels", key, nil, nil)
	h.call(t, http.MethodGet, "/v1/channels", key, nil, nil)
	h.call(t, http.MethodGet, "/v1/channels", "", nil, nil)
	h.call(t, http.MethodGet, "/v1/bogus", key, nil, nil)
	m := h.metrics(t)
	for _, want := range []string{
		`parley_gateway_requests_total{group="channels",status="200"} 2`,
		`parley_gateway_requests_total{group="channels",status="401"} 1`,
		`parley_gateway_requests_total{group="unknown",status="404"} 1`,
		`parley_gateway_upstream_duration_seconds_count{service="messaging"} 2`,
		`parley_gateway_rate_limited_total 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
