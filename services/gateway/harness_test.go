package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/httpx"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/rpcserver"
	"github.com/parleyhq/parley/services/gateway/internal/adapters"
	gwconfig "github.com/parleyhq/parley/services/gateway/internal/config"
	"github.com/parleyhq/parley/services/gateway/internal/domain/account"
	httpport "github.com/parleyhq/parley/services/gateway/internal/ports/http"
	"github.com/parleyhq/parley/services/gateway/migrations"
)

const defaultRate = 120

// harness is one gateway, started by serve as in production, on the
// test's own slice of Postgres, Redis and NATS: the public API on its own
// listener, the admin API on the rpc "admin" endpoint.
type harness struct {
	env    *testenv.Env
	cfg    gwconfig.Config
	url    string
	gdb    *gorm.DB
	client *rpc.Client
}

// newHarness starts a gateway with the production defaults, changed by
// each of mutate.
func newHarness(t *testing.T, mutate ...func(*gwconfig.Config)) *harness {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	cfg := gwconfig.Config{
		Connections:           env.Connections(),
		Addr:                  ports.FreeAddr(t),
		RatePerMinute:         defaultRate,
		AuthFailuresPerMinute: httpport.DefaultAuthFailuresPerMinute,
		SSEWriteTimeout:       httpx.StreamWriteTimeout,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	return &harness{env: env, cfg: cfg, url: startGateway(t, env, cfg, seams{}), gdb: env.DB(t, adapters.Schema, migrations.FS), client: rpc.NewClient(env.NATS(t), env.RPCPrefix)}
}

// startGateway serves a gateway with cfg and s on env and returns its
// public URL once it answers.
func startGateway(t *testing.T, env *testenv.Env, cfg gwconfig.Config, s seams) string {
	t.Helper()
	bg := testenv.Serve(t, "gateway", func(ctx context.Context) error { return serve(ctx, cfg, env.Logger(t), s) })
	url := "http://" + cfg.Addr
	// Ready once the listener answers: the rpc endpoints are served by then.
	bg.WaitReady(url, 20*time.Second)
	return url
}

// another starts a second gateway instance on h's database, Redis and
// NATS, with h's configuration on its own address. Admin calls reach
// either instance (the rpc endpoint is a queue group).
func (h *harness) another(t *testing.T) *harness {
	t.Helper()
	return h.anotherWith(t, seams{})
}

// anotherWith is another with the seams s.
func (h *harness) anotherWith(t *testing.T, s seams) *harness {
	t.Helper()
	cfg := h.cfg
	cfg.Addr = ports.FreeAddr(t)
	other := *h
	other.cfg, other.url = cfg, startGateway(t, h.env, cfg, s)
	return &other
}

// authFailuresPerMinute sets AUTH_FAILURES_PER_MINUTE.
func authFailuresPerMinute(n int) func(*gwconfig.Config) {
	return func(c *gwconfig.Config) { c.AuthFailuresPerMinute = n }
}

// admin calls the gateway's admin endpoint over NATS, as parleyctl does.
func (h *harness) admin(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	status, raw := h.adminBytes(t, method, path, body)
	return status, decodeMap(t, method, path, raw)
}

// adminBytes is admin answering the body as it came.
func (h *harness) adminBytes(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	req := &rpcv1.Request{Method: method}
	req.Path, req.RawQuery, _ = strings.Cut(path, "?")
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req.Body = b
		req.Headers = []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}}
	}
	return h.adminDo(t, req)
}

// adminRaw sends a raw body to the admin endpoint.
func (h *harness) adminRaw(t *testing.T, method, path string, body []byte) (int, map[string]any) {
	t.Helper()
	status, raw := h.adminDo(t, &rpcv1.Request{Method: method, Path: path, Body: body,
		Headers: []*rpcv1.Header{{Name: "Content-Type", Value: "application/json"}}})
	return status, decodeMap(t, method, path, raw)
}

func (h *harness) adminDo(t *testing.T, req *rpcv1.Request) (int, []byte) {
	t.Helper()
	resp, err := h.client.Do(context.Background(), rpc.ServiceGateway, rpc.EndpointAdmin, req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", req.GetMethod(), req.GetPath(), err)
	}
	return int(resp.GetStatus()), resp.GetBody()
}

func decodeMap(t *testing.T, method, path string, raw []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("admin %s %s: body %q: %v", method, path, raw, err)
	}
	return out
}

// mustAdmin is admin that fails the test unless the status is want.
func (h *harness) mustAdmin(t *testing.T, want int, method, path string, body any) map[string]any {
	t.Helper()
	status, out := h.admin(t, method, path, body)
	if status != want {
		t.Fatalf("admin %s %s = %d %v, want %d", method, path, status, out, want)
	}
	return out
}

// workspace creates a workspace and an API key for it.
func (h *harness) workspace(t *testing.T, body map[string]any) (id, key string) {
	t.Helper()
	out := h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces", body)
	id = out["workspace"].(map[string]any)["id"].(string)
	_, key = h.newKey(t, id)
	return id, key
}

// newKey creates an API key for a workspace.
func (h *harness) newKey(t *testing.T, workspaceID string) (id, key string) {
	t.Helper()
	k := h.mustAdmin(t, http.StatusCreated, http.MethodPost, "/admin/workspaces/"+workspaceID+"/api-keys", map[string]any{"name": "test"})
	return k["id"].(string), k["key"].(string)
}

// metrics scrapes /metrics.
func (h *harness) metrics(t *testing.T) string {
	t.Helper()
	return string(h.call(t, http.MethodGet, "/metrics", "", nil, nil).body)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return out
}

// expectError checks a {code,message} error response.
func (r response) expectError(t *testing.T, status int, code string) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d (%s), want %d %s", r.status, r.body, status, code)
	}
	body := r.json(t)
	if body["code"] != code || body["message"] == "" || len(body) != 2 {
		t.Fatalf("body = %s, want {code:%q, message}", r.body, code)
	}
	return body["message"].(string)
}

// call sends a request to the public API. key "" sends no Authorization.
func (h *harness) call(t *testing.T, method, path, key string, body []byte, header http.Header) response {
	t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return do(t, req)
}

// do sends req and reads the whole answer.
func do(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// seen is one request a stand-in service received.
type seen struct {
	workspaceID string
	// modules and features are what rpc.HasModule and rpc.HasFeature
	// answered for every module and feature there is.
	modules  []string
	features []string
	method   string
	path     string
	rawQuery string
	header   http.Header
	body     []byte
}

// fakeService stands in for one of our services (messaging, dispatcher,
// flow-runner) on its rpc "api" endpoint. It records what it receives and
// answers with respond.
type fakeService struct {
	mu   sync.Mutex
	got  []seen
	name string
}

func (h *harness) fakeService(t *testing.T, name string, respond echo.HandlerFunc) *fakeService {
	t.Helper()
	f := &fakeService{name: name}
	e := httpx.NewEcho(h.env.Logger(t))
	e.Any("/*", func(c echo.Context) error {
		b, _ := io.ReadAll(c.Request().Body)
		ctx := c.Request().Context()
		var modules, features []string
		for _, m := range account.Modules {
			if rpc.HasModule(ctx, string(m)) {
				modules = append(modules, string(m))
			}
		}
		for _, ft := range account.Features {
			if rpc.HasFeature(ctx, ft.Name) {
				features = append(features, ft.Name)
			}
		}
		f.mu.Lock()
		f.got = append(f.got, seen{
			workspaceID: rpc.WorkspaceID(ctx),
			modules:     modules,
			features:    features,
			method:      c.Request().Method,
			path:        c.Request().URL.Path,
			rawQuery:    c.Request().URL.RawQuery,
			header:      c.Request().Header.Clone(),
			body:        b,
		})
		f.mu.Unlock()
		return respond(c)
	})
	rpcserver.Serve(t, h.env.NATS(t), h.env.RPCPrefix, name, h.env.Logger(t), map[string]http.Handler{rpc.EndpointAPI: e})
	return f
}

func (f *fakeService) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.got...)
}

func (f *fakeService) last(t *testing.T) seen {
	t.Helper()
	got := f.requests()
	if len(got) == 0 {
		t.Fatalf("%s received nothing", f.name)
	}
	return got[len(got)-1]
}

// echoBack answers 200 with what the service saw, for routing tests.
func echoBack(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"path": c.Request().URL.Path})
}
