package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is a write function that records every batch it is given and
// can be held, so that callers pile up behind a write under way.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	hold    chan struct{} // each write takes a value; closed, none waits
	started chan struct{} // gets a value when a write starts
	fail    func(item string) bool
}

func newRecorder() *recorder {
	return &recorder{hold: make(chan struct{}), started: make(chan struct{}, 100)}
}

func (r *recorder) write(_ context.Context, batch []*Job[string]) error {
	r.started <- struct{}{}
	<-r.hold
	items := make([]string, len(batch))
	for i, j := range batch {
		items[i] = j.Item
	}
	r.mu.Lock()
	r.batches = append(r.batches, items)
	r.mu.Unlock()
	if r.fail != nil {
		for _, it := range items {
			if r.fail(it) {
				return fmt.Errorf("write failed because of %s", it)
			}
		}
	}
	return nil
}

func (r *recorder) got() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// waitQueued waits until g holds n queued jobs.
func waitQueued[T any](t *testing.T, g *Committer[T], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		q := g.Queued()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func key(s string) string { return s[:1] } // items "a1", "a2" are the same row

// Callers that arrive while a write is under way share the next one, in
// their order, up to the batch size; every caller gets its answer.
func TestGroupCommitSharesWrites(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	g := New(3, 1, time.Millisecond, key, r.write)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	submit := func(item string) {
		wg.Go(func() { errs <- g.Do(context.Background(), item) })
	}
	submit("a")
	<-r.started // the first write is under way, alone
	for i, it := range []string{"b", "c", "d", "e"} {
		submit(it)
		waitQueued(t, g, i+1)
	}
	close(r.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("do: %v", err)
		}
	}
	want := [][]string{{"a"}, {"b", "c", "d"}, {"e"}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
	// The writer goes away once the queue is empty.
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		flushing, queued := g.flushing, len(g.queue)
		g.mu.Unlock()
		if flushing == 0 && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the writes: %d writers, %d queued", flushing, queued)
		}
		time.Sleep(time.Millisecond)
	}
}

// One batch never carries two writes of the same row: the second waits for
// the next batch, so the later state lands last.
func TestGroupCommitOneWritePerRowPerBatch(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	g := New(10, 1, 0, key, r.write)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Do(context.Background(), "x0") })
	<-r.started
	for i, it := range []string{"a1", "b1", "a2", "c1", "a3"} {
		wg.Go(func() { _ = g.Do(context.Background(), it) })
		waitQueued(t, g, i+1)
	}
	close(r.hold)
	wg.Wait()
	want := [][]string{{"x0"}, {"a1", "b1", "c1"}, {"a2"}, {"a3"}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// Reads (no key) may share a batch for the same row.
func TestGroupCommitReadsShareRows(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	g := New(10, 1, 0, nil, r.write)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Do(context.Background(), "x") })
	<-r.started
	for i := range 3 {
		wg.Go(func() { _ = g.Do(context.Background(), "w") })
		waitQueued(t, g, i+1)
	}
	close(r.hold)
	wg.Wait()
	want := [][]string{{"x"}, {"w", "w", "w"}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// A batch that fails is written again one job at a time: only the job
// that makes it fail gets the error.
func TestGroupCommitIsolatesAFailure(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.fail = func(item string) bool { return item == "bad" }
	g := New(10, 1, 0, key, r.write)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Do(context.Background(), "x") })
	<-r.started
	results := map[string]error{}
	var mu sync.Mutex
	for i, it := range []string{"a", "bad", "c"} {
		wg.Go(func() {
			err := g.Do(context.Background(), it)
			mu.Lock()
			results[it] = err
			mu.Unlock()
		})
		waitQueued(t, g, i+1)
	}
	close(r.hold)
	wg.Wait()
	if results["a"] != nil || results["c"] != nil || results["bad"] == nil {
		t.Errorf("results %v; want an error for bad only", results)
	}
	want := [][]string{{"x"}, {"a", "bad", "c"}, {"a"}, {"bad"}, {"c"}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// A caller whose context ends stops waiting; the writer goes on.
func TestGroupCommitCallerGivesUp(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	g := New(10, 1, 0, key, r.write)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Do(ctx, "a") }()
	<-r.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("do = %v, want context.Canceled", err)
	}
	close(r.hold)
	if err := g.Do(context.Background(), "b"); err != nil {
		t.Errorf("next do = %v", err)
	}
}

// While the writer stays busy and its last batch was shared, it lets a
// partial batch fill for the linger; an item alone never waits for it.
func TestGroupCommitLingersOnlyUnderLoad(t *testing.T) {
	t.Parallel()
	const linger = 500 * time.Millisecond
	r := newRecorder()
	g := New(10, 1, linger, key, r.write)
	var wg sync.WaitGroup
	submit := func(item string, queued int) {
		wg.Go(func() { _ = g.Do(context.Background(), item) })
		if queued > 0 {
			waitQueued(t, g, queued)
		}
	}
	start := time.Now()
	submit("a", 0)
	<-r.started
	if took := time.Since(start); took >= linger {
		t.Errorf("a lone item waited %s to be written", took)
	}
	submit("b", 1)
	submit("c", 2)
	r.hold <- struct{}{} // a is written; b and c go together
	<-r.started
	submit("d", 1)
	r.hold <- struct{}{} // b, c written; d waits for company
	submit("e", 2)
	close(r.hold)
	wg.Wait()
	want := [][]string{{"a"}, {"b", "c"}, {"d", "e"}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}
