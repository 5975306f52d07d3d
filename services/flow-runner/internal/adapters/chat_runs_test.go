package adapters

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// chatRun is a waiting chat run of ws in a new conversation; flowID ""
// is the assistant's.
func chatRun(ws, flowID string) *run.Run {
	r := &run.Run{
		ID: uuid.NewString(), FlowID: flowID, WorkspaceID: ws, Status: run.StatusWaiting, CurrentNodeID: "wait",
		NodesExecuted: 1, StartedAt: time.Now().UTC().Truncate(time.Microsecond),
		Chat: &run.Chat{ConversationID: uuid.NewString(), ChannelID: uuid.NewString(), ChannelKind: "telegram", ContactID: "c1", ContactName: "Ann"},
		Vars: map[string]any{
			"input":           map[string]any{"text": "hi"},
			"conversation_id": "x",
			"channel":         map[string]any{"id": "x", "kind": "telegram"},
			"contact":         map[string]any{"id": "c1", "name": "Ann"},
		},
	}
	if flowID != "" {
		r.Version = 1
	}
	wake := r.StartedAt.Add(time.Minute)
	r.WakeAt = &wake
	return r
}

// inTx runs fn in a transaction of the store's database, failing the test
// on its error.
func inTx(t *testing.T, runs *RunStore, fn func(tx *gorm.DB) error) {
	t.Helper()
	if err := runs.db.WithContext(context.Background()).Transaction(fn); err != nil {
		t.Fatal(err)
	}
}

// TestChatRunsInsideTheCallersTransaction: a chat run, of a flow or of
// the assistant (no flow), is inserted, loaded and updated inside the
// caller's transaction with its conversation, channel and wake time, its
// node runs numbered on; nothing is stored when that transaction rolls
// back.
func TestChatRunsInsideTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, f, runs := publishedFlow(t, time.Hour)
	for _, flowID := range []string{f.ID, ""} {
		r := chatRun(ws, flowID)
		inTx(t, runs, func(tx *gorm.DB) error {
			return InsertRun(tx, r, []run.NodeRun{{NodeID: "start", NodeType: "start", StartedAt: r.StartedAt, Output: map[string]any{"a": 1.0}}})
		})
		var loaded *run.Run
		inTx(t, runs, func(tx *gorm.DB) (err error) {
			loaded, err = LoadRun(tx, r.ID)
			return err
		})
		if loaded.FlowID != flowID || loaded.Version != r.Version || !loaded.WakeAt.Equal(*r.WakeAt) || loaded.Status != run.StatusWaiting ||
			loaded.TraceBytes == 0 || !reflect.DeepEqual(loaded.Vars, r.Vars) {
			t.Fatalf("loaded %+v", loaded)
		}
		if want := (run.Chat{ConversationID: r.Chat.ConversationID, ChannelID: r.Chat.ChannelID, ChannelKind: "telegram", ContactID: "c1", ContactName: "Ann"}); loaded.Chat == nil || *loaded.Chat != want {
			t.Fatalf("loaded chat %+v, want %+v", loaded.Chat, want)
		}

		loaded.Status, loaded.WakeAt, loaded.NodesExecuted = run.StatusCompleted, nil, 3
		done := time.Now().UTC()
		loaded.CompletedAt = &done
		inTx(t, runs, func(tx *gorm.DB) error {
			return UpdateRun(tx, loaded, []run.NodeRun{{NodeID: "wait", NodeType: "delay", StartedAt: done}, {NodeID: "end", NodeType: "end", StartedAt: done}})
		})
		tr, err := runs.Trace(ctx, ws, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Run.Status != run.StatusCompleted || tr.Run.WakeAt != nil || tr.Run.NodesExecuted != 3 || tr.Run.Chat == nil || len(tr.NodeRuns) != 3 ||
			tr.NodeRuns[0].NodeID != "start" || tr.NodeRuns[2].NodeID != "end" {
			t.Fatalf("the updated run: %+v %+v", tr.Run, tr.NodeRuns)
		}

		// The Developer API never reads it, nor a continue of a session.
		if _, err := runs.Get(ctx, ws, f.ID, r.ID); !errors.Is(err, catalog.ErrRunNotFound) {
			t.Fatalf("Get of a chat run = %v", err)
		}
		// Another workspace's operators do not see it.
		if _, err := runs.Trace(ctx, uuid.NewString(), r.ID); !errors.Is(err, catalog.ErrRunNotFound) {
			t.Fatalf("Trace from another workspace = %v", err)
		}
	}

	// A rolled back transaction stores nothing.
	r := chatRun(ws, "")
	rollback := errors.New("rollback")
	err := runs.db.Transaction(func(tx *gorm.DB) error {
		if err := InsertRun(tx, r, nil); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	if _, err := runs.Trace(ctx, ws, r.ID); !errors.Is(err, catalog.ErrRunNotFound) {
		t.Fatalf("a rolled back run = %v", err)
	}
	inTx(t, runs, func(tx *gorm.DB) error {
		if _, err := LoadRun(tx, r.ID); !errors.Is(err, catalog.ErrRunNotFound) {
			t.Errorf("LoadRun of an unknown run = %v", err)
		}
		if _, err := LoadRun(tx, "nope"); !errors.Is(err, catalog.ErrRunNotFound) {
			t.Errorf("LoadRun of no id = %v", err)
		}
		if err := UpdateRun(tx, r, nil); !errors.Is(err, catalog.ErrRunNotFound) {
			t.Errorf("UpdateRun of an unknown run = %v", err)
		}
		return nil
	})
}

// TestChatRunsInTheOperatorsList: the list shows each run's kind and a
// chat run's conversation, and filters by conversation.
func TestChatRunsInTheOperatorsList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, f, runs := publishedFlow(t, time.Hour)
	api := &run.Run{ID: uuid.NewString(), FlowID: f.ID, Version: 1, WorkspaceID: ws, Status: run.StatusCompleted,
		Vars: map[string]any{}, StartedAt: time.Now().UTC().Add(-time.Minute)}
	if err := runs.Create(ctx, api, nil, nil); err != nil {
		t.Fatal(err)
	}
	assistant, flowed := chatRun(ws, ""), chatRun(ws, f.ID)
	flowed.StartedAt = assistant.StartedAt.Add(time.Second)
	flowed.Chat.ConversationID = assistant.Chat.ConversationID
	other := chatRun(ws, "")
	other.StartedAt = flowed.StartedAt.Add(time.Second)
	inTx(t, runs, func(tx *gorm.DB) error {
		for _, r := range []*run.Run{assistant, flowed, other} {
			if err := InsertRun(tx, r, nil); err != nil {
				return err
			}
		}
		return nil
	})

	all, err := runs.List(ctx, ws, catalog.RunQuery{Limit: 10})
	if err != nil || len(all) != 4 {
		t.Fatalf("every run = %+v, %v", all, err)
	}
	got := []string{}
	for _, s := range all {
		got = append(got, s.Kind+" "+s.FlowID+" "+s.ConversationID)
	}
	want := []string{
		"chat  " + other.Chat.ConversationID,
		"chat " + f.ID + " " + assistant.Chat.ConversationID,
		"chat  " + assistant.Chat.ConversationID,
		"api " + f.ID + " ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	one, err := runs.List(ctx, ws, catalog.RunQuery{ConversationID: assistant.Chat.ConversationID, Limit: 10})
	if err != nil || len(one) != 2 || one[0].ID != flowed.ID || one[1].ID != assistant.ID || one[1].Version != 0 {
		t.Fatalf("one conversation's runs = %+v, %v", one, err)
	}
	if none, err := runs.List(ctx, uuid.NewString(), catalog.RunQuery{ConversationID: assistant.Chat.ConversationID, Limit: 10}); err != nil || len(none) != 0 {
		t.Fatalf("another workspace's = %+v, %v", none, err)
	}
	if none, err := runs.List(ctx, ws, catalog.RunQuery{ConversationID: "nope", Limit: 10}); err != nil || len(none) != 0 {
		t.Fatalf("no conversation id = %+v, %v", none, err)
	}
}
