// Package groupcommit lets concurrent callers share one write (group
// commit): each queues its item and waits, and a writer stores what is
// queued with one statement or one transaction, answering every caller
// after it (docs/architecture.md "Ingress").
package groupcommit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Committer lets concurrent callers share writes (group commit), or
// reads.
//
// Done one by one, each write costs its own statement, round trip and WAL
// flush. Through a Committer a
// caller queues its item and waits; up to `writers` goroutines each take
// what is queued (up to maxBatch items) and handle it with one statement
// or one transaction. A lone item goes at once; under load, batches grow
// by themselves while earlier ones commit, and a writer whose last batch
// was shared waits `linger` (well under a millisecond) for a partial one
// to fill, which cuts the statements per delivery further. The queue
// holds at most one item per waiting caller, so it is bounded by the
// callers' own concurrency.
type Committer[T any] struct {
	maxBatch int
	writers  int
	// key identifies an item's row: one batch never carries two items for
	// the same row (one statement cannot write a row twice, and the later
	// write must land last). Nil for reads, which may share a row.
	key func(T) string
	// write stores batch, setting the Err of each job that could not be
	// stored; an error it returns means none was. A batch that fails is
	// written again one job at a time, so one bad item fails only itself:
	// write must be safe to call again with the same items.
	write func(ctx context.Context, batch []*Job[T]) error

	// linger is how long a writer lets a partial batch fill when the last
	// one was shared (several callers waiting means more are coming).
	linger time.Duration

	mu       sync.Mutex
	queue    []*Job[T]
	flushing int
	last     int // size of the last batch taken
}

// Job is one queued item and what became of it: a write sets Err for an
// item it could not store.
type Job[T any] struct {
	Item T
	Err  error
	done chan struct{}
}

// groupWriteTimeout bounds one batch's write.
const groupWriteTimeout = 10 * time.Second

// New returns a Committer writing up to maxBatch items at once with
// write, from up to writers goroutines; a partial batch waits linger to
// fill when the last was shared; key (nil for reads) names an item's row,
// and one batch holds at most one item per key.
func New[T any](maxBatch, writers int, linger time.Duration, key func(T) string, write func(context.Context, []*Job[T]) error) *Committer[T] {
	return &Committer[T]{maxBatch: max(1, maxBatch), writers: max(1, writers), linger: linger, key: key, write: write}
}

// Do queues item and waits until it is written or ctx ends. When ctx ends
// first, the item may still be written: the caller must take the write as
// unknown (a redelivered event finds what was stored).
func (g *Committer[T]) Do(ctx context.Context, item T) error {
	j := &Job[T]{Item: item, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, j)
	start := g.flushing < g.writers
	if start {
		g.flushing++
	}
	g.mu.Unlock()
	if start {
		go g.run()
	}
	select {
	case <-j.done:
		return j.Err
	case <-ctx.Done():
		return fmt.Errorf("batched %T: %w", item, ctx.Err())
	}
}

// Queued is how many callers wait for a write that has not started yet.
func (g *Committer[T]) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// run writes batches until the queue is empty.
func (g *Committer[T]) run() {
	for {
		g.mu.Lock()
		if g.linger > 0 && g.last > 1 && len(g.queue) > 0 && len(g.queue) < g.maxBatch {
			// Under load (the last batch was shared): let the batch
			// fill a little more. Alone, an item never waits.
			g.mu.Unlock()
			time.Sleep(g.linger)
			g.mu.Lock()
		}
		batch := g.take()
		g.last = len(batch)
		if len(batch) == 0 {
			g.flushing--
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.flush(batch)
	}
}

// take removes up to maxBatch jobs from the queue, oldest first, at most
// one per key; the others stay queued, in order, for the next batch.
func (g *Committer[T]) take() []*Job[T] {
	if len(g.queue) == 0 {
		return nil
	}
	if g.key == nil {
		n := min(len(g.queue), g.maxBatch)
		batch := slices.Clone(g.queue[:n])
		rest := copy(g.queue, g.queue[n:])
		clear(g.queue[rest:])
		g.queue = g.queue[:rest]
		return batch
	}
	batch := make([]*Job[T], 0, min(len(g.queue), g.maxBatch))
	keys := make(map[string]struct{}, cap(batch))
	rest := g.queue[:0]
	for _, j := range g.queue {
		k := g.key(j.Item)
		if _, dup := keys[k]; dup || len(batch) == g.maxBatch {
			rest = append(rest, j)
			continue
		}
		keys[k] = struct{}{}
		batch = append(batch, j)
	}
	clear(g.queue[len(rest):]) // keep no references past the live queue
	g.queue = rest
	return batch
}

func (g *Committer[T]) flush(batch []*Job[T]) {
	ctx, cancel := context.WithTimeout(context.Background(), groupWriteTimeout)
	defer cancel()
	if err := g.write(ctx, batch); err != nil {
		if len(batch) == 1 {
			batch[0].Err = err
		} else {
			for _, j := range batch {
				j.Err = nil
				if err := g.write(ctx, []*Job[T]{j}); err != nil {
					j.Err = err
				}
			}
		}
	}
	for _, j := range batch {
		close(j.done)
	}
}
