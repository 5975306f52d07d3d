package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/natscluster"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestReplicasFollowTheSetting: on a three-server cluster, an events
// stream and a chat stream created with one replica, each with a durable
// consumer, are moved to three replicas and back to one by ensuring them
// again as a service's start does (Ensure, EnsureChat, EnsureDurable),
// while messages keep being published. After each change the streams and
// their consumers are on that many servers, all current (a consumer
// updated while its stream moves it is left on its old servers: one run in
// three did so before EnsureDurable waited); nothing published is lost,
// what was acked before is not handed out again, and the rest is handed
// out once, in order.
func TestReplicasFollowTheSetting(t *testing.T) {
	t.Parallel()
	c := natscluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env := testenv.New(t, testenv.NATS(c.URL()))
	js := env.JetStream(t)
	events := env.Stream
	durable := natsx.Durable{Name: "test", AckWait: time.Minute, MaxAckPending: 1000}
	type ensured struct {
		stream natsx.EventsStream
		cons   jetstream.Consumer
	}
	// ensure does what a start with EVENTS_REPLICAS=replicas does.
	ensure := func(replicas int) []ensured {
		t.Helper()
		events.Replicas = replicas
		chat := natsx.ChatStream(events)
		if _, err := events.Ensure(ctx, js); err != nil {
			t.Fatal(err)
		}
		if _, err := chat.EnsureChat(ctx, js); err != nil {
			t.Fatal(err)
		}
		var out []ensured
		for _, s := range []natsx.EventsStream{events, chat} {
			cons, err := s.EnsureDurable(ctx, js, durable)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ensured{s, cons})
		}
		return out
	}
	// placed waits until each stream and consumer is on replicas servers,
	// all current.
	placed := func(replicas int, streams []ensured) {
		t.Helper()
		for _, e := range streams {
			for _, of := range []natsx.Placement{{Stream: e.stream.Name}, {Stream: e.stream.Name, Consumer: durable.Name}} {
				wait.For(t, time.Minute, fmt.Sprintf("%s %s on %d servers", of.Stream, of.Consumer, replicas), func() error {
					rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					p, err := natsx.ReadPlacement(rctx, js, of)
					if err != nil {
						return err
					}
					if p.Replicas != replicas || p.Leader == "" || len(p.Current) != replicas || len(p.Behind) > 0 {
						return fmt.Errorf("placed %+v", p)
					}
					return nil
				})
			}
		}
	}
	// publish stores message i on both streams, retried under the same
	// id (stored once) while a stream changes leader. It runs on the
	// publishing goroutine too, so it returns its error.
	publish := func(streams []ensured, i int) error {
		for _, e := range streams {
			deadline := time.Now().Add(time.Minute)
			for {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := js.Publish(pctx, e.stream.Subject("ws", "test"), []byte(strconv.Itoa(i)), jetstream.WithMsgID(strconv.Itoa(i)))
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("publish %d to %s: %w", i, e.stream.Name, err)
				}
				time.Sleep(wait.Interval)
			}
		}
		return nil
	}
	// take fetches n messages from each consumer and acks them; they
	// must be from, from+1, ...
	take := func(streams []ensured, from, n int) {
		t.Helper()
		for _, e := range streams {
			for next := from; next < from+n; {
				batch, err := e.cons.Fetch(min(from+n-next, 100), jetstream.FetchMaxWait(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				for msg := range batch.Messages() {
					if got := string(msg.Data()); got != strconv.Itoa(next) {
						t.Fatalf("%s handed out message %s, want %d", e.stream.Name, got, next)
					}
					if err := msg.DoubleAck(ctx); err != nil {
						t.Fatal(err)
					}
					next++
				}
				if err := batch.Error(); err != nil {
					t.Fatalf("%s after message %d: %v", e.stream.Name, next-1, err)
				}
			}
		}
	}

	streams := ensure(1)
	placed(1, streams)
	for i := range 100 {
		if err := publish(streams, i); err != nil {
			t.Fatal(err)
		}
	}
	take(streams, 0, 50)

	// Messages keep coming while the replicas change.
	var (
		mu        sync.Mutex
		published = 100
		stop      = make(chan struct{})
		done      = make(chan error, 1)
	)
	to := slices.Clone(streams) // the names stay; streams is ensured again
	go func() {
		for i := 100; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := publish(to, i); err != nil {
				done <- err
				return
			}
			mu.Lock()
			published = i + 1
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return published
	}
	// more lets another hundred messages be published.
	more := func() {
		t.Helper()
		n := count()
		wait.For(t, time.Minute, "another hundred messages published", func() error {
			select {
			case err := <-done:
				t.Fatalf("publishing stopped: %v", err)
			default:
			}
			if count() < n+100 {
				return fmt.Errorf("%d published", count())
			}
			return nil
		})
	}
	streams = ensure(3)
	placed(3, streams)
	at3 := count()
	more()
	streams = ensure(1)
	placed(1, streams)
	more()
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages published on each stream, %d of them before both were on three servers", published, at3)

	for _, e := range streams {
		info, err := e.cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending != uint64(published-50) || info.NumAckPending != 0 || info.AckFloor.Stream != 50 {
			t.Fatalf("%s's consumer after the changes: %d pending, %d awaiting their ack, acked to %d; want %d, 0, 50",
				e.stream.Name, info.NumPending, info.NumAckPending, info.AckFloor.Stream, published-50)
		}
	}
	take(streams, 50, published-50)
	for _, e := range streams {
		if _, err := e.cons.Next(jetstream.FetchMaxWait(500 * time.Millisecond)); !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("%s handed out more than was published: %v", e.stream.Name, err)
		}
	}
}

// TestEnsureRefusesReplicasASingleServerCannotHold: EVENTS_REPLICAS above
// 1 on a NATS server that is not clustered fails the start at once, with
// the server's reason, rather than after waiting for a cluster.
func TestEnsureRefusesReplicasASingleServerCannotHold(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	s := env.Stream
	s.Replicas = 3
	start := time.Now()
	_, err := s.Ensure(context.Background(), env.JetStream(t))
	if err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("ensure with 3 replicas on one server: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the refusal took %v: it was waited on", took)
	}
}
