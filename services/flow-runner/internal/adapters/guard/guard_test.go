package guard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const testKey = "sk-guard-0123456789"

// moderations is a fake moderation endpoint in OpenAI's shape: it flags
// an input holding "forbidden", answers 500 while down, and holds each
// request until hold is closed when hold is set.
type moderations struct {
	srv *httptest.Server
	// arrived gets a value as each request arrives.
	arrived chan struct{}

	mu     sync.Mutex
	inputs []string
	auth   []string
	down   bool
	hold   chan struct{}
}

func newModerations(t *testing.T) *moderations {
	t.Helper()
	m := &moderations{arrived: make(chan struct{}, 64)}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *moderations) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Input string `json:"input"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	m.mu.Lock()
	m.inputs = append(m.inputs, body.Input)
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	down, hold := m.down, m.hold
	m.mu.Unlock()
	m.arrived <- struct{}{}
	if hold != nil {
		<-hold
	}
	if r.URL.Path != "/v1/moderations" || down {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"moderation is down"}}`))
		return
	}
	flagged := strings.Contains(body.Input, "forbidden")
	// Two results, as for an array input: one flagged is enough.
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "modr-1", "model": "omni-moderation-latest", "results": []map[string]any{
		{"flagged": false, "categories": map[string]bool{}}, {"flagged": flagged, "categories": map[string]bool{"harassment": flagged}},
	}})
}

func (m *moderations) set(down bool, hold chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down, m.hold = down, hold
}

// sent is the inputs and Authorization headers received.
func (m *moderations) sent() (inputs, auth []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.inputs...), append([]string(nil), m.auth...)
}

func (m *moderations) requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.inputs)
}

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClock() *clock { return &clock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func moderated(m *moderations, o Options) *Guard {
	o.BaseURL = m.srv.URL + "/v1"
	return New(o)
}

func TestModeration(t *testing.T) {
	t.Parallel()
	m := newModerations(t)
	g := moderated(m, Options{APIKey: testKey})
	ctx := t.Context()
	for _, tt := range []struct {
		give string
		want bool
	}{{"hello there", false}, {"a forbidden thing", true}} {
		flagged, err := g.Check(ctx, tt.give)
		if err != nil || flagged != tt.want {
			t.Fatalf("Check(%q) = %v, %v; want %v", tt.give, flagged, err, tt.want)
		}
	}
	inputs, auth := m.sent()
	if len(inputs) != 2 || inputs[1] != "a forbidden thing" || auth[0] != "Bearer "+testKey {
		t.Fatalf("sent %q with %q", inputs, auth)
	}
}

func TestNoKeyNoAuthorization(t *testing.T) {
	t.Parallel()
	m := newModerations(t)
	if _, err := moderated(m, Options{}).Check(t.Context(), "hi"); err != nil {
		t.Fatal(err)
	}
	if _, auth := m.sent(); auth[0] != "" {
		t.Fatalf("Authorization %q sent without a key", auth[0])
	}
}

func TestBlockList(t *testing.T) {
	t.Parallel()
	g := New(Options{BlockList: []string{"ass", "Плохое слово", " KILL yourself ", "", "!!"}})
	tests := []struct {
		give string
		want bool
	}{
		{"an ass", true},
		{"ASS!", true},
		{"first class", false},
		{"assassin", false},
		{"это плохое   СЛОВО, да", true},
		{"ПЛОХОЕ", false},
		{"плохоеслово", false},
		{"please kill-yourself", true},
		{"skill yourself up", false},
		{"", false},
		{"!!", false},
	}
	for _, tt := range tests {
		flagged, err := g.Check(context.Background(), tt.give)
		if err != nil || flagged != tt.want {
			t.Errorf("Check(%q) = %v, %v; want %v", tt.give, flagged, err, tt.want)
		}
	}
	if err := g.Ready(context.Background()); err != nil {
		t.Fatalf("Ready with a block list = %v", err)
	}
}

func TestBothConfigured(t *testing.T) {
	t.Parallel()
	m := newModerations(t)
	g := moderated(m, Options{BlockList: []string{"refund"}})
	ctx := t.Context()

	// The block list answers without a call.
	if flagged, err := g.Check(ctx, "I want a REFUND"); err != nil || !flagged || m.requests() != 0 {
		t.Fatalf("block-listed: %v, %v after %d requests", flagged, err, m.requests())
	}
	if flagged, err := g.Check(ctx, "something forbidden"); err != nil || !flagged {
		t.Fatalf("moderation-flagged: %v, %v", flagged, err)
	}
	if flagged, err := g.Check(ctx, "a kind word"); err != nil || flagged {
		t.Fatalf("clean: %v, %v", flagged, err)
	}
	// The block list passing is not enough: the text was not checked as
	// configured.
	m.set(true, nil)
	if _, err := g.Check(ctx, "a kind word"); err == nil || !strings.Contains(err.Error(), "moderation is down") {
		t.Fatalf("endpoint down: %v", err)
	}
	if err := g.Ready(ctx); err != nil {
		t.Fatalf("Ready with a block list = %v", err)
	}
}

func TestNotConfigured(t *testing.T) {
	t.Parallel()
	g := New(Options{BlockList: []string{" ", ""}})
	if err := g.Ready(context.Background()); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("Ready = %v", err)
	}
	if _, err := g.Check(context.Background(), "hi"); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("Check = %v", err)
	}
}

func TestCheckErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want string
	}{
		{"no results", `{"results":[]}`, "no results"},
		{"not json", `ok ` + testKey, "not the JSON"},
		{"key echoed", `{"error":{"message":"bad key ` + testKey + `"}}`, "bad key [redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(tt.body, "error") {
					w.WriteHeader(http.StatusUnauthorized)
				}
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			flagged, err := New(Options{BaseURL: srv.URL, APIKey: testKey}).Check(t.Context(), "hi")
			if err == nil || flagged || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), testKey) {
				t.Fatalf("Check = %v, %v; want an error holding %q and not the key", flagged, err, tt.want)
			}
		})
	}
	t.Run("endpoint gone", func(t *testing.T) {
		t.Parallel()
		m := newModerations(t)
		m.srv.Close()
		g := moderated(m, Options{})
		if _, err := g.Check(t.Context(), "hi"); err == nil || !strings.Contains(err.Error(), "safety guard: no reply") {
			t.Fatalf("Check = %v", err)
		}
		// The failed check is the last known state: Ready says so
		// without a probe.
		if err := g.Ready(context.Background()); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("Ready = %v", err)
		}
	})
}

func TestReady(t *testing.T) {
	t.Parallel()
	m := newModerations(t)
	clk := newClock()
	g := moderated(m, Options{CheckInterval: 10 * time.Second, Now: clk.Now})
	ctx := t.Context()

	if err := g.Ready(ctx); err != nil || m.requests() != 1 {
		t.Fatalf("first Ready = %v after %d requests, want one probe", err, m.requests())
	}
	clk.advance(9 * time.Second)
	if err := g.Ready(ctx); err != nil || m.requests() != 1 {
		t.Fatalf("Ready within the interval = %v after %d requests, want no probe", err, m.requests())
	}
	// A real check renews the known state as a probe would.
	if _, err := g.Check(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	clk.advance(9 * time.Second)
	if err := g.Ready(ctx); err != nil || m.requests() != 2 {
		t.Fatalf("Ready after a check = %v after %d requests, want no probe", err, m.requests())
	}

	m.set(true, nil)
	clk.advance(10 * time.Second)
	const down = "the safety guard's moderation endpoint is unreachable: HTTP 500: moderation is down"
	if err := g.Ready(ctx); !errors.Is(err, ErrUnreachable) || err.Error() != down || m.requests() != 3 {
		t.Fatalf("stale Ready, endpoint down = %v after %d requests", err, m.requests())
	}
	// Down is known for the interval too.
	m.set(false, nil)
	if err := g.Ready(ctx); !errors.Is(err, ErrUnreachable) || err.Error() != down || m.requests() != 3 {
		t.Fatalf("Ready within the interval = %v after %d requests", err, m.requests())
	}
	clk.advance(10 * time.Second)
	if err := g.Ready(ctx); err != nil || m.requests() != 4 {
		t.Fatalf("Ready once back = %v after %d requests", err, m.requests())
	}
}

// Concurrent callers of a stale Ready share one probe.
func TestReadySharesOneProbe(t *testing.T) {
	t.Parallel()
	m := newModerations(t)
	hold := make(chan struct{})
	m.set(false, hold)
	g := moderated(m, Options{Now: newClock().Now})
	ctx := t.Context()

	const callers = 8
	errs := make(chan error, callers)
	started := make(chan struct{}, callers)
	for range callers {
		go func() {
			started <- struct{}{}
			errs <- g.Ready(ctx)
		}()
	}
	for range callers {
		<-started
	}
	<-m.arrived // the probe is held at the endpoint
	close(hold)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := m.requests(); n != 1 {
		t.Fatalf("%d requests for %d callers, want one probe", n, callers)
	}
}

// A caller that gives up waiting does not end the probe for the others.
func TestReadyCallerGivesUp(t *testing.T) {
	t.Parallel()
	m := newModerations(t)
	hold := make(chan struct{})
	m.set(false, hold)
	g := moderated(m, Options{Now: newClock().Now})

	impatient, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- g.Ready(impatient) }()
	<-m.arrived
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Ready = %v", err)
	}
	close(hold)
	if err := g.Ready(t.Context()); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	if n := m.requests(); n != 1 {
		t.Fatalf("%d requests, want the first probe to have served both", n)
	}
}

// A probe is bounded: a hung endpoint is unreachable within probeTimeout.
func TestReadyProbeTimesOut(t *testing.T) {
	t.Parallel()
	m := newModerations(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	m.set(false, hold)
	g := moderated(m, Options{})
	start := time.Now()
	if err := g.Ready(t.Context()); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "no answer in time") {
		t.Fatalf("Ready = %v", err)
	}
	if took := time.Since(start); took < probeTimeout || took > probeTimeout+time.Second {
		t.Fatalf("Ready took %s, want about %s", took, probeTimeout)
	}
}

// A check cut short by its run says nothing about the endpoint.
func TestCanceledCheckIsNotRecorded(t *testing.T) {
	t.Parallel()
	m := newModerations(t)
	hold := make(chan struct{})
	m.set(false, hold)
	g := moderated(m, Options{Now: newClock().Now})
	ctx, cancel := context.WithCancel(context.Background())
	checked := make(chan error, 1)
	go func() {
		_, err := g.Check(ctx, "hi")
		checked <- err
	}()
	<-m.arrived
	cancel()
	if err := <-checked; err == nil {
		t.Fatal("canceled Check succeeded")
	}
	close(hold)
	if err := g.Ready(t.Context()); err != nil || m.requests() != 2 {
		t.Fatalf("Ready = %v after %d requests, want a probe that succeeds", err, m.requests())
	}
}
