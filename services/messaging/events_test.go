package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	messagingapi "github.com/parleyhq/parley/pkg/api/messaging"
	eventsv1 "github.com/parleyhq/parley/pkg/gen/parley/events/v1"
	"github.com/parleyhq/parley/pkg/testenv/wait"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
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
	// The relay marks the row after JetStream acknowledged the publish, so
	// the event may be in the stream a moment before published_at is set.
	wait.For(t, 5*time.Second, "the outbox row marked published", func() error {
		var rowID string
		var published *time.Time
		h.db.Raw(`SELECT event_id::text, published_at FROM messaging.outbox WHERE starts_with(subject, ?)`,
			h.env.Stream.SubjectPrefix+".").Row().Scan(&rowID, &published)
		if rowID != ev.GetId() || published == nil {
			return fmt.Errorf("outbox row %s published_at %v, event %s", rowID, published, ev.GetId())
		}
		return nil
	})
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

func TestRelayPublishesRowsLeftBehind(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	js := h.env.JetStream(t)
	ws := uuid.NewString()
	ch := h.telegramChannel(ws, "external")
	h.deliver(ch, tgUpdate{UpdateID: 1, MessageID: 1, FromID: 5, First: "Kim", Date: t0.Unix(), Text: "first"})
	wait.Until(t, 5*time.Second, "first event", func() bool { return len(streamMessages(t, js, h.env.Stream.Name)) == 1 })

	// A row committed by an instance that died before publishing: no kick,
	// only the poll finds it.
	id := uuid.NewString()
	payload, _ := proto.Marshal(&eventsv1.Event{Id: id, Type: "message.received", WorkspaceId: ws})
	if err := h.db.Exec(`INSERT INTO messaging.outbox (event_id, subject, payload) VALUES (?, ?, ?)`,
		id, h.env.Stream.Subject(ws, "message.received"), payload).Error; err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 5*time.Second, "the orphaned event", func() bool { return len(streamMessages(t, js, h.env.Stream.Name)) == 2 })
	if got := streamMessages(t, js, h.env.Stream.Name)[1].Header.Get("Nats-Msg-Id"); got != id {
		t.Fatalf("Nats-Msg-Id = %q, want %q", got, id)
	}

	// A row published but not marked (crash between ack and commit) goes out
	// again and the stream stores it once.
	h.db.Exec(`UPDATE messaging.outbox SET published_at = NULL WHERE event_id = ?`, id)
	wait.Until(t, 5*time.Second, "the row marked again", func() bool {
		return h.count("outbox", "published_at IS NULL") == 0
	})
	if n := len(streamMessages(t, js, h.env.Stream.Name)); n != 2 {
		t.Fatalf("stream holds %d messages after a republish, want 2", n)
	}

	// Pruning removes only rows published before the cutoff.
	h.db.Exec(`UPDATE messaging.outbox SET published_at = now() - interval '25 hours' WHERE event_id = ?`, id)
	n, err := adapters.NewOutboxStore(h.db).Prune(context.Background(), time.Now().Add(-h.cfg.OutboxRetention))
	if err != nil || n != 1 || h.count("outbox", "") != 1 {
		t.Fatalf("prune: %d %v, %d rows left", n, err, h.count("outbox", ""))
	}
}
