package natsx_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv"
)

// The chat stream is named after the events stream, so a test's is its
// own (testenv removes every stream named after its events stream), and
// it holds a turn until it is acknowledged, once: a work queue with the
// events stream's duplicate window.
func TestChatStreamIsAWorkQueueNamedAfterTheEvents(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	chat := natsx.ChatStream(env.Stream)
	if chat.Name != env.Stream.Name+"_CHAT" || chat.ChatSubject("w1", "c1") != env.Stream.SubjectPrefix+"_chat.w1.c1" {
		t.Fatalf("chat stream %+v, subject %q", chat, chat.ChatSubject("w1", "c1"))
	}
	ctx := context.Background()
	js := env.JetStream(t)
	stream, err := chat.EnsureChat(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.EnsureChat(ctx, js); err != nil {
		t.Fatalf("ensuring it again: %v", err)
	}
	for range 2 {
		if _, err := js.Publish(ctx, chat.ChatSubject("w1", "c1"), []byte("turn"), jetstream.WithMsgID("turn-1")); err != nil {
			t.Fatal(err)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Retention != jetstream.WorkQueuePolicy || info.State.Msgs != 1 {
		t.Fatalf("retention %v with %d messages; want a work queue holding the one turn", info.Config.Retention, info.State.Msgs)
	}
}

// The events stream keeps every event 14 days, acknowledged or not, so
// that replays read it back (docs/limits-and-errors.md "Webhooks"), and
// stores a publish repeated under the same Nats-Msg-Id once: the outbox
// relay may publish an event twice.
func TestEventsStreamKeepsEventsFourteenDaysAndStoresARepeatOnce(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	js := env.JetStream(t)
	stream, err := env.Stream.Ensure(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Stream.Ensure(ctx, js); err != nil {
		t.Fatalf("ensuring it again: %v", err)
	}
	subject := env.Stream.Subject("w1", "message.received")
	for range 2 {
		if _, err := js.Publish(ctx, subject, []byte("event"), jetstream.WithMsgID("event-1")); err != nil {
			t.Fatal(err)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	if cfg.MaxAge != 14*24*time.Hour || cfg.Retention != jetstream.LimitsPolicy || cfg.Duplicates <= 0 {
		t.Errorf("max age %s, retention %v, duplicate window %s; want 336h, limits (kept after an ack), a window", cfg.MaxAge, cfg.Retention, cfg.Duplicates)
	}
	if len(cfg.Subjects) != 1 || cfg.Subjects[0] != env.Stream.SubjectPrefix+".>" {
		t.Errorf("subjects %v, want %s.>", cfg.Subjects, env.Stream.SubjectPrefix)
	}
	if info.State.Msgs != 1 {
		t.Errorf("%d messages after one event published twice under one Nats-Msg-Id, want 1", info.State.Msgs)
	}
}
