package adapters

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// ChatStore's contract (catalog.ChatStore) on PostgreSQL.

// held is what Hold gives fn for the conversation, changing nothing.
func held(t *testing.T, chats *ChatStore, ws, conv string) catalog.ChatConversation {
	t.Helper()
	var got catalog.ChatConversation
	if err := chats.Hold(context.Background(), ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		got = *c
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestHoldCreatesAndKeepsTheConversation: the first Hold creates the
// conversation (nothing answered, auto, not moved); what fn changes is
// stored, with when it moved.
func TestHoldCreatesAndKeepsTheConversation(t *testing.T) {
	t.Parallel()
	ws, _, runs := publishedFlow(t, time.Hour)
	chats := NewChatStore(runs.db)
	conv := uuid.NewString()
	if c := held(t, chats, ws, conv); c.WorkspaceID != ws || c.ConversationID != conv || c.AnsweredSeq != 0 || c.Mode != "auto" || c.Waiting != nil || !c.MovedAt.IsZero() {
		t.Fatalf("a new conversation %+v", c)
	}
	before := time.Now()
	if err := chats.Hold(context.Background(), ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		c.AnsweredSeq, c.Mode = 3, "suggest"
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Answered: the conversation moved then.
	if c := held(t, chats, ws, conv); c.AnsweredSeq != 3 || c.Mode != "suggest" || c.MovedAt.Before(before.Truncate(time.Microsecond)) || c.MovedAt.After(time.Now()) {
		t.Fatalf("after a change %+v (since %s)", c, before)
	}

	// Another workspace's conversation of that id, or no id, is refused
	// before fn.
	for _, ids := range [][2]string{{uuid.NewString(), conv}, {ws, "nope"}, {"nope", conv}} {
		err := chats.Hold(context.Background(), ids[0], ids[1], "", func(*catalog.ChatConversation) (*catalog.ChatRun, error) {
			t.Errorf("fn ran for %q", ids)
			return nil, nil
		})
		if err == nil || errors.Is(err, catalog.ErrConversationBusy) {
			t.Fatalf("Hold(%q) = %v", ids, err)
		}
	}
}

// TestHoldBusy: while one instance holds the conversation, another's Hold
// is told at once that it is busy; once released, it is free.
func TestHoldBusy(t *testing.T) {
	t.Parallel()
	ws, _, runs := publishedFlow(t, time.Hour)
	chats := NewChatStore(runs.db)
	for _, first := range []bool{true, false} {
		conv := uuid.NewString()
		if !first {
			held(t, chats, ws, conv) // the row exists before
		}
		var second error
		err := chats.Hold(context.Background(), ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
			done := make(chan error, 1)
			go func() {
				done <- chats.Hold(context.Background(), ws, conv, "", func(*catalog.ChatConversation) (*catalog.ChatRun, error) {
					t.Error("a second holder ran")
					return nil, nil
				})
			}()
			second = <-done
			c.AnsweredSeq = 1
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(second, catalog.ErrConversationBusy) {
			t.Fatalf("the second Hold (row existed: %v) = %v", !first, second)
		}
		if c := held(t, chats, ws, conv); c.AnsweredSeq != 1 {
			t.Fatalf("after the first holder %+v", c)
		}
	}
}

// TestHoldStoresNothingOnAnError: fn's error is Hold's, and neither the
// conversation nor the run changes.
func TestHoldStoresNothingOnAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, _, runs := publishedFlow(t, time.Hour)
	chats := NewChatStore(runs.db)
	conv := uuid.NewString()
	r := chatRun(ws, "")
	r.Chat.ConversationID = conv
	failed := errors.New("the turn failed")
	err := chats.Hold(ctx, ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		c.AnsweredSeq, c.Waiting, c.WaitingSince = 1, r, time.Now()
		return &catalog.ChatRun{Run: r, New: true}, failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("Hold = %v", err)
	}
	if c := held(t, chats, ws, conv); c.AnsweredSeq != 0 || c.Waiting != nil {
		t.Fatalf("after a failed fn %+v", c)
	}
	if _, err := runs.Trace(ctx, ws, r.ID); !errors.Is(err, catalog.ErrRunNotFound) {
		t.Fatalf("the run of a failed fn: %v", err)
	}

	// A caller gone meanwhile stores nothing either.
	cut, cancel := context.WithCancel(ctx)
	err = chats.Hold(cut, ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		cancel()
		c.AnsweredSeq = 1
		return &catalog.ChatRun{Run: r, New: true}, nil
	})
	if err == nil {
		t.Fatal("Hold of a caller gone succeeded")
	}
	// Its connection is dropped, and PostgreSQL frees the row once it
	// sees that.
	var c catalog.ChatConversation
	wait.For(t, 10*time.Second, "the conversation free again", func() error {
		return chats.Hold(ctx, ws, conv, "", func(got *catalog.ChatConversation) (*catalog.ChatRun, error) {
			c = *got
			return nil, nil
		})
	})
	if c.AnsweredSeq != 0 {
		t.Fatalf("after a caller gone %+v", c)
	}
}

// TestHoldKeepsTheWaitingRun: a run left waiting is stored with the
// conversation and given back, whole, to the next holder; a continue
// updates it, and the conversation waits no more.
func TestHoldKeepsTheWaitingRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, f, runs := publishedFlow(t, time.Hour)
	chats := NewChatStore(runs.db)
	conv := uuid.NewString()
	r := chatRun(ws, f.ID)
	r.Chat.ConversationID = conv
	since := time.Now().UTC().Truncate(time.Microsecond)
	if err := chats.Hold(ctx, ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		c.AnsweredSeq, c.Waiting, c.WaitingSince = 1, r, since
		return &catalog.ChatRun{Run: r, New: true, NodeRuns: []run.NodeRun{{NodeID: "start", NodeType: "start", StartedAt: since}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	c := held(t, chats, ws, conv)
	w := c.Waiting
	if w == nil || w.ID != r.ID || w.FlowID != f.ID || w.Status != run.StatusWaiting || !w.WakeAt.Equal(*r.WakeAt) ||
		!reflect.DeepEqual(w.Vars, r.Vars) || w.Chat == nil || w.Chat.ConversationID != conv || !c.WaitingSince.Equal(since) {
		t.Fatalf("the waiting run given back %+v (since %v)", w, c.WaitingSince)
	}

	if err := chats.Hold(ctx, ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		w := c.Waiting
		done := time.Now().UTC()
		w.Status, w.WakeAt, w.CompletedAt, w.NodesExecuted = run.StatusCompleted, nil, &done, 2
		c.AnsweredSeq, c.Waiting = 2, nil
		return &catalog.ChatRun{Run: w, NodeRuns: []run.NodeRun{{NodeID: "end", NodeType: "end", StartedAt: done}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if c := held(t, chats, ws, conv); c.Waiting != nil || c.AnsweredSeq != 2 || !c.WaitingSince.IsZero() {
		t.Fatalf("after the continue %+v", c)
	}
	tr, err := runs.Trace(ctx, ws, r.ID)
	if err != nil || tr.Run.Status != run.StatusCompleted || len(tr.NodeRuns) != 2 {
		t.Fatalf("the continued run %+v, %v", tr, err)
	}
}

// waitingRun stores a new chat run of ws, due at wake (nil: waiting at a
// question), as the run waiting in a new conversation since now, which
// change, when not nil, changes further.
func waitingRun(t *testing.T, chats *ChatStore, ws string, wake *time.Time, change func(c *catalog.ChatConversation)) *run.Run {
	t.Helper()
	conv := uuid.NewString()
	r := chatRun(ws, "")
	r.Chat.ConversationID, r.WakeAt = conv, wake
	if err := chats.Hold(context.Background(), ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		c.Waiting, c.WaitingSince = r, time.Now().UTC().Truncate(time.Microsecond)
		if change != nil {
			change(c)
		}
		return &catalog.ChatRun{Run: r, New: true}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDueWakes: only runs waiting at a delay in their conversation whose
// time has come, earliest first, at most limit.
func TestDueWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, _, runs := publishedFlow(t, time.Hour)
	chats := NewChatStore(runs.db)
	now := time.Now().UTC().Truncate(time.Microsecond)
	wait := func(wake *time.Time, stays bool) *run.Run {
		t.Helper()
		return waitingRun(t, chats, ws, wake, func(c *catalog.ChatConversation) {
			if !stays {
				c.Waiting = nil
			}
		})
	}
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	later := wait(at(-time.Second), true)
	earlier := wait(at(-time.Minute), true)
	onTime := wait(at(0), true)
	wait(at(time.Minute), true) // not due
	wait(nil, true)             // at a question
	wait(at(-time.Hour), false) // no longer the conversation's
	done := wait(at(-2*time.Minute), true)
	if err := chats.Hold(ctx, ws, done.Chat.ConversationID, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		c.Waiting.Status, c.Waiting.WakeAt = run.StatusCompleted, nil
		r := c.Waiting
		c.Waiting = nil
		return &catalog.ChatRun{Run: r}, nil
	}); err != nil {
		t.Fatal(err)
	}

	due, err := chats.DueWakes(ctx, now, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.Wakeup{}
	for _, r := range []*run.Run{earlier, later, onTime} {
		want = append(want, catalog.Wakeup{WorkspaceID: ws, ConversationID: r.Chat.ConversationID, RunID: r.ID})
	}
	if !reflect.DeepEqual(due, want) {
		t.Fatalf("due\n got %+v\nwant %+v", due, want)
	}
	if due, err := chats.DueWakes(ctx, now, 2); err != nil || !reflect.DeepEqual(due, want[:2]) {
		t.Fatalf("due, limit 2: %+v, %v", due, err)
	}
}

// TestDueWakesAfterTheirRetry: a wake that failed is due again at its
// retry, not before, and takes its place among the due wakes by it; the
// tries and the retry are kept with the conversation until it changes.
func TestDueWakesAfterTheirRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, _, runs := publishedFlow(t, time.Hour)
	chats := NewChatStore(runs.db)
	now := time.Now().UTC().Truncate(time.Microsecond)
	wait := func(wake time.Duration, tries int, retry time.Duration) catalog.Wakeup {
		t.Helper()
		at := now.Add(wake)
		r := waitingRun(t, chats, ws, &at, func(c *catalog.ChatConversation) {
			if tries > 0 {
				c.WakeTries, c.WakeRetryAt = tries, now.Add(retry)
			}
		})
		return catalog.Wakeup{WorkspaceID: ws, ConversationID: r.Chat.ConversationID, RunID: r.ID}
	}
	retried := wait(-2*time.Minute, 1, -10*time.Second)
	due := wait(-time.Minute, 0, 0)
	notYet := wait(-3*time.Minute, 3, time.Minute)
	got, err := chats.DueWakes(ctx, now, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []catalog.Wakeup{due, retried}; !reflect.DeepEqual(got, want) {
		t.Fatalf("due\n got %+v\nwant %+v", got, want)
	}
	if c := held(t, chats, ws, notYet.ConversationID); c.WakeTries != 3 || !c.WakeRetryAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("the conversation keeps %d tries, retry at %v", c.WakeTries, c.WakeRetryAt)
	}
	if got, err := chats.DueWakes(ctx, now.Add(time.Minute), 10); err != nil || len(got) != 3 || got[2] != notYet {
		t.Fatalf("due at the last retry: %+v, %v", got, err)
	}
}
