package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/idempotency"
	"github.com/parleyhq/parley/pkg/ratelimit"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv/apicheck"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/flow-runner/internal/adapters"
	svcconfig "github.com/parleyhq/parley/services/flow-runner/internal/config"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// The invoke contract: every rule of docs/flows.md "Idempotency" and
// "Concurrency and the daily cap", as a developer meets them.

// hold is a flow http node's target that holds each request until the
// test lets them all go: a run that is still going, as long as a test
// needs.
type hold struct {
	srv      *httptest.Server
	arrived  chan struct{}
	release  chan struct{}
	released sync.Once
}

func newHold(t *testing.T) *hold {
	h := &hold{arrived: make(chan struct{}, 200), release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.arrived <- struct{}{}
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(func() { h.letGo(); h.srv.Close() })
	return h
}

func (h *hold) letGo() { h.released.Do(func() { close(h.release) }) }

// wait waits for n requests to be held.
func (h *hold) wait(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-h.arrived:
		case <-time.After(15 * time.Second):
			t.Fatalf("%d of %d runs reached the held http node", i, n)
		}
	}
}

// heldFlow is a flow whose run waits at h's http node, then ends.
func heldFlow(h *hold) string {
	return doc("Held", apiOnly, "call",
		fmt.Sprintf(`{"id": "call", "type": "http", "method": "GET", "url": %q, "save_as": "resp", "next": "done"}`, h.srv.URL),
		`{"id": "done", "type": "end", "output": {"ok": "{{vars.resp.body.ok}}"}}`)
}

// counterFlow ends with an output that tells runs apart.
var counterFlow = doc("Counter", apiOnly, "done", `{"id": "done", "type": "end", "output": {"echo": "{{vars.input.n}}"}}`)

// keyed sends an invoke with an Idempotency-Key.
func (h *harness) keyed(ws, flowID, key, body string) (int, http.Header, []byte) {
	h.t.Helper()
	return h.call(ws, full, http.MethodPost, "/v1/flows/"+flowID+"/invoke", body, map[string]string{idempotency.Header: key})
}

// keyedLater is keyed on a goroutine of its own, for a call that is held
// while the test goes on: its answer's body comes on the channel.
func (h *harness) keyedLater(ws, flowID, key, body string) <-chan []byte {
	answer := make(chan []byte, 1)
	go func() {
		_, _, b := h.keyed(ws, flowID, key, body)
		answer <- b
	}()
	return answer
}

// runCount is how many runs the workspace has stored.
func (h *harness) runCount(ws string) int {
	h.t.Helper()
	var n int
	if err := h.env.DB(h.t, adapters.Schema, migrations.FS).Raw(`SELECT count(*) FROM flows.runs WHERE workspace_id = ?`, ws).Scan(&n).Error; err != nil {
		h.t.Fatal(err)
	}
	return n
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// Rule 1: at most 128 printable ASCII characters.
func TestIdempotencyKeyShape(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", counterFlow)
	for name, key := range map[string]string{
		"129 characters": strings.Repeat("k", 129),
		"a tab":          "order\t1",
		"non-ASCII":      "заказ-1",
		"DEL":            "order\x7f",
	} {
		status, _, body := h.keyed(ws, id, key, `{"input": {}}`)
		wantError(t, status, body, http.StatusBadRequest, idempotency.CodeKeyInvalid)
		if n := h.runCount(ws); n != 0 {
			t.Fatalf("%s: %d runs", name, n)
		}
	}
	// The key's form is checked before the body (docs/flows.md "Invoking
	// a flow"): a bad key with a bad input is told about the key.
	status, _, body := h.keyed(ws, id, "order\t1", `{"input": [1]}`)
	wantError(t, status, body, http.StatusBadRequest, idempotency.CodeKeyInvalid)
	status, _, body = h.keyed(ws, id, strings.Repeat("k", 128)+"", `{"input": {}}`)
	if status != http.StatusOK {
		t.Fatalf("128 characters: %d %s", status, body)
	}
}

// Rules 2–4: the same key and request replays the first answer, the flow
// does not run again; a byte-different body is another request.
func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", counterFlow)
	const body = `{"input": {"n": 1}}`
	status, hd, first := h.keyed(ws, id, "order-1", body)
	if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("first: %d %v %s", status, hd, first)
	}
	status, hd, again := h.keyed(ws, id, "order-1", body)
	if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" || !jsonEqual(t, first, again) {
		t.Fatalf("replay: %d %v %s; want 200, replayed, %s", status, hd, again, first)
	}
	if n := h.runCount(ws); n != 1 {
		t.Fatalf("%d runs; want the flow run once", n)
	}
	for _, other := range []string{`{"input":{"n":1}}`, `{"input": {"n": 1} }`, `{"input": {"n": 2}}`} {
		status, _, b := h.keyed(ws, id, "order-1", other)
		wantError(t, status, b, http.StatusUnprocessableEntity, idempotency.CodeKeyReuse)
	}
	// Keys are per workspace.
	other := uuid.NewString()
	otherFlow := h.publish(other, "", counterFlow)
	if status, hd, b := h.keyed(other, otherFlow, "order-1", body); status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("same key in another workspace: %d %v %s", status, hd, b)
	}
	if n := h.runCount(ws); n != 1 {
		t.Fatalf("%d runs after the refusals", n)
	}
}

// Rule 7: a failed run's result is replayed too.
func TestFailedRunIsReplayed(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Failing", apiOnly, "call",
		`{"id": "call", "type": "http", "method": "GET", "url": "http://127.0.0.1:1/nothing", "save_as": "resp", "next": "done"}`, endNode))
	status, _, first := h.keyed(ws, id, "k", `{"input": {}}`)
	out := apicheck.Body[flowrunnerapi.InvokeResponse](t, first)
	if status != http.StatusOK || out.Status != "failed" {
		t.Fatalf("first: %d %s", status, first)
	}
	status, hd, again := h.keyed(ws, id, "k", `{"input": {}}`)
	if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" || !jsonEqual(t, first, again) {
		t.Fatalf("replay of a failed run: %d %s", status, again)
	}
	if n := h.runCount(ws); n != 1 {
		t.Fatalf("%d runs", n)
	}
}

// Rule 5: an answer over 16 KB is not replayed: 409 with its run_id, and
// the key stays used.
func TestLargeAnswerIsNotReplayed(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", doc("Echo", apiOnly, "done", `{"id": "done", "type": "end", "output": {"echo": "{{vars.input.s}}"}}`))
	body := `{"input": {"s": "` + strings.Repeat("a", 16<<10-20) + `"}}`
	status, _, first := h.keyed(ws, id, "big", body)
	out := apicheck.Body[flowrunnerapi.InvokeResponse](t, first)
	if status != http.StatusOK || len(first) <= idempotency.MaxStoredBody {
		t.Fatalf("first: %d, %d bytes", status, len(first))
	}
	for range 2 {
		status, _, again := h.keyed(ws, id, "big", body)
		wantError(t, status, again, http.StatusConflict, idempotency.CodeResponseUnavailable)
		var e struct {
			RunID string `json:"run_id"`
		}
		decode(t, again, &e)
		if e.RunID != out.RunID {
			t.Fatalf("run_id %q, want %q", e.RunID, out.RunID)
		}
	}
	if n := h.runCount(ws); n != 1 {
		t.Fatalf("%d runs", n)
	}
}

// Rule 6: a repeat while the first still runs is 409
// idempotency_in_progress; then it replays.
func TestRepeatWhileRunning(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	held := newHold(t)
	ws := uuid.NewString()
	id := h.publish(ws, "", heldFlow(held))
	first := h.keyedLater(ws, id, "slow", `{"input": {}}`)
	held.wait(t, 1)
	status, _, body := h.keyed(ws, id, "slow", `{"input": {}}`)
	wantError(t, status, body, http.StatusConflict, idempotency.CodeInProgress)
	held.letGo()
	got := <-first
	status, hd, again := h.keyed(ws, id, "slow", `{"input": {}}`)
	if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" || !jsonEqual(t, got, again) {
		t.Fatalf("after the run: %d %s; want the replay of %s", status, again, got)
	}
}

// Rule 6: a claim older than IDEMPOTENCY_STUCK_AFTER belongs to a call
// that broke (its instance died): it is released and a new run starts.
func TestStuckClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *svcconfig.Config) { c.BudgetTime = time.Second; c.IdempotencyStuckAfter = 2 * time.Second })
	ws := uuid.NewString()
	id := h.publish(ws, "", counterFlow)
	const body = `{"input": {"n": 7}}`
	// An instance claimed the key and died before answering.
	dead := h.keyStore()
	res, err := dead.Begin(context.Background(), ws, "crashed", idempotency.Fingerprint(http.MethodPost, "/v1/flows/"+id+"/invoke", []byte(body)))
	if err != nil || res.State != idempotency.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	status, _, b := h.keyed(ws, id, "crashed", body)
	wantError(t, status, b, http.StatusConflict, idempotency.CodeInProgress)
	wait.For(t, 10*time.Second, "the stuck claim to be taken over", func() error {
		status, _, b := h.keyed(ws, id, "crashed", body)
		if status != http.StatusOK {
			return fmt.Errorf("%d %s", status, b)
		}
		return nil
	})
	if n := h.runCount(ws); n != 1 {
		t.Fatalf("%d runs", n)
	}
	if err := res.Claim.Complete(context.Background(), idempotency.Response{Status: 200, Body: []byte(`{}`)}); err == nil {
		t.Fatal("the dead call's late answer overwrote the new one")
	}
}

// keyStore is the flow-runner's key store, as another instance has it.
func (h *harness) keyStore() *idempotency.Store {
	return idempotency.New(h.env.Redis(h.t), redisx.Keys{Prefix: h.cfg.RedisPrefix}, "flows.invoke", idempotency.Options{
		TTL: h.cfg.IdempotencyTTL, StuckAfter: h.cfg.IdempotencyStuckAfter, RefField: "run_id",
	})
}

// Rule 7: a request refused before its run starts does not occupy the key.
func TestRefusedRequestLeavesTheKey(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	const body = `{"input": {}}`
	// 422: not invokable; republished, the same key and request run.
	id := h.publish(ws, "", doc("Handover", apiOnly, "h", `{"id": "h", "type": "handover", "next": "done"}`, endNode))
	status, _, b := h.keyed(ws, id, "k", body)
	wantError(t, status, b, http.StatusUnprocessableEntity, "flow_not_invokable")
	h.publish(ws, id, counterFlow)
	if status, hd, b := h.keyed(ws, id, "k", body); status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("after the 422: %d %v %s", status, hd, b)
	}
	// 404 on a session, 404 on a flow.
	cont := `{"session_id": "` + uuid.NewString() + `", "input": {"text": "hi"}}`
	for range 2 {
		status, _, b := h.keyed(ws, id, "k2", cont)
		wantError(t, status, b, http.StatusNotFound, "session_not_found")
	}
	missing := uuid.NewString()
	for range 2 {
		status, _, b := h.keyed(ws, missing, "k3", body)
		wantError(t, status, b, http.StatusNotFound, "flow_not_found")
	}
	if n := h.runCount(ws); n != 1 {
		t.Fatalf("%d runs", n)
	}
}

// A number no float64 holds, anywhere in input, is 400 input_invalid
// naming it, and a body JSON cannot read (NaN, Infinity) 400
// invalid_request; either way before anything runs or is counted: no run,
// no daily unit, and the Idempotency-Key is left for the request that
// follows.
func TestNumbersOutOfRangeAreRefusedBeforeAnything(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", counterFlow)
	for _, tt := range []struct{ body, field string }{
		{`{"input": {"n": 1e400}}`, "input.n"},
		{`{"input": {"n": -1e400}}`, "input.n"},
		{`{"input": {"n": 1` + strings.Repeat("0", 309) + `}}`, "input.n"},
		{`{"input": {"items": [{"price": 2}, {"price": 1.8e308}]}}`, "input.items[1].price"},
		{`{"input": {"n": 1e400}, "stream": true}`, "input.n"},
		{`{"session_id": "` + uuid.NewString() + `", "input": {"text": "hi", "n": -1E+999}}`, "input.n"},
	} {
		status, _, b := h.keyed(ws, id, "k", tt.body)
		if msg := wantError(t, status, b, http.StatusBadRequest, "input_invalid"); !strings.HasPrefix(msg, tt.field+": must be a number from ") {
			t.Errorf("%.60s: message %q, want it to name %s", tt.body, msg, tt.field)
		}
	}
	for _, body := range []string{`{"input": {"n": NaN}}`, `{"input": {"n": Infinity}}`, `{"input": {"n": -Infinity}}`, `{"input": {"n": 0x10}}`} {
		status, _, b := h.keyed(ws, id, "k", body)
		wantError(t, status, b, http.StatusBadRequest, "invalid_request")
	}
	if n := h.runCount(ws); n != 0 {
		t.Fatalf("%d runs after the refusals", n)
	}
	loc, err := h.cfg.Location()
	if err != nil {
		t.Fatal(err)
	}
	daily := dailycap.New(h.env.Redis(t), redisx.Keys{Prefix: h.cfg.RedisPrefix}, adapters.DailyCapCounter, loc)
	if used, err := daily.Used(context.Background(), ws); err != nil || used != 0 {
		t.Fatalf("daily count %d, %v after the refusals", used, err)
	}
	// The key is free: another request with it runs, and is not a replay.
	status, hd, b := h.keyed(ws, id, "k", `{"input": {"n": 1.7976931348623157e308}}`)
	if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "" || !strings.Contains(string(b), `"echo":1.7976931348623157e+308`) {
		t.Fatalf("the key's first good request: %d %v %s", status, hd, b)
	}
	if used, err := daily.Used(context.Background(), ws); err != nil || used != 1 {
		t.Fatalf("daily count %d, %v after one run", used, err)
	}
}

// Rule 8 and the concurrency limit: FLOW_CONCURRENCY runs per workspace
// across instances, streams included; the next is 429 with Retry-After,
// replays and in-progress answers included.
func TestConcurrencyAcrossInstances(t *testing.T) {
	t.Parallel()
	one := start(t, func(c *svcconfig.Config) { c.Concurrency = 2 })
	two := startOn(t, one.env, "-two", func(c *svcconfig.Config) { c.Concurrency = 2 })
	held := newHold(t)
	ws := uuid.NewString()
	id := one.publish(ws, "", heldFlow(held))
	counter := one.publish(ws, "", counterFlow)
	if status, _, b := one.keyed(ws, counter, "done-before", `{"input": {}}`); status != http.StatusOK {
		t.Fatalf("%d %s", status, b)
	}
	var wg sync.WaitGroup
	for i, h := range []*harness{one, two} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := map[string]string{idempotency.Header: fmt.Sprintf("run-%d", i)}
			if status, _, b := h.call(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", `{"input": {}}`, key); status != http.StatusOK {
				t.Errorf("held run %d: %d %s", i, status, b)
			}
		}()
	}
	held.wait(t, 2)
	for _, h := range []*harness{one, two} {
		for name, send := range map[string]func() (int, http.Header, []byte){
			"a new run":   func() (int, http.Header, []byte) { return h.keyed(ws, counter, uuid.NewString(), `{"input": {}}`) },
			"a replay":    func() (int, http.Header, []byte) { return h.keyed(ws, counter, "done-before", `{"input": {}}`) },
			"in progress": func() (int, http.Header, []byte) { return h.keyed(ws, id, "run-0", `{"input": {}}`) },
		} {
			status, hd, b := send()
			wantError(t, status, b, http.StatusTooManyRequests, "concurrency_limited")
			if hd.Get("Retry-After") != "1" {
				t.Fatalf("%s: Retry-After %q", name, hd.Get("Retry-After"))
			}
		}
	}
	// Another workspace has its own places.
	other := uuid.NewString()
	otherFlow := one.publish(other, "", counterFlow)
	if status, _, b := two.keyed(other, otherFlow, "x", `{"input": {}}`); status != http.StatusOK {
		t.Fatalf("another workspace: %d %s", status, b)
	}
	held.letGo()
	wg.Wait()
	// The places came back.
	if status, _, b := two.keyed(ws, counter, uuid.NewString(), `{"input": {}}`); status != http.StatusOK {
		t.Fatalf("after the runs: %d %s", status, b)
	}
}

// A place held by an instance that died (its lease no longer renewed)
// comes back when the lease runs out.
func TestDeadInstanceSlotComesBack(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	h := start(t, func(c *svcconfig.Config) { c.Concurrency = 1; c.SlotLease = lease })
	ws := uuid.NewString()
	id := h.publish(ws, "", counterFlow)
	slots := ratelimit.NewSlots(h.env.Redis(t), redisx.Keys{Prefix: h.cfg.RedisPrefix}, lease)
	if _, err := slots.Acquire(context.Background(), ratelimit.Slot{Name: "flows:runs:" + ws, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	status, _, b := h.keyed(ws, id, "a", `{"input": {}}`)
	wantError(t, status, b, http.StatusTooManyRequests, "concurrency_limited")
	wait.For(t, 10*time.Second, "the dead instance's place to run out", func() error {
		if status, _, b := h.keyed(ws, id, "a", `{"input": {}}`); status != http.StatusOK {
			return fmt.Errorf("%d %s", status, b)
		}
		return nil
	})
}

// A run longer than its slot's lease keeps its place: it is renewed.
func TestLongRunKeepsItsSlot(t *testing.T) {
	t.Parallel()
	const lease = 600 * time.Millisecond
	h := start(t, func(c *svcconfig.Config) { c.Concurrency = 1; c.SlotLease = lease })
	held := newHold(t)
	ws := uuid.NewString()
	id := h.publish(ws, "", heldFlow(held))
	counter := h.publish(ws, "", counterFlow)
	done := make(chan int, 1)
	go func() {
		status, _, _ := h.keyed(ws, id, "long", `{"input": {}}`)
		done <- status
	}()
	held.wait(t, 1)
	deadline := time.Now().Add(4 * lease)
	for time.Now().Before(deadline) {
		status, _, b := h.keyed(ws, counter, uuid.NewString(), `{"input": {}}`)
		wantError(t, status, b, http.StatusTooManyRequests, "concurrency_limited")
		time.Sleep(lease / 4)
	}
	held.letGo()
	if status := <-done; status != http.StatusOK {
		t.Fatalf("long run: %d", status)
	}
}

// The daily cap: INVOKE_DAILY_CAP runs a day per workspace, exact under
// 100 parallel invokes; replays and refused requests do not count.
func TestDailyInvokeCap(t *testing.T) {
	t.Parallel()
	const limit = 7
	h := start(t, func(c *svcconfig.Config) { c.InvokeDailyCap = limit; c.Concurrency = 200 })
	ws := uuid.NewString()
	id := h.publish(ws, "", counterFlow)
	// Refusals and a replay first: none counts.
	status, _, missing := h.keyed(ws, uuid.NewString(), "missing", `{"input": {}}`)
	wantError(t, status, missing, http.StatusNotFound, "flow_not_found")
	if status, _, b := h.keyed(ws, id, "first", `{"input": {}}`); status != http.StatusOK {
		t.Fatalf("%d %s", status, b)
	}
	if status, hd, _ := h.keyed(ws, id, "first", `{"input": {}}`); status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("replay: %d", status)
	}
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, b := h.api(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", `{"input": {}}`)
			if status == http.StatusTooManyRequests && !strings.Contains(string(b), `"daily_invoke_cap"`) {
				t.Errorf("429 %s; want daily_invoke_cap", b)
			}
			mu.Lock()
			counts[status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts[http.StatusOK] != limit-1 || counts[http.StatusTooManyRequests] != 100-(limit-1) {
		t.Fatalf("answers %v; want %d runs and the rest refused", counts, limit-1)
	}
	if n := h.runCount(ws); n != limit {
		t.Fatalf("%d runs stored", n)
	}
	// A replay still answers at the cap.
	if status, hd, _ := h.keyed(ws, id, "first", `{"input": {}}`); status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("replay at the cap: %d", status)
	}
}

// Rule 8, the backstop: a run that committed never runs again, even when
// Redis lost its key, or the process died between the commit and the
// Redis write (its claim left running).
func TestCommittedRunNeverReruns(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", counterFlow)
	const body = `{"input": {"n": 3}}`
	_, _, first := h.keyed(ws, id, "k", body)
	ctx := context.Background()
	h.env.ForgetRedis(t)
	status, hd, again := h.keyed(ws, id, "k", body)
	if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" || !jsonEqual(t, first, again) {
		t.Fatalf("after a Redis flush: %d %v %s", status, hd, again)
	}
	status, _, b := h.keyed(ws, id, "k", `{"input": {"n": 4}}`)
	wantError(t, status, b, http.StatusUnprocessableEntity, idempotency.CodeKeyReuse)

	// Died between commit and Redis write: the key's claim is left running.
	h.env.ForgetRedis(t)
	if res, err := h.keyStore().Begin(ctx, ws, "k", idempotency.Fingerprint(http.MethodPost, "/v1/flows/"+id+"/invoke", []byte(body))); err != nil || res.State != idempotency.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	status, hd, again = h.keyed(ws, id, "k", body)
	if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" || !jsonEqual(t, first, again) {
		t.Fatalf("with a claim left running: %d %v %s", status, hd, again)
	}
	if n := h.runCount(ws); n != 1 {
		t.Fatalf("%d runs", n)
	}
}

// Rule 8's one window: Redis loses the key while its first call still
// runs, so a repeat runs the flow again. The first call's run ends first;
// its receipt, stored first, answers the key from then on, from Redis as
// from PostgreSQL, though the repeat held the key's claim when it ended.
func TestKeyLostWhileRunningIsAnsweredByTheFirstReceipt(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	// Each call's run waits at a hold of its own: the flow is published
	// again, with the second hold, before the repeat.
	firstHold, repeatHold := newHold(t), newHold(t)
	id := h.publish(ws, "", heldFlow(firstHold))
	const body = `{"input": {}}`
	first := h.keyedLater(ws, id, "lost", body)
	firstHold.wait(t, 1)
	h.env.ForgetRedis(t)
	h.publish(ws, id, heldFlow(repeatHold))
	repeat := h.keyedLater(ws, id, "lost", body)
	repeatHold.wait(t, 1)
	firstHold.letGo()
	firstAnswer := <-first
	repeatHold.letGo()
	repeatAnswer := <-repeat
	if jsonEqual(t, firstAnswer, repeatAnswer) {
		t.Fatalf("the repeat was answered %s, the first call's answer; want a run of its own", repeatAnswer)
	}
	if n := h.runCount(ws); n != 2 {
		t.Fatalf("%d runs stored, want 2", n)
	}
	for _, when := range []string{"from Redis", "once Redis lost it again"} {
		status, hd, again := h.keyed(ws, id, "lost", body)
		if status != http.StatusOK || hd.Get(idempotency.ReplayedHeader) != "true" || !jsonEqual(t, firstAnswer, again) {
			t.Fatalf("the key %s: %d %s; want the first call's answer replayed, %s", when, status, again, firstAnswer)
		}
		h.env.ForgetRedis(t)
	}
}

// A run that started but could not be stored keeps its daily unit (it
// ran) and frees its key (nothing was committed that a repeat could
// replay): a JSON call is 500 internal_error, a stream ends with a failed
// end event.
func TestRunNotStored(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	ws := uuid.NewString()
	id := h.publish(ws, "", counterFlow)
	// From now on no run can be stored.
	if err := h.env.DB(t, adapters.Schema, migrations.FS).Exec(`ALTER TABLE flows.runs ADD CONSTRAINT refuse_runs CHECK (false) NOT VALID`).Error; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		status, _, b := h.keyed(ws, id, "k", `{"input": {}}`)
		wantError(t, status, b, http.StatusInternalServerError, "internal_error")
	}
	status, hd, body := h.call(ws, full, http.MethodPost, "/v1/flows/"+id+"/invoke", `{"input": {}, "stream": true}`, nil)
	events, _ := parseSSE(t, string(body))
	if status != http.StatusOK || hd.Get("Content-Type") != "text/event-stream" || len(events) == 0 {
		t.Fatalf("stream: %d %v %s", status, hd, body)
	}
	end := events[len(events)-1]
	if end.name != "end" || end.data["status"] != "failed" || !strings.Contains(fmt.Sprint(end.data["error"]), "internal_error") {
		t.Fatalf("end %v", end)
	}
	// The count of the service's day (DAILY_RESET_TZ).
	loc, err := h.cfg.Location()
	if err != nil {
		t.Fatal(err)
	}
	used, err := dailycap.New(h.env.Redis(t), redisx.Keys{Prefix: h.cfg.RedisPrefix}, adapters.DailyCapCounter, loc).Used(context.Background(), ws)
	if err != nil || used != 3 {
		t.Fatalf("daily count %d, %v; want the 3 runs that went", used, err)
	}
}
