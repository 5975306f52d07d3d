package natsx_test

import (
	"context"
	"testing"

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
