package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// stream is a test's events stream with one durable pull consumer on it.
type stream struct {
	t    *testing.T
	env  *testenv.Env
	js   jetstream.JetStream
	cons jetstream.Consumer
}

func newStream(t *testing.T) *stream {
	t.Helper()
	env := testenv.New(t)
	js := env.JetStream(t)
	ctx := context.Background()
	if _, err := env.Stream.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, env.Stream.Name, jetstream.ConsumerConfig{
		Durable:   "test",
		AckPolicy: jetstream.AckExplicitPolicy,
		// Far longer than any test: a message seen again was nak'ed,
		// not timed out.
		AckWait: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &stream{t: t, env: env, js: js, cons: cons}
}

func (s *stream) publish(n int) {
	s.t.Helper()
	for i := range n {
		if _, err := s.js.Publish(context.Background(), s.env.Stream.Subject("ws", "test"), fmt.Appendf(nil, "%d", i)); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *stream) consume(concurrency int, h natsx.Handler) *natsx.Consumer {
	s.t.Helper()
	c, err := natsx.Consume(s.cons, concurrency, h, s.env.Logger(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// settled waits until every message published was acked or terminated.
func (s *stream) settled(published uint64) {
	s.t.Helper()
	wait.For(s.t, 10*time.Second, "every message settled", func() error {
		info, err := s.cons.Info(context.Background())
		if err != nil {
			return err
		}
		if info.AckFloor.Stream != published || info.NumAckPending != 0 || info.NumPending != 0 {
			return fmt.Errorf("ack floor %d, %d ack pending, %d pending", info.AckFloor.Stream, info.NumAckPending, info.NumPending)
		}
		return nil
	})
}

// deliveries counts the times each message was handed to the handler.
type deliveries struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *deliveries) add(msg jetstream.Msg) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[string(msg.Data())]++
	return d.n[string(msg.Data())]
}

func (d *deliveries) of(data string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[data]
}

// A handled message is acked; a permanent failure is terminated, never seen
// again; a transient one comes back after the nak delay.
func TestConsumeSettlesByTheHandlersError(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	var seen deliveries
	s.consume(4, func(_ context.Context, msg jetstream.Msg) error {
		switch n := seen.add(msg); string(msg.Data()) {
		case "1":
			return natsx.Permanent(errors.New("malformed"))
		case "2":
			if n == 1 {
				return errors.New("database unreachable")
			}
		}
		return nil
	})
	s.publish(3)
	s.settled(3)
	if seen.of("0") != 1 || seen.of("1") != 1 || seen.of("2") != 2 {
		t.Fatalf("deliveries: ok %d, permanent %d, transient %d; want 1, 1, 2", seen.of("0"), seen.of("1"), seen.of("2"))
	}
	info, err := s.cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 {
		t.Fatalf("%d messages waiting for redelivery after all were settled", info.NumRedelivered)
	}
}

// A message the handler cannot work on yet comes back after the delay it
// asked for, far sooner than a failure's first nak delay.
func TestConsumeHandsBackLaterAfterTheDelayAsked(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	var seen deliveries
	again := make(chan time.Duration, 1)
	var first time.Time
	s.consume(2, func(_ context.Context, msg jetstream.Msg) error {
		if seen.add(msg) == 1 {
			first = time.Now()
			return natsx.Later(10*time.Millisecond, errors.New("its predecessor is not answered yet"))
		}
		again <- time.Since(first)
		return nil
	})
	s.publish(1)
	s.settled(1)
	if took := <-again; took >= natsx.NakDelayMin {
		t.Fatalf("handed back for %s, a failure's delay; want the 10ms asked for", took)
	}
}

// A handler that panics on a message terminates it and goes on with the
// others: one bad message never stops the consumer or its process.
func TestConsumeSurvivesAPanickingHandler(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	var seen deliveries
	s.consume(2, func(_ context.Context, msg jetstream.Msg) error {
		seen.add(msg)
		if string(msg.Data()) == "1" {
			var m map[string]int
			m["boom"]++ // a nil map: the bug a message exposes
		}
		return nil
	})
	s.publish(3)
	s.settled(3)
	if seen.of("0") != 1 || seen.of("1") != 1 || seen.of("2") != 1 {
		t.Fatalf("deliveries %d, %d, %d; want each once (the panicking one terminated)", seen.of("0"), seen.of("1"), seen.of("2"))
	}
}

// No more messages are worked on at once than the consumer's concurrency.
func TestConsumeBoundsTheMessagesInHand(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	var inHand, most atomic.Int32
	s.consume(2, func(context.Context, jetstream.Msg) error {
		n := inHand.Add(1)
		defer inHand.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond) // long enough for pulls to pile up if unbounded
		return nil
	})
	s.publish(10)
	s.settled(10)
	if m := most.Load(); m > 2 {
		t.Fatalf("%d messages in hand at once, want at most 2", m)
	}
}

// Stop lets the message in hand finish and be acked, and takes no more.
func TestStopLetsTheMessageInHandFinish(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	inHand, stopping, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var handled atomic.Int32
	c := s.consume(1, func(ctx context.Context, _ jetstream.Msg) error {
		close(inHand)
		<-ctx.Done() // Stop has begun
		close(stopping)
		<-release // work that, once started, finishes
		handled.Add(1)
		return nil
	})
	s.publish(1)

	stopped := make(chan int32, 1) // messages handled when Stop returned
	// In hand is the handler holding it: the server counts a message
	// handed out a moment before the client gives it to the handler, and a
	// Stop in between would rightly hand it back instead.
	select {
	case <-inHand:
	case <-time.After(10 * time.Second):
		t.Fatal("the message never reached the handler")
	}
	go func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
		stopped <- handled.Load()
	}()
	<-stopping
	close(release)
	if n := <-stopped; n != 1 {
		t.Fatal("Stop returned before the message in hand was handled")
	}
	s.settled(1)

	// A message published after Stop waits for another instance.
	s.publish(1)
	wait.For(t, 5*time.Second, "the new message stored", func() error {
		info, err := s.cons.Info(context.Background())
		if err != nil {
			return err
		}
		if info.NumPending+uint64(info.NumAckPending) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	if n := handled.Load(); n != 1 {
		t.Fatalf("%d messages handled, want only the one in hand at Stop", n)
	}
}

// A handler that gives up when Stop ends its ctx hands the message back at
// once: another instance gets it without waiting out the ack wait.
func TestStopHandsBackWhatTheHandlerGivesUp(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	entered := make(chan struct{}, 1)
	c := s.consume(1, func(ctx context.Context, _ jetstream.Msg) error {
		entered <- struct{}{}
		<-ctx.Done() // waiting to retry, say
		return ctx.Err()
	})
	s.publish(1)
	<-entered
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var seen deliveries
	s.consume(1, func(_ context.Context, msg jetstream.Msg) error {
		seen.add(msg)
		return nil
	})
	s.settled(1) // well within the minute of ack wait
	if seen.of("0") != 1 {
		t.Fatalf("the other instance got the message %d times, want 1", seen.of("0"))
	}
}

// With room for many more messages than it holds, a stopping consumer
// still has a pull open on the server when it hands its messages back;
// none of them may go to that pull (whose messages nobody would take
// any more, until the ack wait): another instance gets every one.
func TestStopHandsBackManyWhileItsPullIsOpen(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	const n = 20
	var entered atomic.Int32
	c := s.consume(256, func(ctx context.Context, _ jetstream.Msg) error {
		entered.Add(1)
		<-ctx.Done() // waiting for a place, say
		return ctx.Err()
	})
	s.publish(n)
	wait.Until(t, 10*time.Second, "every message in hand", func() bool { return entered.Load() == n })
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var seen deliveries
	s.consume(256, func(_ context.Context, msg jetstream.Msg) error {
		seen.add(msg)
		return nil
	})
	s.settled(n) // well within the minute of ack wait
	for i := range n {
		if got := seen.of(fmt.Sprint(i)); got != 1 {
			t.Errorf("message %d reached the other instance %d times, want 1", i, got)
		}
	}
}

// Stop gives up waiting when its ctx ends, and says so.
func TestStopIsBounded(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	c := s.consume(1, func(context.Context, jetstream.Msg) error {
		entered <- struct{}{}
		<-release
		return nil
	})
	t.Cleanup(func() { close(release) }) // before the consumer's own cleanup waits for it
	s.publish(1)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Stop(ctx); err == nil {
		t.Fatal("Stop returned nil with a message still in hand past its deadline")
	}
}
