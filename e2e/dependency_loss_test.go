package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/pkg/dailycap"
	"github.com/parleyhq/parley/pkg/redisx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/localserver"
	"github.com/parleyhq/parley/pkg/testenv/metafake"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestRedisAndPostgresLostUnderLoad runs Parley on Redis and PostgreSQL
// servers of the test's own (pkg/testenv/localserver; NATS is the shared
// one) under a steady load of customer messages (Telegram ingress to a
// signed webhook) and of flow invokes through the gateway, each with an
// Idempotency-Key and each sent again as a retrying client does. Under that
// load, one after the other: Redis is flushed (FLUSHALL); Redis is killed
// and started again, empty; PostgreSQL is restarted (fast shutdown); its
// postmaster is killed with SIGKILL and started again (crash recovery).
//
// What must hold, as docs/operations.md "When a dependency is down" says:
//
//   - every message ingress answered 200 reaches the webhook, under one
//     delivery id (the same id may come again: at-least-once delivery,
//     counted and reported); ingress answers 503 only while PostgreSQL is
//     down, never while Redis is;
//   - every invoke is answered 200 in the end, refused only with 503
//     service_unavailable and only during a fault; each key's repeats are
//     its first answer, replayed, byte for byte, whatever Redis lost in
//     between (the receipts in PostgreSQL answer for it);
//   - each key's flow ran once, but for the window docs/flows.md
//     "Idempotency" states: a call refused 503 after its run went (the run
//     could not be stored while PostgreSQL was down) runs again on the
//     retry; and exactly one run is stored per key;
//   - every service's /readyz comes back by itself, no process restarted.
//
// The flush also shows what losing Redis costs, each on a workspace of its
// own: a workspace limited per minute is allowed again; the places of the
// runs going are forgotten (FLOW_CONCURRENCY more may start beside them);
// the day's invoke count starts again (INVOKE_DAILY_CAP); a page's daily
// private replies start again (PRIVATE_REPLY_DAILY_CAP), while a
// commenter's 7-day window holds (it is in PostgreSQL too); and a key
// whose run was still going runs again when repeated, after which its
// first receipt answers.
//
// The test logs how long each fault stopped ingress, invokes and
// deliveries, and each service's readiness.
func TestRedisAndPostgresLostUnderLoad(t *testing.T) {
	t.Parallel()
	rd := localserver.StartRedis(t)
	pg := localserver.StartPostgres(t)
	graph, graphAPI := metafake.Start(t)
	s := startSuiteEnv(t, []testenv.Option{testenv.Servers(pg.URL, rd.URL)}, nil,
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
		"INVOKE_DAILY_CAP="+strconv.Itoa(lossDailyCap),
		"PRIVATE_REPLY_DAILY_CAP="+strconv.Itoa(lossPrivateReplyCap),
		"META_APP_SECRET="+cmtAppSecret,
		"META_GRAPH_API_BASE="+graphAPI+"/v21.0",
	)
	costs := newRedisCosts(t, s, graph)
	load := startLossLoad(t, s)
	ready := watchReadiness(t, s)
	load.waitProgress(t, time.Now(), "the load under way")
	steady := time.Now()
	load.waitProgress(t, steady, "the load alone")

	var faults []*fault
	begin := func(name string, redis bool) *fault {
		f := &fault{name: name, redis: redis, start: time.Now()}
		faults = append(faults, f)
		return f
	}

	// FLUSHALL: nothing becomes unavailable; what Redis held is gone.
	costs.before(t)
	f := begin("Redis FLUSHALL", true)
	rd.Flush(t)
	f.back = time.Now()
	costs.afterFlush(t)
	load.settle(t, ready, f)

	// SIGKILL: the services that use Redis are not ready and refuse what
	// needs it until it is back, empty; ingress does not need it.
	f = begin("Redis SIGKILL, started again empty", true)
	rd.Kill(t)
	wait.For(t, lossWithin, "the services without Redis to say so", func() error {
		for _, name := range []string{"gateway", "messaging", "flow-runner"} {
			if st := ready.now(name); st == http.StatusOK {
				return fmt.Errorf("%s /readyz %d", name, st)
			}
		}
		return nil
	})
	load.invokes.waitRefused(t, f, "an invoke refused without Redis")
	rd.Start(t)
	f.back = time.Now()
	load.settle(t, ready, f)
	costs.afterRedisRestart(t)

	// A fast restart: every connection is closed, what runs is rolled
	// back.
	f = begin("PostgreSQL fast restart", false)
	pg.Restart(t)
	f.back = time.Now()
	load.settle(t, ready, f)

	// SIGKILL of the postmaster: ingress refuses until crash recovery is
	// done.
	f = begin("PostgreSQL SIGKILL, started again", false)
	pg.Kill(t)
	load.messages.waitRefused(t, f, "a message refused without PostgreSQL")
	pg.Start(t)
	f.back = time.Now()
	load.settle(t, ready, f)

	load.stop(t)
	load.check(t, faults)
	for name, p := range s.procs {
		if !p.running() {
			t.Errorf("%s exited during the test", name)
		}
	}
	report(t, load, ready, steady, faults)
}

const (
	// lossDailyCap is INVOKE_DAILY_CAP: far above what the load runs in a
	// day, so that only the workspace filled to it on purpose reaches it.
	lossDailyCap = 100_000
	// lossPrivateReplyCap is PRIVATE_REPLY_DAILY_CAP.
	lossPrivateReplyCap = 2
	// lossWithin bounds each wait of the test for something the services
	// do on their own, on a loaded machine.
	lossWithin = 90 * time.Second
	// lossRetryFor bounds how long a load client retries one call.
	lossRetryFor = 2 * time.Minute
	// The load's pace: each sender waits lossPace between its messages,
	// each invoker between its keys, and a refused call is sent again
	// after lossRetryDelay.
	lossPace       = 50 * time.Millisecond
	lossRetryDelay = 100 * time.Millisecond
	lossSenders    = 2
	lossInvokers   = 2
)

// fault is one thing done to a server, and when.
type fault struct {
	name  string
	redis bool      // a fault of Redis (ingress must not notice)
	start time.Time // the test began it
	back  time.Time // the server was back
	// settled is when the test saw everything work again: every
	// /readyz 200, and ingress and invokes answered 200 after back.
	settled time.Time
}

// answer is one answer a load client got: when its request was sent, when
// it was answered, and its status (0: none).
type answer struct {
	sent, at time.Time
	status   int
}

// answers is a client's answers, in order.
type answers struct {
	mu  sync.Mutex
	all []answer
}

func (a *answers) add(sent time.Time, status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = append(a.all, answer{sent, time.Now(), status})
}

func (a *answers) answers() []answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.all)
}

// waitRefused waits until an answer since f began is not 200.
func (a *answers) waitRefused(t *testing.T, f *fault, what string) {
	t.Helper()
	wait.Until(t, lossWithin, what, func() bool {
		_, _, refused := pause(a.answers(), f.start, time.Now())
		return refused
	})
}

// pause finds, among all (in the order answered), the first answer
// between from and to that is not 200 (down), and the first 200 to a
// request sent after it (up, zero if none came): a request sent before
// the refusal may have got past what was missing. refused is false when
// every answer in between was 200.
func pause(all []answer, from, to time.Time) (down, up time.Time, refused bool) {
	for _, a := range all {
		switch {
		case a.at.Before(from):
		case !refused && a.at.After(to):
			return time.Time{}, time.Time{}, false
		case !refused && a.status != http.StatusOK:
			down, refused = a.at, true
		case refused && a.status == http.StatusOK && !a.sent.Before(down):
			return down, a.at, true
		}
	}
	return down, time.Time{}, refused
}

// okSince counts the 200s answered after from.
func okSince(all []answer, from time.Time) int {
	n := 0
	for _, a := range all {
		if a.status == http.StatusOK && a.at.After(from) {
			n++
		}
	}
	return n
}

// readiness polls every service's /readyz, keeping each change of its
// status.
type readiness struct {
	mu      sync.Mutex
	changes map[string][]answer
}

// readyPoll is how often readiness polls.
const readyPoll = 100 * time.Millisecond

func watchReadiness(t *testing.T, s *suite) *readiness {
	r := &readiness{changes: map[string][]answer{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for name, p := range s.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(readyPoll)
			defer tick.Stop()
			for {
				st := probe("http://" + p.addr + "/readyz")
				r.mu.Lock()
				if c := r.changes[name]; len(c) == 0 || c[len(c)-1].status != st {
					now := time.Now()
					r.changes[name] = append(c, answer{now, now, st})
				}
				r.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	return r
}

// now is the service's last /readyz status, 0 before the first.
func (r *readiness) now(service string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.changes[service]
	if len(c) == 0 {
		return 0
	}
	return c[len(c)-1].status
}

func (r *readiness) of(service string) []answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes[service])
}

// lossLoad is the steady load: customers writing through Telegram ingress
// and a developer invoking a flow with Idempotency-Keys.
type lossLoad struct {
	s        *suite
	ingress  string
	secret   string
	rcv      *receiver.Receiver
	key      string // the developer's API key
	flow     string
	effects  *effectCounter
	messages answers // ingress's answers
	invokes  answers // the gateway's answers to the invokes

	stopped atomic.Bool
	wg      sync.WaitGroup
	next    atomic.Int64 // the last update id taken

	mu       sync.Mutex
	accepted map[int]time.Time // update id -> answered 200
	keys     []*keyRun
	errs     []string
}

// keyRun is one Idempotency-Key of the load.
type keyRun struct {
	key string
	// first is the first 200 the key got: its run's answer (or, when an
	// earlier try committed and was answered 503, the receipt's replay).
	first flowAnswer
	// refusedAt are the times of the 503s the key got.
	refusedAt []time.Time
	replays   int
}

func startLossLoad(t *testing.T, s *suite) *lossLoad {
	t.Helper()
	ws, key := s.workspaceWithKey(t, "Load", "developer_api,flows")
	ch := s.addChannel(t, ws, "external", "--kind", "telegram", "--token", "700100400:AAH-loss-e2e-token")
	l := &lossLoad{
		s: s, ingress: s.messagingURL + "/ingress/telegram/" + ch.ID, secret: ch.Secret,
		key: key, effects: newEffectCounter(t), accepted: map[int]time.Time{},
	}
	l.rcv = receiver.New(t, receiver.Status(http.StatusNoContent), receiver.Within(3*time.Minute))
	s.saveWebhook(t, key, l.rcv.URL)
	l.flow = s.publishFlow(t, ws, l.effects.flow())
	t.Cleanup(func() { l.stopped.Store(true); l.wg.Wait() })
	for i := range lossSenders {
		l.wg.Add(1)
		go l.send(int64(7000 + i))
	}
	for i := range lossInvokers {
		l.wg.Add(1)
		go l.invoke(i)
	}
	return l
}

func (l *lossLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 20 {
		l.errs = append(l.errs, fmt.Sprintf(format, args...))
	}
}

// send writes messages as customer from, each posted until it is answered
// 200, as Telegram does.
func (l *lossLoad) send(from int64) {
	defer l.wg.Done()
	for !l.stopped.Load() {
		id := int(l.next.Add(1))
		body := telegramMessage(id, from, "Lou", updateText(id))
		deadline := time.Now().Add(lossRetryFor)
		for {
			sent := time.Now()
			st := postTelegram(l.ingress, l.secret, body)
			l.messages.add(sent, st)
			if st == http.StatusOK {
				l.mu.Lock()
				l.accepted[id] = time.Now()
				l.mu.Unlock()
				break
			}
			if st != http.StatusServiceUnavailable {
				l.fail("update %d: ingress answered %d, want 200 or 503", id, st)
			}
			if time.Now().After(deadline) {
				l.fail("update %d: not accepted within %s", id, lossRetryFor)
				return
			}
			time.Sleep(lossRetryDelay)
		}
		time.Sleep(lossPace)
	}
}

// updateText is the text of the load's message id.
func updateText(id int) string { return fmt.Sprintf("update %d", id) }

// invoke calls the flow with a new key each round until it is answered
// 200; then sends the same call again, and the call of a key from
// earlier, as retrying clients do: both must be replays.
func (l *lossLoad) invoke(worker int) {
	defer l.wg.Done()
	for i := 0; !l.stopped.Load(); i++ {
		k := &keyRun{key: fmt.Sprintf("loss-%d-%d", worker, i)}
		if !l.call(k, false) {
			return
		}
		l.mu.Lock()
		l.keys = append(l.keys, k)
		older := l.keys[rand.IntN(len(l.keys))]
		l.mu.Unlock()
		if !l.call(k, true) || !l.call(older, true) {
			return
		}
		time.Sleep(lossPace)
	}
}

// call sends k's call until it is answered 200, and checks that answer:
// the key's run (repeat false), or its first answer replayed.
func (l *lossLoad) call(k *keyRun, repeat bool) bool {
	body := fmt.Sprintf(`{"input": {"key": %q}}`, k.key)
	deadline := time.Now().Add(lossRetryFor)
	for {
		sent := time.Now()
		a, err := postFlow(context.Background(), l.s.gatewayURL, l.key, invokePath(l.flow), body, idempotencyKeyHeader, k.key)
		if err != nil {
			a.status = 0
		}
		l.invokes.add(sent, a.status)
		switch {
		case a.status == http.StatusOK:
			return l.answered(k, repeat, a)
		case a.status == http.StatusServiceUnavailable && a.code() == "service_unavailable" && a.header.Get("Retry-After") != "":
			l.mu.Lock()
			k.refusedAt = append(k.refusedAt, time.Now())
			l.mu.Unlock()
		case err != nil:
			l.fail("key %s: %v", k.key, err)
		default:
			l.fail("key %s: %s, want 200 or 503 service_unavailable with Retry-After", k.key, a)
		}
		if time.Now().After(deadline) {
			l.fail("key %s: not answered 200 within %s", k.key, lossRetryFor)
			return false
		}
		time.Sleep(lossRetryDelay)
	}
}

// answered checks a 200 to k's call.
func (l *lossLoad) answered(k *keyRun, repeat bool, a flowAnswer) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	replayed := a.header.Get(replayedHeader) == "true"
	if !repeat {
		var res flowResult
		if err := json.Unmarshal(a.body, &res); err != nil || res.Status != "completed" || res.RunID == "" || res.Output["key"] != k.key {
			l.errs = append(l.errs, fmt.Sprintf("key %s: %s; want its run, completed", k.key, a))
			return false
		}
		// Only a try answered 503 may have committed its run first.
		if replayed && len(k.refusedAt) == 0 {
			l.errs = append(l.errs, fmt.Sprintf("key %s: its first call answered as a replay", k.key))
		}
		k.first = a
		return true
	}
	var got, want any
	if !replayed || json.Unmarshal(a.body, &got) != nil || json.Unmarshal(k.first.body, &want) != nil || !reflect.DeepEqual(got, want) {
		l.errs = append(l.errs, fmt.Sprintf("key %s repeated: %s (Idempotent-Replayed %q); want its first answer replayed, %s",
			k.key, a, a.header.Get(replayedHeader), k.first.body))
		return false
	}
	k.replays++
	return true
}

// waitProgress waits until, since from, messages have been accepted and
// delivered and invokes answered.
func (l *lossLoad) waitProgress(t *testing.T, from time.Time, what string) {
	t.Helper()
	wait.For(t, lossWithin, what, func() error {
		if err := l.err(); err != nil {
			t.Fatal(err)
		}
		accepted, invoked, delivered := okSince(l.messages.answers(), from), okSince(l.invokes.answers(), from), 0
		for _, r := range l.rcv.Requests() {
			if r.At.After(from) {
				delivered++
			}
		}
		if accepted < 50 || delivered < 50 || invoked < 20 {
			return fmt.Errorf("%d messages accepted, %d delivered, %d invokes answered 200", accepted, delivered, invoked)
		}
		return nil
	})
}

// settle waits until everything works again after f: every /readyz 200,
// ingress and invokes answered 200 since the server was back, and the
// load going on.
func (l *lossLoad) settle(t *testing.T, ready *readiness, f *fault) {
	t.Helper()
	wait.For(t, lossWithin, f.name+": every /readyz 200 again", func() error {
		for name := range l.s.procs {
			if st := ready.now(name); st != http.StatusOK {
				return fmt.Errorf("%s /readyz %d", name, st)
			}
		}
		return nil
	})
	l.waitProgress(t, f.back, f.name+": the load going on")
	f.settled = time.Now()
}

func (l *lossLoad) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return errors.New("load: " + strings.Join(l.errs, "; "))
}

// stop ends the load once each client's call under way has its 200.
func (l *lossLoad) stop(t *testing.T) {
	t.Helper()
	l.stopped.Store(true)
	l.wg.Wait()
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// check holds the load to what the faults may cost.
func (l *lossLoad) check(t *testing.T, faults []*fault) {
	t.Helper()
	inFault := func(at time.Time, redis bool) *fault {
		for _, f := range faults {
			if f.redis == redis && !at.Before(f.start) && !at.After(f.settled) {
				return f
			}
		}
		return nil
	}
	// Refusals only during a fault: ingress's only while PostgreSQL was
	// away; none at all for a flush.
	for _, a := range l.messages.answers() {
		if a.status != http.StatusOK && inFault(a.at, false) == nil {
			t.Errorf("ingress answered %d at %s, outside a fault of PostgreSQL", a.status, a.at.Format(time.StampMilli))
		}
	}
	for _, a := range l.invokes.answers() {
		f := inFault(a.at, true)
		if f == nil {
			f = inFault(a.at, false)
		}
		if a.status != http.StatusOK && (f == nil || f == faults[0]) {
			t.Errorf("an invoke answered %d at %s, outside a fault that makes anything unavailable", a.status, a.at.Format(time.StampMilli))
		}
	}

	// Every accepted message arrived, under one delivery id.
	l.mu.Lock()
	accepted := len(l.accepted)
	l.mu.Unlock()
	var ids map[string]string
	var repeats int
	l.rcv.Await(t, fmt.Sprintf("the %d accepted messages delivered", accepted), func(got []receiver.Request) bool {
		var err error
		if ids, repeats, err = deliveriesByText(got); err != nil {
			t.Fatal(err)
		}
		return len(ids) >= accepted
	})
	l.mu.Lock()
	for id := range l.accepted {
		if _, ok := ids[updateText(id)]; !ok {
			t.Errorf("update %d was accepted and never delivered", id)
		}
	}
	l.mu.Unlock()
	if len(ids) != accepted {
		t.Errorf("%d messages delivered, %d accepted", len(ids), accepted)
	}
	t.Logf("messages: %d accepted, every one delivered; %d deliveries came again under their id (at least once)", accepted, repeats)

	// Each key's flow ran once, or once more for each of its tries
	// refused while PostgreSQL was away (a run that went and could not be
	// stored); one run stored per key.
	stored := l.storedRuns(t)
	effects := l.effects.counts()
	twice, replays := 0, 0
	keys := map[string]bool{}
	for _, k := range l.keys {
		keys[k.key] = true
		replays += k.replays
		extra := 0
		for _, at := range k.refusedAt {
			if inFault(at, false) != nil {
				extra++
			}
		}
		if n := effects[k.key]; n < 1 || n > 1+extra {
			t.Errorf("key %s: its flow ran %d times; want 1, or at most %d (%d tries refused while PostgreSQL was away)", k.key, n, 1+extra, extra)
		} else if n > 1 {
			twice++
		}
		if n := stored[k.key]; n != 1 {
			t.Errorf("key %s: %d runs stored, want 1", k.key, n)
		}
	}
	for key, n := range effects {
		if !keys[key] {
			t.Errorf("the flow ran %d times for key %q, which no call was answered 200 for", n, key)
		}
	}
	t.Logf("invokes: %d keys, each answered 200; %d repeats, every one its first answer replayed; keys whose flow ran twice (a try refused after its run went, while PostgreSQL was away): %d",
		len(l.keys), replays, twice)
}

// storedRuns counts the stored runs of the load's flow by key.
func (l *lossLoad) storedRuns(t *testing.T) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, l.s.env.DatabaseURL)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT vars->'input'->>'key', count(*) FROM flows.runs WHERE flow_id = $1 GROUP BY 1`, l.flow)
	if err != nil {
		t.Fatalf("count runs: %v", err)
	}
	out := map[string]int{}
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			t.Fatalf("count runs: %v", err)
		}
		out[key] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("count runs: %v", err)
	}
	return out
}

// effectCounter is what the load's flow calls: each run calls it once,
// with its key, so it counts how often each key's flow ran.
type effectCounter struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int
}

func newEffectCounter(t *testing.T) *effectCounter {
	e := &effectCounter{n: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.n[r.URL.Query().Get("key")]++
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// flow calls the counter with the run's input.key and answers it.
func (e *effectCounter) flow() string {
	return fmt.Sprintf(`{
  "name": "Effect",
  "triggers": ["api"],
  "nodes": [
    {"id": "start", "type": "start", "next": "call"},
    {"id": "call", "type": "http", "method": "GET", "url": %q, "save_as": "resp", "next": "done"},
    {"id": "done", "type": "end", "output": {"key": "{{vars.input.key}}", "ok": "{{vars.resp.body.ok}}"}}
  ]
}`, e.srv.URL+"/effect?key={{vars.input.key}}")
}

func (e *effectCounter) counts() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.n)
}

// report logs each fault's cost as the clients and the probes saw it, in
// times from the fault's start, after the longest time without a delivery
// under the load alone, from steady to the first fault.
func report(t *testing.T, l *lossLoad, ready *readiness, steady time.Time, faults []*fault) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	outage := func(all []answer, f *fault) string {
		down, up, refused := pause(all, f.start, f.settled)
		switch {
		case !refused:
			return "never refused"
		case up.IsZero():
			return fmt.Sprintf("refused from +%s, not answered 200 again", ms(down.Sub(f.start)))
		}
		return fmt.Sprintf("refused from +%s to +%s (%s)", ms(down.Sub(f.start)), ms(up.Sub(f.start)), ms(up.Sub(down)))
	}
	var arrivals []time.Time
	for _, r := range l.rcv.Requests() {
		arrivals = append(arrivals, r.At)
	}
	slices.SortFunc(arrivals, func(a, b time.Time) int { return a.Compare(b) })
	// longestGap is the longest time no delivery arrived between from and
	// to.
	longestGap := func(from, to time.Time) time.Duration {
		var gap time.Duration
		last := from
		for _, at := range arrivals {
			if at.Before(from) {
				continue
			}
			if at.After(to) {
				break
			}
			gap, last = max(gap, at.Sub(last)), at
		}
		return gap
	}
	t.Logf("the load alone, for %s: longest time without a delivery: %s", ms(faults[0].start.Sub(steady)), ms(longestGap(steady, faults[0].start)))
	for _, f := range faults {
		gap := longestGap(f.start, f.settled)
		var probes []string
		for _, name := range []string{"gateway", "messaging", "webhook-dispatcher", "flow-runner"} {
			if down, up, refused := pause(ready.of(name), f.start, f.settled); refused && !up.IsZero() {
				probes = append(probes, fmt.Sprintf("%s %s", name, ms(up.Sub(down))))
			}
		}
		if len(probes) == 0 {
			probes = []string{"none"}
		}
		t.Logf("%s: the server answered again at +%s; every /readyz 200 and the load through again by +%s\n\tingress: %s\n\tinvokes: %s\n\tlongest time without a delivery: %s\n\t/readyz not 200 (polled every %s): %s",
			f.name, ms(f.back.Sub(f.start)), ms(f.settled.Sub(f.start)),
			outage(l.messages.answers(), f), outage(l.invokes.answers(), f), ms(gap), readyPoll, strings.Join(probes, ", "))
	}
}

// redisCosts shows, each on a workspace of its own, what a flush of Redis
// forgets.
type redisCosts struct {
	s *suite

	// A workspace limited to 2 requests a minute.
	limitedKey string
	limitedAt  time.Time // its 429, and when the window was to end
	limitedEnd time.Time

	// A workspace running FLOW_CONCURRENCY runs held at their http node.
	slotsKey    string
	slotsTarget *heldTarget
	slotsHeld   string // the held flow
	slotsQuick  string // a flow that ends at once
	slotsRuns   <-chan flowAnswer

	// A workspace whose keyed run is held while Redis loses its key.
	keysKey    string
	keysTarget *heldTarget
	keysHeld   string
	keysFirst  <-chan flowAnswer
	keysAnswer flowAnswer // the first receipt's answer, once known

	// A workspace whose day's runs are all spent.
	cappedID    string
	cappedKey   string
	cappedQuick string

	// A page whose private replies of the day, and a commenter's of the
	// week, are spent.
	comments *commentShop
	page     string
}

// keysKeyName is the Idempotency-Key whose run is held across the flush.
const keysKeyName = "order-held-across-the-flush"

func newRedisCosts(t *testing.T, s *suite, graph *metafake.Server) *redisCosts {
	t.Helper()
	c := &redisCosts{s: s}
	_, c.limitedKey = s.workspaceWithRate(t, "Limited", "developer_api", 2)

	var ws string
	ws, c.slotsKey = s.flowDeveloper(t)
	c.slotsTarget = newHeldTarget(t)
	c.slotsHeld = s.publishFlow(t, ws, heldFlow("Held", c.slotsTarget.url()))
	c.slotsQuick = s.publishFlow(t, ws, quickFlow)

	ws, c.keysKey = s.flowDeveloper(t)
	c.keysTarget = newHeldTarget(t)
	c.keysHeld = s.publishFlow(t, ws, heldFlow("Held", c.keysTarget.url()))

	c.cappedID, c.cappedKey = s.flowDeveloper(t)
	c.cappedQuick = s.publishFlow(t, c.cappedID, quickFlow)

	c.comments = &commentShop{suite: s, graph: graph, rcv: newReceiver(t)}
	c.comments.workspace, c.comments.key = s.developer(t)
	c.comments.secret = s.saveWebhook(t, c.comments.key, c.comments.rcv.URL)
	c.page = "104990077"
	c.comments.channel(t, "messenger", c.page, "external")
	now := time.Now().UTC().Truncate(time.Second)
	// Bo comments twice; Di, Ed and Fy once each.
	for i, from := range [][2]string{{"2461", "Bo"}, {"2462", "Di"}, {"2461", "Bo"}, {"2464", "Ed"}, {"2465", "Fy"}} {
		id := fmt.Sprintf("%s_%d", c.page, i+1)
		c.comments.deliver(t, feedComment(c.page, id, from[0], from[1], "Do you ship to Darkhan?", now.Add(-time.Minute)))
		c.comments.waitComment(t, id)
	}
	return c
}

// before spends, in Redis, what the flush will forget.
func (c *redisCosts) before(t *testing.T) {
	t.Helper()
	s := c.s
	const body = `{"input": {}}`

	// FLOW_CONCURRENCY runs going: a fifth is refused.
	c.slotsRuns = together(flowConcurrency, func(int) flowAnswer {
		return flowCall(s.gatewayURL, c.slotsKey, c.slotsHeld, body)
	})
	c.slotsTarget.await(t, flowConcurrency, lossWithin)
	wantRefused(t, "a fifth run beside four", flowCall(s.gatewayURL, c.slotsKey, c.slotsQuick, body), "concurrency_limited")

	// A keyed run going: its key is in progress.
	c.keysFirst = together(1, func(int) flowAnswer {
		return flowCall(s.gatewayURL, c.keysKey, c.keysHeld, body, idempotencyKeyHeader, keysKeyName)
	})
	c.keysTarget.await(t, 1, lossWithin)
	wantRefused(t, "the key of a run going", flowCall(s.gatewayURL, c.keysKey, c.keysHeld, body, idempotencyKeyHeader, keysKeyName), "idempotency_in_progress")

	// The day's runs spent. Spending INVOKE_DAILY_CAP runs would take
	// long: the flow-runner's counter ("invoke", by workspace) is filled
	// at once instead.
	loc, err := time.LoadLocation(s.env.Connections().DailyResetTZ)
	if err != nil {
		t.Fatal(err)
	}
	counter := dailycap.New(s.env.Redis(t), redisx.Keys{Prefix: s.env.RedisPrefix}, "invoke", loc)
	if _, ok, err := counter.ReserveN(context.Background(), c.cappedID, lossDailyCap, lossDailyCap); err != nil || !ok {
		t.Fatalf("spend the day's runs: %v, %v", ok, err)
	}
	if a := flowCall(s.gatewayURL, c.cappedKey, c.cappedQuick, body); a.status != http.StatusTooManyRequests || a.code() != "daily_invoke_cap" {
		t.Fatalf("an invoke once the day's runs are spent: %s; want 429 daily_invoke_cap", a)
	}

	// The page's private replies: Bo's second comment is within his 7
	// days; Ed's is over the day's cap of 2.
	c.privateReply(t, 1)
	c.comments.wantRefused(t, "Bo's second comment", c.privateReplyPath(3), map[string]string{"text": "hi"}, http.StatusTooManyRequests, "private_reply_commenter_window")
	c.privateReply(t, 2)
	c.comments.wantRefused(t, "a third private reply today", c.privateReplyPath(4), map[string]string{"text": "hi"}, http.StatusTooManyRequests, "private_reply_daily_cap")

	// Last, as its window is a minute: two requests, then 429.
	for range 2 {
		if st, _, body := s.api(t, c.limitedKey, http.MethodGet, "/v1/me", nil); st != http.StatusOK {
			t.Fatalf("GET /v1/me within the limit: %d %v", st, body)
		}
	}
	st, h, _ := s.api(t, c.limitedKey, http.MethodGet, "/v1/me", nil)
	reset, err := strconv.Atoi(h.Get("RateLimit-Reset"))
	if st != http.StatusTooManyRequests || err != nil {
		t.Fatalf("GET /v1/me over the limit: %d, RateLimit-Reset %q; want 429", st, h.Get("RateLimit-Reset"))
	}
	c.limitedAt, c.limitedEnd = time.Now(), time.Now().Add(time.Duration(reset)*time.Second)
}

// afterFlush shows what the flush forgot.
func (c *redisCosts) afterFlush(t *testing.T) {
	t.Helper()
	s := c.s
	const body = `{"input": {}}`

	// The minute's window is gone: allowed again before it would have
	// ended.
	if st, _, got := s.api(t, c.limitedKey, http.MethodGet, "/v1/me", nil); st != http.StatusOK {
		t.Fatalf("GET /v1/me after the flush: %d %v; want 200, its window forgotten", st, got)
	}
	if time.Now().After(c.limitedEnd.Add(-time.Second)) {
		t.Fatalf("the flush came %s after the 429, too late to show the window forgotten (it ended anyway)", time.Since(c.limitedAt))
	}

	// The day's runs start again.
	wantCompleted(t, "an invoke of the spent workspace after the flush", flowCall(s.gatewayURL, c.cappedKey, c.cappedQuick, body))

	// The page's day starts again: Ed and Fy get theirs, twice the day's
	// cap in one day. Bo's week does not: the private replies stored in
	// PostgreSQL hold it too.
	c.comments.wantRefused(t, "Bo's second comment after the flush", c.privateReplyPath(3), map[string]string{"text": "hi"}, http.StatusTooManyRequests, "private_reply_commenter_window")
	c.privateReply(t, 4)
	c.privateReply(t, 5)
	if dms := len(c.comments.graph.CallsTo("/me/messages")); dms != 2*lossPrivateReplyCap {
		t.Fatalf("Meta got %d private replies today, want %d: twice the day's cap", dms, 2*lossPrivateReplyCap)
	}

	// The four runs going hold no place any more: four more start beside
	// them, and then a ninth is refused.
	more := together(flowConcurrency, func(int) flowAnswer {
		return flowCall(s.gatewayURL, c.slotsKey, c.slotsHeld, body)
	})
	c.slotsTarget.await(t, flowConcurrency, lossWithin)
	if n := c.slotsTarget.holding.Load(); n != 2*flowConcurrency {
		t.Fatalf("%d runs held at once after the flush, want %d: FLOW_CONCURRENCY beside the %d it forgot", n, 2*flowConcurrency, flowConcurrency)
	}
	wantRefused(t, "a run beside the four started after the flush", flowCall(s.gatewayURL, c.slotsKey, c.slotsQuick, body), "concurrency_limited")
	c.slotsTarget.letGo()
	for _, runs := range []<-chan flowAnswer{c.slotsRuns, more} {
		for range flowConcurrency {
			wantCompleted(t, "a held run", receive(t, runs, lossWithin, "the held runs' answers"))
		}
	}

	// The held run's key is gone: the repeat runs the flow again, beside
	// it. The first run ends first, and its receipt answers the key from
	// then on; the repeat gets its own run's answer.
	repeat := together(1, func(int) flowAnswer {
		return flowCall(s.gatewayURL, c.keysKey, c.keysHeld, body, idempotencyKeyHeader, keysKeyName)
	})
	c.keysTarget.await(t, 1, lossWithin)
	c.keysTarget.letGoOldest(t)
	first := receive(t, c.keysFirst, lossWithin, "the held keyed run's answer")
	firstRun := wantCompleted(t, "the held keyed run", first)
	c.keysTarget.letGo()
	second := receive(t, repeat, lossWithin, "the repeat's answer")
	secondRun := wantCompleted(t, "the repeat, run again", second)
	if second.header.Get(replayedHeader) != "" || secondRun.RunID == firstRun.RunID {
		t.Fatalf("the repeat after the flush: %s (Idempotent-Replayed %q); want a run of its own", second, second.header.Get(replayedHeader))
	}
	if n := c.keysTarget.seen.Load(); n != 2 {
		t.Fatalf("the keyed flow ran %d times, want 2", n)
	}
	c.keysAnswer = first
	wantReplay(t, "the key, repeated once both runs ended", flowCall(s.gatewayURL, c.keysKey, c.keysHeld, body, idempotencyKeyHeader, keysKeyName), first)
}

// afterRedisRestart: the key held across the flush, whose answer Redis
// lost again, is answered from its first receipt.
func (c *redisCosts) afterRedisRestart(t *testing.T) {
	t.Helper()
	a := flowCall(c.s.gatewayURL, c.keysKey, c.keysHeld, `{"input": {}}`, idempotencyKeyHeader, keysKeyName)
	wantReplay(t, "the key held across the flush, after Redis restarted empty", a, c.keysAnswer)
	if n := c.keysTarget.seen.Load(); n != 2 {
		t.Fatalf("the keyed flow ran %d times, want 2", n)
	}
}

func (c *redisCosts) privateReplyPath(i int) string {
	return fmt.Sprintf("/v1/comments/%s_%d/private-reply", c.page, i)
}

func (c *redisCosts) privateReply(t *testing.T, i int) {
	t.Helper()
	if st, out := c.comments.reply(t, c.privateReplyPath(i), map[string]string{"text": "hi"}); st != http.StatusOK {
		t.Fatalf("private reply to comment %d: %d %v", i, st, out)
	}
}

// flowCall invokes flowID through the gateway at baseURL; no answer is an
// answer with err set.
func flowCall(baseURL, key, flowID, body string, headers ...string) flowAnswer {
	a, err := postFlow(context.Background(), baseURL, key, invokePath(flowID), body, headers...)
	if err != nil {
		return flowAnswer{err: err}
	}
	return a
}
