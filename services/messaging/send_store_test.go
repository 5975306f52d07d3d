package main

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// sendStore is a database with one Telegram channel and one conversation
// of it, for the store's side of a send.
type sendStore struct {
	db       *gorm.DB
	store    *adapters.ConversationStore
	receipts *adapters.ReceiptStore
	channels *adapters.ChannelStore
	conv     conversation.Conversation
	ch       channel.Channel
}

// receiptTTL is the sendStore's IDEMPOTENCY_TTL.
const receiptTTL = time.Hour

func newSendStore(t *testing.T) sendStore {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	ctx := context.Background()
	s := sendStore{
		db:       gdb,
		receipts: adapters.NewReceiptStore(gdb, receiptTTL),
		channels: adapters.NewChannelStore(gdb),
		ch: channel.Channel{
			ID: uuid.NewString(), WorkspaceID: uuid.NewString(), Kind: channel.KindTelegram, ExternalID: "bot-7",
			Token: "7:token", Secret: "secret", AIMode: channel.AIModeSuggest, Status: channel.StatusActive,
			CreatedAt: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC),
		},
	}
	s.store = adapters.NewConversationStore(gdb).WithReceipts(s.receipts)
	if err := s.channels.Create(ctx, s.ch); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	got, err := s.store.Receive(ctx, customerMessage(conversation.Conversation{
		WorkspaceID: s.ch.WorkspaceID, ChannelID: s.ch.ID, Platform: channel.KindTelegram,
		Contact: conversation.Contact{WorkspaceID: s.ch.WorkspaceID, ChannelID: s.ch.ID, SenderID: "42", Name: "Ada"},
		ReplyTo: "chat-42", LastMessageAt: at, LastCustomerMessageAt: at,
	}, "first", nil))
	if err != nil {
		t.Fatal(err)
	}
	s.conv = got.Conversation
	// The tests count the messages they store: the customer's first is
	// not one of them.
	if err := gdb.Exec(`DELETE FROM messaging.messages WHERE conversation_id = ?`, s.conv.ID).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.UpdateChat(ctx, s.ch.WorkspaceID, s.conv.ID, func(c *conversation.Chat) error {
		c.Unanswered = "no answer yet"
		c.Tags = []string{"vip"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// sentMessage is a message sent in the store's conversation at at.
func (s sendStore) sentMessage(content string, at time.Time) conversation.Message {
	return conversation.Message{
		ID: uuid.NewString(), WorkspaceID: s.conv.WorkspaceID, ConversationID: s.conv.ID, Sender: conversation.SenderAI,
		Type: conversation.TypeText, Content: content, ExternalID: "tg-" + content, CreatedAt: at,
		Metadata: map[string]any{"run_id": "run-1", "buttons": []any{map[string]any{"title": "Yes", "payload": "y"}}},
	}
}

// count is how many rows of table (schema messaging) match where.
func (s sendStore) count(t *testing.T, table, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.db.Raw(`SELECT count(*) FROM messaging.`+table+` WHERE `+where, args...).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGetWithChannel: a send's one read gives the conversation as Get
// gives it and the channel as ChannelStore.Get gives it; another
// workspace's conversation, or none, is ErrNotFound.
func TestGetWithChannel(t *testing.T) {
	t.Parallel()
	s := newSendStore(t)
	ctx := context.Background()
	conv, ch, err := s.store.GetWithChannel(ctx, s.conv.WorkspaceID, s.conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantConv, err := s.store.Get(ctx, s.conv.WorkspaceID, s.conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantCh, err := s.channels.Get(ctx, s.ch.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(conv, wantConv) {
		t.Errorf("conversation = %+v\nwant %+v", conv, wantConv)
	}
	if !reflect.DeepEqual(ch, wantCh) || !reflect.DeepEqual(ch, s.ch) {
		t.Errorf("channel = %+v\nwant %+v (stored %+v)", ch, wantCh, s.ch)
	}
	if conv.Chat.Unanswered != "no answer yet" || len(conv.Chat.Tags) != 1 || conv.Contact.Name != "Ada" {
		t.Errorf("conversation lost its chat state or contact: %+v", conv)
	}
	for _, tt := range []struct{ name, ws, id string }{
		{"other workspace", uuid.NewString(), s.conv.ID},
		{"unknown conversation", s.conv.WorkspaceID, uuid.NewString()},
		{"not an id", s.conv.WorkspaceID, "nope"},
	} {
		if _, _, err := s.store.GetWithChannel(ctx, tt.ws, tt.id); !errors.Is(err, conversation.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", tt.name, err)
		}
	}
}

// TestAddSent: sent messages are stored as a message of the receive path
// is (the same column values), the conversation moves forward (never
// back) and is answered, and the receipt is stored when there is one.
func TestAddSent(t *testing.T) {
	t.Parallel()
	s := newSendStore(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 20, 11, 0, 0, 123456000, time.UTC)

	// Without a receipt, two messages (an image and its text).
	first, second := s.sentMessage("one", at), s.sentMessage("two", at.Add(time.Second))
	if err := s.store.AddSent(ctx, []conversation.Message{first, second}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.store.ListMessages(ctx, conversation.MessageQuery{ConversationID: s.conv.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0], second) || !reflect.DeepEqual(got[1], first) {
		t.Fatalf("messages = %+v\nwant %+v, %+v", got, second, first)
	}
	conv, err := s.store.Get(ctx, s.conv.WorkspaceID, s.conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !conv.LastMessageAt.Equal(second.CreatedAt) || conv.Chat.Unanswered != "" || conv.Chat.Tags[0] != "vip" {
		t.Fatalf("conversation after the send = %+v", conv)
	}
	if n := s.count(t, "idempotency_receipts", "true"); n != 0 {
		t.Fatalf("%d receipts stored by a send without one", n)
	}

	// The same message stored by the receive path's insert has the same
	// columns, byte for byte (but its sender: the customer).
	same := s.sentMessage("one", at)
	same.Sender = conversation.SenderContact
	if _, err := s.store.Receive(ctx, conversation.Delivery{
		ChannelID: s.ch.ID, Key: "same", Conversation: &conversation.Conversation{
			WorkspaceID: s.ch.WorkspaceID, ChannelID: s.ch.ID, Platform: channel.KindTelegram,
			Contact: conversation.Contact{WorkspaceID: s.ch.WorkspaceID, ChannelID: s.ch.ID, SenderID: "42"},
			ReplyTo: "chat-42", LastMessageAt: at, LastCustomerMessageAt: at,
		},
		NewID: uuid.NewString,
		Store: func(conversation.Conversation) (conversation.Stored, error) {
			return conversation.Stored{Message: same}, nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	var rows []string
	err = s.db.Raw(`SELECT concat_ws('|', workspace_id, conversation_id, type, content, metadata::text, external_id,
		to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')) FROM messaging.messages WHERE id IN ?`,
		[]string{first.ID, same.ID}).Scan(&rows).Error
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0] != rows[1] {
		t.Fatalf("AddSent's row and the receive path's differ: %q", rows)
	}

	// With a receipt; an older message does not move the conversation back.
	older := s.sentMessage("three", at.Add(-time.Hour))
	rec := receipt.Receipt{WorkspaceID: s.conv.WorkspaceID, KeyHash: "hash-1", Fingerprint: "fp-1", Status: 201, Body: []byte(`{"message":{}}`), Ref: older.ID}
	if err := s.store.AddSent(ctx, []conversation.Message{older}, &rec); err != nil {
		t.Fatal(err)
	}
	if n := s.count(t, "messages", "id = ?", older.ID); n != 1 {
		t.Fatalf("message with a receipt: %d stored", n)
	}
	found, ok, err := s.receipts.Find(ctx, rec.WorkspaceID, rec.KeyHash)
	if err != nil || !ok {
		t.Fatalf("receipt: ok %v, err %v", ok, err)
	}
	if found.Fingerprint != rec.Fingerprint || found.Response.Status != 201 || string(found.Response.Body) != string(rec.Body) || found.Response.Ref != older.ID {
		t.Fatalf("receipt = %+v", found)
	}
	conv, err = s.store.Get(ctx, s.conv.WorkspaceID, s.conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !conv.LastMessageAt.Equal(second.CreatedAt) {
		t.Fatalf("an older sent message moved last_message_at to %v", conv.LastMessageAt)
	}

	// A receipt too large to replay (nil body) stays optional in size too.
	large := rec
	large.KeyHash, large.Body = "hash-large", nil
	if err := s.store.AddSent(ctx, []conversation.Message{s.sentMessage("four", at)}, &large); err != nil {
		t.Fatal(err)
	}
	if found, ok, err := s.receipts.Find(ctx, rec.WorkspaceID, large.KeyHash); err != nil || !ok || !found.Response.TooLarge {
		t.Fatalf("receipt without body: %+v, ok %v, err %v", found, ok, err)
	}
}

// TestAddSentMissingConversation: sent messages of a conversation that
// does not exist (deleted meanwhile) are ErrNotFound, and nothing is
// stored, neither the messages nor the receipt.
func TestAddSentMissingConversation(t *testing.T) {
	t.Parallel()
	s := newSendStore(t)
	ctx := context.Background()
	m := s.sentMessage("lost", time.Now().UTC().Truncate(time.Microsecond))
	m.ConversationID = uuid.NewString()
	rec := receipt.Receipt{WorkspaceID: s.conv.WorkspaceID, KeyHash: "hash-lost", Fingerprint: "fp", Status: 201, Body: []byte(`{}`), Ref: m.ID}
	for _, r := range []*receipt.Receipt{nil, &rec} {
		if err := s.store.AddSent(ctx, []conversation.Message{m}, r); !errors.Is(err, conversation.ErrNotFound) {
			t.Fatalf("receipt %v: err = %v, want ErrNotFound", r != nil, err)
		}
	}
	if n := s.count(t, "messages", "true"); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
	if n := s.count(t, "idempotency_receipts", "true"); n != 0 {
		t.Fatalf("%d receipts stored", n)
	}

	// A store given no receipt store refuses a receipt and stores nothing.
	bare := adapters.NewConversationStore(s.db)
	m.ConversationID = s.conv.ID
	if err := bare.AddSent(ctx, []conversation.Message{m}, &rec); err == nil {
		t.Fatal("a receipt without a receipt store was taken")
	}
	if n := s.count(t, "messages", "true"); n != 0 {
		t.Fatalf("%d messages stored without their receipt", n)
	}
}

// TestAddSentReceiptConflict: a key's live receipt stays (it answered the
// key first) while the messages are stored; an expired one is replaced.
func TestAddSentReceiptConflict(t *testing.T) {
	t.Parallel()
	s := newSendStore(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 20, 11, 0, 0, 0, time.UTC)
	first := receipt.Receipt{WorkspaceID: s.conv.WorkspaceID, KeyHash: "hash-1", Fingerprint: "fp-1", Status: 201, Body: []byte(`{"n":1}`), Ref: "r1"}
	if err := s.store.AddSent(ctx, []conversation.Message{s.sentMessage("one", at)}, &first); err != nil {
		t.Fatal(err)
	}
	second := first
	second.Fingerprint, second.Body, second.Ref = "fp-2", []byte(`{"n":2}`), "r2"
	m := s.sentMessage("two", at)
	if err := s.store.AddSent(ctx, []conversation.Message{m}, &second); err != nil {
		t.Fatal(err)
	}
	if n := s.count(t, "messages", "id = ?", m.ID); n != 1 {
		t.Fatal("the message of a send whose key has a live receipt was not stored")
	}
	if found, _, err := s.receipts.Find(ctx, first.WorkspaceID, first.KeyHash); err != nil || found.Fingerprint != "fp-1" || found.Response.Ref != "r1" {
		t.Fatalf("live receipt = %+v, err %v; want the first kept", found, err)
	}

	if err := s.db.Exec(`UPDATE messaging.idempotency_receipts SET created_at = now() - ?::interval`, (2 * receiptTTL).String()).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.store.AddSent(ctx, []conversation.Message{s.sentMessage("three", at)}, &second); err != nil {
		t.Fatal(err)
	}
	if found, ok, err := s.receipts.Find(ctx, first.WorkspaceID, first.KeyHash); err != nil || !ok || found.Fingerprint != "fp-2" || found.Response.Ref != "r2" {
		t.Fatalf("after expiry receipt = %+v, ok %v, err %v; want the second", found, ok, err)
	}
}
