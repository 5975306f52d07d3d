package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testSecret = "whsec_test"

func testBody(id string) []byte {
	return []byte(`{"id":"` + id + `","event":"test","created_at":"2026-11-22T10:00:00.000Z","data":{"workspace_id":"w","sent_at":"2026-11-22T10:00:00.000Z"}}`)
}

// delivery builds a request the way the dispatcher sends one, signed with
// secret at ts.
func delivery(t testing.TB, url, secret string, ts time.Time, id string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEvent, "test")
	req.Header.Set(HeaderDelivery, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(secret, ts.Unix(), body))
	return req
}

// recorder is a handle function that counts its calls and fails while
// failing is set.
type recorder struct {
	mu      sync.Mutex
	events  []*Event
	failing bool
}

func (r *recorder) handle(_ context.Context, ev *Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	if r.failing {
		return errors.New("database down: secret internals")
	}
	return nil
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func serve(h http.Handler, req *http.Request) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestHandlerRefuses(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := testBody("d1")
	tests := []struct {
		name     string
		req      func() *http.Request
		wantCode int
		wantBody string // a part of the one-line body
	}{
		{"wrong secret", func() *http.Request { return delivery(t, "/", "whsec_other", now, "d1", body) },
			http.StatusUnauthorized, "signature does not match"},
		{"tampered body", func() *http.Request {
			r := delivery(t, "/", testSecret, now, "d1", body)
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(string(body), `"w"`, `"x"`, 1)))
			return r
		}, http.StatusUnauthorized, "signature does not match"},
		{"301 s old", func() *http.Request { return delivery(t, "/", testSecret, now.Add(-301*time.Second), "d1", body) },
			http.StatusUnauthorized, "timestamp refused"},
		{"301 s ahead", func() *http.Request { return delivery(t, "/", testSecret, now.Add(301*time.Second), "d1", body) },
			http.StatusUnauthorized, "timestamp refused"},
		{"no signature", func() *http.Request {
			r := delivery(t, "/", testSecret, now, "d1", body)
			r.Header.Del(HeaderSignature)
			return r
		}, http.StatusUnauthorized, "missing header: X-Service-Signature"},
		{"no timestamp", func() *http.Request {
			r := delivery(t, "/", testSecret, now, "d1", body)
			r.Header.Del(HeaderTimestamp)
			return r
		}, http.StatusUnauthorized, "missing header: X-Service-Timestamp"},
		{"signed but not an envelope", func() *http.Request { return delivery(t, "/", testSecret, now, "d1", []byte(`{"hello":1}`)) },
			http.StatusBadRequest, "malformed event"},
		{"delivery header not the envelope's id", func() *http.Request { return delivery(t, "/", testSecret, now, "d2", body) },
			http.StatusBadRequest, `X-Service-Delivery "d2" is not the envelope's id "d1"`},
		{"not a POST", func() *http.Request { return httptest.NewRequest(http.MethodGet, "/", nil) },
			http.StatusMethodNotAllowed, "POST"},
		{"too large", func() *http.Request {
			return delivery(t, "/", testSecret, now, "d1", append(testBody("d1"), strings.Repeat(" ", 2048)...))
		}, http.StatusRequestEntityTooLarge, "larger than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			h := NewHandler(testSecret, NewMemoryStore(0, 0), rec.handle, WithClock(func() time.Time { return now }), WithBodyLimit(1024))
			code, got := serve(h, tt.req())
			if code != tt.wantCode || !strings.Contains(got, tt.wantBody) || strings.Count(got, "\n") != 1 {
				t.Errorf("answer %d %q, want %d and one line with %q", code, got, tt.wantCode, tt.wantBody)
			}
			if rec.calls() != 0 {
				t.Errorf("handle called %d times", rec.calls())
			}
		})
	}
}

// A body limit of zero or less is the default, not a limit that refuses
// every delivery.
func TestHandlerBodyLimitZeroIsTheDefault(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	for _, n := range []int64{0, -1} {
		var rec recorder
		h := NewHandler(testSecret, NewMemoryStore(0, 0), rec.handle, WithClock(func() time.Time { return now }), WithBodyLimit(n))
		if code, body := serve(h, delivery(t, "/", testSecret, now, "d1", testBody("d1"))); code != http.StatusOK || rec.calls() != 1 {
			t.Errorf("WithBodyLimit(%d): %d %q, %d calls; want 200, 1", n, code, body, rec.calls())
		}
		big := append(testBody("d2"), strings.Repeat(" ", DefaultBodyLimit)...)
		if code, _ := serve(h, delivery(t, "/", testSecret, now, "d2", big)); code != http.StatusRequestEntityTooLarge {
			t.Errorf("WithBodyLimit(%d): a body over DefaultBodyLimit answered %d, want 413", n, code)
		}
	}
}

func TestHandlerHandlesOnce(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	var rec recorder
	h := NewHandler(testSecret, NewMemoryStore(0, 0), rec.handle, WithClock(func() time.Time { return now }))

	// Each attempt has its own timestamp and signature, the same id and body.
	for i, ts := range []time.Time{now.Add(-2 * time.Second), now} {
		if code, body := serve(h, delivery(t, "/", testSecret, ts, "d1", testBody("d1"))); code != http.StatusOK {
			t.Fatalf("attempt %d: %d %q, want 200", i+1, code, body)
		}
	}
	if rec.calls() != 1 {
		t.Fatalf("handle called %d times, want 1", rec.calls())
	}
	ev := rec.events[0]
	if ev.ID != "d1" || ev.Kind != KindTest || ev.Data.(*Test).WorkspaceID != "w" {
		t.Fatalf("handled %#v", ev)
	}
	if code, _ := serve(h, delivery(t, "/", testSecret, now, "d2", testBody("d2"))); code != http.StatusOK || rec.calls() != 2 {
		t.Fatalf("another delivery: %d, %d calls; want 200, 2", code, rec.calls())
	}
}

// TestHandlerReplayOfARecordedDelivery: an attempt recorded on its way
// (its headers and body as sent) and sent again is answered 200 without
// being handled while its timestamp verifies, and refused 401 once it no
// longer does, the store having remembered its id all along, whatever TTL
// it was given. The attempt is stamped Tolerance ahead of the receiver's
// clock, so it verifies for the longest: from its arrival until its stamp
// is Tolerance behind, and a second more (whole seconds).
func TestHandlerReplayOfARecordedDelivery(t *testing.T) {
	t.Parallel()
	for _, ttl := range []time.Duration{0, time.Nanosecond, time.Minute, 2 * Tolerance} {
		t.Run(fmt.Sprintf("ttl %s", ttl), func(t *testing.T) {
			t.Parallel()
			sent := time.Unix(1_800_000_000, 0)
			arrived := sent.Add(-Tolerance)
			now := arrived
			clock := func() time.Time { return now }
			store := NewMemoryStore(ttl, 0)
			store.now = clock
			var rec recorder
			h := NewHandler(testSecret, store, rec.handle, WithClock(clock))
			recorded := delivery(t, "/", testSecret, sent, "d1", testBody("d1"))
			replay := func() (int, string) {
				r := recorded.Clone(context.Background())
				r.Body = io.NopCloser(strings.NewReader(string(testBody("d1"))))
				return serve(h, r)
			}
			for _, tt := range []struct {
				after time.Duration
				code  int
			}{
				{0, http.StatusOK},           // the genuine attempt
				{time.Second, http.StatusOK}, // replayed at once
				{Tolerance, http.StatusOK},
				{2*Tolerance + 999*time.Millisecond, http.StatusOK}, // at the window's far edge
				{2*Tolerance + time.Second, http.StatusUnauthorized},
				{DefaultTTL + time.Hour, http.StatusUnauthorized}, // the id forgotten, the timestamp still refused
			} {
				now = arrived.Add(tt.after)
				if code, body := replay(); code != tt.code || rec.calls() != 1 {
					t.Fatalf("%s after it arrived: %d %q, %d calls; want %d, 1 call", tt.after, code, body, rec.calls(), tt.code)
				}
			}
			// The far edge is in the window: another delivery sent then is
			// handled.
			now = arrived.Add(2*Tolerance + 999*time.Millisecond)
			if code, _ := serve(h, delivery(t, "/", testSecret, sent, "d2", testBody("d2"))); code != http.StatusOK || rec.calls() != 2 {
				t.Fatalf("another delivery at the far edge: %d, %d calls; want 200, 2", code, rec.calls())
			}
		})
	}
}

func TestHandlerFailureIsRetried(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	rec := recorder{failing: true}
	h := NewHandler(testSecret, NewMemoryStore(0, 0), rec.handle, WithClock(func() time.Time { return now }))

	code, body := serve(h, delivery(t, "/", testSecret, now, "d1", testBody("d1")))
	if code != http.StatusInternalServerError || strings.Contains(body, "secret internals") {
		t.Fatalf("failed handle: %d %q, want 500 without the error's text", code, body)
	}
	rec.mu.Lock()
	rec.failing = false
	rec.mu.Unlock()
	if code, body := serve(h, delivery(t, "/", testSecret, now.Add(time.Second), "d1", testBody("d1"))); code != http.StatusOK {
		t.Fatalf("retry: %d %q, want 200", code, body)
	}
	if rec.calls() != 2 {
		t.Fatalf("handle called %d times, want 2 (the failure and the retry)", rec.calls())
	}
	if code, _ := serve(h, delivery(t, "/", testSecret, now.Add(2*time.Second), "d1", testBody("d1"))); code != http.StatusOK || rec.calls() != 2 {
		t.Fatalf("after success: %d, %d calls; want 200 without handling", code, rec.calls())
	}
}

type failingStore struct{ claimErr, releaseErr error }

func (s failingStore) Claim(context.Context, string) (bool, error) {
	return s.claimErr == nil, s.claimErr
}
func (s failingStore) Release(context.Context, string) error { return s.releaseErr }

func TestHandlerStoreErrors(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	clock := WithClock(func() time.Time { return now })
	var rec recorder
	h := NewHandler(testSecret, failingStore{claimErr: errors.New("redis: refused")}, rec.handle, clock)
	if code, body := serve(h, delivery(t, "/", testSecret, now, "d1", testBody("d1"))); code != http.StatusInternalServerError || rec.calls() != 0 || strings.Contains(body, "redis") {
		t.Fatalf("claim failed: %d %q, %d calls; want 500 without handling", code, body, rec.calls())
	}
	rec.failing = true
	h = NewHandler(testSecret, failingStore{releaseErr: errors.New("redis: refused")}, rec.handle, clock)
	if code, _ := serve(h, delivery(t, "/", testSecret, now, "d1", testBody("d1"))); code != http.StatusInternalServerError || rec.calls() != 1 {
		t.Fatalf("release failed: %d, %d calls; want 500", code, rec.calls())
	}
}

// Duplicates that arrive together, over real connections, are handled
// once: the others are answered 200 while the first is still in handle.
func TestHandlerConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	const n = 16
	var calls atomic.Int32
	proceed := make(chan struct{})
	h := NewHandler(testSecret, NewMemoryStore(0, 0), func(ctx context.Context, ev *Event) error {
		calls.Add(1)
		select {
		case <-proceed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	codes := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			resp, err := srv.Client().Do(delivery(t, srv.URL, testSecret, time.Now(), "d1", testBody("d1")))
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	// n-1 duplicates are answered while the first waits in handle.
	for i := 0; i < n-1; i++ {
		if code := <-codes; code != http.StatusOK {
			t.Fatalf("a duplicate was answered %d, want 200", code)
		}
	}
	close(proceed)
	if code := <-codes; code != http.StatusOK {
		t.Fatalf("the first was answered %d, want 200", code)
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("handle called %d times, want 1", got)
	}
}

// Distinct deliveries arriving together are each handled once.
func TestHandlerConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	h := NewHandler(testSecret, NewMemoryStore(0, 0), func(_ context.Context, ev *Event) error {
		mu.Lock()
		defer mu.Unlock()
		seen[ev.ID]++
		return nil
	})
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("d%d", i%10)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, body := serve(h, delivery(t, "/", testSecret, time.Now(), id, testBody(id))); code != http.StatusOK {
				t.Errorf("%s: %d %q", id, code, body)
			}
		}()
	}
	wg.Wait()
	if len(seen) != 10 {
		t.Fatalf("handled %d deliveries, want 10", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s handled %d times", id, n)
		}
	}
}

// A handle that panics releases its claim too (net/http recovers the
// panic and drops the connection): the next attempt is handled.
func TestHandlerPanicIsRetried(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	calls := 0
	h := NewHandler(testSecret, NewMemoryStore(0, 0), func(context.Context, *Event) error {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return nil
	}, WithClock(func() time.Time { return now }))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach net/http")
			}
		}()
		serve(h, delivery(t, "/", testSecret, now, "d1", testBody("d1")))
	}()
	if code, body := serve(h, delivery(t, "/", testSecret, now, "d1", testBody("d1"))); code != http.StatusOK || calls != 2 {
		t.Fatalf("after a panic: %d %q, %d calls; want 200, 2", code, body, calls)
	}
}
