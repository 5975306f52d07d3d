package adapters

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// publishedFlow is a run store over a fresh database (receipts kept
// receiptTTL) with one flow published in a new workspace.
func publishedFlow(t *testing.T, receiptTTL time.Duration) (string, *catalog.Flow, *RunStore) {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(Schema, migrations.FS))
	gdb := env.DB(t, Schema, migrations.FS)
	ws := uuid.NewString()
	f, err := NewFlowStore(gdb).Publish(context.Background(), publication(t, ws, ""))
	if err != nil {
		t.Fatal(err)
	}
	return ws, f, NewRunStore(gdb, receiptTTL)
}

// TestManyContinuesDoNotStarveThePool runs more continues at once than the
// pool has connections, each reading the database again while it holds its
// run (as a version load or a call_flow target does): all finish.
func TestManyContinuesDoNotStarveThePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, f, runs := publishedFlow(t, time.Hour)
	const n = 25 // over db.Open's 20 connections
	sessions := make([]string, n)
	for i := range sessions {
		sessions[i] = uuid.NewString()
		r := &run.Run{
			ID: uuid.NewString(), FlowID: f.ID, Version: 1, WorkspaceID: ws, Status: run.StatusWaiting,
			CurrentNodeID: "q", Vars: map[string]any{"input": map[string]any{}}, StartedAt: time.Now(), SessionID: sessions[i],
		}
		if err := runs.Create(ctx, r, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runs.Continue(ctx, s, func(r *run.Run) (catalog.Changes, error) {
				time.Sleep(50 * time.Millisecond)
				if _, err := runs.Get(ctx, ws, f.ID, r.ID); err != nil {
					return catalog.Changes{}, err
				}
				r.Status = run.StatusCompleted
				return catalog.Changes{NodeRuns: []run.NodeRun{{NodeID: "q", NodeType: "question", StartedAt: time.Now()}}}, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("continues starved the connection pool")
	}
	// Finished runs are no sessions; a refusal by fn stores nothing.
	err := runs.Continue(ctx, sessions[0], func(r *run.Run) (catalog.Changes, error) {
		if r.Status != run.StatusCompleted {
			t.Errorf("stored status %s", r.Status)
		}
		return catalog.Changes{}, catalog.ErrSessionNotFound
	})
	if !errors.Is(err, catalog.ErrSessionNotFound) {
		t.Fatalf("refusal: %v", err)
	}
	if err := runs.Continue(ctx, uuid.NewString(), nil); !errors.Is(err, catalog.ErrSessionNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}

// A receipt is stored with its run (invoke) or with the run's changes
// (continue), answers its key until it expires, and a key free again after
// that takes a new receipt; expired receipts are purged.
func TestReceiptsStoredWithTheirRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, f, runs := publishedFlow(t, 2*time.Second)
	newRun := func(status run.Status, session string) *run.Run {
		return &run.Run{
			ID: uuid.NewString(), FlowID: f.ID, Version: 1, WorkspaceID: ws, Status: status,
			CurrentNodeID: "q", Vars: map[string]any{}, StartedAt: time.Now(), SessionID: session,
		}
	}
	waiting := newRun(run.StatusWaiting, uuid.NewString())
	first := &catalog.Receipt{WorkspaceID: ws, KeyHash: "k1", Fingerprint: "fp1", Status: 200, Body: []byte(`{"status":"waiting"}`), RunID: waiting.ID}
	if err := runs.Create(ctx, waiting, []run.NodeRun{{NodeID: "start", NodeType: "start", StartedAt: time.Now()}}, first); err != nil {
		t.Fatal(err)
	}
	got, err := runs.FindReceipt(ctx, ws, "k1")
	if err != nil || got == nil || got.Fingerprint != "fp1" || got.Status != 200 || string(got.Body) != string(first.Body) || got.RunID != waiting.ID {
		t.Fatalf("receipt = %+v, %v", got, err)
	}
	if other, err := runs.FindReceipt(ctx, uuid.NewString(), "k1"); err != nil || other != nil {
		t.Fatalf("another workspace's key = %+v, %v", other, err)
	}

	// A continue's receipt, with no body (its answer was too large).
	err = runs.Continue(ctx, waiting.SessionID, func(r *run.Run) (catalog.Changes, error) {
		r.Status = run.StatusCompleted
		return catalog.Changes{Receipt: &catalog.Receipt{WorkspaceID: ws, KeyHash: "k2", Fingerprint: "fp2", Status: 200, RunID: r.ID}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = runs.FindReceipt(ctx, ws, "k2")
	if err != nil || got == nil || got.Body != nil || got.RunID != waiting.ID {
		t.Fatalf("continue's receipt = %+v, %v", got, err)
	}

	if first.Superseded {
		t.Fatal("the key's first receipt marked superseded")
	}

	// A live receipt is never replaced: the key answered first. The
	// receipts that came later say so, whichever way they came.
	again := newRun(run.StatusCompleted, "")
	late := &catalog.Receipt{WorkspaceID: ws, KeyHash: "k1", Fingerprint: "other", Status: 200, Body: []byte(`{}`), RunID: again.ID}
	if err := runs.Create(ctx, again, nil, late); err != nil {
		t.Fatal(err)
	}
	if got, _ := runs.FindReceipt(ctx, ws, "k1"); got == nil || got.RunID != waiting.ID || !late.Superseded {
		t.Fatalf("live receipt replaced: %+v; the later one superseded %v", got, late.Superseded)
	}
	if _, err := runs.Get(ctx, ws, f.ID, again.ID); err != nil {
		t.Fatalf("the run of a superseded receipt: %v; want it stored", err)
	}
	lateStream := &catalog.Receipt{WorkspaceID: ws, KeyHash: "k1", Fingerprint: "other", Status: 200, Body: []byte(`{}`), RunID: again.ID}
	if err := runs.FinishStream(ctx, nil, run.StatusCompleted, lateStream); err != nil || !lateStream.Superseded {
		t.Fatalf("a stream's later receipt: %v, superseded %v", err, lateStream.Superseded)
	}
	resumed := newRun(run.StatusWaiting, uuid.NewString())
	if err := runs.Create(ctx, resumed, nil, nil); err != nil {
		t.Fatal(err)
	}
	lateContinue := &catalog.Receipt{WorkspaceID: ws, KeyHash: "k1", Fingerprint: "other", Status: 200, RunID: resumed.ID}
	err = runs.Continue(ctx, resumed.SessionID, func(r *run.Run) (catalog.Changes, error) {
		r.Status = run.StatusCompleted
		return catalog.Changes{Receipt: lateContinue}, nil
	})
	if err != nil || !lateContinue.Superseded {
		t.Fatalf("a continue's later receipt: %v, superseded %v", err, lateContinue.Superseded)
	}
	if got, _ := runs.FindReceipt(ctx, ws, "k1"); got == nil || got.RunID != waiting.ID {
		t.Fatalf("live receipt replaced: %+v", got)
	}

	// Expired, it answers nothing; the key's next receipt replaces it.
	wait.Until(t, 10*time.Second, "the receipt to expire", func() bool {
		got, err := runs.FindReceipt(ctx, ws, "k1")
		return err == nil && got == nil
	})
	later := newRun(run.StatusCompleted, "")
	next := &catalog.Receipt{WorkspaceID: ws, KeyHash: "k1", Fingerprint: "fp3", Status: 200, Body: []byte(`{}`), RunID: later.ID}
	if err := runs.Create(ctx, later, nil, next); err != nil {
		t.Fatal(err)
	}
	if got, _ := runs.FindReceipt(ctx, ws, "k1"); got == nil || got.RunID != later.ID || got.Fingerprint != "fp3" || next.Superseded {
		t.Fatalf("expired receipt not replaced: %+v; the new one superseded %v", got, next.Superseded)
	}
	wait.Until(t, 10*time.Second, "the continue's receipt to expire", func() bool {
		got, err := runs.FindReceipt(ctx, ws, "k2")
		return err == nil && got == nil
	})
	n, err := runs.PurgeReceipts(ctx, 100)
	if err != nil || n != 1 {
		t.Fatalf("purged %d, %v; want the expired k2", n, err)
	}
	if got, _ := runs.FindReceipt(ctx, ws, "k1"); got == nil {
		t.Fatal("a live receipt was purged")
	}
}

// A continued run is given what its trace took so far (run.Run.TraceBytes):
// every stored node run's input and output, as stored, the calls before
// included; its new node runs follow the stored ones.
func TestContinueSaysWhatTheTraceTook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, f, runs := publishedFlow(t, time.Hour)
	r := &run.Run{
		ID: uuid.NewString(), FlowID: f.ID, Version: 1, WorkspaceID: ws, Status: run.StatusWaiting,
		CurrentNodeID: "q", Vars: map[string]any{}, StartedAt: time.Now(), SessionID: uuid.NewString(),
	}
	first := []run.NodeRun{
		{NodeID: "start", NodeType: "start", StartedAt: time.Now()},
		{NodeID: "v", NodeType: "variable", StartedAt: time.Now(), Output: map[string]any{"v": "abc"}},
		{NodeID: "q", NodeType: "question", StartedAt: time.Now(), Input: map[string]any{"text": "é"}, Output: run.Message{Type: "text", Text: "Name?"}},
	}
	if err := runs.Create(ctx, r, first, nil); err != nil {
		t.Fatal(err)
	}
	// {"v":"abc"} 11, {"text":"é"} 13 (é is two bytes), {"type":"text","text":"Name?"} 30.
	const took = 11 + 13 + 30
	for call, want := range []int{took, took + 14} {
		err := runs.Continue(ctx, r.SessionID, func(got *run.Run) (catalog.Changes, error) {
			if got.TraceBytes != want {
				t.Errorf("call %d: the trace took %d bytes; want %d", call+2, got.TraceBytes, want)
			}
			return catalog.Changes{NodeRuns: []run.NodeRun{{NodeID: "q", NodeType: "question", StartedAt: time.Now(), Input: map[string]any{"text": "yes"}}}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	tr, err := runs.Get(ctx, ws, f.ID, r.ID)
	if err != nil || len(tr.NodeRuns) != 5 || tr.NodeRuns[4].NodeID != "q" {
		t.Fatalf("trace %+v, %v", tr, err)
	}
}

// FinishStream marks a stored run failed, only its outcome changing, and
// stores its receipt with it; a run changed since (a continue took it) is
// left as it is, and a stream whose end was delivered adds its receipt
// alone.
func TestFinishStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, f, runs := publishedFlow(t, time.Hour)
	done := time.Now()
	completed := &run.Run{
		ID: uuid.NewString(), FlowID: f.ID, Version: 1, WorkspaceID: ws, Status: run.StatusCompleted, CurrentNodeID: "done",
		NodesExecuted: 3, Vars: map[string]any{"n": float64(1)}, Output: map[string]any{"ok": true},
		Messages: []run.Message{{Type: "text", Text: "hi"}}, StartedAt: done, CompletedAt: &done,
	}
	if err := runs.Create(ctx, completed, []run.NodeRun{{NodeID: "start", NodeType: "start", StartedAt: done}}, nil); err != nil {
		t.Fatal(err)
	}
	cut := *completed
	cut.Status, cut.Output = run.StatusFailed, map[string]any{}
	cut.Error = &run.Error{Code: run.CodeNodeFailed, Message: `node "done": run canceled`}
	receipt := &catalog.Receipt{WorkspaceID: ws, KeyHash: "k", Fingerprint: "fp", Status: 200, Body: []byte(`{"status":"failed"}`), RunID: cut.ID}
	if err := runs.FinishStream(ctx, &cut, run.StatusCompleted, receipt); err != nil {
		t.Fatal(err)
	}
	tr, err := runs.Get(ctx, ws, f.ID, cut.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := tr.Run; r.Status != run.StatusFailed || r.Error == nil || *r.Error != *cut.Error || len(r.Output) != 0 ||
		r.Vars["n"] != float64(1) || len(r.Messages) != 1 || len(tr.NodeRuns) != 1 {
		t.Fatalf("stored %+v with %d node runs; want failed, the rest as it was", r, len(tr.NodeRuns))
	}
	if got, err := runs.FindReceipt(ctx, ws, "k"); err != nil || got == nil || string(got.Body) != `{"status":"failed"}` {
		t.Fatalf("receipt = %+v, %v", got, err)
	}

	// Stored since as something else (here: the failure itself), the run
	// is not marked again.
	again := cut
	again.Error = &run.Error{Code: run.CodeNodeFailed, Message: "not this"}
	if err := runs.FinishStream(ctx, &again, run.StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if tr, _ := runs.Get(ctx, ws, f.ID, cut.ID); tr.Run.Error.Message != cut.Error.Message {
		t.Fatalf("a run changed since was marked: %+v", tr.Run.Error)
	}

	// Delivered: the receipt alone.
	if err := runs.FinishStream(ctx, nil, run.StatusCompleted, &catalog.Receipt{WorkspaceID: ws, KeyHash: "k2", Fingerprint: "fp", Status: 200, Body: []byte(`{}`), RunID: cut.ID}); err != nil {
		t.Fatal(err)
	}
	if got, err := runs.FindReceipt(ctx, ws, "k2"); err != nil || got == nil || got.RunID != cut.ID {
		t.Fatalf("receipt = %+v, %v", got, err)
	}
}
