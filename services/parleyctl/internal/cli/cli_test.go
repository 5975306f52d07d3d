package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/pkg/errs"
	rpcv1 "github.com/parleyhq/parley/pkg/gen/parley/rpc/v1"
	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
	"github.com/parleyhq/parley/services/parleyctl/internal/config"
)

// recorder stands in for the services' admin endpoints: it records each
// call and answers from a table keyed by "METHOD path" (query left out).
type recorder struct {
	calls    []string
	bodies   []map[string]any
	raws     [][]byte // each call's body as sent
	queries  []string
	features [][]string // the features each raw call carried
	answers  map[string]any
}

func (r *recorder) CallJSON(_ context.Context, service, endpoint, _, method, path string, in, out any) error {
	route, query, _ := strings.Cut(path, "?")
	var raw []byte
	if in != nil {
		raw, _ = json.Marshal(in)
	}
	return r.answer(service, endpoint, method, route, query, raw, nil, out)
}

func (r *recorder) CallRaw(_ context.Context, service, endpoint string, req *rpcv1.Request, out any) error {
	return r.answer(service, endpoint, req.GetMethod(), req.GetPath(), req.GetRawQuery(), req.GetBody(), req.GetFeatures(), out)
}

func (r *recorder) answer(service, endpoint, method, route, query string, raw []byte, features []string, out any) error {
	key := method + " " + route
	r.calls = append(r.calls, service+"/"+endpoint+" "+key)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	r.bodies = append(r.bodies, body)
	r.raws = append(r.raws, raw)
	r.queries = append(r.queries, query)
	r.features = append(r.features, features)
	answer, ok := r.answers[key]
	if !ok {
		return errs.NotFound("not_found", "no answer for "+key)
	}
	if err, isErr := answer.(error); isErr {
		return err
	}
	if out != nil {
		raw, _ := json.Marshal(answer)
		return json.Unmarshal(raw, out)
	}
	return nil
}

// wantUsageError runs args and expects a usage error mentioning want, with
// no service called.
func wantUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	rec := &recorder{}
	err := cli.New(testConfig(), rec, &bytes.Buffer{}).Run(context.Background(), args)
	var usage *cli.UsageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want a usage error mentioning %q", err, want)
	}
	if len(rec.calls) != 0 {
		t.Errorf("a usage error still called %v", rec.calls)
	}
}

func testConfig() config.Config {
	return config.Config{GatewayAddr: ":8080", MessagingAddr: ":8081", FlowRunnerAddr: "127.0.0.1:8083", DemoAPIKey: "pk_demo_key_for_tests_0000000000000000", DemoTelegramToken: "1:t", DemoTelegramSecret: "s"}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown", []string{"nope"}, "unknown command"},
		{"unknown verb of a group", []string{"channel", "delete"}, `unknown command "channel delete"; parleyctl channel takes create, set-flow, set-mode`},
		{"missing flag", []string{"workspace", "create"}, "--name is required"},
		{"bad flag", []string{"workspace", "create", "--name", "x", "--bogus"}, "bogus"},
		{"stray argument", []string{"apikey", "revoke", "--id", "k", "extra"}, "unexpected argument"},
		{"on and off", []string{"workspace", "feature", "--workspace", "w", "--feature", "flows_api", "--on", "--off"}, "exactly one"},
		{"nothing to update", []string{"workspace", "update", "--workspace", "w"}, "nothing to change"},
		{"help", []string{"channel", "create", "--help"}, "usage: parleyctl channel create"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantUsageError(t, tt.args, tt.want)
		})
	}
}

// TestHelpPrintsUsage: no command, help, and every group alone (or with
// help) print the usage on stdout, call nothing, and succeed.
func TestHelpPrintsUsage(t *testing.T) {
	t.Parallel()
	groups := map[string][]string{
		"workspace":  {"create", "update", "feature"},
		"apikey":     {"create", "revoke"},
		"channel":    {"create", "set-mode", "set-flow"},
		"webhook":    {"resave"},
		"deliveries": {"replay"},
		"flow":       {"publish", "deactivate"},
	}
	type helpCase struct {
		name     string
		args     []string
		want     []string
		wantNone string
	}
	tests := []helpCase{
		{name: "no command", want: []string{"parleyctl demo", "parleyctl channel create", "parleyctl apikey revoke"}},
		{name: "help", args: []string{"help"}, want: []string{"parleyctl demo", "parleyctl workspace feature"}},
		{name: "--help", args: []string{"--help"}, want: []string{"parleyctl deliveries replay"}},
	}
	for group, verbs := range groups {
		var want []string
		for _, v := range verbs {
			want = append(want, "parleyctl "+group+" "+v+" --")
		}
		// Each group's usage names only its own commands.
		tests = append(tests,
			helpCase{name: group + " alone", args: []string{group}, want: want, wantNone: "parleyctl demo"},
			helpCase{name: group + " -h", args: []string{group, "-h"}, want: want, wantNone: "parleyctl demo"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			var out bytes.Buffer
			if err := cli.New(testConfig(), rec, &out).Run(context.Background(), tt.args); err != nil {
				t.Fatalf("Run(%q) = %v, want the usage", tt.args, err)
			}
			if !strings.HasPrefix(out.String(), "usage:\n") {
				t.Fatalf("stdout = %q", out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("usage %q lacks %q", out.String(), w)
				}
			}
			if tt.wantNone != "" && strings.Contains(out.String(), tt.wantNone) {
				t.Errorf("usage %q names %q", out.String(), tt.wantNone)
			}
			if len(rec.calls) != 0 {
				t.Errorf("help called %v", rec.calls)
			}
		})
	}
}

func TestWorkspaceCreateSendsOnlyGivenFields(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: map[string]any{"POST /admin/workspaces": map[string]any{"workspace": map[string]any{"id": "w1"}}}}
	var out bytes.Buffer
	err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"workspace", "create", "--name", "Acme", "--modules", "developer_api, flows", "--rate-per-minute", "10"})
	if err != nil {
		t.Fatal(err)
	}
	body := rec.bodies[0]
	if body["name"] != "Acme" || body["rate_per_minute"] != float64(10) || len(body["modules"].([]any)) != 2 {
		t.Errorf("body = %v", body)
	}
	if _, sent := body["ai_limit"]; sent {
		t.Errorf("ai_limit sent though not given: %v", body)
	}
	if !json.Valid(out.Bytes()) {
		t.Errorf("stdout is not JSON: %s", out.String())
	}
}

// demoFlowListed is the flow-runner's list holding the demo flows as this
// parleyctl publishes them.
func demoFlowListed(t *testing.T) map[string]any {
	t.Helper()
	_, name, description, err := cli.DemoFlow("http://127.0.0.1:8083/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, aiName, aiDescription, err := cli.DemoAIFlow()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"flows": []any{
		map[string]any{"id": "f0", "name": "Another flow", "description": "", "published_version": 1},
		map[string]any{"id": "f1", "name": name, "description": description, "published_version": 3},
		map[string]any{"id": "f2", "name": aiName, "description": aiDescription, "published_version": 1},
	}}
}

func TestDemoReusesWhatExists(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: map[string]any{
		"GET /v1/flows":                      demoFlowListed(t),
		"POST /admin/workspaces/w1/flows":    errors.New("must not publish the demo flow again"),
		"GET /admin/workspaces":              map[string]any{"workspaces": []any{map[string]any{"id": "w1", "slug": "demo"}}},
		"POST /admin/workspaces/w1/api-keys": map[string]any{"id": "k1", "key": "pk_demo_key_for_tests_0000000000000000"},
		"GET /admin/channels": map[string]any{"channels": []any{
			map[string]any{"id": "c1", "kind": "telegram", "external_id": "parley_demo_bot", "secret": "s", "ai_mode": "external"},
			map[string]any{"id": "c2", "kind": "webchat", "external_id": "parley_demo_site", "secret": "w", "ai_mode": "auto"},
		}},
		"PATCH /admin/channels/c1":               errors.New("must not change the Telegram channel's mode"),
		"PATCH /admin/channels/c2":               errors.New("must not set the mode the channel has"),
		"DELETE /admin/channels/c2/chat-flow":    map[string]any{"chat_flow": map[string]any{"workspace_id": "w1", "channel_id": "c2", "flow_id": ""}},
		"POST /admin/workspaces":                 errors.New("must not create the workspace again"),
		"POST /admin/channels":                   errors.New("must not create the channel again"),
		"GET /admin/workspaces/w1/kb/documents":  map[string]any{"documents": []any{map[string]any{"id": "d1", "title": "Demo shop policy", "passages": 6}}},
		"POST /admin/workspaces/w1/kb/documents": errors.New("must not add the demo document again"),
	}}
	var out bytes.Buffer
	if err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"demo"}); err != nil {
		t.Fatalf("demo: %v (calls %v)", err, rec.calls)
	}
	var printed struct {
		APIKey          string `json:"api_key"`
		GatewayURL      string `json:"gateway_url"`
		WebchatURL      string `json:"webchat_url"`
		TelegramIngress struct {
			URL string `json:"url"`
		} `json:"telegram_ingress"`
		FlowID string `json:"flow_id"`
		Flow   struct {
			PublishedVersion int `json:"published_version"`
		} `json:"flow"`
	}
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil {
		t.Fatal(err)
	}
	if printed.APIKey != "pk_demo_key_for_tests_0000000000000000" || printed.GatewayURL != "http://localhost:8080" ||
		printed.TelegramIngress.URL != "http://localhost:8081/ingress/telegram/c1" ||
		printed.WebchatURL != "http://localhost:8081/webchat/c2" || printed.FlowID != "f1" || printed.Flow.PublishedVersion != 3 {
		t.Errorf("printed = %+v", printed)
	}
	if rec.bodies[1]["key"] != "pk_demo_key_for_tests_0000000000000000" {
		t.Errorf("demo key request body = %v", rec.bodies[1])
	}
	// Clearing a chat flow that is not set changes nothing.
	if i := slices.Index(rec.calls, "flow-runner/admin DELETE /admin/channels/c2/chat-flow"); i < 0 || rec.queries[i] != "workspace_id=w1" {
		t.Errorf("calls %v (queries %v): want the webchat's chat flow cleared", rec.calls, rec.queries)
	}
}

// A demo workspace whose webchat channel an operator switched to suggest
// and gave a chat flow is handed back to the assistant: mode auto, no
// chat flow. The Telegram channel keeps the mode it was given.
func TestDemoHandsTheWebchatBackToTheAssistant(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: demoAnswers(map[string]any{
		"GET /v1/flows": demoFlowListed(t),
		"GET /admin/channels": map[string]any{"channels": []any{
			map[string]any{"id": "c1", "kind": "telegram", "external_id": "parley_demo_bot", "ai_mode": "external"},
			map[string]any{"id": "c2", "kind": "webchat", "external_id": "parley_demo_site", "ai_mode": "suggest"},
		}},
		"PATCH /admin/channels/c2":              map[string]any{"channel": map[string]any{"id": "c2", "kind": "webchat", "external_id": "parley_demo_site", "ai_mode": "auto"}},
		"GET /admin/workspaces/w1/kb/documents": map[string]any{"documents": []any{map[string]any{"id": "d1", "title": "Demo shop policy", "passages": 6}}},
	})}
	var out bytes.Buffer
	if err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"demo"}); err != nil {
		t.Fatalf("demo: %v (calls %v)", err, rec.calls)
	}
	patch := slices.Index(rec.calls, "messaging/admin PATCH /admin/channels/c2")
	cleared := slices.Index(rec.calls, "flow-runner/admin DELETE /admin/channels/c2/chat-flow")
	if patch < 0 || rec.bodies[patch]["ai_mode"] != "auto" || cleared < 0 || rec.queries[cleared] != "workspace_id=w1" {
		t.Fatalf("calls %v (bodies %v): want the webchat set to auto and its chat flow cleared", rec.calls, rec.bodies)
	}
	if slices.Contains(rec.calls, "messaging/admin PATCH /admin/channels/c1") {
		t.Errorf("the Telegram channel's mode was changed: %v", rec.calls)
	}
	var printed struct {
		Channels []struct {
			ID     string `json:"id"`
			AIMode string `json:"ai_mode"`
		} `json:"channels"`
	}
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || len(printed.Channels) != 2 || printed.Channels[1].AIMode != "auto" {
		t.Errorf("printed %s (%v)", out.String(), err)
	}
}

func TestServiceErrorsPassThrough(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: map[string]any{
		"PATCH /admin/channels/c1": errs.InvalidRequest("ai_mode must be auto, suggest or external"),
	}}
	err := cli.New(testConfig(), rec, &bytes.Buffer{}).Run(context.Background(), []string{"channel", "set-mode", "--channel", "c1", "--mode", "loud"})
	e, ok := errs.As(err)
	if !ok || e.Status != http.StatusBadRequest || !strings.Contains(e.Error(), "ai_mode") {
		t.Fatalf("err = %v", err)
	}
}

func TestDemoCreatesWhatIsMissing(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: map[string]any{
		"GET /admin/workspaces":                  map[string]any{"workspaces": []any{}},
		"POST /admin/workspaces":                 map[string]any{"workspace": map[string]any{"id": "w1", "slug": "demo"}},
		"POST /admin/workspaces/w1/api-keys":     map[string]any{"id": "k1"},
		"GET /admin/channels":                    map[string]any{"channels": []any{}},
		"POST /admin/channels":                   map[string]any{"channel": map[string]any{"id": "c9", "ai_mode": "auto"}},
		"DELETE /admin/channels/c9/chat-flow":    map[string]any{"chat_flow": map[string]any{"flow_id": ""}},
		"GET /v1/flows":                          map[string]any{"flows": []any{}},
		"POST /admin/workspaces/w1/flows":        map[string]any{"id": "f1", "published_version": 1},
		"GET /admin/workspaces/w1/kb/documents":  map[string]any{"documents": []any{}},
		"POST /admin/workspaces/w1/kb/documents": map[string]any{"document": map[string]any{"id": "d1"}},
	}}
	if err := cli.New(testConfig(), rec, &bytes.Buffer{}).Run(context.Background(), []string{"demo"}); err != nil {
		t.Fatalf("demo: %v", err)
	}
	var kinds []string
	for i, call := range rec.calls {
		if strings.HasSuffix(call, "POST /admin/channels") {
			kinds = append(kinds, rec.bodies[i]["kind"].(string))
		}
	}
	if strings.Join(kinds, ",") != "telegram,webchat" {
		t.Fatalf("created channels %v, want telegram and webchat (calls %v)", kinds, rec.calls)
	}
	if rec.bodies[1]["slug"] != "demo" {
		t.Errorf("workspace body = %v", rec.bodies[1])
	}
}
