package app_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// The wakes of chat runs waiting at a delay (docs/chat.md "Operating
// it"), on PostgreSQL through the real stores, with messaging and the
// gateway faked: a wake that fails for now is tried again after its
// backoff without holding back the wakes due after it, and one that can
// never succeed ends its run.

// keyedConversations is messaging as the chat runs see it: a send is
// delivered once per key, and one whose text is in fail fails for now.
type keyedConversations struct {
	mu        sync.Mutex
	fail      map[string]error
	tries     []string
	delivered map[string]string
	handovers []string
}

func (k *keyedConversations) Send(_ context.Context, _, conv, key, _ string, m run.Message) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tries = append(k.tries, key+" "+m.Text)
	if err := k.fail[m.Text]; err != nil {
		return err
	}
	if _, ok := k.delivered[key]; !ok {
		k.delivered[key] = conv + " " + m.Text
	}
	return nil
}

func (k *keyedConversations) Draft(context.Context, string, string, string, string, []run.Message) error {
	return errors.New("no drafts on an auto channel")
}

func (k *keyedConversations) HandOver(_ context.Context, _, conv, reason string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.handovers = append(k.handovers, conv+" "+reason)
	return nil
}

func (k *keyedConversations) ResumeAI(context.Context, string, string) error          { return nil }
func (k *keyedConversations) AddTags(context.Context, string, string, []string) error { return nil }
func (k *keyedConversations) Assign(context.Context, string, string, string) error    { return nil }
func (k *keyedConversations) MarkUnanswered(context.Context, string, string, string) error {
	return nil
}

func (k *keyedConversations) setFail(text string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fail[text] = err
}

// sendTries is how many sends were asked for, delivered or not.
func (k *keyedConversations) sendTries() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.tries)
}

// gatewayWorkspaces answers every workspace with the flows module, or
// its error in fail; reads counts the reads of each.
type gatewayWorkspaces struct {
	mu    sync.Mutex
	fail  map[string]error
	reads map[string]int
}

func (g *gatewayWorkspaces) Workspace(_ context.Context, ws string) (app.Workspace, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads[ws]++
	if err := g.fail[ws]; err != nil {
		return app.Workspace{}, err
	}
	return app.Workspace{Name: "Shop", Plan: app.Plan{Flows: true}, AILimit: 100}, nil
}

func (g *gatewayWorkspaces) setFail(ws string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail[ws] = err
}

func (g *gatewayWorkspaces) readsOf(ws string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reads[ws]
}

// stepClock moves only when told: it holds the time in nanoseconds
// since the epoch.
type stepClock struct{ at atomic.Int64 }

func (c *stepClock) Now() time.Time          { return time.Unix(0, c.at.Load()).UTC() }
func (c *stepClock) advance(d time.Duration) { c.at.Add(int64(d)) }

// delaySeconds is the delay of wakeFlow.
const delaySeconds = 60

// wakeFlow says A, waits delaySeconds, then says B and C.
const wakeFlow = `{"name": "later", "triggers": ["chat"], "nodes": [
	{"id": "start", "type": "start", "next": "a"},
	{"id": "a", "type": "send_message", "message": {"text": "A"}, "next": "d"},
	{"id": "d", "type": "delay", "seconds": 60, "next": "b"},
	{"id": "b", "type": "send_message", "message": {"text": "B"}, "next": "c"},
	{"id": "c", "type": "send_message", "message": {"text": "C"}}]}`

type wakeFixture struct {
	t        *testing.T
	app      *app.App
	chats    *adapters.ChatStore
	runs     *adapters.RunStore
	convs    *keyedConversations
	ws       *gatewayWorkspaces
	clock    *stepClock
	channels map[string]string
}

func newWakeFixture(t *testing.T) *wakeFixture {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	f := &wakeFixture{
		t: t, chats: adapters.NewChatStore(gdb), runs: adapters.NewRunStore(gdb, time.Hour),
		convs:    &keyedConversations{fail: map[string]error{}, delivered: map[string]string{}},
		ws:       &gatewayWorkspaces{fail: map[string]error{}, reads: map[string]int{}},
		clock:    &stepClock{},
		channels: map[string]string{},
	}
	f.clock.at.Store(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano())
	f.app = app.New(app.Deps{
		Flows: adapters.NewFlowStore(gdb), ChatFlows: adapters.NewChatFlowStore(gdb), Runs: f.runs,
		Engine: &run.Engine{Now: f.clock.Now}, Chats: f.chats, Conversations: f.convs, Workspaces: f.ws,
		ChatSessionTTL: time.Hour, ChatGapWait: time.Minute, Clock: f.clock.Now,
	})
	return f
}

// workspace is a new workspace whose channel's chat flow is wakeFlow.
func (f *wakeFixture) workspace() string {
	f.t.Helper()
	ctx := context.Background()
	ws, channel := uuid.NewString(), uuid.NewString()
	fl, err := f.app.PublishFlow(ctx, ws, "", []byte(wakeFlow))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.app.SetChatFlow(ctx, ws, channel, fl.ID); err != nil {
		f.t.Fatal(err)
	}
	f.channels[ws] = channel
	return ws
}

// waiting answers a first message in a new conversation of ws: its run
// says A and waits at the delay.
func (f *wakeFixture) waiting(ws string) catalog.Wakeup {
	f.t.Helper()
	conv := uuid.NewString()
	err := f.app.AnswerTurn(context.Background(), app.Turn{
		ID: uuid.NewString(), WorkspaceID: ws, ConversationID: conv, Seq: 1, Mode: app.ModeAuto,
		Chat:      run.Chat{ConversationID: conv, ChannelID: f.channels[ws], ChannelKind: "telegram", ContactID: "ct", ContactName: "Ann"},
		Message:   run.CustomerMessage{ID: uuid.NewString(), Text: "hi", Type: "text"},
		CreatedAt: f.clock.Now(),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	c := f.conversation(ws, conv)
	if c.Waiting == nil {
		f.t.Fatalf("conversation %s: no run waits", conv)
	}
	return catalog.Wakeup{WorkspaceID: ws, ConversationID: conv, RunID: c.Waiting.ID}
}

// conversation is the conversation as the store keeps it.
func (f *wakeFixture) conversation(ws, conv string) catalog.ChatConversation {
	f.t.Helper()
	var got catalog.ChatConversation
	if err := f.chats.Hold(context.Background(), ws, conv, "", func(c *catalog.ChatConversation) (*catalog.ChatRun, error) {
		got = *c
		return nil, nil
	}); err != nil {
		f.t.Fatal(err)
	}
	return got
}

// run is the stored run of w.
func (f *wakeFixture) run(w catalog.Wakeup) *run.Run {
	f.t.Helper()
	tr, err := f.runs.Trace(context.Background(), w.WorkspaceID, w.RunID)
	if err != nil {
		f.t.Fatal(err)
	}
	return tr.Run
}

func (f *wakeFixture) wakeDue() {
	f.t.Helper()
	if err := f.app.WakeDue(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *wakeFixture) due() []catalog.Wakeup {
	f.t.Helper()
	due, err := f.chats.DueWakes(context.Background(), f.clock.Now(), 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	return due
}

// TestWakesThatFailDoNotHoldBackTheWakesBehindThem: more due wakes than
// one round takes, each failing, for now (the gateway unreachable) or for
// good (the workspace gone), do not stop a wake due after them: the next
// round wakes it.
func TestWakesThatFailDoNotHoldBackTheWakesBehindThem(t *testing.T) {
	t.Parallel()
	f := newWakeFixture(t)
	down, gone, up := f.workspace(), f.workspace(), f.workspace()
	const failing = 101 // more than a round takes
	var stuck []catalog.Wakeup
	for i := range failing {
		ws := down
		if i%2 == 1 {
			ws = gone
		}
		stuck = append(stuck, f.waiting(ws))
	}
	f.clock.advance(time.Second)
	later := f.waiting(up)
	f.ws.setFail(down, errors.New("the gateway is unreachable"))
	f.ws.setFail(gone, fmt.Errorf("%w: %s", app.ErrWorkspaceNotFound, gone))
	f.clock.advance(delaySeconds * time.Second)

	f.wakeDue()
	f.wakeDue()
	if r := f.run(later); r.Status != run.StatusCompleted {
		t.Fatalf("the wake due after %d failing ones, two rounds later: %s", failing, r.Status)
	}
	for _, w := range stuck {
		want := run.StatusWaiting
		if w.WorkspaceID == gone {
			want = run.StatusFailed
		}
		if r := f.run(w); r.Status != want {
			t.Fatalf("run %s of workspace %s: %s, want %s", w.RunID, w.WorkspaceID, r.Status, want)
		}
	}
	// The ones that fail for now come again after their backoff.
	if due := f.due(); len(due) != 0 {
		t.Fatalf("%d wakes due again before their backoff", len(due))
	}
	f.clock.advance(time.Second)
	if due := f.due(); len(due) != (failing+1)/2 {
		t.Fatalf("%d wakes due after their backoff, want %d", len(due), (failing+1)/2)
	}
}

// TestAWakeThatCanNeverSucceedEndsItsRun: the wake of a run whose
// workspace is gone fails the run workspace_not_found and hands the
// conversation over, as a failed chat run does; it is not tried again.
func TestAWakeThatCanNeverSucceedEndsItsRun(t *testing.T) {
	t.Parallel()
	f := newWakeFixture(t)
	ws := f.workspace()
	w := f.waiting(ws)
	f.ws.setFail(ws, fmt.Errorf("%w: %s", app.ErrWorkspaceNotFound, ws))
	f.clock.advance(delaySeconds * time.Second)
	if err := f.app.WakeChatRun(context.Background(), w); !errors.Is(err, app.ErrWorkspaceNotFound) {
		t.Fatalf("WakeChatRun = %v, want the workspace gone", err)
	}
	r := f.run(w)
	if r.Status != run.StatusFailed || r.Error == nil || r.Error.Code != app.CodeWorkspaceNotFound || r.CompletedAt == nil || r.WakeAt != nil {
		t.Fatalf("the run after its wake failed for good: %s, %+v", r.Status, r.Error)
	}
	if c := f.conversation(ws, w.ConversationID); c.Waiting != nil || c.WakeTries != 0 || !c.WakeRetryAt.IsZero() {
		t.Fatalf("the conversation still waits: %+v", c)
	}
	wantHandover := []string{w.ConversationID + " the chat run " + w.RunID + " failed: workspace_not_found: the run's workspace no longer exists"}
	if !reflect.DeepEqual(f.convs.handovers, wantHandover) {
		t.Fatalf("handovers %q, want %q", f.convs.handovers, wantHandover)
	}
	reads := f.ws.readsOf(ws)
	for range 3 {
		f.clock.advance(time.Hour)
		f.wakeDue()
	}
	if got := f.ws.readsOf(ws); got != reads || len(f.convs.handovers) != 1 {
		t.Fatalf("the ended run's wake was tried again: %d reads of its workspace after %d, %d handovers", got, reads, len(f.convs.handovers))
	}
}

// TestAWakeThatFailsForNowIsTriedAgainAfterItsBackoff: a wake whose send
// messaging cannot take now leaves the run waiting, is not tried again
// before its backoff (1 s, then 2 s), and once messaging takes it the run
// goes on: every message reaches the customer once, the one sent before
// the failure too (its retry has the same key).
func TestAWakeThatFailsForNowIsTriedAgainAfterItsBackoff(t *testing.T) {
	t.Parallel()
	f := newWakeFixture(t)
	ws := f.workspace()
	w := f.waiting(ws)
	f.convs.setFail("C", errors.New("messaging is unreachable"))
	f.clock.advance(delaySeconds * time.Second)

	tries := f.convs.sendTries()
	for n, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		if err := f.app.WakeChatRun(context.Background(), w); err == nil || !strings.Contains(err.Error(), "messaging is unreachable") {
			t.Fatalf("try %d: WakeChatRun = %v, want messaging's failure", n+1, err)
		}
		if r := f.run(w); r.Status != run.StatusWaiting {
			t.Fatalf("try %d: the run %s after a wake that failed for now", n+1, r.Status)
		}
		c := f.conversation(ws, w.ConversationID)
		if c.WakeTries != n+1 || !c.WakeRetryAt.Equal(f.clock.Now().Add(backoff)) {
			t.Fatalf("try %d: %d tries, next at %v, want %d at %v", n+1, c.WakeTries, c.WakeRetryAt, n+1, f.clock.Now().Add(backoff))
		}
		tries = f.convs.sendTries()
		f.clock.advance(backoff - time.Millisecond)
		f.wakeDue()
		if len(f.due()) != 0 || f.convs.sendTries() != tries {
			t.Fatalf("try %d: tried again before its backoff", n+1)
		}
		f.clock.advance(time.Millisecond)
		if due := f.due(); !reflect.DeepEqual(due, []catalog.Wakeup{w}) {
			t.Fatalf("try %d: due after its backoff %+v", n+1, due)
		}
	}

	f.convs.setFail("C", nil)
	f.wakeDue()
	if r := f.run(w); r.Status != run.StatusCompleted {
		t.Fatalf("the run after messaging came back: %s %+v", r.Status, r.Error)
	}
	if c := f.conversation(ws, w.ConversationID); c.Waiting != nil || c.WakeTries != 0 || !c.WakeRetryAt.IsZero() {
		t.Fatalf("the conversation after the wake: %+v", c)
	}
	var texts []string
	for _, d := range f.convs.delivered {
		texts = append(texts, strings.TrimPrefix(d, w.ConversationID+" "))
	}
	if len(texts) != 3 || strings.Count(strings.Join(texts, ""), "B") != 1 || strings.Count(strings.Join(texts, ""), "C") != 1 {
		t.Fatalf("delivered %q, want A, B and C once each", f.convs.delivered)
	}
	f.wakeDue()
	if f.convs.sendTries() != tries+2 {
		t.Fatalf("%d sends asked for after the wake, want %d", f.convs.sendTries(), tries+2)
	}
}
