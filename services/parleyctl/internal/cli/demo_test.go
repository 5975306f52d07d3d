package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/services/parleyctl/internal/cli"
)

// The demo flow is an api flow of a question, an http call to the given
// URL, a condition and an end, and its revision follows the URL.
func TestDemoFlowDocument(t *testing.T) {
	t.Parallel()
	url := `http://127.0.0.1:8083/healthz?"quoted"`
	doc, name, description, err := cli.DemoFlow(url)
	if err != nil {
		t.Fatal(err)
	}
	var flow struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Triggers    []string `json:"triggers"`
		Nodes       []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(doc, &flow); err != nil {
		t.Fatalf("demo flow is not JSON: %v\n%s", err, doc)
	}
	if flow.Name != name || flow.Description != description || !reflect.DeepEqual(flow.Triggers, []string{"api"}) {
		t.Fatalf("demo flow head = %q %q %v", flow.Name, flow.Description, flow.Triggers)
	}
	var types []string
	for _, n := range flow.Nodes {
		types = append(types, n.Type)
		if n.Type == "http" && n.URL != url {
			t.Errorf("http node calls %q, want %q", n.URL, url)
		}
	}
	for _, want := range []string{"start", "question", "http", "condition", "end"} {
		if !slices.Contains(types, want) {
			t.Errorf("demo flow has no %s node: %v", want, types)
		}
	}
	if bytes.Contains(doc, []byte("$")) {
		t.Errorf("a placeholder is left in the demo flow:\n%s", doc)
	}

	_, _, same, _ := cli.DemoFlow(url)
	_, _, other, _ := cli.DemoFlow("http://127.0.0.1:9999/healthz")
	if same != description || other == description {
		t.Errorf("descriptions %q, %q (same URL), %q (another): the revision must follow the document", description, same, other)
	}
}

// A workspace without the demo flows is listed through the flow-runner's
// api endpoint with the flows_api feature, and is given
// the demo flow (whose http node calls the flow-runner's configured
// address), the demo document, and the demo AI flow over it.
func TestDemoPublishesTheFlowsWhenMissing(t *testing.T) {
	t.Parallel()
	rec := &recorder{answers: demoAnswers(map[string]any{
		"GET /v1/flows":                          map[string]any{"flows": []any{}},
		"GET /admin/workspaces/w1/kb/documents":  map[string]any{"documents": []any{}},
		"POST /admin/workspaces/w1/kb/documents": map[string]any{"document": map[string]any{"id": "d1", "title": "Demo shop policy", "passages": 6}},
	})}
	var out bytes.Buffer
	if err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"demo"}); err != nil {
		t.Fatalf("demo: %v", err)
	}
	i := slices.Index(rec.calls, "flow-runner/api GET /v1/flows") - 1
	if i < 0 || !slices.Equal(rec.calls[i+1:], []string{
		"flow-runner/api GET /v1/flows",
		"flow-runner/admin POST /admin/workspaces/w1/flows",
		"flow-runner/admin GET /admin/workspaces/w1/kb/documents",
		"flow-runner/admin POST /admin/workspaces/w1/kb/documents",
		"flow-runner/admin POST /admin/workspaces/w1/flows",
	}) {
		t.Fatalf("calls %v", rec.calls)
	}
	// flows_api is on unless switched off: the demo switches nothing.
	if slices.ContainsFunc(rec.calls, func(c string) bool { return strings.Contains(c, "/features/") }) {
		t.Errorf("the demo switched a feature: %v", rec.calls)
	}
	if !slices.Equal(rec.features[i+1], []string{"flows_api"}) {
		t.Errorf("the list carried features %v", rec.features[i+1])
	}
	want, _, _, _ := cli.DemoFlow("http://127.0.0.1:8083/healthz")
	if !bytes.Equal(rec.raws[i+2], want) || rec.queries[i+2] != "" {
		t.Errorf("published %q?%s, want the demo flow as a new flow", rec.raws[i+2], rec.queries[i+2])
	}
	if doc := rec.bodies[i+4]; doc["title"] != "Demo shop policy" || !strings.Contains(doc["markdown"].(string), "# Returns") {
		t.Errorf("added document %v", doc)
	}
	wantAI, _, _, _ := cli.DemoAIFlow()
	if !bytes.Equal(rec.raws[i+5], wantAI) || rec.queries[i+5] != "" {
		t.Errorf("published %q?%s, want the demo AI flow as a new flow", rec.raws[i+5], rec.queries[i+5])
	}
	var printed struct {
		AIFlowID   string `json:"ai_flow_id"`
		KBDocument struct {
			ID       string `json:"id"`
			Passages int    `json:"passages"`
		} `json:"kb_document"`
	}
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed.AIFlowID != "f1" || printed.KBDocument.ID != "d1" || printed.KBDocument.Passages != 6 {
		t.Errorf("printed %s (%v)", out.String(), err)
	}
}

// demoAnswers are the recorder's answers for a demo workspace w1 with its
// key and channels, plus more.
func demoAnswers(more map[string]any) map[string]any {
	answers := map[string]any{
		"GET /admin/workspaces":              map[string]any{"workspaces": []any{map[string]any{"id": "w1", "slug": "demo"}}},
		"POST /admin/workspaces/w1/api-keys": map[string]any{"id": "k1"},
		"GET /admin/channels": map[string]any{"channels": []any{
			map[string]any{"id": "c1", "kind": "telegram", "external_id": "parley_demo_bot", "ai_mode": "auto"},
			map[string]any{"id": "c2", "kind": "webchat", "external_id": "parley_demo_site", "ai_mode": "auto"},
		}},
		"DELETE /admin/channels/c2/chat-flow": map[string]any{"chat_flow": map[string]any{"workspace_id": "w1", "channel_id": "c2", "flow_id": ""}},
		"POST /admin/workspaces/w1/flows":     map[string]any{"id": "f1", "published_version": 1},
	}
	for k, v := range more {
		answers[k] = v
	}
	return answers
}

// A demo flow published by another parleyctl or for another address gets a
// new version of the same flow.
func TestDemoRepublishesAChangedFlow(t *testing.T) {
	t.Parallel()
	_, name, _, err := cli.DemoFlow("http://127.0.0.1:8083/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, aiName, aiDescription, _ := cli.DemoAIFlow()
	rec := &recorder{answers: demoAnswers(map[string]any{
		"GET /v1/flows": map[string]any{"flows": []any{
			map[string]any{"id": "f1", "name": name, "description": "an older revision", "published_version": 2},
			map[string]any{"id": "f2", "name": aiName, "description": aiDescription, "published_version": 1},
		}},
		"POST /admin/workspaces/w1/flows":       map[string]any{"id": "f1", "published_version": 3},
		"GET /admin/workspaces/w1/kb/documents": map[string]any{"documents": []any{map[string]any{"id": "d1", "title": "Demo shop policy", "passages": 6}}},
	})}
	var out bytes.Buffer
	if err := cli.New(testConfig(), rec, &out).Run(context.Background(), []string{"demo"}); err != nil {
		t.Fatalf("demo: %v", err)
	}
	i := slices.Index(rec.calls, "flow-runner/admin POST /admin/workspaces/w1/flows")
	if i < 0 || rec.queries[i] != "flow_id=f1" || slices.Index(rec.calls[i+1:], rec.calls[i]) >= 0 {
		t.Fatalf("calls %v (queries %v), want one new version of f1", rec.calls, rec.queries)
	}
	var printed struct {
		FlowID string `json:"flow_id"`
		Flow   struct {
			PublishedVersion int `json:"published_version"`
		} `json:"flow"`
	}
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed.FlowID != "f1" || printed.Flow.PublishedVersion != 3 {
		t.Errorf("printed %s (%v)", out.String(), err)
	}
}
