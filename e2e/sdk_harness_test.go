package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	parley "github.com/parleyhq/parley/sdk/go"
)

// sdkClient is the Go client (sdk/go) with key, on the suite's gateway,
// its exchanges with the gateway recorded.
func (s *suite) sdkClient(t testing.TB, key string, opts ...parley.Option) (*parley.Client, *exchanges) {
	t.Helper()
	return sdkClientAt(s.gatewayURL, key, opts...)
}

// sdkClientAt is sdkClient on baseURL (a gatewayFront's, say). Its requests
// to a gateway of a suite are validated against the OpenAPI document, as
// every other client's (gateways).
func sdkClientAt(baseURL, key string, opts ...parley.Option) (*parley.Client, *exchanges) {
	x := &exchanges{base: gateways.Transport(nil), waiting: map[int][]chan struct{}{}}
	all := append([]parley.Option{parley.WithBaseURL(baseURL), parley.WithHTTPClient(&http.Client{Transport: x})}, opts...)
	return parley.New(key, all...), x
}

// exchange is one request the client sent, as its transport saw it.
type exchange struct {
	method, path   string
	idempotencyKey string
	// status is the answer's, 0 when the request got no answer (err).
	status    int
	replayed  bool // Idempotent-Replayed: true
	requestID string
	err       error
	// sent is when the request went, answered when its answer (or error)
	// came.
	sent, answered time.Time
}

// waited is how long the client waited between a's answer and b.
func waited(a, b exchange) time.Duration { return b.sent.Sub(a.answered) }

// exchanges records every request of a client and its answer: the
// retries a test wants to count, and the statuses it waits for.
type exchanges struct {
	base http.RoundTripper

	mu      sync.Mutex
	list    []exchange
	waiting map[int][]chan struct{}
}

func (x *exchanges) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := x.base.RoundTrip(req)
	e := exchange{method: req.Method, path: req.URL.Path, idempotencyKey: req.Header.Get(idempotencyKeyHeader), err: err, sent: sent, answered: time.Now()}
	if resp != nil {
		e.status = resp.StatusCode
		e.replayed = resp.Header.Get(replayedHeader) == "true"
		e.requestID = resp.Header.Get("X-Request-Id")
	}
	x.mu.Lock()
	x.list = append(x.list, e)
	for _, ch := range x.waiting[e.status] {
		close(ch)
	}
	delete(x.waiting, e.status)
	x.mu.Unlock()
	return resp, err
}

// next returns a channel closed when the next answer with status arrives.
func (x *exchanges) next(status int) <-chan struct{} {
	ch := make(chan struct{})
	x.mu.Lock()
	x.waiting[status] = append(x.waiting[status], ch)
	x.mu.Unlock()
	return ch
}

// to returns the exchanges of method and path, in order.
func (x *exchanges) to(method, path string) []exchange {
	x.mu.Lock()
	defer x.mu.Unlock()
	return exchangesTo(x.list, method, path)
}

// exchangesTo returns the exchanges of list to method and path.
func exchangesTo(list []exchange, method, path string) []exchange {
	var out []exchange
	for _, e := range list {
		if e.method == method && e.path == path {
			out = append(out, e)
		}
	}
	return out
}

// count is how many answers had status.
func (x *exchanges) count(status int) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, e := range x.list {
		if e.status == status {
			n++
		}
	}
	return n
}

// last is the latest exchange.
func (x *exchanges) last() exchange {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.list) == 0 {
		return exchange{}
	}
	return x.list[len(x.list)-1]
}

// gatewayFront is the network between a client and the gateway failing at
// the worst moment: an HTTP proxy that forwards each request and relays
// its answer as it comes, except that it hangs up on the client instead
// of relaying the answer of a request dropAnswer named (the gateway has
// done the work and answered in full), and cuts the streams it is
// relaying when cutStreams is called (its connection to the gateway too,
// as a network failure would).
type gatewayFront struct {
	URL    string
	target string

	mu       sync.Mutex
	drop     map[string]int // "POST /v1/messages": answers still to drop
	received []exchange     // what the proxy forwarded (method, path, key)
	streams  map[*frontStream]bool
}

type frontStream struct {
	cancel context.CancelFunc
	cut    bool
}

// newGatewayFront starts a proxy in front of target (a gateway's URL)
// until t ends.
func newGatewayFront(t testing.TB, target string) *gatewayFront {
	f := &gatewayFront{target: target, drop: map[string]int{}, streams: map[*frontStream]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// dropAnswer has the proxy hang up instead of relaying the answer to the
// next request of method and path.
func (f *gatewayFront) dropAnswer(method, path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop[method+" "+path]++
}

// cutStreams breaks the connections of every answer being relayed now.
func (f *gatewayFront) cutStreams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for st := range f.streams {
		st.cut = true
		st.cancel()
	}
	return len(f.streams)
}

// forwarded returns the requests of method and path the proxy forwarded.
func (f *gatewayFront) forwarded(method, path string) []exchange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return exchangesTo(f.received, method, path)
}

func (f *gatewayFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, f.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	req.Header = r.Header.Clone()
	route := r.Method + " " + r.URL.Path
	st := &frontStream{cancel: cancel}
	f.mu.Lock()
	f.received = append(f.received, exchange{method: r.Method, path: r.URL.Path, idempotencyKey: r.Header.Get(idempotencyKeyHeader)})
	drop := f.drop[route] > 0
	if drop {
		f.drop[route]--
	}
	f.streams[st] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.streams, st)
		f.mu.Unlock()
	}()

	resp, err := gateways.Transport(nil).RoundTrip(req)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	if drop {
		_, _ = io.Copy(io.Discard, resp.Body)
		panic(http.ErrAbortHandler) // the server closes the client's connection
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			f.mu.Lock()
			cut := st.cut
			f.mu.Unlock()
			if cut {
				panic(http.ErrAbortHandler) // mid-answer: no end of the chunked body
			}
			return
		}
	}
}

// outcome is what a call returned.
type outcome[T any] struct {
	val T
	err error
}

// callRefused starts call on a goroutine of its own and returns once
// refused is closed (exchanges.next of the refusal's status), which must
// happen before the call ends and within 30 s; the call's outcome comes
// on the channel returned, for awaitOutcome.
func callRefused[T any](t *testing.T, what string, refused <-chan struct{}, call func() (T, error)) <-chan outcome[T] {
	t.Helper()
	done := make(chan outcome[T], 1)
	go func() {
		v, err := call()
		done <- outcome[T]{v, err}
	}()
	select {
	case <-refused:
	case r := <-done:
		t.Fatalf("%s ended (%+v, %v) before it was refused", what, r.val, r.err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s was not refused within 30 s", what)
	}
	return done
}

// awaitOutcome waits a minute at most for a call's outcome.
func awaitOutcome[T any](t *testing.T, what string, done <-chan outcome[T]) (T, error) {
	t.Helper()
	select {
	case r := <-done:
		return r.val, r.err
	case <-time.After(time.Minute):
		t.Fatalf("%s did not end within a minute", what)
	}
	var zero T
	return zero, nil
}
