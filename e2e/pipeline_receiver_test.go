package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/receiver"
)

// pipelineReceiver is the developers' receiver: one loopback server, the
// webhook of workspace i at pipelineHooks+i, each checked with that
// workspace's secret.
type pipelineReceiver struct {
	url        string
	workspaces []string // ids, by index
	secrets    []string // webhook secrets, by index
	bare       atomic.Int64

	mu     sync.Mutex
	runs   []*pipelineRun
	seen   map[string]int64 // delivery id -> message number
	errs   []string
	last   receiver.Request // a delivery, for bare-http
	lastWS int

	// gate holds the answers to the deliveries (once filed) while a kill
	// line keeps them in flight.
	gate receiver.Gate
}

func newPipelineReceiver(b testing.TB, workspaces int) *pipelineReceiver {
	r := &pipelineReceiver{workspaces: make([]string, workspaces), secrets: make([]string, workspaces), seen: map[string]int64{}}
	srv := httptest.NewServer(r)
	b.Cleanup(srv.Close)
	b.Cleanup(r.gate.Release) // runs before Close: held handlers must end first
	r.url = srv.URL
	return r
}

func (r *pipelineReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	got := receiver.Request{Method: req.Method, Path: req.URL.RequestURI(), Header: req.Header, Body: body, At: time.Now()}
	ws, werr := strconv.Atoi(strings.TrimPrefix(req.URL.Path, pipelineHooks))
	if err != nil || werr != nil || ws < 0 || ws >= len(r.secrets) {
		r.fail("request %s %s: unknown webhook or unreadable body (%v)", req.Method, got.Path, err)
		http.Error(w, "unknown webhook", http.StatusNotFound)
		return
	}
	if err := checkHook(got, r.secrets[ws]); err != nil {
		r.fail("workspace %d, delivery %s: %v", ws, got.Delivery(), err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if req.URL.RawQuery == "bare" {
		r.bare.Add(1)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var env struct {
		Data struct {
			WorkspaceID string `json:"workspace_id"`
			Message     struct {
				ExternalID string `json:"external_id"`
			} `json:"message"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &env) // checkHook has decoded it
	n, err := strconv.ParseInt(env.Data.Message.ExternalID, 10, 64)
	if err != nil || env.Data.WorkspaceID != r.workspaces[ws] {
		r.fail("delivery %s to workspace %d: data.workspace_id %q, data.message.external_id %q", got.Delivery(), ws, env.Data.WorkspaceID, env.Data.Message.ExternalID)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	_, wait := r.gate.Enter()
	r.record(got, ws, n)
	wait()
	w.WriteHeader(http.StatusNoContent)
}

// duplicates is how many of the run's deliveries came again.
func (r *pipelineReceiver) duplicates(run *pipelineRun) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return run.dups
}

// allDuplicates is how many deliveries of any run came again.
func (r *pipelineReceiver) allDuplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, run := range r.runs {
		n += run.dups
	}
	return n
}

// record files delivery got of message n, received by workspace ws.
func (r *pipelineReceiver) record(got receiver.Request, ws int, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.lastWS = got, ws
	r.arrivedLocked(got.Delivery(), got.At, n)
}

// arrived files message n as received at at under id, which names this
// one arrival (a webhook's delivery id): a message that comes under two
// ids fails the run, and so does an id that comes twice, but in a run
// that kills a process (atLeastOnce), where it is counted (dups) as the
// at-least-once delivery that docs/webhooks.md "Answering a delivery"
// documents.
func (r *pipelineReceiver) arrived(id string, at time.Time, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrivedLocked(id, at, n)
}

func (r *pipelineReceiver) arrivedLocked(id string, at time.Time, n int64) {
	i := slices.IndexFunc(r.runs, func(run *pipelineRun) bool { return n >= run.first && n < run.first+int64(run.n) })
	if prev, dup := r.seen[id]; dup {
		if i >= 0 && prev == n && r.runs[i].atLeastOnce {
			r.runs[i].dups++
			return
		}
		r.failLocked("delivery %s (message %d) received twice", id, prev)
		return
	}
	r.seen[id] = n
	if i < 0 {
		r.failLocked("delivery %s: message %d was never sent", id, n)
		return
	}
	run := r.runs[i]
	k := n - run.first
	if run.ids[k] != "" {
		r.failLocked("message %d delivered twice, as %s and %s", n, run.ids[k], id)
		return
	}
	run.ids[k], run.received[k] = id, at
	if run.counted[k] {
		run.done++
		if run.done == run.want {
			close(run.all)
		}
	}
}

// cut ends run after its first sent messages: the rest, never sent, are
// not counted, and the run is whole once the sent ones have arrived.
func (r *pipelineReceiver) cut(run *pipelineRun, sent int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	whole := run.done == run.want
	for i := sent; i < run.n; i++ {
		if run.counted[i] {
			run.counted[i] = false
			run.want--
		}
	}
	if !whole && run.done == run.want {
		close(run.all)
	}
}

func (r *pipelineReceiver) add(run *pipelineRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, run)
}

func (r *pipelineReceiver) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failLocked(format, args...)
}

func (r *pipelineReceiver) failLocked(format string, args ...any) {
	if len(r.errs) < 10 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	} else if len(r.errs) == 10 {
		r.errs = append(r.errs, "...")
	}
}

// err is every failure so far, nil if none.
func (r *pipelineReceiver) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return nil
	}
	return errors.New("receiver: " + strings.Join(r.errs, "; "))
}

// missing counts the run's counted messages not received yet, and names
// one of them.
func (r *pipelineReceiver) missing(run *pipelineRun) (int, int64) {
	return r.missingIn(run, 0, run.n)
}

// missingIn is missing among the run's messages from (its index) to
// before to.
func (r *pipelineReceiver) missingIn(run *pipelineRun, from, to int) (int, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, example := 0, int64(-1)
	for i := from; i < min(to, run.n); i++ {
		if run.counted[i] && run.ids[i] == "" {
			n++
			if example < 0 {
				example = run.first + int64(i)
			}
		}
	}
	return n, example
}

// delivered is how many of the run's counted messages have arrived.
func (r *pipelineReceiver) delivered(run *pipelineRun) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return run.done
}

// deliveryIDs are the delivery ids of the run's counted messages.
func (r *pipelineReceiver) deliveryIDs(run *pipelineRun) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for i, id := range run.ids {
		if run.counted[i] {
			ids = append(ids, id)
		}
	}
	return ids
}

// receivedTimes is when each of the run's messages arrived.
func (r *pipelineReceiver) receivedTimes(run *pipelineRun) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(run.received)
}

// bareSample is one delivery as received, for bare-http to post again.
type bareSample struct {
	ws     int
	header http.Header
	body   []byte
}

func (r *pipelineReceiver) sample() bareSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bareSample{ws: r.lastWS, header: r.last.Header.Clone(), body: r.last.Body}
}

// hangingEndpoint is a webhook that takes each request and never answers
// it, until the benchmark ends (or the dispatcher gives up on it). It is a
// server of its own, as another host would be.
type hangingEndpoint struct {
	url     string
	held    atomic.Int64 // requests taken so far
	release chan struct{}
}

func newHangingEndpoint(b testing.TB) *hangingEndpoint {
	h := &hangingEndpoint{release: make(chan struct{})}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	// Cleanups run last first: the held requests end, then the server
	// closes (Close waits for them).
	b.Cleanup(func() { close(h.release) })
	h.url = srv.URL + "/hooks/hanging"
	return h
}

func (h *hangingEndpoint) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h.held.Add(1)
	select {
	case <-h.release:
		w.WriteHeader(http.StatusServiceUnavailable)
	case <-req.Context().Done():
	}
}
