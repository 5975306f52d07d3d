package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/messaging/internal/adapters"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
	"github.com/parleyhq/parley/services/messaging/migrations"
)

// ingressStore is a conversation store over its own database, with one
// Telegram channel.
type ingressStore struct {
	db    *gorm.DB
	store *adapters.ConversationStore
	ws    string
	ch    string
}

func newIngressStore(t *testing.T) ingressStore {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(adapters.Schema, migrations.FS))
	gdb := env.DB(t, adapters.Schema, migrations.FS)
	s := ingressStore{db: gdb, store: adapters.NewConversationStore(gdb), ws: uuid.NewString(), ch: uuid.NewString()}
	if err := gdb.Exec(`INSERT INTO messaging.channels (id, workspace_id, kind, secret) VALUES (?, ?, 'telegram', 's')`, s.ch, s.ws).Error; err != nil {
		t.Fatal(err)
	}
	return s
}

// from is a message of customer sender at at.
func (s ingressStore) from(sender string, at time.Time) conversation.Conversation {
	return conversation.Conversation{
		WorkspaceID: s.ws, ChannelID: s.ch, Platform: channel.KindTelegram,
		Contact: conversation.Contact{WorkspaceID: s.ws, ChannelID: s.ch, SenderID: sender, Name: "Customer " + sender},
		ReplyTo: "chat-" + sender, LastMessageAt: at, LastCustomerMessageAt: at,
	}
}

func (s ingressStore) count(t *testing.T, table, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.db.Raw(`SELECT count(*) FROM messaging.`+table+` WHERE `+where, args...).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// receiveAll receives deliveries at once, each from its own goroutine, and
// returns what each got.
func (s ingressStore) receiveAll(deliveries []conversation.Delivery) ([]conversation.Received, []error) {
	got, errs := make([]conversation.Received, len(deliveries)), make([]error, len(deliveries))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, d := range deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i], errs[i] = s.store.Receive(context.Background(), d)
		}()
	}
	close(start)
	wg.Wait()
	return got, errs
}

// TestReceiveConcurrent: deliveries received at once (so sharing
// transactions) are each stored once, with an event each; a repeated key,
// in the same batch or a later one, is answered as a duplicate and stores
// nothing; deliveries only seen store their claim alone; an unchanged
// contact is not written again.
func TestReceiveConcurrent(t *testing.T) {
	t.Parallel()
	s := newIngressStore(t)
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	const senders, perSender = 12, 8
	withEvent := func(conv conversation.Conversation, st *conversation.Stored) error {
		st.Event = &outbox.Event{ID: uuid.NewString(), Subject: "events." + conv.ID, Payload: []byte(st.Message.ID), CreatedAt: at}
		return nil
	}
	var deliveries []conversation.Delivery
	for n := range senders * perSender {
		d := customerMessage(s.from(strconv.Itoa(n%senders), at.Add(time.Duration(n)*time.Second)), "update-"+strconv.Itoa(n), withEvent)
		deliveries = append(deliveries, d, d) // every key twice
		deliveries = append(deliveries, conversation.Delivery{ChannelID: s.ch, Key: "seen-" + strconv.Itoa(n)})
	}
	got, errs := s.receiveAll(deliveries)
	fresh := map[string]int{}
	for i, d := range deliveries {
		if errs[i] != nil {
			t.Fatalf("delivery %s: %v", d.Key, errs[i])
		}
		if got[i].Fresh {
			fresh[d.Key]++
			if d.Conversation != nil && (got[i].Conversation.ID == "" || got[i].Stored.Message.ConversationID != got[i].Conversation.ID) {
				t.Fatalf("delivery %s stored %+v", d.Key, got[i])
			}
		}
	}
	for n := range senders * perSender {
		for _, key := range []string{"update-" + strconv.Itoa(n), "seen-" + strconv.Itoa(n)} {
			if fresh[key] != 1 {
				t.Fatalf("key %s answered fresh %d times, want once", key, fresh[key])
			}
		}
	}
	for table, want := range map[string]int64{"messages": senders * perSender, "outbox": senders * perSender,
		"ingress_receipts": 2 * senders * perSender, "contacts": senders, "conversations": senders} {
		if n := s.count(t, table, "true"); n != want {
			t.Errorf("%d rows in %s, want %d", n, table, want)
		}
	}
	last := at.Add(time.Duration(senders*perSender-1) * time.Second)
	if n := s.count(t, "conversations", "last_message_at > ?", last.Add(-senders*time.Second)); n != senders {
		t.Errorf("%d conversations at their latest message, want %d", n, senders)
	}

	// A later delivery of a known customer with the same name leaves the
	// contact's row as it was; a new name is written.
	var before string
	if err := s.db.Raw(`SELECT xmin::text FROM messaging.contacts WHERE sender_id = '0'`).Scan(&before).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Receive(context.Background(), customerMessage(s.from("0", last.Add(time.Second)), "same-name", nil)); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := s.db.Raw(`SELECT xmin::text FROM messaging.contacts WHERE sender_id = '0'`).Scan(&after).Error; err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("an unchanged contact was written (xmin %s, was %s)", after, before)
	}
	renamed := s.from("0", last.Add(2*time.Second))
	renamed.Contact.Name = "Ada"
	r, err := s.store.Receive(context.Background(), customerMessage(renamed, "new-name", nil))
	if err != nil || r.Conversation.Contact.Name != "Ada" {
		t.Fatalf("renamed: %+v, %v", r.Conversation.Contact, err)
	}
	if n := s.count(t, "contacts", "sender_id = '0' AND name = 'Ada'"); n != 1 {
		t.Errorf("the new name was not stored")
	}
}

// TestReceiveTurnsInOrder: customer messages of one conversation received
// at once each become the next chat turn: numbers 1..n, gap-free, each
// once, their outbox rows in number order, the counter at n.
func TestReceiveTurnsInOrder(t *testing.T) {
	t.Parallel()
	s := newIngressStore(t)
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	const n = 40
	var deliveries []conversation.Delivery
	for i := range n {
		// Other customers' messages share the batches.
		deliveries = append(deliveries, customerMessage(s.from("other-"+strconv.Itoa(i), at), "other-"+strconv.Itoa(i), nil))
		deliveries = append(deliveries, customerMessage(s.from("42", at.Add(time.Duration(i)*time.Second)), "turn-"+strconv.Itoa(i),
			func(conv conversation.Conversation, st *conversation.Stored) error {
				seq := conv.Chat.Turns + 1
				st.Turn = &conversation.Turn{Seq: seq, Event: outbox.Event{
					ID: uuid.NewString(), Subject: "chat." + conv.ID, Payload: []byte(strconv.FormatInt(seq, 10)), CreatedAt: at,
				}}
				return nil
			}))
	}
	_, errs := s.receiveAll(deliveries)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("delivery %s: %v", deliveries[i].Key, err)
		}
	}
	var payloads []string
	if err := s.db.Raw(`SELECT convert_from(payload, 'UTF8') FROM messaging.outbox WHERE subject LIKE 'chat.%' ORDER BY seq`).Scan(&payloads).Error; err != nil {
		t.Fatal(err)
	}
	if len(payloads) != n {
		t.Fatalf("%d chat turns in the outbox, want %d", len(payloads), n)
	}
	for i, p := range payloads {
		if p != strconv.Itoa(i+1) {
			t.Fatalf("outbox turns in order: %v", payloads)
		}
	}
	if got := s.count(t, "conversations", "turns = ?", n); got != 1 {
		t.Fatalf("%d conversations at turn %d, want 1", got, n)
	}
}

// TestReceiveBadItemAlone: a delivery that cannot be stored (its message
// breaks a constraint; its decision fails) fails alone, claiming nothing,
// while those that shared its batch are stored; redelivered, it is fresh.
func TestReceiveBadItemAlone(t *testing.T) {
	t.Parallel()
	s := newIngressStore(t)
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	first, err := s.store.Receive(context.Background(), customerMessage(s.from("1", at), "first", nil))
	if err != nil {
		t.Fatal(err)
	}
	taken := first.Stored.Message.ID
	errDecide := errors.New("cannot decide")
	const n = 30
	var deliveries []conversation.Delivery
	for i := range n {
		deliveries = append(deliveries, customerMessage(s.from(strconv.Itoa(i), at.Add(time.Second)), fmt.Sprint("good-", i), nil))
	}
	deliveries = append(deliveries,
		customerMessage(s.from("bad-id", at), "bad-id", func(_ conversation.Conversation, st *conversation.Stored) error {
			st.Message.ID = taken // a message id already stored
			return nil
		}),
		customerMessage(s.from("bad-decision", at), "bad-decision", func(conversation.Conversation, *conversation.Stored) error {
			return errDecide
		}))
	_, errs := s.receiveAll(deliveries)
	for i, err := range errs[:n] {
		if err != nil {
			t.Fatalf("delivery %s: %v", deliveries[i].Key, err)
		}
	}
	if errs[n] == nil || !errors.Is(errs[n+1], errDecide) {
		t.Fatalf("bad deliveries: %v, %v", errs[n], errs[n+1])
	}
	if got := s.count(t, "messages", "true"); got != n+1 {
		t.Fatalf("%d messages, want %d", got, n+1)
	}
	if got := s.count(t, "ingress_receipts", "key LIKE 'bad-%'"); got != 0 {
		t.Fatalf("%d bad deliveries claimed", got)
	}
	again, err := s.store.Receive(context.Background(), customerMessage(s.from("bad-id", at), "bad-id", nil))
	if err != nil || !again.Fresh {
		t.Fatalf("redelivered: fresh %v, %v", again.Fresh, err)
	}
}
