package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/sse"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// The invoke contract of POST /v1/flows/:id/invoke scaled out: two
// gateways and three flow-runners of the built binaries on one database,
// Redis and NATS, one workspace's requests spread over both gateways and
// landing on whichever flow-runner NATS's queue group picks. The service's
// own tests (services/flow-runner/invoke_contract_test.go, stream_test.go)
// hold each rule against one or two in-process instances; these hold them
// across processes, and when one of them is SIGKILLed mid-run.

// Settings of every flow-runner TestFlowInvokeScaleOut starts. The slot
// lease is short so that a killed runner's slots come back within the
// test. RUN_BUDGET_TIME must outlast what a part does while a run is held,
// at most starting two flow-runners while the victim holds its runs.
// IDEMPOTENCY_STUCK_AFTER must be over it (the flow-runner refuses to
// start otherwise), and leaves the killed call's key claimed when its
// slots are back, a lease after the kill.
const (
	scaleSlotLease  = time.Second
	scaleRunBudget  = 2 * time.Second
	scaleStuckAfter = 3 * time.Second
	// flowConcurrency is FLOW_CONCURRENCY, left at its default.
	flowConcurrency = 4
)

func scaleRunnerEnv() []string {
	return []string{
		"FLOW_SLOT_LEASE=" + scaleSlotLease.String(),
		"RUN_BUDGET_TIME=" + scaleRunBudget.String(),
		"IDEMPOTENCY_STUCK_AFTER=" + scaleStuckAfter.String(),
		// The held flows' http node calls the test on 127.0.0.1.
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
	}
}

const (
	idempotencyKeyHeader = "Idempotency-Key"
	replayedHeader       = "Idempotent-Replayed"
)

// scaleOut is the deployment the parts of TestFlowInvokeScaleOut share.
type scaleOut struct {
	s        *suite
	gateways []string // base URLs
	runners  []*proc  // every flow-runner started, the killed one included
}

// gateway spreads requests: the i-th goes to gateway i mod 2.
func (sc *scaleOut) gateway(i int) string { return sc.gateways[i%len(sc.gateways)] }

func (sc *scaleOut) liveRunners() []*proc {
	var live []*proc
	for _, p := range sc.runners {
		if p.running() {
			live = append(live, p)
		}
	}
	return live
}

// TestFlowInvokeScaleOut: with two gateways and three flow-runners, one
// Idempotency-Key runs its flow once however many calls race for it, the
// workspace's FLOW_CONCURRENCY holds across instances, of simultaneous
// continues of one session one wins, a SIGKILLed flow-runner's slots and
// keys come back, and SSE reaches the client through the gateway as the
// run goes.
func TestFlowInvokeScaleOut(t *testing.T) {
	t.Parallel()
	s := startSuiteOwn(t, func(service string, _ *testenv.Env) []string {
		if service == "flow-runner" {
			return scaleRunnerEnv()
		}
		return nil
	})
	sc := &scaleOut{
		s:        s,
		gateways: []string{s.gatewayURL, "http://" + s.startExtra(t, "gateway", "GATEWAY_ADDR").addr},
		runners:  []*proc{s.procs["flow-runner"]},
	}
	// First, while the suite's own flow-runner is the only one in the
	// queue group; it starts two more before it kills that one.
	t.Run("killed runner's slots and keys come back", sc.killedRunner)
	for len(sc.liveRunners()) < 3 {
		sc.runners = append(sc.runners, s.startExtra(t, "flow-runner", "FLOW_RUNNER_ADDR", scaleRunnerEnv()...))
	}
	t.Run("one run per idempotency key", sc.oneRunPerKey)
	t.Run("concurrency limit across instances", sc.limitAcrossInstances)
	t.Run("racing continues", sc.racingContinues)
	t.Run("stream through the gateway", sc.streamThroughGateway)
}

// A flow-runner SIGKILLed mid-run gives nothing back: its runs'
// concurrency slots come back when their leases run out (FLOW_SLOT_LEASE,
// renewed every third of it until the kill), their Idempotency-Keys answer
// idempotency_in_progress until the claim is older than
// IDEMPOTENCY_STUCK_AFTER and are then taken over, and nothing of the
// killed runs is stored. The runs are started while the victim is the
// only flow-runner, so they are its for certain; the survivors join the
// queue group while it holds them, so that a live runner answers the
// moment it dies.
func (sc *scaleOut) killedRunner(t *testing.T) {
	s := sc.s
	victim := sc.runners[0]
	ws, key := s.flowDeveloper(t)
	target := newHeldTarget(t)
	held := s.publishFlow(t, ws, heldFlow("Held", target.url()))
	quick := s.publishFlow(t, ws, quickFlow)
	const body = `{"input": {}}`

	// The victim's calls never get their answer: abandoned at the kill.
	// The first is a stream, whose run_start tells its run_id.
	ctx, abandon := context.WithCancel(context.Background())
	defer abandon()
	claimed := time.Now()
	st := openEventStream(t, sc.gateway(0), key, invokePath(held), body, idempotencyKeyHeader, "victim-0")
	for i := 1; i < flowConcurrency; i++ {
		go func() {
			_, _ = postFlow(ctx, sc.gateway(i), key, invokePath(held), body, idempotencyKeyHeader, fmt.Sprintf("victim-%d", i))
		}()
	}
	killedRun, _ := st.next(t, 10*time.Second).data["run_id"].(string)
	if _, err := uuid.Parse(killedRun); err != nil {
		t.Fatalf("the victim's stream began without a run_id: %q", killedRun)
	}
	target.await(t, flowConcurrency, 15*time.Second)
	for i := range sc.gateways {
		wantRefused(t, "a fifth run while the victim holds four", sc.post(t, i, key, quick, body), "concurrency_limited")
	}

	for range 2 {
		sc.runners = append(sc.runners, s.startExtra(t, "flow-runner", "FLOW_RUNNER_ADDR", scaleRunnerEnv()...))
	}
	if n := target.holding.Load(); n != flowConcurrency {
		t.Fatalf("%d of the victim's runs still held when the survivors were up, want %d (RUN_BUDGET_TIME %s shorter than starting two flow-runners?)",
			n, flowConcurrency, scaleRunBudget)
	}
	victim.kill(t)
	killed := time.Now()
	abandon()
	st.hangUp()
	t.Logf("victim killed %s after its runs were claimed", killed.Sub(claimed).Round(time.Millisecond))

	// The dead runs' leases outlive the process (they were renewed at most
	// a third of the lease before the kill)...
	wantRefused(t, "a run just after the kill", sc.post(t, 0, key, quick, body), "concurrency_limited")
	// ...and run out within FLOW_SLOT_LEASE of it. The margin is for the
	// polling and the request that finds the place free on a loaded
	// machine; the default lease (15 s), or a slot never given back,
	// would be far over it.
	var back time.Duration
	wait.For(t, scaleSlotLease+5*time.Second, "the killed runner's slots to come back", func() error {
		a := sc.post(t, 1, key, quick, body)
		if a.status == http.StatusTooManyRequests && a.code() == "concurrency_limited" {
			return errors.New(a.String())
		}
		wantCompleted(t, "a run once the slots came back", a)
		back = time.Since(killed)
		return nil
	})
	const margin = time.Second
	if back > scaleSlotLease+margin {
		t.Fatalf("the killed runner's slots came back %s after the kill; want within FLOW_SLOT_LEASE (%s)", back, scaleSlotLease)
	}
	t.Logf("slots back %s after the kill", back.Round(time.Millisecond))

	// The killed call's key is still claimed.
	wantRefused(t, "the killed call's key", sc.post(t, 0, key, held, body, idempotencyKeyHeader, "victim-0"), "idempotency_in_progress")
	// Nothing of the killed runs was stored, so none is left "waiting" or
	// running for ever: a run is written once, when its call ends (the run
	// and its node runs in one statement), and theirs never ended. The
	// streamed one's run_id, told by its run_start, names no run.
	if n := s.runsStored(t, held); n != 0 {
		t.Fatalf("%d runs of the killed runner's flow stored", n)
	}
	if status, _, got := s.api(t, key, http.MethodGet, "/v1/flows/"+held+"/runs/"+killedRun, nil); status != http.StatusNotFound || got["code"] != "run_not_found" {
		t.Fatalf("GET the killed run %q: %d %v; want 404 run_not_found", killedRun, status, got)
	}

	// All four places came back, and there are still four. Each run's
	// lease is renewed on its own, so the four run out at different
	// moments within FLOW_SLOT_LEASE of the kill: a refill call refused
	// before every lease can have run out asks again.
	refill := newHeldTarget(t)
	refillFlow := s.publishFlow(t, ws, heldFlow("Refill", refill.url()))
	allLeasesOut := killed.Add(scaleSlotLease + margin)
	answers := together(flowConcurrency, func(i int) flowAnswer {
		for {
			a := sc.postCtx(context.Background(), i, key, refillFlow, body)
			if a.status != http.StatusTooManyRequests || a.code() != "concurrency_limited" || time.Now().After(allLeasesOut) {
				return a
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	refill.await(t, flowConcurrency, 15*time.Second)
	wantRefused(t, "a fifth run beside the refill", sc.post(t, 1, key, quick, body), "concurrency_limited")
	refill.letGo()
	for range flowConcurrency {
		wantCompleted(t, "a refill run", receive(t, answers, 15*time.Second, "the refill runs' answers"))
	}

	// Older than IDEMPOTENCY_STUCK_AFTER, the key is taken over and the
	// flow runs again, to its end this time.
	target.passThrough()
	var again flowAnswer
	wait.For(t, scaleStuckAfter+10*time.Second, "the killed call's key to be taken over", func() error {
		a := sc.post(t, 1, key, held, body, idempotencyKeyHeader, "victim-0")
		if a.status == http.StatusConflict && a.code() == "idempotency_in_progress" {
			return errors.New(a.String())
		}
		again = a
		return nil
	})
	if waited := time.Since(claimed); waited < scaleStuckAfter {
		t.Fatalf("the key was taken over %s after its claim, before IDEMPOTENCY_STUCK_AFTER (%s)", waited, scaleStuckAfter)
	}
	res := wantCompleted(t, "the taken-over key's run", again)
	if again.header.Get(replayedHeader) != "" || res.RunID == killedRun || res.Output["ok"] != true {
		t.Fatalf("the taken-over key's run: %s %v; want a new run, not a replay, with output ok true", again, again.header)
	}
	replay := sc.post(t, 0, key, held, body, idempotencyKeyHeader, "victim-0")
	wantReplay(t, "the taken-over key, repeated", replay, again)
	if n := s.runsStored(t, held); n != 1 {
		t.Fatalf("%d runs of the killed runner's flow stored; want the one of the takeover", n)
	}
}

// Twenty identical calls at once with one Idempotency-Key, spread over
// both gateways, of a run held at its http node: one claims the key and
// runs the flow; while it is held none of the others can have an answer,
// so each is refused with 409 idempotency_in_progress (it found the key
// claimed) or 429 concurrency_limited with Retry-After: 1 (four calls
// already had the workspace's places when it came). Once the run ends,
// twenty more at once each get its answer replayed, same JSON, with
// Idempotent-Replayed: true (or 429 for the same reason: a replay takes a
// place too). The flow ran once: one request reached the target, one run
// is stored.
func (sc *scaleOut) oneRunPerKey(t *testing.T) {
	s := sc.s
	ws, key := s.flowDeveloper(t)
	target := newHeldTarget(t)
	held := s.publishFlow(t, ws, heldFlow("Held", target.url()))
	const callers = 20
	const body = `{"input": {"order": "A-1001"}}`
	orderKey := "order-" + uuid.NewString()
	call := func(i int) flowAnswer {
		return sc.postCtx(context.Background(), i, key, held, body, idempotencyKeyHeader, orderKey)
	}

	answers := together(callers, call)
	target.await(t, 1, 15*time.Second)
	refusals := map[string]int{}
	for i := range callers - 1 {
		a := receive(t, answers, 15*time.Second, fmt.Sprintf("the other calls' answers while the run is held (%d of %d so far)", i, callers-1))
		wantRefused(t, "a call while the key's run is held", a, "idempotency_in_progress", "concurrency_limited")
		refusals[a.code()]++
	}
	target.letGo()
	first := receive(t, answers, 15*time.Second, "the key's run's answer")
	res := wantCompleted(t, "the key's run", first)
	if first.header.Get(replayedHeader) != "" || res.Output["ok"] != true {
		t.Fatalf("the key's run: %s %v", first, first.header)
	}
	t.Logf("while the run was held: %v", refusals)

	replays := 0
	answers = together(callers, call)
	for range callers {
		a := receive(t, answers, 15*time.Second, "the repeats' answers")
		if a.status == http.StatusTooManyRequests {
			wantRefused(t, "a repeat", a, "concurrency_limited")
			continue
		}
		wantReplay(t, "a repeat after the run", a, first)
		replays++
	}
	if replays == 0 {
		t.Fatal("no repeat after the run was replayed")
	}
	wantReplay(t, "one more repeat", sc.post(t, 1, key, held, body, idempotencyKeyHeader, orderKey), first)

	if n := target.seen.Load(); n != 1 {
		t.Fatalf("the held target saw %d requests; want the one run's", n)
	}
	if n := s.runsStored(t, held); n != 1 {
		t.Fatalf("%d runs stored; want 1", n)
	}
	trace := s.runTrace(t, key, "/v1/flows/"+held, res.RunID)
	if run := trace["run"].(map[string]any); run["status"] != "completed" {
		t.Fatalf("the stored run: %v", run)
	}
}

// FLOW_CONCURRENCY (4) runs at once per workspace, counted across every
// instance: four runs held on several flow-runners, started through both
// gateways, and a fifth through either gateway is 429 concurrency_limited
// with Retry-After: 1; once they end, it goes. Where the four land is the
// queue group's choice: a round whose four all landed on one flow-runner
// (1 in 27) says nothing across instances and is played again.
func (sc *scaleOut) limitAcrossInstances(t *testing.T) {
	s := sc.s
	ws, key := s.flowDeveloper(t)
	target := newHeldTarget(t)
	held := s.publishFlow(t, ws, heldFlow("Held", target.url()))
	quick := s.publishFlow(t, ws, quickFlow)
	const body = `{"input": {}}`
	runners := sc.liveRunners()
	for round := 1; ; round++ {
		before := completedBy(runners)
		answers := together(flowConcurrency, func(i int) flowAnswer {
			return sc.postCtx(context.Background(), i, key, held, body)
		})
		target.await(t, flowConcurrency, 15*time.Second)
		for i := range sc.gateways {
			wantRefused(t, fmt.Sprintf("a fifth run through gateway %d", i+1), sc.post(t, i, key, quick, body), "concurrency_limited")
		}
		target.letGo()
		for range flowConcurrency {
			wantCompleted(t, "a held run", receive(t, answers, 15*time.Second, "the held runs' answers"))
		}
		served, spread := completedBy(runners), 0
		for i := range served {
			if served[i] -= before[i]; served[i] > 0 {
				spread++
			}
		}
		if spread >= 2 {
			t.Logf("round %d: held runs completed by each flow-runner: %v", round, served)
			break
		}
		if round == 4 {
			t.Fatalf("four rounds' held runs each landed on one flow-runner (last %v): is the queue group shared?", served)
		}
	}
	for i := range sc.gateways {
		wantCompleted(t, fmt.Sprintf("the fifth run through gateway %d, after the four", i+1), sc.post(t, i, key, quick, body))
	}
}

// Simultaneous continues of one waiting session, spread over both
// gateways and landing on several flow-runners: one wins, the others are
// 409 session_busy. The winner's continue is held at an http node after
// the question, with the run locked, until every other continue has its
// answer; so none of them can come after the run finished, which would be
// 404 session_not_found, and 409 session_busy is the only refusal
// accepted. There are as many continues as the workspace has places
// (FLOW_CONCURRENCY), so none is refused for the limit either. Of three
// rounds, at least one must have had its continues served by two
// flow-runners or more (all three rounds on one each: 1 in 27³).
func (sc *scaleOut) racingContinues(t *testing.T) {
	s := sc.s
	ws, key := s.flowDeveloper(t)
	target := newHeldTarget(t)
	flowID := s.publishFlow(t, ws, heldQuestionFlow(target.url()))
	const racers = flowConcurrency
	instances := len(sc.liveRunners())
	var spreads []int
	for round := range 3 {
		invoked := sc.post(t, round, key, flowID, `{"input": {}}`)
		var waiting flowResult
		if invoked.status != http.StatusOK || json.Unmarshal(invoked.body, &waiting) != nil || waiting.Status != "waiting" || waiting.SessionID == "" {
			t.Fatalf("invoke: %s; want a run waiting at the question", invoked)
		}
		body := fmt.Sprintf(`{"session_id": %q, "input": {"text": "Ada"}}`, waiting.SessionID)
		before := s.rpcRequestsBy(t, instances)
		answers := together(racers, func(i int) flowAnswer { return sc.postCtx(context.Background(), i, key, flowID, body) })
		target.await(t, 1, 15*time.Second)
		for i := range racers - 1 {
			a := receive(t, answers, 15*time.Second, fmt.Sprintf("the losing continues' answers while the winner is held (%d of %d so far)", i, racers-1))
			wantRefused(t, "a losing continue", a, "session_busy")
		}
		target.letGo()
		won := wantCompleted(t, "the winning continue", receive(t, answers, 15*time.Second, "the winning continue's answer"))
		if won.RunID != waiting.RunID || won.Output["name"] != "Ada" {
			t.Fatalf("the winning continue: %+v; want run %s with name Ada", won, waiting.RunID)
		}
		spread := 0
		for id, n := range s.rpcRequestsBy(t, instances) {
			if n > before[id] {
				spread++
			}
		}
		spreads = append(spreads, spread)
		wantRefused(t, "a continue of the finished run", sc.post(t, round+1, key, flowID, body), "session_not_found")
	}
	if n := target.seen.Load(); n != 3 {
		t.Fatalf("the held target saw %d requests; want one per round", n)
	}
	t.Logf("flow-runners that served each round's continues: %v", spreads)
	if slices.Max(spreads) < 2 {
		t.Fatalf("every round's continues were served by one flow-runner (%v): is the queue group shared?", spreads)
	}
}

// SSE through the gateway, read as curl -N does: the first event
// (run_start) reaches the client while the run is still held at its http
// node, every event comes in the run's order, and the stream ends with
// end. A client that hangs up mid-run stops the run, which is stored
// failed (stopped by the hang-up, not by RUN_BUDGET_TIME), and a repeat
// with its key, even one asking for a stream, is that failed answer as
// JSON with Idempotent-Replayed: true.
func (sc *scaleOut) streamThroughGateway(t *testing.T) {
	s := sc.s
	ws, key := s.flowDeveloper(t)
	target := newHeldTarget(t)
	flowID := s.publishFlow(t, ws, heldGreetingFlow(target.url()))
	path := invokePath(flowID)
	const body = `{"input": {"name": "Ada"}}`

	st := openEventStream(t, sc.gateway(0), key, path, body, idempotencyKeyHeader, "stream-"+uuid.NewString())
	events := []sseEvent{st.next(t, 10*time.Second)}
	firstAfter := time.Since(st.sent)
	for !events[len(events)-1].isNodeStart("call") {
		events = append(events, st.next(t, 10*time.Second))
	}
	target.await(t, 1, 10*time.Second)
	// The run cannot end before the target lets it go: events read while
	// it holds were relayed as they came, not kept until the end.
	if target.holding.Load() != 1 {
		t.Fatalf("%v reached the client only after the run had stopped at its http node; want them as they come", eventNames(events))
	}
	t.Logf("first event %s after the request", firstAfter.Round(time.Microsecond))
	target.letGo()
	events = append(events, st.rest(t, 10*time.Second)...)
	want := []string{"run_start", "node_start start", "node_end start", "node_start hi", "message", "node_end hi",
		"node_start call", "node_end call", "node_start done", "node_end done", "end"}
	if got := eventNames(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	runID, _ := events[0].data["run_id"].(string)
	if msg := events[4].data; msg["type"] != "text" || msg["text"] != "Hi Ada" {
		t.Fatalf("message %v", msg)
	}
	end := events[len(events)-1].data
	if end["status"] != "completed" || !reflect.DeepEqual(end["output"], map[string]any{"name": "Ada", "ok": true}) {
		t.Fatalf("end %v", end)
	}
	if run := s.runTrace(t, key, "/v1/flows/"+flowID, runID)["run"].(map[string]any); run["status"] != "completed" {
		t.Fatalf("the streamed run stored as %v", run)
	}

	// A client that hangs up mid-run.
	dropped := "dropped-" + uuid.NewString()
	st = openEventStream(t, sc.gateway(1), key, path, body, idempotencyKeyHeader, dropped)
	start := st.next(t, 10*time.Second)
	for ev := start; !ev.isNodeStart("call"); {
		ev = st.next(t, 10*time.Second)
	}
	target.await(t, 1, 10*time.Second)
	st.hangUp()
	hungUp := time.Now()
	var replay flowAnswer
	wait.For(t, 20*time.Second, "the abandoned run's answer to be kept", func() error {
		a := sc.post(t, 0, key, flowID, body, idempotencyKeyHeader, dropped, "Accept", "text/event-stream")
		if a.status == http.StatusConflict && a.code() == "idempotency_in_progress" {
			return errors.New(a.String())
		}
		replay = a
		return nil
	})
	t.Logf("abandoned run stored %s after the hang-up", time.Since(hungUp).Round(time.Millisecond))
	var failed struct {
		flowResult
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if mt, _, _ := mime.ParseMediaType(replay.header.Get("Content-Type")); replay.status != http.StatusOK || mt != "application/json" ||
		replay.header.Get(replayedHeader) != "true" || json.Unmarshal(replay.body, &failed) != nil {
		t.Fatalf("the hung-up stream's key, repeated: %s %v; want its answer replayed as JSON", replay, replay.header)
	}
	// "run canceled" is the engine's word for a run whose caller went;
	// RUN_BUDGET_TIME would have said run_budget_exceeded.
	if failed.Status != "failed" || failed.RunID != start.data["run_id"] || !strings.Contains(failed.Error.Message, "run canceled") {
		t.Fatalf("the hung-up stream's answer: %s; want run %v failed, canceled", replay.body, start.data["run_id"])
	}
	if run := s.runTrace(t, key, "/v1/flows/"+flowID, failed.RunID)["run"].(map[string]any); run["status"] != "failed" {
		t.Fatalf("the hung-up run stored as %v", run)
	}
}

// heldTarget is the held flows' http node target: it holds every request
// until the test lets those it holds go, so that a run stays in flight on
// whichever flow-runner took it as long as a test needs.
type heldTarget struct {
	srv     *httptest.Server
	arrived chan struct{} // one per request, as it arrives
	seen    atomic.Int32  // requests so far
	holding atomic.Int32  // requests held now

	mu      sync.Mutex
	release chan struct{}   // closed by letGo; later requests wait on a new one
	held    []chan struct{} // each held request's own release, oldest first (letGoOldest)
	open    bool            // the test ended: nothing is held
}

func newHeldTarget(t testing.TB) *heldTarget {
	h := &heldTarget{arrived: make(chan struct{}, 1000), release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.seen.Add(1)
		h.holding.Add(1)
		own := make(chan struct{})
		h.mu.Lock()
		release, open := h.release, h.open
		h.held = append(h.held, own)
		h.mu.Unlock()
		h.arrived <- struct{}{}
		if !open {
			select {
			case <-release:
			case <-own:
			case <-r.Context().Done():
			}
		}
		h.mu.Lock()
		h.held = slices.DeleteFunc(h.held, func(c chan struct{}) bool { return c == own })
		h.mu.Unlock()
		h.holding.Add(-1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(func() {
		h.passThrough()
		h.srv.Close()
	})
	return h
}

func (h *heldTarget) url() string { return h.srv.URL + "/held" }

// letGo releases the requests held now; later ones are held again.
func (h *heldTarget) letGo() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open {
		close(h.release)
		h.release = make(chan struct{})
	}
}

// letGoOldest releases the request held longest, and only it.
func (h *heldTarget) letGoOldest(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.held) == 0 {
		t.Fatal("heldTarget: no request is held")
	}
	close(h.held[0])
	h.held = h.held[1:]
}

// passThrough releases the requests held now and holds none from now on.
func (h *heldTarget) passThrough() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open {
		h.open = true
		close(h.release)
	}
}

// await waits for n more requests to arrive.
func (h *heldTarget) await(t testing.TB, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for i := range n {
		select {
		case <-h.arrived:
		case <-deadline:
			t.Fatalf("%d of %d runs reached the held http node within %s", i, n, within)
		}
	}
}

// heldFlow calls target, which holds the run there, and ends with what it
// answered.
func heldFlow(name, target string) string {
	return fmt.Sprintf(`{
  "name": %q,
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "call"},
    {"id": "call", "type": "http", "method": "GET", "url": %q, "save_as": "resp", "next": "done"},
    {"id": "done", "type": "end", "output": {"ok": "{{vars.resp.body.ok}}"}}
  ]
}`, name, target)
}

// heldQuestionFlow waits at a question; its continue is held at target.
func heldQuestionFlow(target string) string {
	return fmt.Sprintf(`{
  "name": "Held question",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "ask"},
    {"id": "ask", "type": "question", "text": "Your name?", "save_as": "name", "next": "call"},
    {"id": "call", "type": "http", "method": "GET", "url": %q, "save_as": "resp", "next": "done"},
    {"id": "done", "type": "end", "output": {"name": "{{vars.name}}"}}
  ]
}`, target)
}

// heldGreetingFlow sends a message, then is held at target.
func heldGreetingFlow(target string) string {
	return fmt.Sprintf(`{
  "name": "Held greeting",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "hi"},
    {"id": "hi", "type": "send_message", "message": {"type": "text", "text": "Hi {{vars.input.name}}"}, "next": "call"},
    {"id": "call", "type": "http", "method": "GET", "url": %q, "save_as": "resp", "next": "done"},
    {"id": "done", "type": "end", "output": {"name": "{{vars.input.name}}", "ok": "{{vars.resp.body.ok}}"}}
  ]
}`, target)
}

// quickFlow ends at once.
const quickFlow = `{
  "name": "Quick",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "done"},
    {"id": "done", "type": "end", "output": {"done": true}}
  ]
}`

// publishFlow publishes doc in workspace ws with parleyctl and returns its
// id.
func (s *suite) publishFlow(t testing.TB, ws, doc string) string {
	t.Helper()
	var pub struct {
		ID string `json:"id"`
	}
	s.ctl(t, &pub, "flow", "publish", "--workspace", ws, "--file", flowFile(t, doc))
	if pub.ID == "" {
		t.Fatal("flow publish printed no id")
	}
	return pub.ID
}

func invokePath(flowID string) string { return "/v1/flows/" + flowID + "/invoke" }

// runsStored counts the stored runs of a flow, whatever their status.
func (s *suite) runsStored(t testing.TB, flowID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.env.DatabaseURL)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM flows.runs WHERE flow_id = $1`, flowID).Scan(&n); err != nil {
		t.Fatalf("count runs: %v", err)
	}
	return n
}

// completedBy reads each flow-runner's completed runs from its /metrics.
func completedBy(runners []*proc) []float64 {
	out := make([]float64, len(runners))
	for i, p := range runners {
		out[i] = metric(p.addr, completedRuns)
	}
	return out
}

// rpcRequestsBy is how many requests each of the suite's flow-runners has
// been sent on its api endpoint, by instance id, as NATS micro's
// $SRV.STATS tells; want is how many are running. Flow-runners of other
// tests answer too, and are told apart by their endpoint's subject.
func (s *suite) rpcRequestsBy(t testing.TB, want int) map[string]int {
	t.Helper()
	nc, err := nats.Connect(s.env.NATSURL)
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	defer nc.Close()
	statsSubject, err := micro.ControlSubject(micro.StatsVerb, "flow-runner", "")
	if err != nil {
		t.Fatal(err)
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(statsSubject, inbox, nil); err != nil {
		t.Fatal(err)
	}
	api := s.env.RPCPrefix + ".flow-runner.api"
	out := map[string]int{}
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < want {
		msg, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("%s: %d of %d flow-runners answered: %v", statsSubject, len(out), want, err)
		}
		var stats micro.Stats
		if err := json.Unmarshal(msg.Data, &stats); err != nil {
			t.Fatalf("%s: %v: %s", statsSubject, err, msg.Data)
		}
		for _, ep := range stats.Endpoints {
			if ep.Subject == api {
				out[stats.ID] = ep.NumRequests
			}
		}
	}
	return out
}

// flowAnswer is one answer of a gateway as its client got it; err is why
// there was none.
type flowAnswer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (a flowAnswer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("%d %s", a.status, bytes.TrimSpace(a.body))
}

// code is the error code of a JSON error answer.
func (a flowAnswer) code() string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Code
}

// flowResult is an invoke's or a continue's JSON answer.
type flowResult struct {
	RunID     string         `json:"run_id"`
	Status    string         `json:"status"`
	SessionID string         `json:"session_id"`
	Output    map[string]any `json:"output"`
}

// flowClient sends the tests' requests, checked against the OpenAPI
// document (gateways); its timeout only bounds a request nobody answers,
// as a test abandons those it does not wait for.
var flowClient = &http.Client{Timeout: 60 * time.Second, Transport: gateways.Transport(&http.Transport{MaxIdleConnsPerHost: 32})}

// postFlow POSTs body to path on the gateway at baseURL with key and
// headers (name, value pairs) and reads the whole answer.
func postFlow(ctx context.Context, baseURL, key, path, body string, headers ...string) (flowAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, strings.NewReader(body))
	if err != nil {
		return flowAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := flowClient.Do(req)
	if err != nil {
		return flowAnswer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return flowAnswer{status: resp.StatusCode, header: resp.Header, body: raw}, err
}

// postCtx invokes flowID through gateway i; it never fails a test, so
// that it can run on any goroutine.
func (sc *scaleOut) postCtx(ctx context.Context, i int, key, flowID, body string, headers ...string) flowAnswer {
	a, err := postFlow(ctx, sc.gateway(i), key, invokePath(flowID), body, headers...)
	if err != nil {
		return flowAnswer{err: fmt.Errorf("POST %s through %s: %w", invokePath(flowID), sc.gateway(i), err)}
	}
	return a
}

// post is postCtx on the test's goroutine: no answer fails t.
func (sc *scaleOut) post(t testing.TB, i int, key, flowID, body string, headers ...string) flowAnswer {
	t.Helper()
	a := sc.postCtx(context.Background(), i, key, flowID, body, headers...)
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a
}

// together makes n calls at once, call(i) for i in [0, n), and returns
// their answers as they come.
func together(n int, call func(i int) flowAnswer) <-chan flowAnswer {
	answers := make(chan flowAnswer, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			answers <- call(i)
		}()
	}
	close(start)
	return answers
}

// receive takes the next answer, failing t if there is none within.
func receive(t testing.TB, answers <-chan flowAnswer, within time.Duration, what string) flowAnswer {
	t.Helper()
	select {
	case a := <-answers:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		return a
	case <-time.After(within):
		t.Fatalf("%s: none within %s", what, within)
		return flowAnswer{}
	}
}

// refusalStatus is the HTTP status of each refusal the tests expect.
var refusalStatus = map[string]int{
	"concurrency_limited":     http.StatusTooManyRequests,
	"idempotency_in_progress": http.StatusConflict,
	"session_busy":            http.StatusConflict,
	"session_not_found":       http.StatusNotFound,
}

// wantRefused checks an error answer: its code is one of codes, with that
// code's status; a 429 also says Retry-After: 1.
func wantRefused(t testing.TB, what string, a flowAnswer, codes ...string) {
	t.Helper()
	if code := a.code(); !slices.Contains(codes, code) || a.status != refusalStatus[code] {
		t.Fatalf("%s: %s; want %v", what, a, codes)
	}
	if a.status == http.StatusTooManyRequests && a.header.Get("Retry-After") != "1" {
		t.Fatalf("%s: 429 with Retry-After %q; want 1", what, a.header.Get("Retry-After"))
	}
}

// wantCompleted checks a 200 answer of a completed run and decodes it.
func wantCompleted(t testing.TB, what string, a flowAnswer) flowResult {
	t.Helper()
	var res flowResult
	if a.status != http.StatusOK || json.Unmarshal(a.body, &res) != nil || res.Status != "completed" || res.RunID == "" {
		t.Fatalf("%s: %s; want 200 and a completed run", what, a)
	}
	return res
}

// wantReplay checks that a is first's JSON body, replayed.
func wantReplay(t testing.TB, what string, a, first flowAnswer) {
	t.Helper()
	var got, want any
	if a.status != http.StatusOK || a.header.Get(replayedHeader) != "true" ||
		json.Unmarshal(a.body, &got) != nil || json.Unmarshal(first.body, &want) != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: %s (Idempotent-Replayed %q); want 200, replayed, %s", what, a, a.header.Get(replayedHeader), first.body)
	}
}

// sseEvent is one event of a text/event-stream.
type sseEvent struct {
	name string
	data map[string]any
}

func (e sseEvent) isNodeStart(nodeID string) bool {
	return e.name == "node_start" && e.data["node_id"] == nodeID
}

// eventNames are events' names, a node's with its id.
func eventNames(events []sseEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.name
		if id, ok := e.data["node_id"].(string); ok {
			out[i] += " " + id
		}
	}
	return out
}

// readSSEEvent reads the next event of an event stream, its data decoded,
// skipping comments (": ping"); io.EOF when the stream ended between
// events.
func readSSEEvent(r *sse.Reader) (sseEvent, error) {
	for {
		ev, err := r.Next()
		if err != nil {
			return sseEvent{}, err
		}
		if ev.Name == "" {
			continue
		}
		out := sseEvent{name: ev.Name}
		return out, ev.JSON(&out.data)
	}
}

// eventStream is a streamed invoke read as it comes, as curl -N reads it,
// on a goroutine of its own, so that a test can wait for the next event
// with a deadline.
type eventStream struct {
	sent   time.Time // when the request was sent
	events chan sseEvent
	err    error // why reading stopped (io.EOF: the stream ended); set before events is closed
	hangUp context.CancelFunc
}

// openEventStream POSTs body to path with Accept: text/event-stream and
// checks that the answer is a stream.
func openEventStream(t testing.TB, baseURL, key, path, body string, headers ...string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	st := &eventStream{sent: time.Now(), events: make(chan sseEvent, 64), hangUp: cancel}
	resp, err := flowClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s (stream): %v", path, err)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("POST %s (stream): %d %s %s; want 200 text/event-stream", path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	go func() {
		defer resp.Body.Close()
		r := sse.NewReader(resp.Body)
		for {
			ev, err := readSSEEvent(r)
			if err != nil {
				st.err = err
				close(st.events)
				return
			}
			st.events <- ev
		}
	}()
	return st
}

// next is the stream's next event.
func (st *eventStream) next(t testing.TB, within time.Duration) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-st.events:
		if !ok {
			t.Fatalf("the stream ended (%v) before its next event", st.err)
		}
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %s", within)
		return sseEvent{}
	}
}

// rest reads the stream to its end, which must be clean (io.EOF after a
// whole event).
func (st *eventStream) rest(t testing.TB, within time.Duration) []sseEvent {
	t.Helper()
	var out []sseEvent
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				if !errors.Is(st.err, io.EOF) {
					t.Fatalf("the stream broke after %v: %v", eventNames(out), st.err)
				}
				return out
			}
			out = append(out, ev)
		case <-deadline:
			t.Fatalf("the stream did not end within %s; so far %v", within, eventNames(out))
		}
	}
}
