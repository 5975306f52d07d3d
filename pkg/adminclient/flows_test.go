package adminclient_test

import (
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
)

// TestOperatorFlowReads: every flow, a flow's versions and one version's
// document, and the runs, read from the flow-runner's admin endpoint with
// the workspace in the path or the query.
func TestOperatorFlowReads(t *testing.T) {
	t.Parallel()
	// A version's document keeps its author's layout.
	const document = "{\n  \"name\": \"Order\",\n  \"nodes\": [ {\"id\": \"s\", \"type\": \"start\"} ]\n}"
	client, s := newClient(t, map[string]answer{
		"flow-runner GET /admin/workspaces/w1/flows": {http.StatusOK, `{"flows":[` +
			`{"id":"f2","name":"Chat","description":"","status":"inactive","triggers":["chat"],"published_version":1,"created_at":"2026-11-24T03:00:00Z","updated_at":"2026-11-24T05:00:00Z"},` +
			`{"id":"f1","name":"Order","description":"d","status":"active","triggers":["api","chat"],"published_version":2,"created_at":"2026-11-24T02:00:00Z","updated_at":"2026-11-24T04:00:00Z"}]}`},
		"flow-runner GET /admin/flows/f1/versions": {http.StatusOK, `{"flow_id":"f1","published_version":2,"versions":[` +
			`{"version":2,"published_at":"2026-11-24T04:00:00Z","node_count":3},{"version":1,"published_at":"2026-11-24T02:00:00Z","node_count":2}]}`},
		"flow-runner GET /admin/flows/f1/versions/2": {http.StatusOK, document},
		"flow-runner GET /admin/flows/f1/versions/9": {http.StatusNotFound, `{"code":"flow_version_not_found","message":"flow version not found"}`},
		"flow-runner GET /admin/workspaces/w1/runs": {http.StatusOK, `{"runs":[` +
			`{"id":"r2","flow_id":"f1","flow_version":2,"status":"waiting","nodes_executed":2,"started_at":"2026-11-24T04:10:00Z","completed_at":null,"duration_ms":null,"usage":{"tokens":0,"cost_usd":0,"billable_units":0}},` +
			`{"id":"r1","flow_id":"f1","flow_version":2,"status":"failed","nodes_executed":3,"started_at":"2026-11-24T04:05:00Z","completed_at":"2026-11-24T04:05:01.5Z","duration_ms":1500,` +
			`"usage":{"tokens":120,"cost_usd":0.0004,"billable_units":1},"error":{"code":"http_failed","message":"boom"}}],"next_before":"2026-11-24T04:05:00Z"}`},
	})

	flows, err := client.ListAllFlows(ctx, "w1")
	want := []flowrunnerapi.WorkspaceFlow{
		{Flow: flowrunnerapi.Flow{ID: "f2", Name: "Chat", Status: "inactive", PublishedVersion: 1, UpdatedAt: "2026-11-24T05:00:00Z"},
			Triggers: []string{"chat"}, CreatedAt: "2026-11-24T03:00:00Z"},
		{Flow: flowrunnerapi.Flow{ID: "f1", Name: "Order", Description: "d", Status: "active", PublishedVersion: 2, UpdatedAt: "2026-11-24T04:00:00Z"},
			Triggers: []string{"api", "chat"}, CreatedAt: "2026-11-24T02:00:00Z"},
	}
	if err != nil || !reflect.DeepEqual(flows, want) {
		t.Fatalf("ListAllFlows = %+v, %v", flows, err)
	}
	if r := s.last(t); r.endpoint != "admin" || r.method != http.MethodGet || r.workspaceID != "" || r.query != "" {
		t.Errorf("the list went as %+v: the admin endpoint, the workspace in the path", r)
	}

	versions, err := client.ListFlowVersions(ctx, "w1", "f1")
	wantVersions := flowrunnerapi.FlowVersions{FlowID: "f1", PublishedVersion: 2, Versions: []flowrunnerapi.FlowVersion{
		{Version: 2, PublishedAt: "2026-11-24T04:00:00Z", NodeCount: 3}, {Version: 1, PublishedAt: "2026-11-24T02:00:00Z", NodeCount: 2}}}
	if err != nil || !reflect.DeepEqual(versions, wantVersions) {
		t.Fatalf("ListFlowVersions = %+v, %v", versions, err)
	}
	if r := s.last(t); r.endpoint != "admin" || r.query != "workspace_id=w1" {
		t.Errorf("the versions went as %+v", r)
	}

	doc, err := client.GetFlowVersion(ctx, "w1", "f1", 2)
	if err != nil || string(doc) != document {
		t.Fatalf("GetFlowVersion = %q, %v; want the document byte for byte", doc, err)
	}
	if r := s.last(t); r.query != "workspace_id=w1" {
		t.Errorf("the version went as %+v", r)
	}
	_, err = client.GetFlowVersion(ctx, "w1", "f1", 9)
	if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusNotFound || e.Code != "flow_version_not_found" {
		t.Fatalf("a missing version = %#v", err)
	}

	page, err := client.ListRuns(ctx, "w1", adminclient.RunFilter{FlowID: "f1", Status: "failed", Before: "2026-11-24T05:00:00Z", Limit: 2})
	if err != nil || len(page.Runs) != 2 || page.NextBefore == nil || *page.NextBefore != "2026-11-24T04:05:00Z" {
		t.Fatalf("ListRuns = %+v, %v", page, err)
	}
	waiting, failed := page.Runs[0], page.Runs[1]
	if waiting.CompletedAt != nil || waiting.DurationMS != nil || waiting.Error != nil || waiting.Status != "waiting" {
		t.Errorf("the waiting run = %+v", waiting)
	}
	if failed.DurationMS == nil || *failed.DurationMS != 1500 || failed.Usage != (flowrunnerapi.Usage{Tokens: 120, CostUSD: 0.0004, BillableUnits: 1}) ||
		failed.Error == nil || failed.Error.Code != "http_failed" || failed.FlowVersion != 2 || failed.NodesExecuted != 3 {
		t.Errorf("the failed run = %+v", failed)
	}
	query, _ := url.ParseQuery(s.last(t).query)
	if !reflect.DeepEqual(query, url.Values{"flow_id": {"f1"}, "status": {"failed"}, "before": {"2026-11-24T05:00:00Z"}, "limit": {"2"}}) {
		t.Errorf("the runs query = %v", query)
	}
	// No filter sends no query.
	if _, err := client.ListRuns(ctx, "w1", adminclient.RunFilter{}); err != nil || s.last(t).query != "" {
		t.Fatalf("unfiltered ListRuns sent %q: %v", s.last(t).query, err)
	}
}
