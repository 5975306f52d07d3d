package main

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/adminclient"
	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
)

// TestOperatorListsEveryFlow: the admin list holds every flow of the
// workspace, active or not, API or chat, with its triggers; never another
// workspace's.
func TestOperatorListsEveryFlow(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()
	api, chat, gone := h.publishFlowKinds(ws, other)
	if status, body := h.admin(http.MethodPost, "/admin/flows/"+gone+"/deactivate", nil); status != http.StatusOK {
		t.Fatalf("deactivate: %d %s", status, body)
	}

	status, body := h.admin(http.MethodGet, "/admin/workspaces/"+ws+"/flows", nil)
	if status != http.StatusOK {
		t.Fatalf("list: %d %s", status, body)
	}
	var list struct {
		Flows []map[string]any `json:"flows"`
	}
	decode(t, body, &list)
	var got []string
	for _, f := range list.Flows {
		got = append(got, f["id"].(string)+" "+f["status"].(string))
		for _, k := range []string{"name", "description", "triggers", "published_version", "created_at", "updated_at"} {
			if _, ok := f[k]; !ok {
				t.Fatalf("a listed flow lacks %s: %v", k, f)
			}
		}
	}
	if want := []string{gone + " inactive", chat + " active", api + " active"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	if tr := list.Flows[1]["triggers"]; !reflect.DeepEqual(tr, []any{"chat"}) {
		t.Fatalf("the chat flow's triggers: %v", tr)
	}

	status, body = h.admin(http.MethodGet, "/admin/workspaces/"+uuid.NewString()+"/flows", nil)
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"flows":[]}` {
		t.Fatalf("a workspace without flows: %d %s", status, body)
	}
	status, body = h.admin(http.MethodGet, "/admin/workspaces/nope/flows", nil)
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")
}

// TestOperatorReadsVersions: a flow's versions newest first with their
// node counts, each one's document as published; the workspace is
// required, and another workspace's flow is not found.
func TestOperatorReadsVersions(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()
	v1 := doc("Greeter", apiOnly, "done", endNode)
	v2 := "{\n  \"name\": \"Greeter\",\n" + strings.TrimPrefix(doc("Greeter", apiOnly, "hi", greet, endNode), `{"name": "Greeter",`)
	id := h.publish(ws, "", v1)
	h.publish(ws, id, v2)
	theirs := h.publish(other, "", v1)

	status, body := h.admin(http.MethodGet, "/admin/flows/"+id+"/versions?workspace_id="+ws, nil)
	if status != http.StatusOK {
		t.Fatalf("versions: %d %s", status, body)
	}
	versions := apicheck.Body[flowrunnerapi.FlowVersions](t, body)
	if versions.FlowID != id || versions.PublishedVersion != 2 || len(versions.Versions) != 2 ||
		versions.Versions[0].Version != 2 || versions.Versions[0].NodeCount != 3 ||
		versions.Versions[1].Version != 1 || versions.Versions[1].NodeCount != 2 {
		t.Fatalf("versions: %s", body)
	}
	if _, err := time.Parse(time.RFC3339Nano, versions.Versions[0].PublishedAt); err != nil {
		t.Fatalf("published_at %q: %v", versions.Versions[0].PublishedAt, err)
	}

	for v, want := range map[string]string{"1": v1, "2": v2} {
		status, body := h.admin(http.MethodGet, "/admin/flows/"+id+"/versions/"+v+"?workspace_id="+ws, nil)
		if status != http.StatusOK || string(body) != want {
			t.Fatalf("version %s: %d %q, want the document as published", v, status, body)
		}
	}

	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/admin/flows/" + id + "/versions", http.StatusBadRequest, "invalid_request"},
		{"/admin/flows/" + id + "/versions?workspace_id=nope", http.StatusBadRequest, "invalid_request"},
		{"/admin/flows/" + id + "/versions/1", http.StatusBadRequest, "invalid_request"},
		{"/admin/flows/" + id + "/versions/x?workspace_id=" + ws, http.StatusBadRequest, "invalid_request"},
		{"/admin/flows/" + id + "/versions/0?workspace_id=" + ws, http.StatusBadRequest, "invalid_request"},
		{"/admin/flows/" + id + "/versions/3?workspace_id=" + ws, http.StatusNotFound, "flow_version_not_found"},
		{"/admin/flows/" + id + "/versions?workspace_id=" + other, http.StatusNotFound, "flow_not_found"},
		{"/admin/flows/" + id + "/versions/1?workspace_id=" + other, http.StatusNotFound, "flow_not_found"},
		{"/admin/flows/" + theirs + "/versions?workspace_id=" + ws, http.StatusNotFound, "flow_not_found"},
		{"/admin/flows/" + uuid.NewString() + "/versions?workspace_id=" + ws, http.StatusNotFound, "flow_not_found"},
		{"/admin/flows/nope/versions/1?workspace_id=" + ws, http.StatusNotFound, "flow_not_found"},
	} {
		status, body := h.admin(http.MethodGet, tc.path, nil)
		wantError(t, status, body, tc.status, tc.code)
	}
}

// TestOperatorListsRuns: runs newest first with their status, version,
// times and usage, filtered by flow and status, paged by next_before;
// filters it cannot read are 400, another workspace's flow is 404 and its
// runs are never listed.
func TestOperatorListsRuns(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws, other := uuid.NewString(), uuid.NewString()
	greeter := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	asker := h.publish(ws, "", doc("Asker", apiOnly, "ask", askNode, byeNode))
	theirs := h.publish(other, "", doc("Other's", apiOnly, "done", endNode))
	h.invoke(other, theirs, map[string]any{"input": map[string]any{}})
	var completed []string
	for range 3 {
		completed = append(completed, h.invoke(ws, greeter, map[string]any{"input": map[string]any{"name": "Ann"}}).RunID)
	}
	waiting := h.invoke(ws, asker, map[string]any{"input": map[string]any{"name": "Bo"}})
	if waiting.Status != "waiting" {
		t.Fatalf("the asker did not wait: %+v", waiting)
	}

	list := func(query string) flowrunnerapi.RunPage {
		t.Helper()
		status, body := h.admin(http.MethodGet, "/admin/workspaces/"+ws+"/runs"+query, nil)
		if status != http.StatusOK {
			t.Fatalf("runs%s: %d %s", query, status, body)
		}
		if !strings.Contains(string(body), `"usage":{"tokens":0,"cost_usd":0,"billable_units":0}`) {
			t.Fatalf("runs%s without usage: %s", query, body)
		}
		return apicheck.Body[flowrunnerapi.RunPage](t, body)
	}

	all := list("")
	if len(all.Runs) != 4 || all.NextBefore != nil {
		t.Fatalf("every run: %+v", all)
	}
	w := all.Runs[0]
	if w.ID != waiting.RunID || w.Status != "waiting" || w.CompletedAt != nil || w.DurationMS != nil || w.FlowID != asker || w.FlowVersion != 1 {
		t.Fatalf("the newest run is the waiting one: %+v", w)
	}
	c := all.Runs[1]
	if c.ID != completed[2] || c.Status != "completed" || c.CompletedAt == nil || c.DurationMS == nil || *c.DurationMS < 0 || c.NodesExecuted != 3 {
		t.Fatalf("the last completed run: %+v", c)
	}

	// Following next_before walks the runs one at a time, newest first.
	var walked []string
	query := "?flow_id=" + greeter + "&limit=1"
	for range 10 {
		p := list(query)
		for _, r := range p.Runs {
			walked = append(walked, r.ID)
		}
		if p.NextBefore == nil {
			break
		}
		query = "?flow_id=" + greeter + "&limit=1&before=" + url.QueryEscape(*p.NextBefore)
	}
	if want := []string{completed[2], completed[1], completed[0]}; !reflect.DeepEqual(walked, want) {
		t.Fatalf("walked %v, want %v", walked, want)
	}
	if p := list("?status=waiting"); len(p.Runs) != 1 || p.Runs[0].ID != waiting.RunID {
		t.Fatalf("waiting runs: %+v", p)
	}

	for _, tc := range []struct {
		query  string
		status int
		code   string
	}{
		{"?limit=0", http.StatusBadRequest, "invalid_request"},
		{"?limit=101", http.StatusBadRequest, "invalid_request"},
		{"?limit=x", http.StatusBadRequest, "invalid_request"},
		{"?before=yesterday", http.StatusBadRequest, "invalid_request"},
		{"?status=running", http.StatusBadRequest, "invalid_request"},
		{"?flow_id=nope", http.StatusBadRequest, "invalid_request"},
		{"?limit=1&limit=2", http.StatusBadRequest, "invalid_request"},
		{"?status=failed&status=succeeded", http.StatusBadRequest, "invalid_request"},
		{"?flow_id=" + theirs, http.StatusNotFound, "flow_not_found"},
		{"?flow_id=" + uuid.NewString(), http.StatusNotFound, "flow_not_found"},
	} {
		status, body := h.admin(http.MethodGet, "/admin/workspaces/"+ws+"/runs"+tc.query, nil)
		wantError(t, status, body, tc.status, tc.code)
	}
	status, body := h.admin(http.MethodGet, "/admin/workspaces/nope/runs", nil)
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")
}

// TestAdminClientAgreesWithTheRoutes reads every flow, the versions, a
// version's document, the runs and a listed run's trace through
// pkg/adminclient, as parleyctl and the console do, from this
// flow-runner: the client's shapes are the routes' shapes.
func TestAdminClientAgreesWithTheRoutes(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ctx := context.Background()
	client := adminclient.New(h.rpc)
	ws, other := uuid.NewString(), uuid.NewString()
	v2 := "{\n  \"name\": \"Greeter\", \"description\": \"v2\", \"triggers\": [\"api\", \"chat\"],\n  \"nodes\": [{\"id\": \"start\", \"type\": \"start\", \"next\": \"done\"}, " + endNode + "]\n}"
	id := h.publish(ws, "", doc("Greeter", apiOnly, "hi", greet, endNode))
	h.publish(ws, id, v2)
	chat := h.publish(ws, "", doc("Chat only", []string{"chat"}, "done", endNode))
	if _, err := client.DeactivateFlow(ctx, ws, chat); err != nil {
		t.Fatal(err)
	}
	// Named for another workspace, a flow is not found, and stays active.
	_, err := client.DeactivateFlow(ctx, other, id)
	if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusNotFound || e.Code != "flow_not_found" {
		t.Fatalf("DeactivateFlow as another workspace = %v", err)
	}
	run := h.invoke(ws, id, map[string]any{"input": map[string]any{"name": "Ann"}})

	flows, err := client.ListAllFlows(ctx, ws)
	if err != nil || len(flows) != 2 {
		t.Fatalf("ListAllFlows = %+v, %v", flows, err)
	}
	inactive, greeter := flows[0], flows[1]
	if inactive.ID != chat || inactive.Status != "inactive" || !reflect.DeepEqual(inactive.Triggers, []string{"chat"}) {
		t.Fatalf("the deactivated chat flow = %+v", inactive)
	}
	if greeter.ID != id || greeter.Status != "active" || greeter.Name != "Greeter" || greeter.Description != "v2" || greeter.PublishedVersion != 2 ||
		!reflect.DeepEqual(greeter.Triggers, []string{"api", "chat"}) || greeter.CreatedAt == "" || greeter.UpdatedAt == "" {
		t.Fatalf("the greeter = %+v", greeter)
	}

	versions, err := client.ListFlowVersions(ctx, ws, id)
	if err != nil || versions.FlowID != id || versions.PublishedVersion != 2 || len(versions.Versions) != 2 ||
		versions.Versions[0].Version != 2 || versions.Versions[0].NodeCount != 2 || versions.Versions[1].NodeCount != 3 || versions.Versions[1].PublishedAt == "" {
		t.Fatalf("ListFlowVersions = %+v, %v", versions, err)
	}
	document, err := client.GetFlowVersion(ctx, ws, id, 2)
	if err != nil || string(document) != v2 {
		t.Fatalf("GetFlowVersion = %q, %v", document, err)
	}
	for _, err := range []error{
		func() error { _, err := client.ListFlowVersions(ctx, other, id); return err }(),
		func() error { _, err := client.GetFlowVersion(ctx, other, id, 1); return err }(),
		func() error { _, err := client.ListRuns(ctx, other, adminclient.RunFilter{FlowID: id}); return err }(),
	} {
		if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusNotFound || e.Code != "flow_not_found" {
			t.Fatalf("another workspace's flow = %#v", err)
		}
	}
	if _, err := client.GetFlowVersion(ctx, ws, id, 3); err == nil {
		t.Fatal("a version the flow lacks was read")
	} else if e, ok := adminclient.AsError(err); !ok || e.Code != "flow_version_not_found" {
		t.Fatalf("a missing version = %#v", err)
	}

	page, err := client.ListRuns(ctx, ws, adminclient.RunFilter{FlowID: id, Status: "completed", Limit: 10})
	if err != nil || len(page.Runs) != 1 || page.NextBefore != nil {
		t.Fatalf("ListRuns = %+v, %v", page, err)
	}
	listed := page.Runs[0]
	if listed.ID != run.RunID || listed.FlowID != id || listed.FlowVersion != 2 || listed.Status != "completed" ||
		listed.CompletedAt == nil || listed.DurationMS == nil || listed.Error != nil || listed.NodesExecuted != 2 {
		t.Fatalf("the listed run = %+v", listed)
	}
	if _, err := client.ListRuns(ctx, ws, adminclient.RunFilter{Status: "bogus"}); err == nil {
		t.Fatal("a bogus status was taken")
	} else if e, ok := adminclient.AsError(err); !ok || e.Status != http.StatusBadRequest || e.Code != "invalid_request" {
		t.Fatalf("a bogus status = %#v", err)
	}
	trace, err := client.GetRunTrace(ctx, ws, listed.FlowID, listed.ID)
	if err != nil || trace.Run.ID != listed.ID || trace.Run.StartedAt != listed.StartedAt || len(trace.NodeRuns) != 2 {
		t.Fatalf("the listed run's trace = %+v, %v", trace, err)
	}
}
