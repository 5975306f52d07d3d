package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// customerMessage is a delivery named key of a text message in c, which
// stores the message and, when decide is not nil, what it adds to it.
func customerMessage(c conversation.Conversation, key string, decide func(conversation.Conversation, *conversation.Stored) error) conversation.Delivery {
	return conversation.Delivery{
		ChannelID: c.ChannelID, Key: key, Conversation: &c, NewID: uuid.NewString,
		Store: func(conv conversation.Conversation) (conversation.Stored, error) {
			st := conversation.Stored{Message: conversation.Message{
				ID: uuid.NewString(), WorkspaceID: conv.WorkspaceID, ConversationID: conv.ID, Sender: conversation.SenderContact,
				Type: conversation.TypeText, Content: "message " + key, Metadata: map[string]any{}, CreatedAt: c.LastMessageAt,
			}}
			if decide != nil {
				if err := decide(conv, &st); err != nil {
					return conversation.Stored{}, err
				}
			}
			return st, nil
		},
	}
}

// TestUpsertConversation: the contact and conversation stored in one step
// keep what a later delivery may not change: a known name or picture
// against an empty one, a newer message time and reply address against an
// older, retried delivery; and the conversation stays one per contact.
func TestUpsertConversation(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	ws, chID := uuid.NewString(), uuid.NewString()
	if err := gdb.Exec(`INSERT INTO messaging.channels (id, workspace_id, kind, secret) VALUES (?, ?, 'telegram', 's')`, chID, ws).Error; err != nil {
		t.Fatal(err)
	}
	store := adapters.NewConversationStore(gdb)
	upsert := func(name, pic, replyTo string, at time.Time) conversation.Conversation {
		t.Helper()
		got, err := store.Receive(context.Background(), customerMessage(conversation.Conversation{
			WorkspaceID: ws, ChannelID: chID, Platform: channel.KindTelegram,
			Contact: conversation.Contact{WorkspaceID: ws, ChannelID: chID, SenderID: "42", Name: name, ProfilePic: pic},
			ReplyTo: replyTo, LastMessageAt: at, LastCustomerMessageAt: at,
		}, uuid.NewString(), nil))
		if err != nil || !got.Fresh {
			t.Fatalf("receive: fresh %v, err %v", got.Fresh, err)
		}
		return got.Conversation
	}
	t1 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	first := upsert("Ada", "https://pic/a", "chat-1", t1)
	if first.Contact.Name != "Ada" || first.Contact.SenderID != "42" || first.Contact.WorkspaceID != ws || first.ReplyTo != "chat-1" {
		t.Fatalf("first = %+v", first)
	}
	newer := upsert("", "", "chat-2", t1.Add(time.Hour))
	if newer.ID != first.ID || newer.Contact.ID != first.Contact.ID {
		t.Fatalf("a second message made conversation %s / contact %s, want %s / %s", newer.ID, newer.Contact.ID, first.ID, first.Contact.ID)
	}
	if newer.Contact.Name != "Ada" || newer.Contact.ProfilePic != "https://pic/a" || newer.ReplyTo != "chat-2" || !newer.LastMessageAt.Equal(t1.Add(time.Hour)) {
		t.Fatalf("after a newer message without a name = %+v", newer)
	}
	older := upsert("Ada L.", "", "chat-1", t1.Add(-time.Hour))
	if older.ReplyTo != "chat-2" || !older.LastMessageAt.Equal(t1.Add(time.Hour)) || !older.LastCustomerMessageAt.Equal(t1.Add(time.Hour)) || older.Contact.Name != "Ada L." {
		t.Fatalf("after a retried older delivery = %+v", older)
	}
}
