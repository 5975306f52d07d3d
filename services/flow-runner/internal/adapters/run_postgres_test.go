package adapters

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// TestManyContinuesDoNotStarveThePool runs more continues at once than the
// pool has connections, each reading the database again while it holds its
// run (as a version load or a call_flow target does): all finish.
func TestManyContinuesDoNotStarveThePool(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(Schema, migrations.FS))
	gdb := env.DB(t, Schema, migrations.FS)
	ctx := context.Background()
	ws := uuid.NewString()
	f, err := NewFlowStore(gdb).Publish(ctx, publication(t, ws, ""))
	if err != nil {
		t.Fatal(err)
	}
	runs := NewRunStore(gdb)
	const n = 25 // over db.Open's 20 connections
	sessions := make([]string, n)
	for i := range sessions {
		sessions[i] = uuid.NewString()
		r := &run.Run{
			ID: uuid.NewString(), FlowID: f.ID, Version: 1, WorkspaceID: ws, Status: run.StatusWaiting,
			CurrentNodeID: "q", Vars: map[string]any{"input": map[string]any{}}, StartedAt: time.Now(), SessionID: sessions[i],
		}
		if err := runs.Create(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runs.Continue(ctx, s, func(r *run.Run) ([]run.NodeRun, error) {
				time.Sleep(50 * time.Millisecond)
				if _, err := runs.Get(ctx, ws, f.ID, r.ID); err != nil {
					return nil, err
				}
				r.Status = run.StatusCompleted
				return []run.NodeRun{{NodeID: "q", NodeType: "question", StartedAt: time.Now()}}, nil
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
	err = runs.Continue(ctx, sessions[0], func(r *run.Run) ([]run.NodeRun, error) {
		if r.Status != run.StatusCompleted {
			t.Errorf("stored status %s", r.Status)
		}
		return nil, catalog.ErrSessionNotFound
	})
	if !errors.Is(err, catalog.ErrSessionNotFound) {
		t.Fatalf("refusal: %v", err)
	}
	if err := runs.Continue(ctx, uuid.NewString(), nil); !errors.Is(err, catalog.ErrSessionNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}
