package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// AnswerTurn and WakeChatRun (docs/chat.md "Order and exactly one
// answer") over in-memory ports and the real engine, with a fake LLM,
// guard, knowledge base and quota. The adapters' tests hold ChatStore's
// contract on PostgreSQL (chat_postgres_test.go), and the e2e tests the
// whole path.

// memChats is a catalog.ChatStore in memory that keeps Hold's contract:
// one holder at a time (ErrConversationBusy for another), fn given a
// copy with the channel's chat flow (from chatFlows), and nothing of it
// stored when fn fails.
type memChats struct {
	mu    sync.Mutex
	convs map[string]*memConv
	// runs are the stored runs as JSON, so that a holder's changes reach
	// them only when it succeeds.
	runs     map[string][]byte
	nodeRuns map[string][]run.NodeRun
	held     map[string]bool
	// during, when set, runs inside Hold while the conversation is held.
	during func()
	// chatFlows answers the chat flow of the channel Hold is given.
	chatFlows catalog.ChatFlowStore
	// now stamps a conversation's change (its MovedAt).
	now func() time.Time
}

type memConv struct {
	workspaceID  string
	answered     int64
	mode         string
	waitingRunID string
	waitingSince time.Time
	movedAt      time.Time
	wakeTries    int
	wakeRetryAt  time.Time
}

func newMemChats() *memChats {
	return &memChats{convs: map[string]*memConv{}, runs: map[string][]byte{}, nodeRuns: map[string][]run.NodeRun{}, held: map[string]bool{}, now: time.Now}
}

func (m *memChats) Hold(ctx context.Context, ws, conv, channel string, fn func(c *catalog.ChatConversation) (*catalog.ChatRun, error)) error {
	m.mu.Lock()
	if m.held[conv] {
		m.mu.Unlock()
		return catalog.ErrConversationBusy
	}
	m.held[conv] = true
	row, ok := m.convs[conv]
	if !ok {
		row = &memConv{workspaceID: ws, mode: ModeAuto}
	}
	c := &catalog.ChatConversation{WorkspaceID: ws, ConversationID: conv, AnsweredSeq: row.answered, Mode: row.mode, MovedAt: row.movedAt,
		WakeTries: row.wakeTries, WakeRetryAt: row.wakeRetryAt}
	if row.waitingRunID != "" {
		c.Waiting, c.WaitingSince = m.load(row.waitingRunID), row.waitingSince
	}
	if channel != "" {
		var err error
		if c.ChatFlowID, c.ChatFlowVersion, err = m.chatFlows.ChatFlow(ctx, ws, channel); err != nil {
			delete(m.held, conv)
			m.mu.Unlock()
			return err
		}
	}
	during := m.during
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.held, conv)
		m.mu.Unlock()
	}()
	if during != nil {
		during()
	}

	changed, err := fn(c)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if changed != nil {
		if _, exists := m.runs[changed.Run.ID]; exists == changed.New {
			return fmt.Errorf("run %s: stored %v, new %v", changed.Run.ID, exists, changed.New)
		}
		m.store(changed.Run)
		m.nodeRuns[changed.Run.ID] = append(m.nodeRuns[changed.Run.ID], changed.NodeRuns...)
	}
	next := &memConv{workspaceID: ws, answered: c.AnsweredSeq, mode: c.Mode, movedAt: m.now(), wakeTries: c.WakeTries, wakeRetryAt: c.WakeRetryAt}
	if c.Waiting != nil {
		next.waitingRunID, next.waitingSince = c.Waiting.ID, c.WaitingSince
	}
	m.convs[conv] = next
	return nil
}

func (m *memChats) DueWakes(_ context.Context, now time.Time, limit int) ([]catalog.Wakeup, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []catalog.Wakeup
	for id, c := range m.convs {
		if c.waitingRunID == "" || c.wakeRetryAt.After(now) {
			continue
		}
		if at, ok := m.load(c.waitingRunID).Wake(); ok && !at.After(now) {
			due = append(due, catalog.Wakeup{WorkspaceID: c.workspaceID, ConversationID: id, RunID: c.waitingRunID})
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].RunID < due[j].RunID })
	if len(due) > limit {
		due = due[:limit]
	}
	return due, nil
}

func (m *memChats) store(r *run.Run) {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	m.runs[r.ID] = b
}

func (m *memChats) load(id string) *run.Run {
	var r run.Run
	if err := json.Unmarshal(m.runs[id], &r); err != nil {
		panic(err)
	}
	return &r
}

// conv is what the store keeps of the conversation (a zero one when
// nothing).
func (m *memChats) conv(id string) memConv {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.convs[id]; ok {
		return *c
	}
	return memConv{}
}

// run is the stored run and its node runs; nil when none.
func (m *memChats) run(id string) (*run.Run, []run.NodeRun) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.runs[id]; !ok {
		return nil, nil
	}
	return m.load(id), m.nodeRuns[id]
}

func (m *memChats) runCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.runs)
}

// recordingConversations records every call to messaging in a line; fail
// answers a call (by its verb) with an error.
type recordingConversations struct {
	mu     sync.Mutex
	calls  []string
	drafts [][]run.Message
	fail   map[string]error
}

func (r *recordingConversations) record(verb, line string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fail[verb]; err != nil {
		return err
	}
	r.calls = append(r.calls, verb+" "+line)
	return nil
}

func (r *recordingConversations) Send(_ context.Context, ws, conv, key, runID string, m run.Message) error {
	return r.record("send", fmt.Sprintf("%s/%s key=%s run=%s %s", ws, conv, key, runID, m.Text))
}

func (r *recordingConversations) Draft(_ context.Context, ws, conv, key, runID string, ms []run.Message) error {
	texts := []string{}
	for _, m := range ms {
		texts = append(texts, m.Text)
	}
	if err := r.record("draft", fmt.Sprintf("%s/%s key=%s run=%s %s", ws, conv, key, runID, strings.Join(texts, "|"))); err != nil {
		return err
	}
	r.mu.Lock()
	r.drafts = append(r.drafts, ms)
	r.mu.Unlock()
	return nil
}

func (r *recordingConversations) HandOver(_ context.Context, ws, conv, reason string) error {
	return r.record("handover", ws+"/"+conv+" "+reason)
}

func (r *recordingConversations) ResumeAI(_ context.Context, ws, conv string) error {
	return r.record("resume_ai", ws+"/"+conv)
}

func (r *recordingConversations) AddTags(_ context.Context, ws, conv string, tags []string) error {
	return r.record("tag", ws+"/"+conv+" "+strings.Join(tags, ","))
}

func (r *recordingConversations) Assign(_ context.Context, ws, conv, operator string) error {
	return r.record("assign", ws+"/"+conv+" "+operator)
}

func (r *recordingConversations) MarkUnanswered(_ context.Context, ws, conv, reason string) error {
	return r.record("unanswered", ws+"/"+conv+" "+reason)
}

func (r *recordingConversations) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *recordingConversations) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.drafts = nil, nil
}

// fixedWorkspaces answers one workspace for every id.
type fixedWorkspaces struct {
	mu sync.Mutex
	ws Workspace
}

func (f *fixedWorkspaces) Workspace(context.Context, string) (Workspace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ws, nil
}

// chatCatalog is the flows a chat run may be given: FlowStore's Get and
// Version, and ChatFlowStore's ChatFlow as the assignment stands (the
// app decides itself whether the flow still answers).
type chatCatalog struct {
	catalog.FlowStore
	catalog.ChatFlowStore
	flows    map[string]*catalog.Flow
	versions map[string]*catalog.Version
	assigned map[string]string
}

func (c *chatCatalog) Get(_ context.Context, ws, id string) (*catalog.Flow, error) {
	if f, ok := c.flows[id]; ok && f.WorkspaceID == ws {
		cp := *f
		return &cp, nil
	}
	return nil, catalog.ErrFlowNotFound
}

func (c *chatCatalog) Version(_ context.Context, id string, version int) (*catalog.Version, error) {
	if v, ok := c.versions[id]; ok && v.Version == version {
		return v, nil
	}
	return nil, catalog.ErrFlowNotFound
}

// ChatFlow keeps the store's contract: the assigned flow only while it is
// active with the chat trigger.
func (c *chatCatalog) ChatFlow(_ context.Context, _, channelID string) (string, int, error) {
	f, ok := c.flows[c.assigned[channelID]]
	if !ok || f.Status != catalog.StatusActive || !hasTrigger(f.Triggers, catalog.TriggerChat) {
		return "", 0, nil
	}
	return f.ID, f.PublishedVersion, nil
}

type readyGuard struct{}

// downGuard's readiness is err.
type downGuard struct{ err error }

func (g downGuard) Ready(context.Context) error { return g.err }

func (readyGuard) Ready(context.Context) error { return nil }

// scriptedLLM answers each request with the next of its replies (the last
// one again once they run out), recording the requests; err fails them.
type scriptedLLM struct {
	mu      sync.Mutex
	replies []string
	err     error
	reqs    []run.ChatRequest
}

func (l *scriptedLLM) Chat(_ context.Context, req run.ChatRequest) (run.ChatReply, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
	if l.err != nil {
		return run.ChatReply{}, l.err
	}
	text := l.replies[min(len(l.reqs), len(l.replies))-1]
	return run.ChatReply{Text: text, Model: "m", Tokens: 5}, nil
}

func (l *scriptedLLM) requests() []run.ChatRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]run.ChatRequest(nil), l.reqs...)
}

type passingGuard struct{}

func (passingGuard) Check(context.Context, string) (bool, error) { return false, nil }

type oneCardKB struct{}

func (oneCardKB) Search(context.Context, string, string, int) ([]run.Passage, error) {
	return []run.Passage{{Title: "Shipping", Text: "We ship in 2 days."}}, nil
}

// unitQuota holds limit units.
type unitQuota struct {
	mu          sync.Mutex
	used, limit int
	// down makes the count unreachable.
	down bool
}

func (q *unitQuota) Reserve(context.Context, string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.down {
		return fmt.Errorf("gateway: %w", run.ErrQuotaUnavailable)
	}
	if q.used >= q.limit {
		return run.ErrQuotaExceeded
	}
	q.used++
	return nil
}

func (q *unitQuota) Refund(context.Context, string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used--
	return nil
}

// testClock moves only when told.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const (
	chatWS      = "ws"
	chatConv    = "conv1"
	chatChannel = "ch1"
	sessionTTL  = time.Hour
	gapWait     = time.Minute
)

type chatFixture struct {
	app     *App
	chats   *memChats
	convs   *recordingConversations
	ws      *fixedWorkspaces
	catalog *chatCatalog
	llm     *scriptedLLM
	quota   *unitQuota
	clock   *testClock
	engine  *run.Engine
}

// newChatFixture answers channel chatChannel with the assistant (no flow
// assigned), every module on, AI units left.
func newChatFixture(t *testing.T) *chatFixture {
	t.Helper()
	f := &chatFixture{
		chats: newMemChats(),
		convs: &recordingConversations{fail: map[string]error{}},
		ws:    &fixedWorkspaces{ws: Workspace{Name: "Demo Shop", Plan: Plan{Flows: true, Modules: run.Modules{FlowAI: true}}, AIUsed: 0, AILimit: 100}},
		catalog: &chatCatalog{flows: map[string]*catalog.Flow{}, versions: map[string]*catalog.Version{},
			assigned: map[string]string{}},
		llm:   &scriptedLLM{replies: []string{"We ship in 2 days."}},
		quota: &unitQuota{limit: 100},
		clock: &testClock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)},
	}
	f.chats.chatFlows, f.chats.now = f.catalog, f.clock.Now
	f.engine = &run.Engine{LLM: f.llm, Guard: passingGuard{}, Knowledge: oneCardKB{}, Quota: f.quota, Now: f.clock.Now}
	f.app = New(Deps{
		Flows: f.catalog, ChatFlows: f.catalog, Engine: f.engine, Guard: readyGuard{},
		Chats: f.chats, Conversations: f.convs, Workspaces: f.ws,
		ChatSessionTTL: sessionTTL, ChatGapWait: gapWait, Clock: f.clock.Now,
	})
	return f
}

// chatFlow publishes doc (its nodes after start) as flow id, active with
// the given triggers, and assigns it to the channel.
func (f *chatFixture) chatFlow(t *testing.T, id string, triggers []string, first string, nodes ...string) {
	t.Helper()
	all := append([]string{`{"id": "start", "type": "start", "next": "` + first + `"}`}, nodes...)
	doc := `{"name": "t", "triggers": ["chat"], "nodes": [` + strings.Join(all, ",") + `]}`
	def, err := flow.Parse([]byte(doc), flow.ParseOptions{})
	if err != nil {
		t.Fatalf("parse %s: %v", doc, err)
	}
	f.catalog.flows[id] = &catalog.Flow{ID: id, WorkspaceID: chatWS, Status: catalog.StatusActive, Triggers: triggers, PublishedVersion: 1}
	f.catalog.versions[id] = &catalog.Version{FlowID: id, Version: 1, Definition: def}
	f.catalog.assigned[chatChannel] = id
}

// turn is the conversation's turn seq, a typed message, stored now.
func (f *chatFixture) turn(seq int64, text string) Turn {
	return Turn{
		ID: fmt.Sprintf("turn-%d", seq), WorkspaceID: chatWS, ConversationID: chatConv, Seq: seq, Mode: ModeAuto,
		Chat:      run.Chat{ConversationID: chatConv, ChannelID: chatChannel, ChannelKind: "telegram", ContactID: "ct1", ContactName: "Ada"},
		Message:   run.CustomerMessage{ID: fmt.Sprintf("m%d", seq), Text: text, Type: "text"},
		CreatedAt: f.clock.Now(),
	}
}

func (f *chatFixture) answer(t *testing.T, tr Turn) {
	t.Helper()
	if err := f.app.AnswerTurn(context.Background(), tr); err != nil {
		t.Fatalf("AnswerTurn(%s): %v", tr.ID, err)
	}
}

func (f *chatFixture) wantCalls(t *testing.T, want ...string) {
	t.Helper()
	got := f.convs.recorded()
	if len(want) == 0 && len(got) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("calls to messaging\n got %q\nwant %q", got, want)
	}
}

// runOf is the id of the run turn tr starts.
func runOf(tr Turn) string {
	return uuid.NewSHA1(chatRunIDs, []byte(tr.ID)).String()
}

func wantRun(t *testing.T, f *chatFixture, id string, status run.Status) (*run.Run, []run.NodeRun) {
	t.Helper()
	r, nrs := f.chats.run(id)
	if r == nil {
		t.Fatalf("run %s not stored", id)
	}
	if r.Status != status {
		t.Fatalf("run %s: %s (error %+v), want %s", id, r.Status, r.Error, status)
	}
	return r, nrs
}

func TestAnswerTurnByTheAssistant(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	tr := f.turn(1, "When do you ship?")
	f.answer(t, tr)
	id := runOf(tr)
	f.wantCalls(t, "send ws/conv1 key=turn-1/0 run="+id+" We ship in 2 days.")
	r, _ := wantRun(t, f, id, run.StatusCompleted)
	if r.FlowID != "" || r.Version != 0 || r.Chat == nil || r.Chat.ConversationID != chatConv {
		t.Fatalf("assistant run %+v", r)
	}
	reqs := f.llm.requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[0].Content, "Demo Shop") || !strings.Contains(reqs[0].Messages[0].Content, "We ship in 2 days.") {
		t.Fatalf("LLM requests %+v", reqs)
	}
	if c := f.chats.conv(chatConv); c.answered != 1 || c.mode != ModeAuto || c.waitingRunID != "" {
		t.Fatalf("conversation %+v", c)
	}
	// The assistant answers whatever the plan's modules.
	f.ws.ws.Plan = Plan{}
	f.convs.reset()
	f.answer(t, f.turn(2, "And returns?"))
	f.wantCalls(t, "send ws/conv1 key=turn-2/0 run="+runOf(f.turn(2, ""))+" We ship in 2 days.")
}

// TestAnswerTurnAnsweredBefore: a turn at or below the answered one is a
// redelivery: nil, and nothing is done.
func TestAnswerTurnAnsweredBefore(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.answer(t, f.turn(1, "hi"))
	f.answer(t, f.turn(2, "hi again"))
	f.convs.reset()
	runs, asked := f.chats.runCount(), len(f.llm.requests())
	for _, seq := range []int64{1, 2} {
		f.answer(t, f.turn(seq, "hi"))
	}
	f.wantCalls(t)
	if f.chats.runCount() != runs || len(f.llm.requests()) != asked || f.chats.conv(chatConv).answered != 2 {
		t.Fatalf("a redelivery did something: %d runs, %d LLM calls, %+v", f.chats.runCount(), len(f.llm.requests()), f.chats.conv(chatConv))
	}
}

// TestAnswerTurnEarly: a turn whose predecessor is not answered waits for
// it (ErrTurnEarly, nothing stored) until it is older than ChatGapWait;
// then it is answered without it.
func TestAnswerTurnEarly(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	tr := f.turn(2, "second")
	if err := f.app.AnswerTurn(context.Background(), tr); !errors.Is(err, ErrTurnEarly) {
		t.Fatalf("early turn: %v", err)
	}
	f.wantCalls(t)
	if f.chats.runCount() != 0 || f.chats.conv(chatConv).answered != 0 {
		t.Fatalf("an early turn stored something: %+v", f.chats.conv(chatConv))
	}
	f.clock.Advance(gapWait - time.Second)
	if err := f.app.AnswerTurn(context.Background(), tr); !errors.Is(err, ErrTurnEarly) {
		t.Fatalf("early turn before the gap wait: %v", err)
	}
	f.clock.Advance(time.Second)
	f.answer(t, tr)
	f.wantCalls(t, "send ws/conv1 key=turn-2/0 run="+runOf(tr)+" We ship in 2 days.")
	if f.chats.conv(chatConv).answered != 2 {
		t.Fatalf("conversation %+v", f.chats.conv(chatConv))
	}
	// The lost turn, should it come after all, is answered before.
	f.convs.reset()
	f.answer(t, f.turn(1, "first"))
	f.wantCalls(t)
}

// TestAnswerTurnWhileADelayWaits: a turn that comes while the run waits
// at a delay is *WaitingAtDelay, and nothing is done; the wake goes on
// with the run, and the turn is then answered.
func TestAnswerTurnWhileADelayWaits(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.chatFlow(t, "f1", []string{"chat"}, "a",
		`{"id": "a", "type": "send_message", "message": {"text": "A"}, "next": "d"}`,
		`{"id": "d", "type": "delay", "seconds": 30, "next": "b"}`,
		`{"id": "b", "type": "send_message", "message": {"text": "B to {{vars.contact.name}}"}}`)
	first := f.turn(1, "hi")
	f.answer(t, first)
	id := runOf(first)
	f.wantCalls(t, "send ws/conv1 key=turn-1/0 run="+id+" A")
	r, _ := wantRun(t, f, id, run.StatusWaiting)
	wake := f.clock.Now().Add(30 * time.Second)
	if at, ok := r.Wake(); !ok || !at.Equal(wake) {
		t.Fatalf("wake %v %v", at, ok)
	}
	if c := f.chats.conv(chatConv); c.waitingRunID != id {
		t.Fatalf("conversation %+v", c)
	}

	f.convs.reset()
	second := f.turn(2, "still there?")
	err := f.app.AnswerTurn(context.Background(), second)
	var waiting *WaitingAtDelay
	if !errors.As(err, &waiting) || !waiting.Until.Equal(wake) {
		t.Fatalf("a turn during the delay: %v", err)
	}
	f.wantCalls(t)
	if c := f.chats.conv(chatConv); c.answered != 1 {
		t.Fatalf("conversation %+v", c)
	}

	// Not due yet, or another run: nothing.
	w := catalog.Wakeup{WorkspaceID: chatWS, ConversationID: chatConv, RunID: id}
	if due, _ := f.chats.DueWakes(context.Background(), f.clock.Now(), 10); len(due) != 0 {
		t.Fatalf("due before its time: %+v", due)
	}
	if err := f.app.WakeChatRun(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(30 * time.Second)
	if err := f.app.WakeChatRun(context.Background(), catalog.Wakeup{WorkspaceID: chatWS, ConversationID: chatConv, RunID: "other"}); err != nil {
		t.Fatal(err)
	}
	f.wantCalls(t)
	wantRun(t, f, id, run.StatusWaiting)

	// Due: it goes on, keyed after the run and the wake time.
	if due, _ := f.chats.DueWakes(context.Background(), f.clock.Now(), 10); !reflect.DeepEqual(due, []catalog.Wakeup{w}) {
		t.Fatalf("due %+v", due)
	}
	if err := f.app.WakeChatRun(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	f.wantCalls(t, fmt.Sprintf("send ws/conv1 key=%s/wake/%d/0 run=%s B to Ada", id, wake.UnixNano(), id))
	wantRun(t, f, id, run.StatusCompleted)
	if c := f.chats.conv(chatConv); c.waitingRunID != "" || c.answered != 1 {
		t.Fatalf("conversation after the wake %+v", c)
	}
	// A second wake does nothing.
	f.convs.reset()
	if err := f.app.WakeChatRun(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	f.wantCalls(t)

	// The turn that waited starts a new run now.
	f.answer(t, second)
	f.wantCalls(t, "send ws/conv1 key=turn-2/0 run="+runOf(second)+" A")
}

// TestAnswerTurnsBehindADelayKeepTheirOrder: two messages that came while
// the run waited at a delay longer than ChatGapWait wait for it, and once
// the run has gone on they are answered in order, whichever comes back
// first: the later one is early until its predecessor is answered (or the
// conversation has not moved for ChatGapWait), not answered without it
// (which would drop its predecessor as answered before).
func TestAnswerTurnsBehindADelayKeepTheirOrder(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.chatFlow(t, "f1", []string{"chat"}, "a",
		`{"id": "a", "type": "send_message", "message": {"text": "to {{vars.message.text}}"}, "next": "d"}`,
		`{"id": "d", "type": "delay", "seconds": 300}`)
	first := f.turn(1, "first")
	f.answer(t, first)
	id := runOf(first)
	f.clock.Advance(10 * time.Second)
	second, third := f.turn(2, "second"), f.turn(3, "third")
	var waiting *WaitingAtDelay
	if err := f.app.AnswerTurn(context.Background(), second); !errors.As(err, &waiting) {
		t.Fatalf("the second turn during the delay: %v", err)
	}
	f.clock.Advance(gapWait)
	if err := f.app.AnswerTurn(context.Background(), third); !errors.As(err, &waiting) {
		t.Fatalf("the third turn during the delay: %v", err)
	}

	f.clock.Advance(300 * time.Second)
	if err := f.app.WakeChatRun(context.Background(), catalog.Wakeup{WorkspaceID: chatWS, ConversationID: chatConv, RunID: id}); err != nil {
		t.Fatal(err)
	}
	wantRun(t, f, id, run.StatusCompleted)
	f.convs.reset()

	// The third comes back first: its predecessor is on its way.
	if err := f.app.AnswerTurn(context.Background(), third); !errors.Is(err, ErrTurnEarly) {
		t.Fatalf("the third turn before the second, right after the wake: %v", err)
	}
	f.answer(t, second)
	f.wantCalls(t, "send ws/conv1 key=turn-2/0 run="+runOf(second)+" to second")
	if c := f.chats.conv(chatConv); c.answered != 2 {
		t.Fatalf("conversation %+v", c)
	}
	// The second's run waits at the delay in turn: the third waits for it.
	if err := f.app.AnswerTurn(context.Background(), third); !errors.As(err, &waiting) {
		t.Fatalf("the third turn behind the second's delay: %v", err)
	}
}

// TestAnswerTurnAtTheAILimit: with one AI reply left the turn is answered;
// once ai_used has reached ai_limit nothing runs: the message is marked
// unanswered, and the turn is answered.
func TestAnswerTurnAtTheAILimit(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.ws.ws.AIUsed, f.ws.ws.AILimit = 4, 5
	first := f.turn(1, "hi")
	f.answer(t, first)
	f.wantCalls(t, "send ws/conv1 key=turn-1/0 run="+runOf(first)+" We ship in 2 days.")
	f.ws.ws.AIUsed = 5
	f.convs.reset()
	f.answer(t, f.turn(2, "hi"))
	f.wantCalls(t, "unanswered ws/conv1 ai_limit_reached")
	if f.chats.runCount() != 1 || len(f.llm.requests()) != 1 || f.chats.conv(chatConv).answered != 2 {
		t.Fatalf("at the limit: %d runs, %d LLM calls", f.chats.runCount(), len(f.llm.requests()))
	}
	// A plan without AI replies is the same.
	f.ws.ws.AIUsed, f.ws.ws.AILimit = 0, 0
	f.convs.reset()
	f.answer(t, f.turn(3, "hi"))
	f.wantCalls(t, "unanswered ws/conv1 ai_limit_reached")
}

// TestAnswerTurnWithoutTheAI: without an LLM provider or a safety guard,
// a run that needs them does not start: ai_unavailable. A chat flow
// without AI nodes needs neither.
func TestAnswerTurnWithoutTheAI(t *testing.T) {
	t.Parallel()
	for name, unwire := range map[string]func(f *chatFixture){
		"no LLM":                  func(f *chatFixture) { f.engine.LLM = nil },
		"no guard":                func(f *chatFixture) { f.app.guard = nil },
		"a guard none configured": func(f *chatFixture) { f.app.guard = downGuard{fmt.Errorf("guard: %w", run.ErrGuardNotConfigured)} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newChatFixture(t)
			unwire(f)
			f.answer(t, f.turn(1, "hi"))
			f.wantCalls(t, "unanswered ws/conv1 ai_unavailable")
			if f.chats.runCount() != 0 || f.chats.conv(chatConv).answered != 1 {
				t.Fatalf("%d runs stored", f.chats.runCount())
			}

			f.chatFlow(t, "f1", []string{"chat"}, "hi", `{"id": "hi", "type": "send_message", "message": {"text": "Hello"}}`)
			f.convs.reset()
			tr := f.turn(2, "hi")
			f.answer(t, tr)
			f.wantCalls(t, "send ws/conv1 key=turn-2/0 run="+runOf(tr)+" Hello")
		})
	}
}

// TestAnswerTurnPicksTheFlow: the channel's chat flow answers while it is
// active and triggered by chat; otherwise the assistant does.
func TestAnswerTurnPicksTheFlow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(f *chatFixture)
		flowID string
	}{
		{"assigned", func(*chatFixture) {}, "f1"},
		{"none assigned", func(f *chatFixture) { delete(f.catalog.assigned, chatChannel) }, ""},
		{"inactive", func(f *chatFixture) { f.catalog.flows["f1"].Status = catalog.StatusInactive }, ""},
		{"no chat trigger", func(f *chatFixture) { f.catalog.flows["f1"].Triggers = []string{TriggerAPI} }, ""},
		{"gone", func(f *chatFixture) { delete(f.catalog.flows, "f1") }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newChatFixture(t)
			f.chatFlow(t, "f1", []string{"api", "chat"}, "hi", `{"id": "hi", "type": "send_message", "message": {"text": "From the flow"}}`)
			tc.change(f)
			tr := f.turn(1, "hi")
			f.answer(t, tr)
			text := "We ship in 2 days."
			if tc.flowID != "" {
				text = "From the flow"
			}
			f.wantCalls(t, "send ws/conv1 key=turn-1/0 run="+runOf(tr)+" "+text)
			if r, _ := wantRun(t, f, runOf(tr), run.StatusCompleted); r.FlowID != tc.flowID {
				t.Fatalf("run of flow %q, want %q", r.FlowID, tc.flowID)
			}
		})
	}
}

// TestAnswerTurnWithoutTheFlowsModule: a chat flow's run fails
// module_inactive, stored, and the conversation is handed over.
func TestAnswerTurnWithoutTheFlowsModule(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.ws.ws.Plan = Plan{Modules: run.Modules{FlowAI: true}}
	f.chatFlow(t, "f1", []string{"chat"}, "hi", `{"id": "hi", "type": "send_message", "message": {"text": "Hello"}}`)
	tr := f.turn(1, "hi")
	f.answer(t, tr)
	id := runOf(tr)
	r, _ := wantRun(t, f, id, run.StatusFailed)
	if r.Error.Code != run.CodeModuleInactive || r.FlowID != "f1" || r.Chat == nil {
		t.Fatalf("run %+v", r)
	}
	f.wantCalls(t, "handover ws/conv1 the chat run "+id+" failed: module_inactive: the plan has no flows module, which chat flows need")

	// The same for a run that began with the module and waits at a
	// question when the plan loses it: the answer does not continue it.
	g, first := waitingForOrderNumber(t)
	g.ws.ws.Plan = Plan{Modules: run.Modules{FlowAI: true}}
	g.convs.reset()
	g.answer(t, g.turn(2, "42"))
	id = runOf(first)
	r, _ = wantRun(t, g, id, run.StatusFailed)
	if r.Error.Code != run.CodeModuleInactive || r.Vars["order"] != nil {
		t.Fatalf("continued run %+v", r)
	}
	g.wantCalls(t, "handover ws/conv1 the chat run "+id+" failed: module_inactive: the plan has no flows module, which chat flows need")
	if c := g.chats.conv(chatConv); c.waitingRunID != "" || c.answered != 2 {
		t.Fatalf("conversation %+v", c)
	}
}

// TestAnswerTurnWithoutTheFlowAIModule: a chat flow's AI node needs the
// plan's flow_ai module: without it the run fails module_inactive at the
// node, nothing is asked of the provider, and the conversation is handed
// over (the assistant answers without it: TestAnswerTurnByTheAssistant),
// whether the run starts at the node or goes on to it after a question.
func TestAnswerTurnWithoutTheFlowAIModule(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.ws.ws.Plan = Plan{Flows: true}
	f.chatFlow(t, "f1", []string{"chat"}, "ai", `{"id": "ai", "type": "ai_response"}`)
	tr := f.turn(1, "hi")
	f.answer(t, tr)
	id := runOf(tr)
	r, _ := wantRun(t, f, id, run.StatusFailed)
	if r.Error.Code != run.CodeModuleInactive || !strings.Contains(r.Error.Message, "flow_ai") || r.FlowID != "f1" {
		t.Fatalf("run %+v", r)
	}
	if n := len(f.llm.requests()); n != 0 {
		t.Fatalf("%d LLM calls without the flow_ai module", n)
	}
	f.wantCalls(t, "handover ws/conv1 the chat run "+id+" failed: module_inactive: "+r.Error.Message)

	// The same when the AI node comes after a question: the run that
	// goes on has the plan's modules too.
	g := newChatFixture(t)
	g.ws.ws.Plan = Plan{Flows: true}
	g.chatFlow(t, "f1", []string{"chat"}, "q",
		`{"id": "q", "type": "question", "text": "Your order number?", "save_as": "order", "next": "ai"}`,
		`{"id": "ai", "type": "ai_response"}`)
	first := g.turn(1, "hi")
	g.answer(t, first)
	g.convs.reset()
	g.answer(t, g.turn(2, "42"))
	r, _ = wantRun(t, g, runOf(first), run.StatusFailed)
	if r.Error.Code != run.CodeModuleInactive || len(g.llm.requests()) != 0 {
		t.Fatalf("continued run %+v, %d LLM calls", r, len(g.llm.requests()))
	}
	g.wantCalls(t, "handover ws/conv1 the chat run "+runOf(first)+" failed: module_inactive: "+r.Error.Message)
}

// TestAnswerTurnQuestionThenAnswer: a question waits; the next turn
// continues the same run, its text in save_as and the message in
// vars.message; an AI node after it runs with the plan's modules and the
// workspace's name.
func TestAnswerTurnQuestionThenAnswer(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.chatFlow(t, "f1", []string{"chat"}, "q",
		`{"id": "q", "type": "question", "text": "Your order number?", "save_as": "order", "next": "s"}`,
		`{"id": "s", "type": "send_message", "message": {"text": "Order {{vars.order}} ({{vars.message.id}}, first {{vars.input.text}})"}, "next": "ai"}`,
		`{"id": "ai", "type": "ai_response"}`)
	first := f.turn(1, "where is my parcel")
	f.answer(t, first)
	id := runOf(first)
	f.wantCalls(t, "send ws/conv1 key=turn-1/0 run="+id+" Your order number?")
	wantRun(t, f, id, run.StatusWaiting)
	if c := f.chats.conv(chatConv); c.waitingRunID != id || !c.waitingSince.Equal(f.clock.Now()) {
		t.Fatalf("conversation %+v", c)
	}

	f.convs.reset()
	f.clock.Advance(sessionTTL - time.Second)
	second := f.turn(2, "42")
	f.answer(t, second)
	f.wantCalls(t,
		"send ws/conv1 key=turn-2/0 run="+id+" Order 42 (m2, first where is my parcel)",
		"send ws/conv1 key=turn-2/1 run="+id+" We ship in 2 days.")
	r, nrs := wantRun(t, f, id, run.StatusCompleted)
	if r.Vars["order"] != "42" || f.chats.runCount() != 1 {
		t.Fatalf("vars %v, %d runs", r.Vars, f.chats.runCount())
	}
	if reqs := f.llm.requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Messages[0].Content, "Demo Shop") {
		t.Fatalf("the continued run's LLM call %+v", reqs)
	}
	if len(nrs) == 0 || nrs[len(nrs)-1].NodeID != "ai" {
		t.Fatalf("node runs %+v", nrs)
	}
	if c := f.chats.conv(chatConv); c.waitingRunID != "" || c.answered != 2 {
		t.Fatalf("conversation %+v", c)
	}
}

// waitingForOrderNumber is a fixture whose chat flow asks for an order
// number and says it back, with its first turn answered: the run waits at
// the question since the fixture's clock.
func waitingForOrderNumber(t *testing.T) (*chatFixture, Turn) {
	t.Helper()
	f := newChatFixture(t)
	f.chatFlow(t, "f1", []string{"chat"}, "q",
		`{"id": "q", "type": "question", "text": "Your order number?", "save_as": "order", "next": "s"}`,
		`{"id": "s", "type": "send_message", "message": {"text": "Order {{vars.order}}"}}`)
	first := f.turn(1, "hi")
	f.answer(t, first)
	return f, first
}

// TestAnswerTurnAtTheSessionWindowsLastInstant: a message
// CHAT_SESSION_TTL after the run began to wait, that instant included,
// still continues it (docs/chat.md "Chat runs").
func TestAnswerTurnAtTheSessionWindowsLastInstant(t *testing.T) {
	t.Parallel()
	f, first := waitingForOrderNumber(t)
	f.clock.Advance(sessionTTL)
	f.convs.reset()
	f.answer(t, f.turn(2, "42"))
	f.wantCalls(t, "send ws/conv1 key=turn-2/0 run="+runOf(first)+" Order 42")
	wantRun(t, f, runOf(first), run.StatusCompleted)
}

// TestAnswerTurnStoredWithinTheSessionWindowAnsweredAfterIt: the window
// is the message's: one stored before the run's wait expired continues it
// though it is answered later (the flow-runner was behind, or a service it
// needed was down and the turn came again).
func TestAnswerTurnStoredWithinTheSessionWindowAnsweredAfterIt(t *testing.T) {
	t.Parallel()
	f, first := waitingForOrderNumber(t)
	f.clock.Advance(sessionTTL - time.Second)
	late := f.turn(2, "42")
	f.clock.Advance(time.Minute)
	f.convs.reset()
	f.answer(t, late)
	f.wantCalls(t, "send ws/conv1 key=turn-2/0 run="+runOf(first)+" Order 42")
	wantRun(t, f, runOf(first), run.StatusCompleted)
}

// TestAnswerTurnAfterTheSessionExpired: a message more than
// CHAT_SESSION_TTL after the run began to wait starts a new run; the
// expired one stays stored as it was.
func TestAnswerTurnAfterTheSessionExpired(t *testing.T) {
	t.Parallel()
	f, first := waitingForOrderNumber(t)
	f.clock.Advance(sessionTTL + time.Nanosecond)
	f.convs.reset()
	second := f.turn(2, "42")
	f.answer(t, second)
	f.wantCalls(t, "send ws/conv1 key=turn-2/0 run="+runOf(second)+" Your order number?")
	old, _ := wantRun(t, f, runOf(first), run.StatusWaiting)
	if old.Vars["order"] != nil {
		t.Fatalf("the expired run changed: %v", old.Vars)
	}
	wantRun(t, f, runOf(second), run.StatusWaiting)
	if c := f.chats.conv(chatConv); c.waitingRunID != runOf(second) {
		t.Fatalf("conversation %+v", c)
	}
}

// TestAnswerTurnOnASuggestChannel: the run's messages become one draft
// keyed "<turn>/draft"; nothing is sent; the other actions are done.
func TestAnswerTurnOnASuggestChannel(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.chatFlow(t, "f1", []string{"chat"}, "a",
		`{"id": "a", "type": "send_message", "message": {"text": "One"}, "next": "t"}`,
		`{"id": "t", "type": "tag", "tag": "lead", "next": "b"}`,
		`{"id": "b", "type": "send_message", "message": {"text": "Two"}}`)
	tr := f.turn(1, "hi")
	tr.Mode = ModeSuggest
	f.answer(t, tr)
	f.wantCalls(t, "draft ws/conv1 key=turn-1/draft run="+runOf(tr)+" One|Two", "tag ws/conv1 lead")
	if c := f.chats.conv(chatConv); c.mode != ModeSuggest {
		t.Fatalf("conversation %+v", c)
	}
	// A run without messages drafts nothing.
	f.chatFlow(t, "f2", []string{"chat"}, "t", `{"id": "t", "type": "tag", "tag": "quiet"}`)
	f.convs.reset()
	tr = f.turn(2, "hi")
	tr.Mode = ModeSuggest
	f.answer(t, tr)
	f.wantCalls(t, "tag ws/conv1 quiet")
}

// TestAnswerTurnSendRefused: a send messaging refuses is recorded as a
// node run of type "send", the run goes on, and the turn is answered.
func TestAnswerTurnSendRefused(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.chatFlow(t, "f1", []string{"chat"}, "a",
		`{"id": "a", "type": "send_message", "message": {"text": "One"}, "next": "t"}`,
		`{"id": "t", "type": "tag", "tag": "lead"}`)
	f.convs.fail["send"] = fmt.Errorf("send %w: window_closed: the 24-hour window is closed", ErrSendRefused)
	tr := f.turn(1, "hi")
	f.answer(t, tr)
	f.wantCalls(t, "tag ws/conv1 lead")
	_, nrs := wantRun(t, f, runOf(tr), run.StatusCompleted)
	last := nrs[len(nrs)-1]
	if last.NodeType != "send" || last.NodeID != "a" || !strings.Contains(last.Error, "window_closed") {
		t.Fatalf("node runs %+v", nrs)
	}
	if f.chats.conv(chatConv).answered != 1 {
		t.Fatal("the turn is not answered")
	}
	// A refused draft is recorded the same way.
	f.convs.fail["draft"] = fmt.Errorf("draft %w: conversation_handed_over", ErrSendRefused)
	tr = f.turn(2, "hi")
	tr.Mode = ModeSuggest
	f.answer(t, tr)
	_, nrs = wantRun(t, f, runOf(tr), run.StatusCompleted)
	if last := nrs[len(nrs)-1]; last.NodeType != "send" || last.NodeID != "a" || !strings.Contains(last.Error, "conversation_handed_over") {
		t.Fatalf("node runs %+v", nrs)
	}
}

// TestAnswerTurnSendFailsForNow: a transient error fails the turn and
// stores nothing; answered again, it runs under the same id and keys.
func TestAnswerTurnSendFailsForNow(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	down := errors.New("messaging unavailable")
	f.convs.fail["send"] = down
	tr := f.turn(1, "hi")
	if err := f.app.AnswerTurn(context.Background(), tr); !errors.Is(err, down) {
		t.Fatalf("AnswerTurn = %v", err)
	}
	if f.chats.runCount() != 0 || f.chats.conv(chatConv).answered != 0 {
		t.Fatalf("a failed turn stored something: %+v", f.chats.conv(chatConv))
	}
	delete(f.convs.fail, "send")
	f.answer(t, tr)
	f.wantCalls(t, "send ws/conv1 key=turn-1/0 run="+runOf(tr)+" We ship in 2 days.")
	wantRun(t, f, runOf(tr), run.StatusCompleted)
}

// TestAnswerTurnRunIDPerTurn: the same turn answered twice (its first
// instance died before storing the answer) runs under the same id and
// sends under the same keys; another turn has another id.
func TestAnswerTurnRunIDPerTurn(t *testing.T) {
	t.Parallel()
	a, b := newChatFixture(t), newChatFixture(t)
	tr := a.turn(1, "hi")
	a.answer(t, tr)
	b.answer(t, tr)
	if !reflect.DeepEqual(a.convs.recorded(), b.convs.recorded()) {
		t.Fatalf("the same turn twice: %q and %q", a.convs.recorded(), b.convs.recorded())
	}
	if runOf(tr) == runOf(a.turn(2, "")) {
		t.Fatal("two turns share a run id")
	}
	wantRun(t, a, runOf(tr), run.StatusCompleted)
	wantRun(t, b, runOf(tr), run.StatusCompleted)
}

// TestAnswerTurnFailedRunHandsOver: a failed run hands the conversation
// over with its error; quota_exceeded marks the message unanswered.
func TestAnswerTurnFailedRunHandsOver(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.llm.err = errors.New("provider down")
	tr := f.turn(1, "hi")
	f.answer(t, tr)
	r, _ := wantRun(t, f, runOf(tr), run.StatusFailed)
	got := f.convs.recorded()
	if len(got) != 1 || !strings.HasPrefix(got[0], "handover ws/conv1 the chat run "+r.ID+" failed: node_failed: ") {
		t.Fatalf("calls %q", got)
	}

	// At the limit the message is marked unanswered and nothing of the
	// run goes out: also a flow's send before its AI node.
	f.llm.err = nil
	f.quota.limit = 0
	for _, seq := range []int64{2, 3} {
		if seq == 3 {
			f.chatFlow(t, "f0", []string{"chat"}, "a",
				`{"id": "a", "type": "send_message", "message": {"text": "One moment"}, "next": "x"}`,
				`{"id": "x", "type": "ai_response"}`)
		}
		f.convs.reset()
		tr = f.turn(seq, "hi")
		f.answer(t, tr)
		r, _ = wantRun(t, f, runOf(tr), run.StatusFailed)
		if r.Error.Code != run.CodeQuotaExceeded {
			t.Fatalf("turn %d: run error %+v", seq, r.Error)
		}
		f.wantCalls(t, "unanswered ws/conv1 ai_limit_reached")
	}
	f.quota.limit = 100

	// A flow's unsupported node fails it too, after its sends.
	f.chatFlow(t, "f1", []string{"chat"}, "a",
		`{"id": "a", "type": "send_message", "message": {"text": "One moment"}, "next": "x"}`,
		`{"id": "x", "type": "tool"}`)
	f.convs.reset()
	tr = f.turn(4, "hi")
	f.answer(t, tr)
	got = f.convs.recorded()
	if len(got) != 2 || got[0] != "send ws/conv1 key=turn-4/0 run="+runOf(tr)+" One moment" ||
		!strings.Contains(got[1], "failed: node_failed") || !strings.Contains(got[1], "node_type_unsupported") {
		t.Fatalf("calls %q", got)
	}
}

// TestAnswerTurnConversationBusy: a second holder is told the
// conversation is busy, and nothing of it is done.
func TestAnswerTurnConversationBusy(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	var second error
	f.chats.during = func() {
		f.chats.during = nil
		second = f.app.AnswerTurn(context.Background(), f.turn(1, "hi"))
	}
	f.answer(t, f.turn(1, "hi"))
	if !errors.Is(second, catalog.ErrConversationBusy) {
		t.Fatalf("second holder: %v", second)
	}
	if got := f.convs.recorded(); len(got) != 1 {
		t.Fatalf("calls %q", got)
	}
}

// TestWakeChatRunsAI: a wake continues with the plan's modules and the
// workspace's name: an AI node after a delay answers.
func TestWakeChatRunsAI(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.chatFlow(t, "f1", []string{"chat"}, "d",
		`{"id": "d", "type": "delay", "seconds": 5, "next": "ai"}`,
		`{"id": "ai", "type": "ai_response"}`)
	tr := f.turn(1, "when do you ship?")
	f.answer(t, tr)
	f.wantCalls(t)
	f.clock.Advance(5 * time.Second)
	if err := f.app.wakeDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := runOf(tr)
	r, _ := wantRun(t, f, id, run.StatusCompleted)
	f.wantCalls(t, fmt.Sprintf("send ws/conv1 key=%s/wake/%d/0 run=%s We ship in 2 days.", id, f.clock.Now().UnixNano(), id))
	if reqs := f.llm.requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Messages[0].Content, "Demo Shop") {
		t.Fatalf("LLM requests %+v (run %+v)", reqs, r)
	}
}

// TestAnswerTurnWhileThePlanIsUnreachable: a run that failed only because
// the plan's AI units could not be reached is no answer: the turn is
// answered again later, and nothing was sent, stored or handed over.
func TestAnswerTurnWhileThePlanIsUnreachable(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.quota.down = true
	tr := f.turn(1, "When do you ship?")
	if err := f.app.AnswerTurn(context.Background(), tr); !errors.Is(err, run.ErrQuotaUnavailable) {
		t.Fatalf("AnswerTurn = %v, want the outage, for a retry", err)
	}
	f.wantCalls(t)
	if f.chats.runCount() != 0 || f.chats.conv(chatConv).answered != 0 {
		t.Fatalf("an outage was kept: %d runs, %+v", f.chats.runCount(), f.chats.conv(chatConv))
	}
	f.quota.down = false
	f.answer(t, tr)
	f.wantCalls(t, "send ws/conv1 key=turn-1/0 run="+runOf(tr)+" We ship in 2 days.")
}

// TestAnswerTurnWhileTheGuardIsUnreachable: a guard configured but not
// reachable now is an outage: the turn is answered again once it is back,
// not marked unanswered.
func TestAnswerTurnWhileTheGuardIsUnreachable(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	f.app.guard = downGuard{errors.New("the safety guard's moderation endpoint is unreachable")}
	tr := f.turn(1, "When do you ship?")
	if err := f.app.AnswerTurn(context.Background(), tr); err == nil {
		t.Fatal("AnswerTurn = nil while the guard is unreachable, want an error for a retry")
	}
	f.wantCalls(t)
	if f.chats.conv(chatConv).answered != 0 {
		t.Fatalf("the turn was counted answered: %+v", f.chats.conv(chatConv))
	}
	f.app.guard = readyGuard{}
	f.answer(t, tr)
	f.wantCalls(t, "send ws/conv1 key=turn-1/0 run="+runOf(tr)+" We ship in 2 days.")
}

// turnOutcomes records Observer.ChatTurn.
type turnOutcomes struct {
	nopObserver
	mu  sync.Mutex
	got []string
}

func (o *turnOutcomes) ChatTurn(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, outcome)
}

// TestAnswerTurnOutcomesAreCounted: each handling of a turn is reported
// with what became of it, for the parley_flow_runner_chat_turns_total metric.
func TestAnswerTurnOutcomesAreCounted(t *testing.T) {
	t.Parallel()
	f := newChatFixture(t)
	obs := &turnOutcomes{}
	f.app.obs = obs
	f.answer(t, f.turn(1, "hi"))
	f.answer(t, f.turn(1, "hi"))
	_ = f.app.AnswerTurn(context.Background(), f.turn(3, "later"))
	f.quota.down = true
	_ = f.app.AnswerTurn(context.Background(), f.turn(2, "then"))
	want := []string{ChatTurnAnswered, ChatTurnRepeated, ChatTurnEarly, ChatTurnTransient}
	if !reflect.DeepEqual(obs.got, want) {
		t.Fatalf("outcomes %q, want %q", obs.got, want)
	}
}
