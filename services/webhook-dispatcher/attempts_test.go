package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv/ports"
	"github.com/parleyhq/parley/pkg/testenv/receiver"
	svcconfig "github.com/parleyhq/parley/services/webhook-dispatcher/internal/config"
)

// The retry schedule, with a receiver that refuses every attempt with a
// 4xx: four attempts, never sooner than the configured delays after the
// previous one, each signed afresh with the time it was sent, all under
// one delivery id with one body; then the delivery is failed and counts
// once against the webhook. Only lower bounds on the gaps are asserted:
// the schedule promises "not before", and a busy machine may be late.
func TestRetryScheduleWithARefusingReceiver(t *testing.T) {
	t.Parallel()
	// Their sum (1.8 s) spans at least one second boundary, so fresh
	// timestamps must differ between the first and the last attempt.
	delays := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond}
	h := start(t, func(c *svcconfig.Config) { c.RetryDelays = delays }, nil)
	var mu sync.Mutex
	var arrived []time.Time
	rcv := receiver.New(t, func(_ int, w http.ResponseWriter) {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"no such hook"}`))
	})
	ws := uuid.NewString()
	secret := h.saveWebhook(ws, rcv.URL)
	ev := messageEvent(ws, false)
	h.publish(ev)

	d := h.waitDelivery(ws, ev.GetId())
	if d.Status != "failed" || d.Attempts != 4 || !is(d.ResponseStatus, 404) || d.DeliveredAt != nil {
		t.Errorf("log entry %s", jsonOf(d))
	}
	if e := text(d.LastError); !strings.Contains(e, "404") || !strings.Contains(e, "no such hook") {
		t.Errorf("last_error %q, want the status and the receiver's body", e)
	}
	hits := rcv.Requests()
	mu.Lock()
	at := append([]time.Time(nil), arrived...)
	mu.Unlock()
	if len(hits) != 4 || len(at) != 4 {
		t.Fatalf("receiver got %d requests, want 4 (a 4xx is retried like any failure)", len(hits))
	}
	stamps := make([]int64, len(hits))
	for i, got := range hits {
		if id := got.Header.Get("X-Service-Delivery"); id != ev.GetId() {
			t.Errorf("attempt %d: X-Service-Delivery %q, want %s", i+1, id, ev.GetId())
		}
		if !bytes.Equal(got.Body, hits[0].Body) || d.Payload != string(got.Body) {
			t.Errorf("attempt %d: body differs from the first or from the log", i+1)
		}
		if err := got.Verify(secret, at[i]); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
		// Signed when sent: the timestamp is the second the attempt left,
		// not the first attempt's.
		stamps[i], _ = strconv.ParseInt(got.Header.Get("X-Service-Timestamp"), 10, 64)
		if s := at[i].Unix(); stamps[i] > s || stamps[i] < s-1 {
			t.Errorf("attempt %d: X-Service-Timestamp %d, received at %d", i+1, stamps[i], s)
		}
		if i > 0 {
			if gap := at[i].Sub(at[i-1]); gap < delays[i-1] {
				t.Errorf("attempt %d arrived %s after attempt %d, before the %s delay", i+1, gap, i, delays[i-1])
			}
		}
	}
	if stamps[3] <= stamps[0] {
		t.Errorf("timestamps %v: the last attempt, 1.8 s later, carries no later second", stamps)
	}

	// The log's history shows the same schedule.
	history := h.history(ev.GetId())
	if len(history) != 4 {
		t.Fatalf("history %v", history)
	}
	var prev time.Time
	for i, a := range history {
		started, err := time.Parse(time.RFC3339Nano, fmt.Sprint(a["started_at"]))
		if err != nil || a["number"] != float64(i+1) || a["response_status"] != 404.0 {
			t.Errorf("history[%d] = %v", i, a)
		}
		if i > 0 {
			if gap := started.Sub(prev); gap < delays[i-1] {
				t.Errorf("history: attempt %d started %s after attempt %d, before the %s delay", i+1, gap, i, delays[i-1])
			}
		}
		prev = started
	}
	if st, failures := h.webhookRow(ws); st != "active" || failures != 1 {
		t.Errorf("webhook %s with %d failures, want active with 1: a delivery counts once, not per attempt", st, failures)
	}
	if m := h.metrics(); !strings.Contains(m, `parley_dispatcher_deliveries_total{event="message.received",outcome="failed"} 1`) ||
		!strings.Contains(m, `parley_dispatcher_attempt_duration_seconds_count{result="failure"} 4`) {
		t.Errorf("metrics do not show 4 failed attempts and 1 failed delivery:\n%s", grepLines(m, "parley_dispatcher_"))
	}
}

// hostile is a receiver that fails in one way, counting the bytes it got
// out to the dispatcher (what the dispatcher could at most have read).
type hostile struct {
	name    string
	handler func(w http.ResponseWriter, r *http.Request, written *atomic.Int64)
	// raw serves the connection by hand instead (broken HTTP).
	raw func(conn net.Conn, written *atomic.Int64)

	wantStatus    string // delivery status
	wantAttempts  int    // attempts made
	wantResponse  *int   // response_status, nil for none
	wantError     string // in last_error; "" when none
	wantCutAtTime bool   // every attempt ran into the attempt timeout

	url     string
	written atomic.Int64
	hits    atomic.Int32
}

// Receivers that fail in every way, through the full path (consumer,
// delivery, sender, log): each costs bounded time (no attempt outlives the
// attempt timeout by more than scheduling slack) and bounded reading (the
// dispatcher reads at most the 64 KiB cap, so a receiver can push out no
// more than that plus the kernel's socket buffers), and each outcome is
// recorded with a clear last_error of bounded length.
func TestFailingReceivers(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	// slack bounds how far past the attempt timeout an attempt may end on
	// a loaded machine; far below what the hostile receivers would hold
	// an unguarded client for (they go on for 30 s or forever).
	const slack = 2 * time.Second
	// What a receiver can push out before the dispatcher stops reading
	// is the 64 KiB cap plus kernel buffers (a few MiB on loopback); an
	// unbounded reader would take gigabytes in the same time.
	const maxWritten = 64 << 20
	h := start(t, func(c *svcconfig.Config) {
		c.AttemptTimeout = timeout
		c.RetryDelays = []time.Duration{5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}
	}, nil)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(make([]byte, 10<<20))
	_ = zw.Close()
	bomb := gz.Bytes()

	endless := func(status int) func(http.ResponseWriter, *http.Request, *atomic.Int64) {
		return func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
			w.WriteHeader(status)
			chunk := bytes.Repeat([]byte("x"), 32<<10)
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
				n, err := w.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		}
	}
	cases := []*hostile{
		{
			name: "no answer within the timeout",
			handler: func(w http.ResponseWriter, r *http.Request, _ *atomic.Int64) {
				select {
				case <-r.Context().Done():
				case <-time.After(30 * time.Second):
				}
				w.WriteHeader(http.StatusOK) // too late
			},
			wantStatus: "failed", wantAttempts: 4, wantResponse: nil,
			wantError: "no complete response within 500ms", wantCutAtTime: true,
		},
		{
			name:       "connection refused",
			wantStatus: "failed", wantAttempts: 4, wantResponse: nil, wantError: "connection refused",
		},
		{
			name: "status line one byte at a time",
			raw: func(conn net.Conn, written *atomic.Int64) {
				for _, b := range []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") {
					n, err := conn.Write([]byte{b})
					written.Add(int64(n))
					if err != nil {
						return
					}
					time.Sleep(time.Second)
				}
			},
			wantStatus: "failed", wantAttempts: 4, wantResponse: nil,
			wantError: "no complete response within 500ms", wantCutAtTime: true,
		},
		{
			name: "endless response headers",
			raw: func(conn net.Conn, written *atomic.Int64) {
				n, _ := io.WriteString(conn, "HTTP/1.1 200 OK\r\n")
				written.Add(int64(n))
				line := "X-Junk: " + strings.Repeat("j", 1000) + "\r\n"
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
					n, err := io.WriteString(conn, line)
					written.Add(int64(n))
					if err != nil {
						return
					}
				}
			},
			wantStatus: "failed", wantAttempts: 4, wantResponse: nil, wantError: "headers exceeded",
		},
		{
			name:       "endless 500 body",
			handler:    endless(http.StatusInternalServerError),
			wantStatus: "failed", wantAttempts: 4, wantResponse: new(500), wantError: "receiver answered 500: xxxx",
		},
		{
			// The answer is in the status line; the body is read up to
			// the cap and the connection dropped.
			name:       "endless 200 body",
			handler:    endless(http.StatusOK),
			wantStatus: "delivered", wantAttempts: 1, wantResponse: new(200),
		},
		{
			name: "200 then a body one byte a second",
			handler: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
				w.WriteHeader(http.StatusOK)
				for range 30 {
					n, err := w.Write([]byte("."))
					written.Add(int64(n))
					if err != nil {
						return
					}
					w.(http.Flusher).Flush()
					select {
					case <-r.Context().Done():
						return
					case <-time.After(time.Second):
					}
				}
			},
			wantStatus: "delivered", wantAttempts: 1, wantResponse: new(200), wantCutAtTime: true,
		},
		{
			// Never decompressed: 10 MiB of zeros stay 10 KiB on the wire.
			name: "gzip bomb",
			handler: func(w http.ResponseWriter, r *http.Request, written *atomic.Int64) {
				w.Header().Set("Content-Encoding", "gzip")
				w.WriteHeader(http.StatusBadGateway)
				n, _ := w.Write(bomb)
				written.Add(int64(n))
			},
			wantStatus: "failed", wantAttempts: 4, wantResponse: new(502), wantError: "receiver answered 502",
		},
	}

	ws := map[*hostile]string{}
	ids := map[*hostile]string{}
	for _, c := range cases {
		c.url = c.serve(t)
		ws[c] = uuid.NewString()
		h.saveWebhook(ws[c], c.url)
	}
	// All at once: the dispatcher works on them side by side.
	for _, c := range cases {
		ev := messageEvent(ws[c], false)
		ids[c] = ev.GetId()
		h.publish(ev)
	}
	for _, c := range cases {
		d := h.waitDelivery(ws[c], ids[c])
		what := c.name
		if d.Status != c.wantStatus || d.Attempts != c.wantAttempts || !reflect.DeepEqual(d.ResponseStatus, c.wantResponse) {
			t.Errorf("%s: log entry %s, want %s after %v attempts with response_status %s", what, jsonOf(d), c.wantStatus, c.wantAttempts, jsonOf(c.wantResponse))
		}
		lastErr := text(d.LastError)
		switch {
		case c.wantError == "" && d.LastError != nil:
			t.Errorf("%s: last_error %q, want none", what, lastErr)
		case !strings.Contains(lastErr, c.wantError):
			t.Errorf("%s: last_error %q, want it to mention %q", what, lastErr, c.wantError)
		case len(lastErr) > 600:
			t.Errorf("%s: last_error of %d bytes; receivers' text is capped", what, len(lastErr))
		}
		for _, a := range h.history(ids[c]) {
			took := time.Duration(a["duration_ms"].(float64) * float64(time.Millisecond))
			if took > timeout+slack {
				t.Errorf("%s: attempt %v took %s, past the %s attempt timeout", what, a["number"], took, timeout)
			}
			// The attempt's clock starts just after its deadline is set.
			if c.wantCutAtTime && took < timeout-50*time.Millisecond {
				t.Errorf("%s: attempt %v ended after %s, before the %s timeout could have cut it", what, a["number"], took, timeout)
			}
		}
		if n := c.written.Load(); n > maxWritten {
			t.Errorf("%s: the receiver got %d bytes out to the dispatcher; reading is not bounded", what, n)
		}
		if c.hits.Load() != int32(c.wantAttempts) && c.name != "connection refused" {
			t.Errorf("%s: receiver saw %d connections, want %v", what, c.hits.Load(), c.wantAttempts)
		}
		wantFailures := 1
		if c.wantStatus == "delivered" {
			wantFailures = 0
		}
		if st, failures := h.webhookRow(ws[c]); st != "active" || failures != wantFailures {
			t.Errorf("%s: webhook %s with %d failures, want active with %d", what, st, failures, wantFailures)
		}
	}
}

// serve starts c's receiver and returns its webhook URL. A "connection
// refused" receiver is a port that refuses (ports.Refused).
func (c *hostile) serve(t *testing.T) string {
	t.Helper()
	switch {
	case c.handler != nil:
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.hits.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			c.handler(w, r, &c.written)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/hook"
	case c.raw != nil:
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var conns sync.Map
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				c.hits.Add(1)
				conns.Store(conn, struct{}{})
				wg.Go(func() {
					defer conn.Close()
					// Read the request, then misbehave.
					req, err := http.ReadRequest(bufio.NewReader(conn))
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					c.raw(conn, &c.written)
				})
			}
		}()
		t.Cleanup(func() {
			_ = l.Close()
			conns.Range(func(k, _ any) bool { _ = k.(net.Conn).Close(); return true })
			wg.Wait()
		})
		return "http://" + l.Addr().String() + "/hook"
	default:
		return "http://" + ports.Refused(t) + "/hook"
	}
}

// metrics returns the dispatcher's /metrics page.
func (h *harness) metrics() string {
	h.t.Helper()
	resp, err := http.Get("http://" + h.cfg.Addr + "/metrics")
	if err != nil {
		h.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
