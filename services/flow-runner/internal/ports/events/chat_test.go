package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/flow-runner/internal/app"
)

// scriptedAnswerer answers each turn by its id: the error its script
// gives for the nth time the turn is answered (nil past the script). It
// records the time each answer was given the turn as.
type scriptedAnswerer struct {
	mu      sync.Mutex
	script  map[string][]error
	answers map[string]int
	created map[string][]time.Time
}

func (s *scriptedAnswerer) AnswerTurn(_ context.Context, t app.Turn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.answers[t.ID]
	s.answers[t.ID] = n + 1
	if s.created != nil {
		s.created[t.ID] = append(s.created[t.ID], t.CreatedAt)
	}
	if errs := s.script[t.ID]; n < len(errs) {
		return errs[n]
	}
	return nil
}

func (s *scriptedAnswerer) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answers[id]
}

// TestTurnsThatCanNeverBeAnsweredAreDropped: a turn of a workspace the
// gateway no longer knows, and one that cannot be read, are dropped at
// once (docs/chat.md "Order and exactly one answer"), not handed back
// for ever; a turn that fails for a reason that passes comes again and is
// answered.
func TestTurnsThatCanNeverBeAnsweredAreDropped(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	js := env.JetStream(t)
	ctx := context.Background()
	chat := natsx.ChatStream(env.Stream)
	answerer := &scriptedAnswerer{answers: map[string]int{}, script: map[string][]error{
		"gone":  {fmt.Errorf("read workspace: %w: ws", app.ErrWorkspaceNotFound)},
		"flaky": {errors.New("read workspace: the gateway is unreachable")},
	}}
	cons, err := Start(ctx, js, Config{Stream: chat, Durable: "chat-test", Concurrency: 4, AckWait: time.Minute}, answerer, env.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Stop(context.Background()) })

	publish := func(id string, payload []byte) {
		t.Helper()
		if _, err := js.Publish(ctx, chat.ChatSubject("ws", id), payload, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	turn := func(id string) []byte {
		b, err := proto.Marshal(&eventsv1.ChatTurn{
			Id: id, WorkspaceId: "ws", ConversationId: "conv-" + id, Seq: 1, Mode: app.ModeAuto,
			Message: &eventsv1.Message{Id: "m-" + id, Text: "hi", Type: "text"}, CreatedAt: timestamppb.Now(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	publish("gone", turn("gone"))
	publish("flaky", turn("flaky"))
	publish("ok", turn("ok"))
	publish("garbage", []byte("not a chat turn"))
	unread, _ := proto.Marshal(&eventsv1.ChatTurn{Id: "unread", WorkspaceId: "ws"})
	publish("unread", unread)

	durable, err := js.Consumer(ctx, chat.Name, "chat-test")
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 20*time.Second, "every turn settled", func() error {
		info, err := durable.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending != 0 || info.NumPending != 0 {
			return fmt.Errorf("%d ack pending, %d pending", info.NumAckPending, info.NumPending)
		}
		return nil
	})
	for id, want := range map[string]int{"gone": 1, "flaky": 2, "ok": 1, "unread": 0} {
		if got := answerer.count(id); got != want {
			t.Errorf("turn %s answered %d times, want %d", id, got, want)
		}
	}
}

// TestATurnWithoutItsTimeIsTakenAtItsTimeInTheStream: a turn without
// created_at is answered as stored when the chat stream stored it, the
// same time at each delivery; not as the epoch, which would answer it
// without its predecessor and continue a long expired run.
func TestATurnWithoutItsTimeIsTakenAtItsTimeInTheStream(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	js := env.JetStream(t)
	ctx := context.Background()
	chat := natsx.ChatStream(env.Stream)
	answerer := &scriptedAnswerer{answers: map[string]int{}, created: map[string][]time.Time{}, script: map[string][]error{
		"untimed": {errors.New("read workspace: the gateway is unreachable")},
	}}
	cons, err := Start(ctx, js, Config{Stream: chat, Durable: "chat-test", Concurrency: 4, AckWait: time.Minute}, answerer, env.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Stop(context.Background()) })

	b, err := proto.Marshal(&eventsv1.ChatTurn{
		Id: "untimed", WorkspaceId: "ws", ConversationId: "conv", Seq: 2, Mode: app.ModeAuto,
		Message: &eventsv1.Message{Id: "m", Text: "hi", Type: "text"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The server's clock and ours may differ by a moment, never by much.
	before := time.Now().Add(-time.Minute)
	if _, err := js.Publish(ctx, chat.ChatSubject("ws", "conv"), b, jetstream.WithMsgID("untimed")); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Minute)
	wait.For(t, 20*time.Second, "the turn answered after its retry", func() error {
		if n := answerer.count("untimed"); n < 2 {
			return fmt.Errorf("answered %d times", n)
		}
		return nil
	})
	answerer.mu.Lock()
	created := answerer.created["untimed"]
	answerer.mu.Unlock()
	if created[0].Before(before) || created[0].After(after) || !created[1].Equal(created[0]) {
		t.Fatalf("the turn was answered as created at %v, want the same time, when it was published (%v to %v)", created, before, after)
	}
}
