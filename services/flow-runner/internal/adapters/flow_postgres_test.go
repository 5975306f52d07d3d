package adapters

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

const testDoc = `{"name": "T", "triggers": ["api"], "nodes": [{"id": "s", "type": "start", "next": "e"}, {"id": "e", "type": "end"}]}`

// publication publishes testDoc now: a new flow of ws when flowID is
// empty, else a new version of flowID.
func publication(t *testing.T, ws, flowID string) catalog.Publication {
	t.Helper()
	return publicationOf(t, ws, flowID, testDoc, time.Now().UTC())
}

// publicationOf is publication of doc at now.
func publicationOf(t *testing.T, ws, flowID, doc string, now time.Time) catalog.Publication {
	t.Helper()
	def, err := flow.Parse([]byte(doc), flow.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return catalog.Publication{FlowID: flowID, NewID: uuid.NewString(), WorkspaceID: ws, Document: []byte(doc), Definition: def, Now: now}
}

// TestPublishCountsUpUnderRace publishes versions of one flow at once:
// each gets its own number, none fails.
func TestPublishCountsUpUnderRace(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(Schema, migrations.FS))
	store := NewFlowStore(env.DB(t, Schema, migrations.FS))
	ctx := context.Background()
	ws := uuid.NewString()
	first, err := store.Publish(ctx, publication(t, ws, ""))
	if err != nil || first.PublishedVersion != 1 || first.Status != catalog.StatusActive {
		t.Fatalf("first: %+v %v", first, err)
	}
	const n = 8
	var (
		mu       sync.Mutex
		versions []int
		wg       sync.WaitGroup
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := store.Publish(ctx, publication(t, ws, first.ID))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			versions = append(versions, f.PublishedVersion)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Ints(versions)
	for i, v := range versions {
		if v != i+2 {
			t.Fatalf("versions %v", versions)
		}
	}
	if _, err := store.Publish(ctx, publication(t, uuid.NewString(), first.ID)); !errors.Is(err, catalog.ErrFlowNotFound) {
		t.Fatalf("another workspace's flow: %v", err)
	}
}

// TestVersionIsParsedOnce reads a version twice in a fresh store: one
// parse, one shared definition.
func TestVersionIsParsedOnce(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(Schema, migrations.FS))
	gdb := env.DB(t, Schema, migrations.FS)
	f, err := NewFlowStore(gdb).Publish(context.Background(), publication(t, uuid.NewString(), ""))
	if err != nil {
		t.Fatal(err)
	}
	fresh := NewFlowStore(gdb)
	a, err := fresh.Version(context.Background(), f.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fresh.Version(context.Background(), f.ID, 1)
	if err != nil || a.Definition != b.Definition {
		t.Fatalf("second read parsed again (%p, %p) or failed: %v", a.Definition, b.Definition, err)
	}
	if _, err := fresh.Version(context.Background(), f.ID, 2); !errors.Is(err, catalog.ErrFlowNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	if _, err := fresh.Version(context.Background(), "nope", 1); !errors.Is(err, catalog.ErrFlowNotFound) {
		t.Fatalf("a flow id that is no uuid: %v", err)
	}
}
