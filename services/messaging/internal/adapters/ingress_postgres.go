package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/groupcommit"
	"github.com/parleyhq/parley/pkg/ids"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
)

// Platform deliveries are stored through a group commit
// (docs/architecture.md "Ingress"): concurrent Receive calls share one
// transaction of a few set-based statements (the claims, the existing
// conversations moved forward, the messages with their events and chat
// turns), and each caller is answered after its commit. A lone delivery
// goes at once; under load a batch fills while the last one commits, and
// waits ingressLinger at most for more.
const (
	// DefaultIngressBatch is the most deliveries one transaction stores.
	DefaultIngressBatch = 64
	// ingressLinger is how long a partial batch may wait to fill when
	// the last one was shared.
	ingressLinger = 500 * time.Microsecond
	// ingressWriters is how many batches are written at once: one, so the
	// next fills while the last commits, and batches of one instance never
	// wait on each other's locks.
	ingressWriters = 1
)

// ingressItem is one Receive waiting for its batch, and what it stored.
type ingressItem struct {
	delivery conversation.Delivery
	got      conversation.Received
}

// batchKey keeps two deliveries of one conversation (or of one key) out of
// one batch: the second must see what the first stored (its chat turn
// number, its message time).
func (it *ingressItem) batchKey() string {
	d := it.delivery
	if d.Conversation != nil {
		return "conversation\x00" + ids.Canonical(d.ChannelID) + "\x00" + d.Conversation.Contact.SenderID
	}
	return "key\x00" + ids.Canonical(d.ChannelID) + "\x00" + d.Key
}

// Receive stores the delivery in the next batch and returns once that is
// committed.
func (s *ConversationStore) Receive(ctx context.Context, d conversation.Delivery) (conversation.Received, error) {
	if d.Conversation != nil && (d.Store == nil || d.NewID == nil) {
		return conversation.Received{}, errors.New("receive: a customer message needs Store and NewID")
	}
	it := &ingressItem{delivery: d}
	if err := s.ingress.Do(ctx, it); err != nil {
		return conversation.Received{}, err
	}
	return it.got, nil
}

// writeDeliveries stores a batch in one transaction. An error rolls it all
// back; the group commit then stores each delivery alone, so one that
// cannot be stored fails only itself.
func (s *ConversationStore) writeDeliveries(ctx context.Context, batch []*groupcommit.Job[*ingressItem]) error {
	items := make([]*ingressItem, len(batch))
	for i, j := range batch {
		items[i] = j.Item
		items[i].got = conversation.Received{}
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		pool := tx.Statement.ConnPool
		if err := claimDeliveries(ctx, pool, items); err != nil {
			return err
		}
		var messages []*ingressItem
		for _, it := range items {
			if it.got.Fresh && it.delivery.Conversation != nil {
				messages = append(messages, it)
			}
		}
		if len(messages) == 0 {
			return nil
		}
		if err := moveConversations(ctx, pool, messages); err != nil {
			return err
		}
		for _, it := range messages {
			if it.got.Conversation.ID == "" {
				// The customer's first message (or the first on this
				// channel): contact and conversation are made here.
				if err := it.insertConversation(ctx, receiveTx{tx: tx}); err != nil {
					return err
				}
			}
			stored, err := it.delivery.Store(it.got.Conversation)
			if err != nil {
				return err
			}
			it.got.Stored = stored
		}
		return addReceived(ctx, pool, messages)
	})
}

// claimDeliveries takes the batch's keys, in key order so that concurrent
// batches wait on each other rather than deadlock, and marks the items
// whose key was free. An item whose key an earlier one of the batch also
// carries is a repeat of it.
func claimDeliveries(ctx context.Context, pool gorm.ConnPool, items []*ingressItem) error {
	channels, keys := make([]string, 0, len(items)), make([]string, 0, len(items))
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		k := ids.Canonical(it.delivery.ChannelID) + "\x00" + it.delivery.Key
		if !seen[k] {
			seen[k] = true
			channels, keys = append(channels, it.delivery.ChannelID), append(keys, it.delivery.Key)
		}
	}
	rows, err := pool.QueryContext(ctx, `
		INSERT INTO messaging.ingress_receipts (channel_id, key)
		SELECT u.channel_id::uuid, u.key FROM unnest($1::text[], $2::text[]) AS u(channel_id, key)
		ORDER BY 1, 2
		ON CONFLICT DO NOTHING
		RETURNING channel_id::text, key`, channels, keys)
	if err != nil {
		return fmt.Errorf("claim deliveries: %w", err)
	}
	defer rows.Close()
	free := make(map[string]bool, len(items))
	for rows.Next() {
		var channelID, key string
		if err := rows.Scan(&channelID, &key); err != nil {
			return fmt.Errorf("claim deliveries: %w", err)
		}
		free[channelID+"\x00"+key] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("claim deliveries: %w", err)
	}
	for _, it := range items {
		k := ids.Canonical(it.delivery.ChannelID) + "\x00" + it.delivery.Key
		it.got.Fresh = free[k]
		delete(free, k)
	}
	return nil
}

// moveConversationsSQL moves forward the existing conversations of the
// batch's customer messages in one statement, as UpsertConversation does
// one: a contact is written only when the message tells something new of
// it (a name, a picture), a conversation's rows are locked in id order
// (concurrent batches wait rather than deadlock) and never moved back in
// time. An item whose contact or conversation does not exist yet returns
// no row.
const moveConversationsSQL = `
	WITH i AS (
		SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::timestamptz[])
			AS i(ord, channel_id, sender_id, name, profile_pic, reply_to, at, customer_at)
	), k AS (
		UPDATE messaging.contacts AS k SET
			name = CASE WHEN i.name <> '' THEN i.name ELSE k.name END,
			profile_pic = CASE WHEN i.profile_pic <> '' THEN i.profile_pic ELSE k.profile_pic END,
			updated_at = now()
		FROM i
		WHERE k.channel_id = i.channel_id::uuid AND k.sender_id = i.sender_id
			AND ((i.name <> '' AND i.name <> k.name) OR (i.profile_pic <> '' AND i.profile_pic <> k.profile_pic))
		RETURNING k.id, k.name, k.profile_pic
	), c AS (
		SELECT i.*, k0.id AS contact_id, coalesce(k.name, k0.name) AS contact_name,
			coalesce(k.profile_pic, k0.profile_pic) AS contact_pic
		FROM i
		JOIN messaging.contacts AS k0 ON k0.channel_id = i.channel_id::uuid AND k0.sender_id = i.sender_id
		LEFT JOIN k ON k.id = k0.id
	), l AS (
		SELECT v.id, c.ord FROM messaging.conversations AS v
		JOIN c ON v.channel_id = c.channel_id::uuid AND v.contact_id = c.contact_id
		ORDER BY v.id
		FOR UPDATE OF v
	), v AS (
		UPDATE messaging.conversations AS v SET
			reply_to = CASE WHEN c.at >= v.last_message_at THEN c.reply_to ELSE v.reply_to END,
			last_message_at = GREATEST(v.last_message_at, c.at),
			last_customer_message_at = GREATEST(v.last_customer_message_at, c.customer_at)
		FROM l JOIN c ON c.ord = l.ord
		WHERE v.id = l.id
		RETURNING c.ord, v.id, v.workspace_id, v.channel_id, v.platform, v.reply_to, v.last_message_at,
			v.last_customer_message_at, v.created_at, c.contact_id, c.sender_id, c.contact_name, c.contact_pic,
			v.handed_over, v.handover_reason, v.unanswered, v.tags, v.assignee, v.turns
	)
	SELECT ord, id::text, workspace_id::text, channel_id::text, platform, reply_to, last_message_at,
		last_customer_message_at, created_at, contact_id::text, sender_id, contact_name, contact_pic,
		handed_over, handover_reason, unanswered, tags::text, assignee, turns
	FROM v`

// moveConversations moves forward the existing conversations of items
// (moveConversationsSQL) and sets each one's stored conversation; those
// left without one are the customers' first messages.
func moveConversations(ctx context.Context, pool gorm.ConnPool, items []*ingressItem) error {
	n := len(items)
	var (
		ords                                  = make([]int32, n)
		channels, senders, names, pics, reply = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		at                                    = make([]time.Time, n)
		customerAt                            = make([]*time.Time, n)
	)
	for i, it := range items {
		c := it.delivery.Conversation
		ords[i], channels[i], senders[i] = int32(i), c.ChannelID, c.Contact.SenderID
		names[i], pics[i], reply[i], at[i] = c.Contact.Name, c.Contact.ProfilePic, c.ReplyTo, c.LastMessageAt
		if !c.LastCustomerMessageAt.IsZero() {
			customerAt[i] = &c.LastCustomerMessageAt
		}
	}
	rows, err := pool.QueryContext(ctx, moveConversationsSQL, ords, channels, senders, names, pics, reply, at, customerAt)
	if err != nil {
		return fmt.Errorf("move conversations forward: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ord  int
			r    conversationRow
			tags string
		)
		if err := rows.Scan(&ord, &r.ID, &r.WorkspaceID, &r.ChannelID, &r.Platform, &r.ReplyTo, &r.LastMessageAt,
			&r.LastCustomerMessageAt, &r.CreatedAt, &r.ContactID, &r.SenderID, &r.Name, &r.ProfilePic,
			&r.HandedOver, &r.HandoverReason, &r.Unanswered, &tags, &r.Assignee, &r.Turns); err != nil {
			return fmt.Errorf("move conversations forward: %w", err)
		}
		if err := decodeTags(tags, &r.Tags); err != nil {
			return err
		}
		if ord < 0 || ord >= n {
			return fmt.Errorf("move conversations forward: row %d of %d", ord, n)
		}
		items[ord].got.Conversation = r.toDomain()
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("move conversations forward: %w", err)
	}
	return nil
}

// insertConversation stores the contact and conversation of a customer's
// first message, with ids made for them now.
func (it *ingressItem) insertConversation(ctx context.Context, tx receiveTx) error {
	c := *it.delivery.Conversation
	c.ID, c.Contact.ID = it.delivery.NewID(), it.delivery.NewID()
	conv, err := tx.UpsertConversation(ctx, c)
	if err != nil {
		return err
	}
	it.got.Conversation = conv
	return nil
}

// addReceivedSQL stores the batch's customer messages, moves the
// conversations of chat turns to their turn's number (only from the one
// before it: their rows are locked by this transaction) and writes the
// outbox rows in the batch's order, in one statement. It returns how many
// turn counters moved.
const addReceivedSQL = `
	WITH m AS (
		INSERT INTO messaging.messages (id, workspace_id, conversation_id, sender, type, content, metadata, external_id, created_at)
		SELECT u.id::uuid, u.workspace_id::uuid, u.conversation_id::uuid, u.sender, u.type, u.content, u.metadata::jsonb,
			u.external_id, u.created_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[])
			AS u(id, workspace_id, conversation_id, sender, type, content, metadata, external_id, created_at)
	), t AS (
		UPDATE messaging.conversations AS v SET turns = u.seq
		FROM unnest($10::text[], $11::bigint[]) AS u(id, seq)
		WHERE v.id = u.id::uuid AND v.turns = u.seq - 1
		RETURNING v.id
	), o AS (
		INSERT INTO messaging.outbox (event_id, subject, payload, created_at)
		SELECT u.event_id::uuid, u.subject, u.payload, u.created_at
		FROM unnest($12::text[], $13::text[], $14::bytea[], $15::timestamptz[]) WITH ORDINALITY AS u(event_id, subject, payload, created_at, n)
		ORDER BY u.n
	)
	SELECT count(*) FROM t`

// addReceived stores what the batch's customer messages decided
// (addReceivedSQL); a chat turn whose number does not follow its
// conversation's counter fails the batch.
func addReceived(ctx context.Context, pool gorm.ConnPool, items []*ingressItem) error {
	n := len(items)
	var (
		ids, workspaces, convs, senders, types = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		contents, metadata, externalIDs        = make([]string, n), make([]string, n), make([]string, n)
		createdAt                              = make([]time.Time, n)
		turnConvs                              []string
		turnSeqs                               []int64
		eventIDs, subjects                     []string
		payloads                               [][]byte
		eventsAt                               []time.Time
	)
	for i, it := range items {
		st := it.got.Stored
		if st.Message.Sender != conversation.SenderContact || st.Message.ConversationID != it.got.Conversation.ID {
			return fmt.Errorf("receive: message %s is not the customer's in conversation %s", st.Message.ID, it.got.Conversation.ID)
		}
		if st.Event != nil && st.Turn != nil {
			return fmt.Errorf("receive: message %s has both an event and a chat turn", st.Message.ID)
		}
		row, err := messageToRow(st.Message)
		if err != nil {
			return err
		}
		ids[i], workspaces[i], convs[i], senders[i], types[i] = row.ID, row.WorkspaceID, row.ConversationID, row.Sender, row.Type
		contents[i], metadata[i], externalIDs[i], createdAt[i] = row.Content, row.Metadata, row.ExternalID, row.CreatedAt
		ev := st.Event
		if st.Turn != nil {
			turnConvs, turnSeqs = append(turnConvs, row.ConversationID), append(turnSeqs, st.Turn.Seq)
			ev = &st.Turn.Event
		}
		if ev != nil {
			eventIDs, subjects = append(eventIDs, ev.ID), append(subjects, ev.Subject)
			payloads, eventsAt = append(payloads, ev.Payload), append(eventsAt, ev.CreatedAt)
		}
	}
	var moved int
	err := pool.QueryRowContext(ctx, addReceivedSQL,
		ids, workspaces, convs, senders, types, contents, metadata, externalIDs, createdAt,
		nonNilOf(turnConvs), nonNilOf(turnSeqs),
		nonNilOf(eventIDs), nonNilOf(subjects), nonNilOf(payloads), nonNilOf(eventsAt)).Scan(&moved)
	if err != nil {
		return fmt.Errorf("insert messages and their events: %w", err)
	}
	if moved != len(turnConvs) {
		return fmt.Errorf("chat turns: %d of %d turn counters were at the turn before", moved, len(turnConvs))
	}
	return nil
}

// nonNilOf is list, or an empty one for nil, which would be sent as NULL.
func nonNilOf[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

// decodeTags reads a conversation's tags as the JSON text the database
// returns.
func decodeTags(text string, tags *[]string) error {
	if strings.TrimSpace(text) == "" || text == "null" {
		*tags = nil
		return nil
	}
	if err := json.Unmarshal([]byte(text), tags); err != nil {
		return fmt.Errorf("decode tags: %w", err)
	}
	return nil
}
