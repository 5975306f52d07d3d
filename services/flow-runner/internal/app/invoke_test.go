package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// The invoke contract's rules as app.Invoke applies them, over in-memory
// stores. The service's tests (invoke_contract_test.go) hold the same
// rules on Redis and PostgreSQL, across instances.

// fakeFlows holds published flows of workspace "ws", each its one
// version; any other lookup is not found.
type fakeFlows struct {
	catalog.FlowStore
	versions map[string]*catalog.Version
}

func (f *fakeFlows) Get(_ context.Context, workspaceID, flowID string) (*catalog.Flow, error) {
	v, ok := f.versions[flowID]
	if !ok || workspaceID != "ws" {
		return nil, catalog.ErrFlowNotFound
	}
	return &catalog.Flow{ID: flowID, WorkspaceID: workspaceID, Status: catalog.StatusActive, Triggers: []string{TriggerAPI}, PublishedVersion: v.Version}, nil
}

func (f *fakeFlows) Version(_ context.Context, flowID string, version int) (*catalog.Version, error) {
	if v, ok := f.versions[flowID]; ok && v.Version == version {
		return v, nil
	}
	return nil, catalog.ErrFlowNotFound
}

// fakeRuns keeps the runs created and their receipts; fail refuses them.
type fakeRuns struct {
	catalog.RunStore
	mu       sync.Mutex
	runs     []*run.Run
	receipts []*catalog.Receipt
	// finished are the receipts streams stored once their end was
	// decided.
	finished []*catalog.Receipt
	fail     error
	// supersede marks every receipt superseded: another call's answers
	// the key.
	supersede bool
}

func (f *fakeRuns) Create(_ context.Context, r *run.Run, _ []run.NodeRun, receipt *catalog.Receipt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if receipt != nil {
		receipt.Superseded = f.supersede
	}
	f.runs, f.receipts = append(f.runs, r), append(f.receipts, receipt)
	return nil
}

// FinishStream replaces the run stored with status was by cut, and adds
// the receipt.
func (f *fakeRuns) FinishStream(_ context.Context, cut *run.Run, was run.Status, receipt *catalog.Receipt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	for i, stored := range f.runs {
		if cut != nil && stored.ID == cut.ID && stored.Status == was && stored.NodesExecuted == cut.NodesExecuted {
			f.runs[i] = cut
		}
	}
	if receipt != nil {
		receipt.Superseded = f.supersede
		f.finished = append(f.finished, receipt)
	}
	return nil
}

// Continue hands fn the stored run of the session; an unknown session
// is catalog.ErrSessionNotFound.
func (f *fakeRuns) Continue(_ context.Context, sessionID string, fn func(r *run.Run) (catalog.Changes, error)) error {
	f.mu.Lock()
	var found *run.Run
	for _, r := range f.runs {
		if r.SessionID == sessionID {
			found = r
		}
	}
	f.mu.Unlock()
	if found == nil {
		return catalog.ErrSessionNotFound
	}
	_, err := fn(found)
	return err
}

// fakeSlots holds places per workspace; down makes every Take fail.
type fakeSlots struct {
	mu    sync.Mutex
	held  map[string]int
	takes int
	down  error
}

func (f *fakeSlots) Take(_ context.Context, ws string, limit int) (Slot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.takes++
	if f.down != nil {
		return nil, f.down
	}
	if f.held[ws] >= limit {
		return nil, ErrSlotsFull
	}
	f.held[ws]++
	return &fakeSlot{pool: f, ws: ws}, nil
}

func (f *fakeSlots) holding(ws string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[ws]
}

type fakeSlot struct {
	pool *fakeSlots
	ws   string
}

func (s *fakeSlot) KeepRenewed(context.Context, func(error)) func() { return func() {} }

func (s *fakeSlot) Release(context.Context) error {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	s.pool.held[s.ws]--
	return nil
}

// fakeDaily counts runs per workspace; down makes every Reserve fail.
type fakeDaily struct {
	mu    sync.Mutex
	count map[string]int
	down  error
}

func (f *fakeDaily) Reserve(_ context.Context, ws string, limit int) (func(context.Context) error, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return nil, false, f.down
	}
	if f.count[ws] >= limit {
		return nil, false, nil
	}
	f.count[ws]++
	return func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.count[ws]--
		return nil
	}, true, nil
}

func (f *fakeDaily) counted(ws string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[ws]
}

// fakeKeys keeps keys in a map: a key claimed and not answered is in
// progress; an answered one replays its answer. It keeps answers of up to
// max bytes, as the real store does.
type fakeKeys struct {
	mu     sync.Mutex
	keys   map[string]*fakeKey
	claims int
	max    int
}

type fakeKey struct {
	fingerprint string
	answer      *StoredAnswer
}

var (
	errInProgress = errors.New("idempotency_in_progress")
	errReused     = errors.New("idempotency_key_reuse")
)

func (f *fakeKeys) Claim(_ context.Context, ws, key, fingerprint string) (KeyClaim, *StoredAnswer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	k, ok := f.keys[ws+"/"+key]
	switch {
	case !ok:
		f.keys[ws+"/"+key] = &fakeKey{fingerprint: fingerprint}
		return &fakeClaim{keys: f, id: ws + "/" + key}, nil, nil
	case k.fingerprint != fingerprint:
		return nil, nil, errReused
	case k.answer == nil:
		return nil, nil, errInProgress
	}
	return nil, k.answer, nil
}

func (f *fakeKeys) MaxAnswerBytes() int { return f.max }

// answered is the answer key keeps, nil while it has none.
func (f *fakeKeys) answered(ws, key string) *StoredAnswer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k, ok := f.keys[ws+"/"+key]; ok {
		return k.answer
	}
	return nil
}

type fakeClaim struct {
	keys *fakeKeys
	id   string
}

func (c *fakeClaim) KeyHash() string { return "hash:" + c.id }

func (c *fakeClaim) Refused(context.Context) {
	c.keys.mu.Lock()
	defer c.keys.mu.Unlock()
	delete(c.keys.keys, c.id)
}

func (c *fakeClaim) Answered(_ context.Context, a StoredAnswer) {
	c.keys.mu.Lock()
	defer c.keys.mu.Unlock()
	c.keys.keys[c.id].answer = &a
}

// sink records the events' names and renders an answer of the run's id
// and output; its End fails with cut (the stream was cut before the end
// reached its reader).
type sink struct {
	events []string
	ended  *Outcome
	cut    error
}

func (s *sink) RunStarted(string)                      { s.events = append(s.events, "run_start") }
func (s *sink) NodeStarted(id string, _ flow.NodeType) { s.events = append(s.events, "node_start "+id) }
func (s *sink) Message(run.Message)                    { s.events = append(s.events, "message") }
func (s *sink) NodeEnded(nr run.NodeRun)               { s.events = append(s.events, "node_end "+nr.NodeID) }
func (s *sink) Render(o *Outcome) ([]byte, error) {
	return json.Marshal(map[string]any{"run_id": o.Run.ID, "output": o.Run.Output})
}
func (s *sink) End(o *Outcome) error {
	s.ended = o
	return s.cut
}

// observed records what the use case reports.
type observed struct {
	nopObserver
	mu          sync.Mutex
	refused     []string
	unavailable []string
	notFinished []string
}

func (o *observed) StreamNotFinished(_, runID string, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.notFinished = append(o.notFinished, runID)
}

func (o *observed) FlowRefused(ws string, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = append(o.refused, ws)
}

func (o *observed) ContractUnavailable(what string, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unavailable = append(o.unavailable, what)
}

// contractFixture is an App over the fakes: flow "echo" of workspace "ws"
// echoes input.s, flow "say" sends it as a message too, flow "ai" has an
// llm node (and no guard is wired).
type contractFixture struct {
	app   *App
	runs  *fakeRuns
	slots *fakeSlots
	daily *fakeDaily
	keys  *fakeKeys
	obs   *observed
}

func newContractFixture(t *testing.T, concurrency, dailyLimit int) *contractFixture {
	t.Helper()
	version := func(id, doc string) *catalog.Version {
		def, err := flow.Parse([]byte(doc), flow.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &catalog.Version{FlowID: id, Version: 1, Definition: def}
	}
	f := &contractFixture{
		runs:  &fakeRuns{},
		slots: &fakeSlots{held: map[string]int{}},
		daily: &fakeDaily{count: map[string]int{}},
		keys:  &fakeKeys{keys: map[string]*fakeKey{}, max: 1 << 10},
		obs:   &observed{},
	}
	f.app = New(Deps{
		Flows: &fakeFlows{versions: map[string]*catalog.Version{
			"echo": version("echo", `{"name": "Echo", "triggers": ["api"], "nodes": [
				{"id": "start", "type": "start", "next": "done"},
				{"id": "done", "type": "end", "output": {"s": "{{vars.input.s}}"}}]}`),
			"say": version("say", `{"name": "Say", "triggers": ["api"], "nodes": [
				{"id": "start", "type": "start", "next": "hi"},
				{"id": "hi", "type": "send_message", "message": {"type": "text", "text": "{{vars.input.s}}"}, "next": "done"},
				{"id": "done", "type": "end", "output": {"s": "{{vars.input.s}}"}}]}`),
			"ai": version("ai", `{"name": "AI", "triggers": ["api"], "nodes": [
				{"id": "start", "type": "start", "next": "say"},
				{"id": "say", "type": "llm", "prompt": "hi"}]}`),
			"ask": version("ask", `{"name": "Ask", "triggers": ["api"], "nodes": [
				{"id": "start", "type": "start", "next": "q"},
				{"id": "q", "type": "question", "text": "Name?", "save_as": "name", "next": "done"},
				{"id": "done", "type": "end"}]}`),
		}},
		Runs:   f.runs,
		Engine: &run.Engine{},
		Contract: Contract{
			Slots: f.slots, Concurrency: concurrency,
			Daily: f.daily, DailyLimit: dailyLimit,
			Keys: f.keys,
		},
		Observer: f.obs,
	})
	return f
}

// call is a call of flowID in workspace "ws" with the flows module.
func call(flowID, key string, input map[string]any) InvokeCall {
	return InvokeCall{
		WorkspaceID: "ws", FlowID: flowID, Plan: Plan{Flows: true}, Input: input,
		Key: key, Fingerprint: "fp", Sink: &sink{},
	}
}

// invoke is Invoke of call(flowID, key, input).
func (f *contractFixture) invoke(flowID, key string, input map[string]any) (*InvokeAnswer, error) {
	return f.app.Invoke(context.Background(), call(flowID, key, input))
}

// wantClean fails t unless the call left no slot held.
func (f *contractFixture) wantClean(t *testing.T) {
	t.Helper()
	if n := f.slots.holding("ws"); n != 0 {
		t.Fatalf("%d slots still held", n)
	}
}

// A keyed call runs once: its answer is stored with the run (the receipt)
// and kept by its key, and a repeat is that answer, running nothing and
// counting nothing.
func TestInvokeRunsOnceAndRepeatsReplay(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	first := call("echo", "order-1", map[string]any{"s": "a"})
	ans, err := f.app.Invoke(context.Background(), first)
	if err != nil || ans.Replay != nil || ans.Outcome.Run.Status != run.StatusCompleted || ans.Outcome.Run.Output["s"] != "a" {
		t.Fatalf("first = %+v, %v", ans, err)
	}
	if got := first.Sink.(*sink).events; strings.Join(got, ",") != "run_start,node_start start,node_end start,node_start done,node_end done" {
		t.Fatalf("the sink heard %v", got)
	}
	runID := ans.Outcome.Run.ID
	wantBody := `{"output":{"s":"a"},"run_id":"` + runID + `"}`
	kept := f.keys.answered("ws", "order-1")
	if kept == nil || kept.Status != 200 || string(kept.Body) != wantBody || kept.RunID != runID {
		t.Fatalf("the key keeps %+v, want 200 %s for run %s", kept, wantBody, runID)
	}
	if len(f.runs.receipts) != 1 || f.runs.receipts[0] == nil {
		t.Fatalf("receipts %+v", f.runs.receipts)
	}
	if rec := f.runs.receipts[0]; rec.KeyHash != "hash:ws/order-1" || rec.Fingerprint != "fp" || rec.RunID != runID || string(rec.Body) != wantBody {
		t.Fatalf("receipt %+v", rec)
	}

	again := call("echo", "order-1", map[string]any{"s": "a"})
	ans, err = f.app.Invoke(context.Background(), again)
	if err != nil || ans.Outcome != nil || ans.Replay == nil || string(ans.Replay.Body) != wantBody {
		t.Fatalf("repeat = %+v, %v; want the replay of %s", ans, err, wantBody)
	}
	if len(f.runs.runs) != 1 || f.daily.counted("ws") != 1 || len(again.Sink.(*sink).events) != 0 {
		t.Fatalf("the repeat ran: %d runs, %d counted today", len(f.runs.runs), f.daily.counted("ws"))
	}
	f.wantClean(t)
}

// Rule 8: a repeat needs a concurrency slot like any call, so with every
// place taken it is refused before its key is even read.
func TestInvokeRepeatsNeedASlot(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 1, 10)
	if _, err := f.invoke("echo", "k", nil); err != nil {
		t.Fatal(err)
	}
	f.slots.held["ws"] = 1 // a run of another call holds the only place
	_, err := f.invoke("echo", "k", nil)
	var busy *ConcurrencyLimitedError
	if !errors.As(err, &busy) || busy.Limit != 1 || f.keys.claims != 1 {
		t.Fatalf("repeat with every place taken = %v, after %d claims; want concurrency limited before the key", err, f.keys.claims)
	}
}

// Rule 7: a call refused before its run starts takes nothing: its daily
// unit is given back and its key freed, so the same call may run later.
func TestInvokeRefusedBeforeTheRunTakesNothing(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	for _, tt := range []struct {
		flowID string
		want   error
	}{
		{"missing", catalog.ErrFlowNotFound},
		{"ai", ErrGuardNotWired},
	} {
		for range 2 {
			_, err := f.invoke(tt.flowID, "k-"+tt.flowID, nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("%s: %v, want %v (the key free for the repeat)", tt.flowID, err, tt.want)
			}
		}
	}
	if f.daily.counted("ws") != 0 || len(f.runs.runs) != 0 || f.keys.answered("ws", "k-ai") != nil {
		t.Fatalf("refusals took %d units and stored %d runs", f.daily.counted("ws"), len(f.runs.runs))
	}
	// The platform hears why a flow with AI nodes was refused; the
	// developer only that it is unavailable.
	if len(f.obs.refused) != 2 {
		t.Fatalf("observer heard %v", f.obs.refused)
	}
	f.wantClean(t)
}

// Without the flows module nothing is taken, not even a slot.
func TestInvokeNeedsTheFlowsModule(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	c := call("echo", "k", nil)
	c.Plan.Flows = false
	if _, err := f.app.Invoke(context.Background(), c); !errors.Is(err, ErrFlowsModuleInactive) || f.slots.takes != 0 {
		t.Fatalf("%v after %d slot takes", err, f.slots.takes)
	}
}

// The daily cap counts runs that start: at the cap a call is refused and
// its key freed; a repeat of a finished call still replays.
func TestInvokeAtTheDailyCap(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 1)
	if _, err := f.invoke("echo", "first", nil); err != nil {
		t.Fatal(err)
	}
	_, err := f.invoke("echo", "second", nil)
	var capped *DailyCapError
	if !errors.As(err, &capped) || capped.Limit != 1 {
		t.Fatalf("over the cap: %v", err)
	}
	if _, err := f.invoke("echo", "second", nil); !errors.As(err, &capped) {
		t.Fatalf("the refused call's key is not free: %v", err)
	}
	if ans, err := f.invoke("echo", "first", nil); err != nil || ans.Replay == nil {
		t.Fatalf("replay at the cap = %+v, %v", ans, err)
	}
	f.wantClean(t)
}

// A store the contract needs that does not answer refuses the call, names
// the store and tells the observer; nothing runs and the key is freed.
func TestInvokeWhenAContractStoreIsDown(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	f.daily.down = errors.New("redis: connection refused")
	_, err := f.invoke("echo", "k", nil)
	var down *ContractUnavailableError
	if !errors.As(err, &down) || down.What != "daily invoke cap" || len(f.runs.runs) != 0 {
		t.Fatalf("daily cap down: %v", err)
	}
	f.daily.down = nil
	if _, err := f.invoke("echo", "k", nil); err != nil {
		t.Fatalf("the key was kept by the refused call: %v", err)
	}
	f.slots.down = errors.New("redis: connection refused")
	if _, err := f.invoke("echo", "k2", nil); !errors.As(err, &down) || down.What != "concurrency slots" {
		t.Fatalf("slots down: %v", err)
	}
	if strings.Join(f.obs.unavailable, ",") != "daily invoke cap,concurrency slots" {
		t.Fatalf("observer heard %v", f.obs.unavailable)
	}
}

// A run that went but could not be stored keeps its daily unit (it ran)
// and frees its key (nothing committed that a repeat could replay).
func TestInvokeRunNotStored(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	f.runs.fail = errors.New("insert run: connection reset")
	_, err := f.invoke("echo", "k", nil)
	var notStored *RunNotStoredError
	if !errors.As(err, &notStored) || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("%v, want RunNotStoredError", err)
	}
	if f.daily.counted("ws") != 1 || f.keys.answered("ws", "k") != nil {
		t.Fatalf("counted %d; key answer %+v", f.daily.counted("ws"), f.keys.answered("ws", "k"))
	}
	f.runs.fail = nil
	if ans, err := f.invoke("echo", "k", nil); err != nil || ans.Outcome == nil {
		t.Fatalf("the key is not free: %+v, %v", ans, err)
	}
	f.wantClean(t)
}

// A call whose receipt the store did not keep, another call's answering
// the key (two ran beside each other once Redis lost the key), gets its
// own run's answer but frees the key, streamed or not: a repeat finds the
// receipt that was kept.
func TestInvokeWhoseReceiptWasSuperseded(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	f.runs.supersede = true
	for _, c := range []InvokeCall{call("echo", "k", map[string]any{"s": "a"}), streamCall("echo", "k", map[string]any{"s": "a"}, nil)} {
		ans, err := f.app.Invoke(context.Background(), c)
		if err != nil || ans.Replay != nil || ans.Outcome.Run.Output["s"] != "a" {
			t.Fatalf("stream %v: %+v, %v; want its run's answer", c.Stream, ans, err)
		}
		if kept := f.keys.answered("ws", "k"); kept != nil {
			t.Fatalf("stream %v: the key keeps %+v; want it freed", c.Stream, kept)
		}
		if claim, _, err := f.keys.Claim(context.Background(), "ws", "k", "fp"); err != nil || claim == nil {
			t.Fatalf("stream %v: the key after the call: %v; want it free", c.Stream, err)
		} else {
			claim.Refused(context.Background())
		}
	}
	if len(f.runs.runs) != 2 {
		t.Fatalf("%d runs stored, want both", len(f.runs.runs))
	}
	f.wantClean(t)
}

// Rule 5's bound: an answer over what the keys keep is stored with its run
// without its body (a repeat is then told the run), and the key gets it
// whole with the run, to decide the same.
func TestInvokeAnswerTooLargeToKeep(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	ans, err := f.invoke("echo", "big", map[string]any{"s": strings.Repeat("a", 2<<10)})
	if err != nil {
		t.Fatal(err)
	}
	rec := f.runs.receipts[0]
	if rec == nil || rec.Body != nil || rec.RunID != ans.Outcome.Run.ID || rec.Status != 200 {
		t.Fatalf("receipt %+v; want no body, and the run", rec)
	}
	if kept := f.keys.answered("ws", "big"); kept == nil || len(kept.Body) <= f.keys.max || kept.RunID != ans.Outcome.Run.ID {
		t.Fatalf("the key got %+v", kept)
	}
}

// An answer larger than one reply carries could never reach its caller:
// the run fails in-run instead, without the call's messages and output,
// and the run stored, the answer and what the key keeps all say that.
func TestInvokeAnswerTooLargeForAReply(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	f.app.contract.MaxAnswerBytes = 1 << 10
	f.keys.max = 1 << 20
	ans, err := f.invoke("say", "k", map[string]any{"s": strings.Repeat("a", 2<<10)})
	if err != nil {
		t.Fatal(err)
	}
	r := ans.Outcome.Run
	whole, _ := json.Marshal(map[string]any{"run_id": r.ID, "output": map[string]any{"s": strings.Repeat("a", 2<<10)}})
	want := run.Error{Code: run.CodeBudgetExceeded, Message: fmt.Sprintf("the run's answer of %d bytes would pass 1 KiB, the most one reply carries", len(whole))}
	if r.Status != run.StatusFailed || r.Error == nil || *r.Error != want || len(r.Output) != 0 || r.CompletedAt == nil ||
		len(r.Messages) != 0 || len(ans.Outcome.Messages) != 0 {
		t.Fatalf("run %s %+v, output %v, %d messages", r.Status, r.Error, r.Output, len(r.Messages))
	}
	answer := `{"output":{},"run_id":"` + r.ID + `"}`
	if string(ans.Outcome.Answer) != answer {
		t.Fatalf("answer %s; want %s", ans.Outcome.Answer, answer)
	}
	if len(f.runs.runs) != 1 || f.runs.runs[0].Status != run.StatusFailed || string(f.runs.receipts[0].Body) != answer {
		t.Fatalf("stored %d runs, receipt %+v", len(f.runs.runs), f.runs.receipts[0])
	}
	if kept := f.keys.answered("ws", "k"); kept == nil || string(kept.Body) != answer {
		t.Fatalf("the key keeps %+v", kept)
	}
}

// An answer that cannot be rendered is a run not stored: the caller is
// told so (500), and no run says otherwise.
func TestInvokeAnswerNotRendered(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	c := call("echo", "k", nil)
	c.Sink = &unrenderable{}
	_, err := f.app.Invoke(context.Background(), c)
	var notStored *RunNotStoredError
	if !errors.As(err, &notStored) || len(f.runs.runs) != 0 || f.keys.answered("ws", "k") != nil {
		t.Fatalf("%v, %d runs stored; want RunNotStoredError and none", err, len(f.runs.runs))
	}
	f.wantClean(t)
}

// unrenderable is a sink whose answers cannot be rendered.
type unrenderable struct{ sink }

func (*unrenderable) Render(*Outcome) ([]byte, error) {
	return nil, errors.New("json: unsupported value")
}

// A call in progress, or a key used for another request, is refused as
// the key store words it, and takes nothing.
func TestInvokeKeyRefusals(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	f.keys.keys["ws/k"] = &fakeKey{fingerprint: "fp"}
	if _, err := f.invoke("echo", "k", nil); !errors.Is(err, errInProgress) {
		t.Fatalf("in progress: %v", err)
	}
	other := call("echo", "k", nil)
	other.Fingerprint = "another body"
	if _, err := f.app.Invoke(context.Background(), other); !errors.Is(err, errReused) {
		t.Fatalf("reused: %v", err)
	}
	if f.daily.counted("ws") != 0 || len(f.runs.runs) != 0 {
		t.Fatalf("refusals counted %d and ran %d", f.daily.counted("ws"), len(f.runs.runs))
	}
	f.wantClean(t)
}

// Calls without a key run every time, with no receipt.
func TestInvokeWithoutAKey(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	for range 2 {
		if ans, err := f.invoke("echo", "", nil); err != nil || ans.Outcome == nil {
			t.Fatalf("%+v, %v", ans, err)
		}
	}
	if len(f.runs.runs) != 2 || f.runs.receipts[0] != nil || f.keys.claims != 0 || f.daily.counted("ws") != 2 {
		t.Fatalf("%d runs, receipts %v, %d claims", len(f.runs.runs), f.runs.receipts, f.keys.claims)
	}
}

// streamCall is call(...) answered as a stream whose end fails with cut
// (nil: the reader has it).
func streamCall(flowID, key string, input map[string]any, cut error) InvokeCall {
	c := call(flowID, key, input)
	c.Stream = true
	c.Sink.(*sink).cut = cut
	return c
}

var errCut = errors.New("rpc stream caller gone: it cancelled")

// A stream's receipt is stored once its end reached the reader, not with
// its run (a repeat meanwhile is told the call is in progress); the run
// stays as stored.
func TestInvokeStreamStoresItsReceiptOnceItsEndIsDelivered(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	c := streamCall("echo", "k", map[string]any{"s": "a"}, nil)
	ans, err := f.app.Invoke(context.Background(), c)
	if err != nil || ans.Outcome.Run.Status != run.StatusCompleted {
		t.Fatalf("%+v, %v", ans, err)
	}
	if ended := c.Sink.(*sink).ended; ended == nil || ended.Run.ID != ans.Outcome.Run.ID {
		t.Fatalf("the sink's end was %+v", ended)
	}
	wantBody := `{"output":{"s":"a"},"run_id":"` + ans.Outcome.Run.ID + `"}`
	if f.runs.receipts[0] != nil || len(f.runs.finished) != 1 || string(f.runs.finished[0].Body) != wantBody {
		t.Fatalf("receipt with the run %+v, after its end %+v; want none, then %s", f.runs.receipts[0], f.runs.finished, wantBody)
	}
	if f.runs.runs[0].Status != run.StatusCompleted {
		t.Fatalf("stored %s", f.runs.runs[0].Status)
	}
	if kept := f.keys.answered("ws", "k"); kept == nil || string(kept.Body) != wantBody {
		t.Fatalf("the key keeps %+v, want %s", kept, wantBody)
	}
}

// A streamed call whose end never reached its reader (the stream was cut
// once the run was stored) has its run stored failed, node_failed "run
// canceled", with no output and no session the reader never learnt, and
// its key answers that; a run that failed keeps its own error.
func TestInvokeStreamCutBeforeItsEnd(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	for _, tt := range []struct {
		flowID, key string
		was         run.Status
	}{
		{"echo", "completed", run.StatusCompleted},
		{"ask", "waiting", run.StatusWaiting},
	} {
		c := streamCall(tt.flowID, tt.key, map[string]any{"s": "a"}, errCut)
		ans, err := f.app.Invoke(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if ended := c.Sink.(*sink).ended; ended == nil || ended.Run.Status != tt.was {
			t.Fatalf("%s: the sink's end was %+v, want the %s run", tt.key, ended, tt.was)
		}
		r := ans.Outcome.Run
		if r.Status != run.StatusFailed || r.Error == nil || r.Error.Code != run.CodeNodeFailed ||
			!strings.Contains(r.Error.Message, "run canceled") || len(r.Output) != 0 || r.SessionID != "" || r.CompletedAt == nil {
			t.Fatalf("%s: answered %+v (error %+v), want failed, node_failed run canceled, no output or session", tt.key, r, r.Error)
		}
		if stored := f.runs.runs[len(f.runs.runs)-1]; stored.ID != r.ID || stored.Status != run.StatusFailed {
			t.Fatalf("%s: stored %+v, want the run failed", tt.key, stored)
		}
		wantBody := `{"output":{},"run_id":"` + r.ID + `"}`
		if rec := f.runs.finished[len(f.runs.finished)-1]; string(rec.Body) != wantBody {
			t.Fatalf("%s: receipt %+v, want %s", tt.key, rec, wantBody)
		}
		if kept := f.keys.answered("ws", tt.key); kept == nil || string(kept.Body) != wantBody {
			t.Fatalf("%s: the key keeps %+v, want %s", tt.key, kept, wantBody)
		}
	}

	// A run that failed (here: its call's context ended) keeps its error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ans, err := f.app.Invoke(ctx, streamCall("echo", "failed", nil, errCut))
	if err != nil {
		t.Fatal(err)
	}
	if r := ans.Outcome.Run; r.Status != run.StatusFailed || r.Error == nil || !strings.Contains(r.Error.Message, `node "start" (start): run canceled`) {
		t.Fatalf("answered %+v (error %+v), want the run's own failure", r, r.Error)
	}
	f.wantClean(t)
}

// A stream whose end's fate cannot be stored leaves its run as it was
// stored, its key answering that, and tells the observer.
func TestInvokeStreamNotFinished(t *testing.T) {
	t.Parallel()
	f := newContractFixture(t, 4, 10)
	f.app = New(Deps{Flows: f.app.flows, Runs: failingFinish{fakeRuns: f.runs}, Engine: &run.Engine{},
		Contract: f.app.contract, Observer: f.obs})
	ans, err := f.app.Invoke(context.Background(), streamCall("echo", "k", map[string]any{"s": "a"}, errCut))
	if err != nil {
		t.Fatal(err)
	}
	r := ans.Outcome.Run
	wantBody := `{"output":{"s":"a"},"run_id":"` + r.ID + `"}`
	if r.Status != run.StatusCompleted || f.runs.runs[0].Status != run.StatusCompleted {
		t.Fatalf("answered %s, stored %s; want the run as stored, completed", r.Status, f.runs.runs[0].Status)
	}
	if kept := f.keys.answered("ws", "k"); kept == nil || string(kept.Body) != wantBody {
		t.Fatalf("the key keeps %+v, want %s", kept, wantBody)
	}
	if len(f.obs.notFinished) != 1 || f.obs.notFinished[0] != r.ID {
		t.Fatalf("observer heard %v", f.obs.notFinished)
	}
}

// failingFinish is fakeRuns whose FinishStream fails.
type failingFinish struct{ *fakeRuns }

func (failingFinish) FinishStream(context.Context, *run.Run, run.Status, *catalog.Receipt) error {
	return errors.New("update run: connection reset")
}

// A session may be continued up to FLOW_SESSION_TTL after its run
// started, that instant included; past it, ErrSessionExpired
// (docs/limits-and-errors.md "Headless flows").
func TestContinueUpToTheSessionWindow(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		after time.Duration
		want  error
	}{
		"the window's last instant": {time.Hour, nil},
		"just past the window":      {time.Hour + time.Nanosecond, ErrSessionExpired},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newContractFixture(t, 4, 10)
			f.app.sessionTTL = time.Hour
			ans, err := f.invoke("ask", "", map[string]any{})
			if err != nil || ans.Outcome.Run.Status != run.StatusWaiting || ans.Outcome.Run.SessionID == "" {
				t.Fatalf("invoke = %+v, %v; want a waiting run", ans, err)
			}
			started := ans.Outcome.Run.StartedAt
			f.app.now = func() time.Time { return started.Add(tc.after) }
			next := call("ask", "", map[string]any{"text": "Ann"})
			next.Session = &SessionInput{ID: ans.Outcome.Run.SessionID, Text: "Ann"}
			ans, err = f.app.Invoke(context.Background(), next)
			if !errors.Is(err, tc.want) {
				t.Fatalf("continue %s after the start = %v, want %v", tc.after, err, tc.want)
			}
			if tc.want == nil && ans.Outcome.Run.Status != run.StatusCompleted {
				t.Fatalf("continue = %+v, want the run completed", ans.Outcome.Run)
			}
			f.wantClean(t)
		})
	}
}
