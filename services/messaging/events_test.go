package main

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

func TestMessageReceivedPublishedOnlyForExternalChannels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	js := h.env.JetStream(t)
	ws := uuid.NewString()
	auto := h.telegramChannel(ws, "auto")
	suggest := h.telegramChannel(ws, "suggest")
	external := h.telegramChannel(ws, "external")

	// auto and suggest first: the relay publishes in outbox order, so once
	// the external message is in the stream, anything of theirs would be too.
	h.deliver(auto, tgUpdate{UpdateID: 1, MessageID: 11, FromID: 1001, First: "Al", Date: t0.Unix(), Text: "auto"})
	h.deliver(suggest, tgUpdate{UpdateID: 1, MessageID: 12, FromID: 1002, First: "Sue", Date: t0.Unix(), Text: "suggest"})
	h.deliver(external, tgUpdate{UpdateID: 1, MessageID: 13, FromID: 1003, First: "Ed", Last: "Ward", Date: t0.Unix() + 5, Text: "external"})

	var msgs []*jetstream.RawStreamMsg
	wait.Until(t, 5*time.Second, "the event in the stream", func() bool {
		msgs = streamMessages(t, js, h.env.Stream.Name)
		return len(msgs) > 0
	})
	if len(msgs) != 1 {
		t.Fatalf("stream holds %d messages, want 1 (auto and suggest publish nothing)", len(msgs))
	}
	if n := h.eventRows(); n != 1 {
		t.Fatalf("event rows = %d, want 1", n)
	}

	convs := h.conversations(ws, "?platform=telegram")
	var conv messagingapi.Conversation
	for _, c := range convs.Conversations {
		if c.ChannelID == external.ID {
			conv = c
		}
	}
	stored := h.messages(ws, conv.ID, "").Messages[0]

	m := msgs[0]
	if want := h.env.Stream.Subject(ws, "message.received"); m.Subject != want {
		t.Fatalf("subject = %q, want %q", m.Subject, want)
	}
	var ev eventsv1.Event
	if err := proto.Unmarshal(m.Data, &ev); err != nil {
		t.Fatalf("event: %v", err)
	}
	if got := m.Header.Get("Nats-Msg-Id"); got == "" || got != ev.GetId() {
		t.Fatalf("Nats-Msg-Id = %q, event id = %q", got, ev.GetId())
	}
	if _, err := uuid.Parse(ev.GetId()); err != nil {
		t.Fatalf("event id %q is not a UUID", ev.GetId())
	}
	// The relay deletes the row after JetStream acknowledged the publish,
	// so the row may outlive the event's arrival in the stream by a moment.
	wait.Until(t, 5*time.Second, "the published event's row deleted", func() bool { return h.count("outbox", "") == 0 })
	if ev.GetType() != "message.received" || ev.GetWorkspaceId() != ws || ev.GetCreatedAt() == nil ||
		time.Since(ev.GetCreatedAt().AsTime()) > time.Minute {
		t.Fatalf("envelope = %v", &ev)
	}
	d := ev.GetMessageReceived()
	want := &eventsv1.MessageReceived{
		WorkspaceId:    ws,
		ConversationId: conv.ID,
		Platform:       "telegram",
		Channel:        &eventsv1.Channel{Kind: "telegram", ExternalId: external.ExternalID},
		Contact:        &eventsv1.Contact{Id: conv.Contact.ID, SenderId: "1003", Name: "Ed Ward", ProfilePic: ""},
		Message: &eventsv1.Message{
			Id: stored.ID, Text: "external", Type: "text", ExternalId: "13",
			CreatedAt: d.GetMessage().GetCreatedAt(),
		},
	}
	if !proto.Equal(d, want) {
		t.Fatalf("data =\n%v\nwant\n%v", d, want)
	}
	if external.ExternalID == "" {
		t.Fatal("channel external_id is empty")
	}
	if got := d.GetMessage().GetCreatedAt().AsTime(); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("message.created_at = %v, want the update's date", got)
	}

	// A mode change applies from the next message: suggest -> external
	// publishes, external -> auto stops.
	h.setMode(suggest.ID, "external")
	h.setMode(external.ID, "auto")
	h.deliver(external, tgUpdate{UpdateID: 2, MessageID: 14, FromID: 1003, First: "Ed", Date: t0.Unix() + 6, Text: "now auto"})
	h.deliver(suggest, tgUpdate{UpdateID: 2, MessageID: 15, FromID: 1002, First: "Sue", Date: t0.Unix() + 7, Text: "now external"})
	wait.Until(t, 5*time.Second, "the second event", func() bool {
		msgs = streamMessages(t, js, h.env.Stream.Name)
		return len(msgs) > 1
	})
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2", len(msgs))
	}
	var ev2 eventsv1.Event
	if err := proto.Unmarshal(msgs[1].Data, &ev2); err != nil {
		t.Fatal(err)
	}
	if ev2.GetMessageReceived().GetMessage().GetText() != "now external" || ev2.GetMessageReceived().GetChannel().GetExternalId() != suggest.ExternalID {
		t.Fatalf("second event = %v", &ev2)
	}
}

// TestRelayPublishesRowsLeftBehind is what a messaging killed (kill -9)
// between a commit and its publish, or between a publish and its delete,
// leaves in the outbox: the sweep of any instance publishes the row once
// it is OUTBOX_SWEEP_AGE old, and the stream stores a repeat once.
func TestRelayPublishesRowsLeftBehind(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	js := h.env.JetStream(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 5, First: "Kim", Date: t0.Unix(), Text: "first"})
	wait.Until(t, 5*time.Second, "first event", func() bool { return len(streamMessages(t, js, h.env.Stream.Name)) == 1 })

	// A row committed by an instance that died before publishing: no one
	// hands it to the relay, only the sweep finds it.
	id := uuid.NewString()
	payload, _ := proto.Marshal(&eventsv1.Event{Id: id, Type: "message.received", WorkspaceId: ws})
	leftBehind := func() {
		t.Helper()
		if err := h.db.Exec(`INSERT INTO messaging.outbox (event_id, subject, payload) VALUES (?, ?, ?)`,
			id, h.env.Stream.Subject(ws, "message.received"), payload).Error; err != nil {
			t.Fatal(err)
		}
	}
	leftBehind()
	written := time.Now()
	wait.Until(t, 5*time.Second+h.cfg.OutboxSweepAge, "the orphaned event", func() bool { return len(streamMessages(t, js, h.env.Stream.Name)) == 2 })
	if took := time.Since(written); took < h.cfg.OutboxSweepAge {
		t.Fatalf("the orphaned event was swept %s after its commit, before OUTBOX_SWEEP_AGE (%s)", took, h.cfg.OutboxSweepAge)
	}
	if got := streamMessages(t, js, h.env.Stream.Name)[1].Header.Get("Nats-Msg-Id"); got != id {
		t.Fatalf("Nats-Msg-Id = %q, want %q", got, id)
	}
	wait.Until(t, 5*time.Second, "the swept row deleted", func() bool { return h.count("outbox", "") == 0 })

	// A row published but not deleted (killed between the ack and the
	// delete) goes out again, and the stream stores it once.
	leftBehind()
	wait.Until(t, 5*time.Second+h.cfg.OutboxSweepAge, "the republished row deleted", func() bool { return h.count("outbox", "") == 0 })
	if n := len(streamMessages(t, js, h.env.Stream.Name)); n != 2 {
		t.Fatalf("stream holds %d messages after a republish, want 2", n)
	}
}
