package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/bytesize"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/pkg/rpc"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// harness is one flow-runner, wired by serve exactly as in production, on
// the test's own database and rpc prefix.
type harness struct {
	t     *testing.T
	env   *testenv.Env
	cfg   svcconfig.Config
	rpc   *rpc.Client
	clock *clock
}

// clock is a settable clock: the real time plus an offset tests move.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// start runs a flow-runner with private targets allowed and the given
// changes, in a fresh test environment.
func start(t *testing.T, mutate func(*svcconfig.Config)) *harness {
	t.Helper()
	return startOn(t, testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS)), "", mutate)
}

// startOn runs a flow-runner in env. A non-empty prefix suffix gives it its
// own rpc subjects, so a test can address one of two instances sharing the
// database.
func startOn(t *testing.T, env *testenv.Env, suffix string, mutate func(*svcconfig.Config)) *harness {
	t.Helper()
	cfg := svcconfig.Config{
		Connections:         env.Connections(),
		Addr:                ports.FreeAddr(t),
		SessionTTL:          time.Hour,
		BudgetTime:          20 * time.Second,
		BudgetNodes:         200,
		OutputLimit:         bytesize.MiB,
		StagesOpen:          "call_flow,script,condition.cases,delay.until,variable.op",
		AllowPrivateTargets: true,
		// The invoke contract at its documented values (docs/flows.md "Limits").
		Concurrency:           4,
		SlotLease:             15 * time.Second,
		InvokeDailyCap:        2000,
		IdempotencyTTL:        24 * time.Hour,
		IdempotencyStuckAfter: 5 * time.Minute,
		SSEPingInterval:       15 * time.Second,
		// The chat runs' settings at their documented values.
		ChatSessionTTL:   24 * time.Hour,
		ChatConcurrency:  16,
		ChatAckWait:      30 * time.Second,
		ChatConsumer:     "flow-runner-chat",
		ChatWakeInterval: time.Second,
		// No provider and no guard unless a test configures them.
		LLMModel:           "gpt-4o-mini",
		LLMTimeout:         30 * time.Second,
		GuardFallbackText:  "Sorry, I can't help with that here.",
		GuardCheckInterval: 10 * time.Second,
	}
	cfg.RPCSubjectPrefix += suffix
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	clk := &clock{}
	bg := testenv.Serve(t, "flow-runner", func(ctx context.Context) error { return serve(ctx, cfg, env.Logger(t), seams{clock: clk.now}) })
	h := &harness{t: t, env: env, cfg: cfg, rpc: rpc.NewClient(env.NATS(t), cfg.RPCSubjectPrefix), clock: clk}
	// This instance's own readiness first: another instance of the test
	// may answer the rpc already, while this one is still migrating.
	bg.WaitReady("http://"+cfg.Addr, 20*time.Second)
	wait.For(t, 20*time.Second, "flow-runner ready", func() error {
		bg.Early()
		if status, _ := h.admin(http.MethodPost, "/admin/flows/not-a-flow/deactivate", ""); status != http.StatusNotFound {
			return fmt.Errorf("rpc not serving (%d)", status)
		}
		return nil
	})
	return h
}

// plan is what the gateway says of the workspace: its modules and features.
type plan struct {
	modules  []string
	features []string
}

// full is a plan with every module and the flows_api feature.
var full = plan{modules: []string{"developer_api", "flows", "flow_ai", "flow_script"}, features: []string{"flows_api"}}

// without returns p without the named modules and features.
func (p plan) without(names ...string) plan {
	drop := func(in []string) []string {
		var out []string
		for _, x := range in {
			keep := true
			for _, n := range names {
				keep = keep && x != n
			}
			if keep {
				out = append(out, x)
			}
		}
		return out
	}
	return plan{modules: drop(p.modules), features: drop(p.features)}
}

// api sends a public request the way the gateway does: the workspace and
// its plan with it, on the "api" endpoint.
func (h *harness) api(ws string, p plan, method, path string, body any) (int, []byte) {
	h.t.Helper()
	req := &rpcv1.Request{WorkspaceId: ws, Method: method, RequestId: uuid.NewString(), Modules: p.modules, Features: p.features}
	return h.send(rpc.EndpointAPI, req, path, body)
}

// admin sends an operator request the way parleyctl does.
func (h *harness) admin(method, path string, body any) (int, []byte) {
	h.t.Helper()
	return h.send(rpc.EndpointAdmin, &rpcv1.Request{Method: method, RequestId: uuid.NewString()}, path, body)
}

// call is a public request with headers (Idempotency-Key, Accept), and
// its answer's headers too.
func (h *harness) call(ws string, p plan, method, path string, body any, headers map[string]string) (int, http.Header, []byte) {
	h.t.Helper()
	req := &rpcv1.Request{WorkspaceId: ws, Method: method, RequestId: uuid.NewString(), Modules: p.modules, Features: p.features}
	for name, v := range headers {
		req.Headers = append(req.Headers, &rpcv1.Header{Name: name, Value: v})
	}
	resp := h.do(rpc.EndpointAPI, req, path, body)
	hd := http.Header{}
	for _, x := range resp.GetHeaders() {
		hd.Add(x.GetName(), x.GetValue())
	}
	return int(resp.GetStatus()), hd, resp.GetBody()
}

func (h *harness) send(endpoint string, req *rpcv1.Request, path string, body any) (int, []byte) {
	h.t.Helper()
	resp := h.do(endpoint, req, path, body)
	return int(resp.GetStatus()), resp.GetBody()
}

// do sends req with path and body; an rpc failure is a 503 answer.
func (h *harness) do(endpoint string, req *rpcv1.Request, path string, body any) *rpcv1.Response {
	h.t.Helper()
	req.Path, req.RawQuery, _ = strings.Cut(path, "?")
	switch b := body.(type) {
	case nil:
	case string:
		req.Body = []byte(b)
	case []byte:
		req.Body = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		req.Body = raw
	}
	if req.Body != nil {
		req.Headers = append(req.Headers, &rpcv1.Header{Name: "Content-Type", Value: "application/json"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := h.rpc.Do(ctx, rpc.ServiceFlowRunner, endpoint, req)
	if err != nil {
		return &rpcv1.Response{Status: http.StatusServiceUnavailable, Body: []byte(err.Error())}
	}
	return resp
}

// publish publishes doc for ws (a new flow, or a version of flowID) and
// returns the flow id, failing the test unless it is 201.
func (h *harness) publish(ws, flowID, doc string) string {
	h.t.Helper()
	path := "/admin/workspaces/" + ws + "/flows"
	if flowID != "" {
		path += "?flow_id=" + flowID
	}
	status, body := h.admin(http.MethodPost, path, doc)
	if status != http.StatusCreated {
		h.t.Fatalf("publish: %d %s", status, body)
	}
	return apicheck.Body[flowrunnerapi.PublishedFlow](h.t, body).ID
}

// publishFlowKinds publishes, newest last, the flows that a workspace's
// lists are checked against: an API flow that greets, a chat-only flow and
// a flow for the test to deactivate, all of ws, then an API flow of other
// that no list of ws may show. It returns the ids of ws's flows.
func (h *harness) publishFlowKinds(ws, other string) (api, chat, gone string) {
	h.t.Helper()
	api = h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	chat = h.publish(ws, "", doc("Chat only", []string{"chat"}, "done", endNode))
	gone = h.publish(ws, "", doc("Gone", apiOnly, "done", endNode))
	h.publish(other, "", doc("Other's", apiOnly, "done", endNode))
	return api, chat, gone
}

// invoke invokes a flow with the full plan and wants 200.
func (h *harness) invoke(ws, flowID string, body any) flowrunnerapi.InvokeResponse {
	h.t.Helper()
	status, raw := h.api(ws, full, http.MethodPost, "/v1/flows/"+flowID+"/invoke", body)
	if status != http.StatusOK {
		h.t.Fatalf("invoke: %d %s", status, raw)
	}
	return apicheck.Body[flowrunnerapi.InvokeResponse](h.t, raw)
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// wantError checks an error answer's status and code, and returns its
// message.
func wantError(t *testing.T, status int, body []byte, wantStatus int, wantCode string) string {
	t.Helper()
	var e errorBody
	_ = json.Unmarshal(body, &e)
	if status != wantStatus || e.Code != wantCode {
		t.Fatalf("got %d %s, want %d %s", status, body, wantStatus, wantCode)
	}
	return e.Message
}

func decode(t testing.TB, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

// doc is a flow document of nodes with a start that goes to first.
func doc(name string, triggers []string, first string, nodes ...string) string {
	tr, _ := json.Marshal(triggers)
	n, _ := json.Marshal(name)
	d, _ := json.Marshal("about " + name)
	return fmt.Sprintf(`{"name": %s, "description": %s, "triggers": %s, "nodes": [{"id": "start", "type": "start", "next": %q}, %s]}`,
		n, d, tr, first, strings.Join(nodes, ", "))
}

var apiOnly = []string{"api"}

func jsonEncoder(w *strings.Builder) *json.Encoder { return json.NewEncoder(w) }
