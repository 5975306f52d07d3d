package adapters

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// TestListEveryFlowAndItsVersions: the operators' list holds every flow
// of the workspace, inactive and chat-only ones too, newest change first;
// a flow's versions are listed newest first with their node counts, and a
// version's document is the bytes published.
func TestListEveryFlowAndItsVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Migrated(Schema, migrations.FS))
	store := NewFlowStore(env.DB(t, Schema, migrations.FS))
	ws, other := uuid.NewString(), uuid.NewString()
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	publish := func(ws, flowID, doc string, at time.Time) *catalog.Flow {
		t.Helper()
		f, err := store.Publish(ctx, publicationOf(t, ws, flowID, doc, at))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	const chatDoc = `{"name": "Chat", "triggers": ["chat"], "nodes": [{"id": "s", "type": "start", "next": "e"}, {"id": "e", "type": "end"}]}`
	const threeNodes = "{\n  \"name\": \"T2\",\n  \"triggers\": [\"api\"],\n  \"nodes\": [{\"id\": \"s\", \"type\": \"start\", \"next\": \"m\"},\n" +
		"    {\"id\": \"m\", \"type\": \"send_message\", \"message\": {\"type\": \"text\", \"text\": \"hi\"}, \"next\": \"e\"}, {\"id\": \"e\", \"type\": \"end\"}]\n}"
	api := publish(ws, "", testDoc, t0)
	chat := publish(ws, "", chatDoc, t0.Add(time.Second))
	gone := publish(ws, "", testDoc, t0.Add(2*time.Second))
	publish(other, "", testDoc, t0.Add(3*time.Second))
	api = publish(ws, api.ID, threeNodes, t0.Add(4*time.Second))
	if _, err := store.Deactivate(ctx, "", gone.ID, t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}

	flows, err := store.List(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range flows {
		got = append(got, f.ID+" "+f.Status)
	}
	if want := []string{gone.ID + " inactive", api.ID + " active", chat.ID + " active"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if flows[1].PublishedVersion != 2 || !flows[1].CreatedAt.Equal(t0) || !flows[1].UpdatedAt.Equal(t0.Add(4*time.Second)) ||
		!reflect.DeepEqual(flows[2].Triggers, []string{"chat"}) {
		t.Fatalf("listed flows = %+v %+v", flows[1], flows[2])
	}
	if none, err := store.List(ctx, "not-a-uuid"); err != nil || len(none) != 0 {
		t.Fatalf("List of no workspace = %v, %v", none, err)
	}

	versions, err := store.Versions(ctx, api.ID)
	want := []catalog.VersionInfo{{Version: 2, PublishedAt: t0.Add(4 * time.Second), Nodes: 3}, {Version: 1, PublishedAt: t0, Nodes: 2}}
	if err != nil || !reflect.DeepEqual(versions, want) {
		t.Fatalf("Versions = %+v, %v; want %+v", versions, err, want)
	}
	doc, err := store.Document(ctx, api.ID, 2)
	if err != nil || string(doc) != threeNodes {
		t.Fatalf("Document = %q, %v", doc, err)
	}
	for _, tc := range []struct {
		flowID  string
		version int
	}{{api.ID, 3}, {api.ID, 0}, {uuid.NewString(), 1}, {"nope", 1}} {
		if _, err := store.Document(ctx, tc.flowID, tc.version); !errors.Is(err, catalog.ErrVersionNotFound) {
			t.Errorf("Document(%s, %d) = %v, want ErrVersionNotFound", tc.flowID, tc.version, err)
		}
	}
	if none, err := store.Versions(ctx, "nope"); err != nil || len(none) != 0 {
		t.Fatalf("Versions of no flow = %v, %v", none, err)
	}
}

// TestListRuns: a workspace's runs newest first with their usage and
// error, filtered by flow and status, paged by started_at (a tie group
// read whole with At); another workspace's runs are never listed.
func TestListRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, f, runs := publishedFlow(t, time.Hour)
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	create := func(ws, flowID string, status run.Status, at time.Time) *run.Run {
		t.Helper()
		r := &run.Run{ID: uuid.NewString(), FlowID: flowID, Version: 1, WorkspaceID: ws, Status: status, CurrentNodeID: "e",
			NodesExecuted: 2, Vars: map[string]any{}, StartedAt: at}
		switch status {
		case run.StatusWaiting:
			r.SessionID = uuid.NewString()
		case run.StatusFailed:
			done := at.Add(1500 * time.Millisecond)
			r.CompletedAt, r.Error = &done, &run.Error{Code: "http_failed", Message: "boom"}
			r.Usage = run.Usage{Tokens: 120, CostUSD: 0.0004, BillableUnits: 1}
		default:
			done := at.Add(time.Second)
			r.CompletedAt = &done
		}
		if err := runs.Create(ctx, r, nil, nil); err != nil {
			t.Fatal(err)
		}
		return r
	}
	oldest := create(ws, f.ID, run.StatusCompleted, t0)
	failed := create(ws, f.ID, run.StatusFailed, t0.Add(time.Second))
	tieA := create(ws, f.ID, run.StatusCompleted, t0.Add(2*time.Second))
	tieB := create(ws, f.ID, run.StatusWaiting, t0.Add(2*time.Second))

	// Another flow of the workspace, and another workspace's run of a flow.
	second, err := NewFlowStore(runs.db).Publish(ctx, publication(t, ws, ""))
	if err != nil {
		t.Fatal(err)
	}
	otherFlow := create(ws, second.ID, run.StatusCompleted, t0.Add(3*time.Second))
	theirs, err := NewFlowStore(runs.db).Publish(ctx, publication(t, uuid.NewString(), ""))
	if err != nil {
		t.Fatal(err)
	}
	create(theirs.WorkspaceID, theirs.ID, run.StatusCompleted, t0.Add(4*time.Second))

	ids := func(q catalog.RunQuery) []string {
		t.Helper()
		got, err := runs.List(ctx, ws, q)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(got))
		for _, r := range got {
			out = append(out, r.ID)
		}
		return out
	}
	// Ties are ordered by id, descending.
	first, second2 := tieA.ID, tieB.ID
	if first < second2 {
		first, second2 = second2, first
	}
	before := t0.Add(2 * time.Second)
	at := t0.Add(2 * time.Second)
	for _, tc := range []struct {
		name string
		q    catalog.RunQuery
		want []string
	}{
		{"every run", catalog.RunQuery{Limit: 10}, []string{otherFlow.ID, first, second2, failed.ID, oldest.ID}},
		{"a limit", catalog.RunQuery{Limit: 2}, []string{otherFlow.ID, first}},
		{"one flow", catalog.RunQuery{FlowID: f.ID, Limit: 10}, []string{first, second2, failed.ID, oldest.ID}},
		{"a status", catalog.RunQuery{Status: run.StatusCompleted, Limit: 10}, []string{otherFlow.ID, tieA.ID, oldest.ID}},
		{"before", catalog.RunQuery{Before: &before, Limit: 10}, []string{failed.ID, oldest.ID}},
		{"a tie group", catalog.RunQuery{At: &at}, []string{first, second2}},
		{"another workspace's flow", catalog.RunQuery{FlowID: theirs.ID, Limit: 10}, []string{}},
		{"no flow id", catalog.RunQuery{FlowID: "nope", Limit: 10}, []string{}},
	} {
		if got := ids(tc.q); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	got, err := runs.List(ctx, ws, catalog.RunQuery{Status: run.StatusFailed, Limit: 1})
	wantDone := t0.Add(2500 * time.Millisecond)
	if err != nil || len(got) != 1 {
		t.Fatalf("failed runs = %+v, %v", got, err)
	}
	want := catalog.RunSummary{ID: failed.ID, Kind: catalog.SourceAPI, FlowID: f.ID, Version: 1, Status: run.StatusFailed, NodesExecuted: 2,
		Usage: run.Usage{Tokens: 120, CostUSD: 0.0004, BillableUnits: 1}, Error: &run.Error{Code: "http_failed", Message: "boom"},
		StartedAt: t0.Add(time.Second), CompletedAt: &wantDone}
	if !reflect.DeepEqual(got[0], want) {
		t.Fatalf("the failed run = %+v, want %+v", got[0], want)
	}
	if none, err := runs.List(ctx, "nope", catalog.RunQuery{Limit: 10}); err != nil || len(none) != 0 {
		t.Fatalf("runs of no workspace = %v, %v", none, err)
	}
}

// TestVersionsCountNodesOfDocumentsPostgresCannotRead: Go reads JSON that
// PostgreSQL refuses (bytes that are not UTF-8, a \u0000 escape, a lone
// surrogate), and a flow with such a version still lists every version
// with its node count.
func TestVersionsCountNodesOfDocumentsPostgresCannotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Migrated(Schema, migrations.FS))
	store := NewFlowStore(env.DB(t, Schema, migrations.FS))
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	for name, text := range map[string]string{"not UTF-8": "\xff", "a NUL escape": `\u0000`, "a lone surrogate": `\ud800`} {
		threeNodes := `{"name": "T", "triggers": ["api"], "nodes": [{"id": "s", "type": "start", "next": "m"},` +
			`{"id": "m", "type": "send_message", "message": {"type": "text", "text": "` + text + `"}, "next": "e"}, {"id": "e", "type": "end"}]}`
		f, err := store.Publish(ctx, publicationOf(t, uuid.NewString(), "", testDoc, t0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Publish(ctx, publicationOf(t, f.WorkspaceID, f.ID, threeNodes, t0.Add(time.Second))); err != nil {
			t.Fatal(err)
		}
		versions, err := store.Versions(ctx, f.ID)
		want := []catalog.VersionInfo{{Version: 2, PublishedAt: t0.Add(time.Second), Nodes: 3}, {Version: 1, PublishedAt: t0, Nodes: 2}}
		if err != nil || !reflect.DeepEqual(versions, want) {
			t.Errorf("%s: Versions = %+v, %v; want %+v", name, versions, err, want)
		}
	}
}
