package isolation

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/testenv/wait"
)

func mustAcquire(t *testing.T, l *Lane, webhook string) func() {
	t.Helper()
	release, err := l.Acquire(context.Background(), webhook, KeepAlive{})
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// acquireAsync starts an Acquire that is expected to wait; the channel
// gets its release (or nil and the error) once it returns.
type result struct {
	release func()
	err     error
}

func acquireAsync(ctx context.Context, l *Lane, webhook string, keep KeepAlive) <-chan result {
	out := make(chan result, 1)
	go func() {
		r, err := l.Acquire(ctx, webhook, keep)
		out <- result{r, err}
	}()
	return out
}

func notYet(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: got a place (err %v), want it waiting", what, r.err)
	default:
	}
}

func got(t *testing.T, ch <-chan result, what string) func() {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.release
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting after 5s", what)
	}
	return nil
}

// One webhook holds at most its share; the next attempt waits for its
// webhook's place, not for a slot of the lane, and gets the place a
// release frees.
func TestGateCapsOneWebhook(t *testing.T) {
	t.Parallel()
	g := NewGate(3)
	l := g.Lane(10)
	var held []func()
	for range 3 {
		held = append(held, mustAcquire(t, l, "a"))
	}
	fourth := acquireAsync(context.Background(), l, "a", KeepAlive{})
	wait.Until(t, 5*time.Second, "the fourth attempt of a waits for a's place", func() bool { return g.Waiting() == 1 })
	notYet(t, fourth, "fourth of a")
	if l.InFlight() != 3 || l.Waiting() != 0 {
		t.Fatalf("in flight %d, waiting for the lane %d; want 3, 0", l.InFlight(), l.Waiting())
	}
	held[0]()
	held[0]() // a second call releases nothing more
	release := got(t, fourth, "fourth of a after a release")
	if l.InFlight() != 3 || g.Waiting() != 0 {
		t.Fatalf("in flight %d, waiting %d; want 3, 0", l.InFlight(), g.Waiting())
	}
	release()
	for _, r := range held[1:] {
		r()
	}
	if l.InFlight() != 0 || len(g.shares) != 0 {
		t.Fatalf("after every release: %d in flight, %d shares kept", l.InFlight(), len(g.shares))
	}
}

// The lane bounds the instance; an attempt waiting for the lane holds its
// webhook's place.
func TestGateCapsTheLane(t *testing.T) {
	t.Parallel()
	g := NewGate(8)
	l := g.Lane(2)
	ra := mustAcquire(t, l, "a")
	rb := mustAcquire(t, l, "b")
	c := acquireAsync(context.Background(), l, "c", KeepAlive{})
	wait.Until(t, 5*time.Second, "c waits for the lane", func() bool { return l.Waiting() == 1 })
	notYet(t, c, "c")
	if g.Waiting() != 0 {
		t.Fatalf("%d waiting for their webhook's place, want 0", g.Waiting())
	}
	rb()
	rc := got(t, c, "c after b's release")
	ra()
	rc()
}

// Waiting for a webhook's place holds no slot of the lane: while a's extra
// attempts wait, b uses every slot a does not hold.
func TestWaitingForAWebhooksPlaceHoldsNoSlot(t *testing.T) {
	t.Parallel()
	g := NewGate(2)
	l := g.Lane(4)
	a1, a2 := mustAcquire(t, l, "a"), mustAcquire(t, l, "a")
	// Five more of a, each releasing its place as soon as it has it.
	done := make(chan error, 5)
	for range 5 {
		go func() {
			r, err := l.Acquire(context.Background(), "a", KeepAlive{})
			if err == nil {
				r()
			}
			done <- err
		}()
	}
	wait.Until(t, 5*time.Second, "five of a wait", func() bool { return g.Waiting() == 5 })
	b1, b2 := mustAcquire(t, l, "b"), mustAcquire(t, l, "b")
	if l.InFlight() != 4 {
		t.Fatalf("in flight %d, want 4", l.InFlight())
	}
	a1()
	a2()
	b1()
	b2()
	for range 5 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if l.InFlight() != 0 || len(g.shares) != 0 {
		t.Fatalf("%d in flight, %d shares kept", l.InFlight(), len(g.shares))
	}
}

// Lanes share the webhook's places: replays and live deliveries of one
// webhook together hold at most its share.
func TestLanesShareTheWebhooksPlaces(t *testing.T) {
	t.Parallel()
	g := NewGate(2)
	live, replay := g.Lane(10), g.Lane(10)
	r1, r2 := mustAcquire(t, live, "a"), mustAcquire(t, replay, "a")
	third := acquireAsync(context.Background(), replay, "a", KeepAlive{})
	wait.Until(t, 5*time.Second, "the third waits", func() bool { return g.Waiting() == 1 })
	notYet(t, third, "third of a")
	r1()
	got(t, third, "third after a release")()
	r2()
}

// A wait ends with ctx, at either stage, holding nothing.
func TestAcquireEndsWithCtx(t *testing.T) {
	t.Parallel()
	g := NewGate(1)
	l := g.Lane(1)
	held := mustAcquire(t, l, "a")

	// Waiting for a's place.
	ctx, cancel := context.WithCancel(context.Background())
	w := acquireAsync(ctx, l, "a", KeepAlive{})
	wait.Until(t, 5*time.Second, "waiting for a's place", func() bool { return g.Waiting() == 1 })
	cancel()
	if r := <-w; !errors.Is(r.err, context.Canceled) || r.release != nil {
		t.Fatalf("Acquire = %v, %v; want context.Canceled", r.release != nil, r.err)
	}

	// Waiting for the lane, holding b's place.
	ctx, cancel = context.WithCancel(context.Background())
	w = acquireAsync(ctx, l, "b", KeepAlive{})
	wait.Until(t, 5*time.Second, "waiting for the lane", func() bool { return l.Waiting() == 1 })
	cancel()
	if r := <-w; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Acquire = %v; want context.Canceled", r.err)
	}
	if g.Waiting() != 0 || l.Waiting() != 0 || l.InFlight() != 1 {
		t.Fatalf("after cancelling: waiting %d/%d, in flight %d", g.Waiting(), l.Waiting(), l.InFlight())
	}
	// b's place was given back: b gets it as soon as the lane frees.
	held()
	mustAcquire(t, l, "b")()
	if len(g.shares) != 0 {
		t.Fatalf("%d shares kept", len(g.shares))
	}
}

// The keep-alive is called while an attempt waits, across both stages,
// and never for an attempt that gets its place at once.
func TestAcquireKeepsAliveWhileWaiting(t *testing.T) {
	t.Parallel()
	g := NewGate(1)
	l := g.Lane(1)
	var calls atomic.Int32
	keep := KeepAlive{Func: func() { calls.Add(1) }, Every: 5 * time.Millisecond}
	r, err := l.Acquire(context.Background(), "a", keep)
	if err != nil || calls.Load() != 0 {
		t.Fatalf("immediate Acquire: %v, %d keep-alive calls", err, calls.Load())
	}
	w := acquireAsync(context.Background(), l, "a", keep)
	wait.Until(t, 5*time.Second, "three keep-alive calls while waiting", func() bool { return calls.Load() >= 3 })
	r()
	got(t, w, "the waiting attempt")()
	after := calls.Load()
	// No calls once the wait is over: the ticker is stopped.
	r = mustAcquire(t, l, "a")
	r()
	if calls.Load() != after {
		t.Fatalf("keep-alive called after the wait")
	}
}

// Zero bounds bound nothing.
func TestUnboundedGate(t *testing.T) {
	t.Parallel()
	l := NewGate(0).Lane(0)
	var held []func()
	for range 100 {
		held = append(held, mustAcquire(t, l, "a"))
	}
	if l.InFlight() != 100 {
		t.Fatalf("in flight %d", l.InFlight())
	}
	for _, r := range held {
		r()
	}
}
