package adapters

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/pkg/groupcommit"
	"github.com/parleyhq/parley/services/messaging/internal/domain/channel"
	"github.com/parleyhq/parley/services/messaging/internal/domain/conversation"
	"github.com/parleyhq/parley/services/messaging/internal/domain/outbox"
	"github.com/parleyhq/parley/services/messaging/internal/domain/receipt"
)

// ConversationStore keeps contacts, conversations and messages, and takes
// received deliveries (with their dedupe claims and outbox events) in one
// transaction.
type ConversationStore struct {
	db *gorm.DB
	// ingress stores received deliveries in shared transactions
	// (ingress_postgres.go).
	ingress *groupcommit.Committer[*ingressItem]
	// receipts writes the receipts of keyed sends with their messages.
	receipts *ReceiptStore
}

var _ conversation.Store = (*ConversationStore)(nil)

// NewConversationStore returns a store on gdb, storing up to
// DefaultIngressBatch received deliveries in one transaction.
func NewConversationStore(gdb *gorm.DB) *ConversationStore {
	return NewConversationStoreBatched(gdb, DefaultIngressBatch)
}

// NewConversationStoreBatched is NewConversationStore storing up to
// maxBatch received deliveries in one transaction (1: each alone).
func NewConversationStoreBatched(gdb *gorm.DB, maxBatch int) *ConversationStore {
	s := &ConversationStore{db: gdb}
	s.ingress = groupcommit.New(maxBatch, ingressWriters, ingressLinger, (*ingressItem).batchKey, s.writeDeliveries)
	return s
}

// WithReceipts returns the store writing sends' idempotency receipts
// through r; without it, AddSent refuses a receipt.
func (s *ConversationStore) WithReceipts(r *ReceiptStore) *ConversationStore {
	c := *s
	c.receipts = r
	return &c
}

type contactRow struct {
	ID          string `gorm:"column:id"`
	WorkspaceID string `gorm:"column:workspace_id"`
	ChannelID   string `gorm:"column:channel_id"`
	SenderID    string `gorm:"column:sender_id"`
	Name        string `gorm:"column:name"`
	ProfilePic  string `gorm:"column:profile_pic"`
}

func (r contactRow) toDomain() conversation.Contact {
	return conversation.Contact{ID: r.ID, WorkspaceID: r.WorkspaceID, ChannelID: r.ChannelID, SenderID: r.SenderID, Name: r.Name, ProfilePic: r.ProfilePic}
}

// conversationRow is a conversation joined with its contact.
type conversationRow struct {
	ID                    string     `gorm:"column:id"`
	WorkspaceID           string     `gorm:"column:workspace_id"`
	ChannelID             string     `gorm:"column:channel_id"`
	Platform              string     `gorm:"column:platform"`
	ReplyTo               string     `gorm:"column:reply_to"`
	LastMessageAt         time.Time  `gorm:"column:last_message_at"`
	LastCustomerMessageAt *time.Time `gorm:"column:last_customer_message_at"`
	CreatedAt             time.Time  `gorm:"column:created_at"`
	ContactID             string     `gorm:"column:contact_id"`
	SenderID              string     `gorm:"column:sender_id"`
	Name                  string     `gorm:"column:name"`
	ProfilePic            string     `gorm:"column:profile_pic"`
	HandedOver            bool       `gorm:"column:handed_over"`
	HandoverReason        string     `gorm:"column:handover_reason"`
	Unanswered            string     `gorm:"column:unanswered"`
	Tags                  []string   `gorm:"column:tags;serializer:json"`
	Assignee              string     `gorm:"column:assignee"`
	Turns                 int64      `gorm:"column:turns"`
}

func (r conversationRow) toDomain() conversation.Conversation {
	c := conversation.Conversation{
		ID: r.ID, WorkspaceID: r.WorkspaceID, ChannelID: r.ChannelID, Platform: channel.Kind(r.Platform),
		ReplyTo: r.ReplyTo, LastMessageAt: utc(r.LastMessageAt), CreatedAt: utc(r.CreatedAt),
		Contact: conversation.Contact{
			ID: r.ContactID, WorkspaceID: r.WorkspaceID, ChannelID: r.ChannelID,
			SenderID: r.SenderID, Name: r.Name, ProfilePic: r.ProfilePic,
		},
		Chat: conversation.Chat{
			HandedOver: r.HandedOver, HandoverReason: r.HandoverReason, Unanswered: r.Unanswered,
			Tags: r.Tags, Assignee: r.Assignee, Turns: r.Turns,
		},
	}
	if c.Chat.Tags == nil {
		c.Chat.Tags = []string{}
	}
	if r.LastCustomerMessageAt != nil {
		c.LastCustomerMessageAt = utc(*r.LastCustomerMessageAt)
	}
	return c
}

// conversationChatColumns are the conversation's chat state.
const conversationChatColumns = `handed_over, handover_reason, unanswered, tags, assignee, turns`

const conversationColumns = `v.id, v.workspace_id, v.channel_id, v.platform, v.reply_to, v.last_message_at,
	v.last_customer_message_at, v.created_at, c.id AS contact_id, c.sender_id, c.name, c.profile_pic,
	v.handed_over, v.handover_reason, v.unanswered, v.tags, v.assignee, v.turns`

type messageRow struct {
	ID             string    `gorm:"column:id"`
	WorkspaceID    string    `gorm:"column:workspace_id"`
	ConversationID string    `gorm:"column:conversation_id"`
	Sender         string    `gorm:"column:sender"`
	Type           string    `gorm:"column:type"`
	Content        string    `gorm:"column:content"`
	Metadata       string    `gorm:"column:metadata;type:jsonb"`
	ExternalID     string    `gorm:"column:external_id"`
	CreatedAt      time.Time `gorm:"column:created_at"`
}

func (messageRow) TableName() string { return "messaging.messages" }

func messageToRow(m conversation.Message) (messageRow, error) {
	md := m.Metadata
	if md == nil {
		md = map[string]any{}
	}
	b, err := json.Marshal(md)
	if err != nil {
		return messageRow{}, fmt.Errorf("encode message metadata: %w", err)
	}
	return messageRow{
		ID: m.ID, WorkspaceID: m.WorkspaceID, ConversationID: m.ConversationID, Sender: string(m.Sender),
		Type: m.Type, Content: m.Content, Metadata: string(b), ExternalID: m.ExternalID, CreatedAt: m.CreatedAt,
	}, nil
}

func (r messageRow) toDomain() (conversation.Message, error) {
	md := map[string]any{}
	if r.Metadata != "" {
		if err := json.Unmarshal([]byte(r.Metadata), &md); err != nil {
			return conversation.Message{}, fmt.Errorf("decode metadata of message %s: %w", r.ID, err)
		}
	}
	return conversation.Message{
		ID: r.ID, WorkspaceID: r.WorkspaceID, ConversationID: r.ConversationID, Sender: conversation.Sender(r.Sender),
		Type: r.Type, Content: r.Content, Metadata: md, ExternalID: r.ExternalID, CreatedAt: utc(r.CreatedAt),
	}, nil
}

type outboxRow struct {
	Seq       int64     `gorm:"column:seq;primaryKey;autoIncrement"`
	EventID   string    `gorm:"column:event_id"`
	Subject   string    `gorm:"column:subject"`
	Payload   []byte    `gorm:"column:payload"`
	CreatedAt time.Time `gorm:"column:created_at"`
}

func (outboxRow) TableName() string { return "messaging.outbox" }

func (r outboxRow) toDomain() outbox.Event {
	return outbox.Event{ID: r.EventID, Subject: r.Subject, Payload: r.Payload, CreatedAt: utc(r.CreatedAt)}
}

// Get returns a conversation of the workspace.
func (s *ConversationStore) Get(ctx context.Context, workspaceID, id string) (conversation.Conversation, error) {
	row, err := findConversation[conversationRow](s.conversations(ctx), workspaceID, id)
	if err != nil {
		return conversation.Conversation{}, err
	}
	return row.toDomain(), nil
}

// conversationChannelRow is a conversation joined with its contact and
// its channel.
type conversationChannelRow struct {
	Conversation conversationRow `gorm:"embedded"`
	Channel      channelRow      `gorm:"embedded;embeddedPrefix:ch_"`
}

// GetWithChannel returns a conversation of the workspace and its channel,
// in one query: every send needs both.
func (s *ConversationStore) GetWithChannel(ctx context.Context, workspaceID, id string) (conversation.Conversation, channel.Channel, error) {
	tx := s.conversations(ctx).Select(conversationColumns + ", " + prefixedChannelColumns).
		Joins("JOIN messaging.channels AS ch ON ch.id = v.channel_id")
	row, err := findConversation[conversationChannelRow](tx, workspaceID, id)
	if err != nil {
		return conversation.Conversation{}, channel.Channel{}, err
	}
	return row.Conversation.toDomain(), row.Channel.toDomain(), nil
}

// findConversation reads the workspace's conversation id through tx, a
// query of conversations as v, into a row R.
func findConversation[R any](tx *gorm.DB, workspaceID, id string) (R, error) {
	var rows []R
	if !validID(workspaceID, id) {
		return *new(R), conversation.ErrNotFound
	}
	if err := tx.Where("v.workspace_id = ? AND v.id = ?", workspaceID, id).Limit(1).Scan(&rows).Error; err != nil {
		return *new(R), fmt.Errorf("load conversation %s: %w", id, err)
	}
	if len(rows) == 0 {
		return *new(R), conversation.ErrNotFound
	}
	return rows[0], nil
}

func (s *ConversationStore) conversations(ctx context.Context) *gorm.DB {
	return s.db.WithContext(ctx).Table("messaging.conversations AS v").
		Select(conversationColumns).
		Joins("JOIN messaging.contacts AS c ON c.id = v.contact_id")
}

// ListConversations returns a page of the workspace's conversations.
//
// The API's busiest read: its statement is written by hand
// (listConversationsSQL) and its rows scanned by pgx (conversationScanner),
// not built and read by gorm, whose statement building, reflection and
// per-column strings made a page cost several times its query.
func (s *ConversationStore) ListConversations(ctx context.Context, q conversation.ConversationQuery) ([]conversation.Conversation, error) {
	if !validID(q.WorkspaceID) {
		return nil, nil
	}
	out := make([]conversation.Conversation, 0, q.Limit)
	stmt, ok := listConversationsSQL(q)
	if !ok {
		return out, nil
	}
	var sc conversationScanner
	err := db.QueryRows(ctx, s.db, stmt.String(), stmt.Args(), func(rows pgx.Rows) error {
		c, err := sc.scan(rows)
		if err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	return out, nil
}

// listConversationsSQL is the statement of the page q asks for: the
// workspace's conversations joined with their contacts, narrowed by the
// platform and the inbox's filters, newest first (db.SQL.NewestFirst).
// It is not ok when no conversation can match: a channel that is no uuid.
func listConversationsSQL(q conversation.ConversationQuery) (*db.SQL, bool) {
	f := q.Inbox
	if f.ChannelID != "" && !validID(f.ChannelID) {
		return nil, false
	}
	s := db.NewSQL(`SELECT `+conversationColumns+`
	FROM messaging.conversations AS v JOIN messaging.contacts AS c ON c.id = v.contact_id
	WHERE v.workspace_id = `, 1024).Arg(q.WorkspaceID)
	if q.Platform != "" {
		s.Write(" AND v.platform = ").Arg(string(q.Platform))
	}
	if f.ChannelID != "" {
		s.Write(" AND v.channel_id = ").Arg(f.ChannelID)
	}
	if f.Unanswered {
		s.Write(" AND v.unanswered <> ''")
	}
	if f.HandedOver {
		s.Write(" AND v.handed_over")
	}
	if f.SuggestionWaiting {
		s.Write(" AND EXISTS (SELECT 1 FROM messaging.suggestions AS s WHERE s.conversation_id = v.id)")
	}
	if f.Assignee != "" {
		s.Write(" AND lower(v.assignee) = lower(").Arg(f.Assignee).Write(")")
	}
	return s.NewestFirst("v.last_message_at", "v.id", q.Before, q.At, q.Limit), true
}

// conversationScanner reads rows of conversationColumns with few
// allocations, reusing its variables from row to row: the uuids are
// scanned as bytes and the text columns as pgx's own buffer, then a row's
// ids and texts are copied into one string its fields share; the
// workspace and the channels, the same on many rows of a page, are
// formatted once each (uuidStrings), and the platform is one of
// channel.Kinds.
type conversationScanner struct {
	id, workspaceID, channelID, contactID pgtype.UUID

	platform, replyTo, senderID, name, profilePic, handoverReason, unanswered, tags, assignee pgtype.DriverBytes

	lastMessageAt, createdAt time.Time
	lastCustomerMessageAt    pgtype.Timestamptz
	handedOver               bool
	turns                    int64

	dest []any  // where Scan puts conversationColumns, in their order
	text []byte // a row's ids and texts before they become its string

	// The workspaces and channels formatted so far.
	known uuidStrings
}

// uuidStrings formats a few uuids that come again and again once each.
type uuidStrings struct {
	ids     [8][16]byte
	strings [8]string
	n       int
}

// of is u's text, formatted anew only when it is not among the last few.
func (k *uuidStrings) of(u [16]byte) string {
	for i := range min(k.n, len(k.ids)) {
		if k.ids[i] == u {
			return k.strings[i]
		}
	}
	i := k.n % len(k.ids)
	k.ids[i], k.strings[i] = u, string(db.AppendUUID(nil, u))
	k.n++
	return k.strings[i]
}

func (sc *conversationScanner) scan(rows pgx.Rows) (conversation.Conversation, error) {
	if sc.dest == nil {
		sc.dest = []any{
			&sc.id, &sc.workspaceID, &sc.channelID, &sc.platform, &sc.replyTo, &sc.lastMessageAt,
			&sc.lastCustomerMessageAt, &sc.createdAt, &sc.contactID, &sc.senderID, &sc.name, &sc.profilePic,
			&sc.handedOver, &sc.handoverReason, &sc.unanswered, &sc.tags, &sc.assignee, &sc.turns,
		}
	}
	if err := rows.Scan(sc.dest...); err != nil {
		return conversation.Conversation{}, err
	}
	workspaceID, channelID := sc.known.of(sc.workspaceID.Bytes), sc.known.of(sc.channelID.Bytes)
	// One string for the row's own texts, cut at these ends.
	t := db.AppendUUID(sc.text[:0], sc.id.Bytes)
	t = db.AppendUUID(t, sc.contactID.Bytes)
	var ends [9]int
	ends[0], ends[1] = 36, 72
	for i, b := range [...][]byte{sc.replyTo, sc.senderID, sc.name, sc.profilePic, sc.handoverReason, sc.unanswered, sc.assignee} {
		t = append(t, b...)
		ends[i+2] = len(t)
	}
	sc.text = t
	all := string(t)
	field := func(i int) string {
		if i == 0 {
			return all[:ends[0]]
		}
		return all[ends[i-1]:ends[i]]
	}
	c := conversation.Conversation{
		ID: field(0), WorkspaceID: workspaceID, ChannelID: channelID, Platform: platformOf(sc.platform),
		ReplyTo: field(2), LastMessageAt: utc(sc.lastMessageAt), CreatedAt: utc(sc.createdAt),
		Contact: conversation.Contact{
			ID: field(1), WorkspaceID: workspaceID, ChannelID: channelID,
			SenderID: field(3), Name: field(4), ProfilePic: field(5),
		},
		Chat: conversation.Chat{
			HandedOver: sc.handedOver, HandoverReason: field(6), Unanswered: field(7), Assignee: field(8),
			Tags: []string{}, Turns: sc.turns,
		},
	}
	if sc.lastCustomerMessageAt.Valid {
		c.LastCustomerMessageAt = utc(sc.lastCustomerMessageAt.Time)
	}
	// Most conversations have no tags, which needs no JSON decoder.
	if string(sc.tags) != "[]" {
		// Into a variable of its own: c's address would move c to the heap.
		var tags []string
		if err := json.Unmarshal(sc.tags, &tags); err != nil {
			return conversation.Conversation{}, fmt.Errorf("decode tags of conversation %s: %w", c.ID, err)
		}
		c.Chat.Tags = nonNil(tags)
	}
	return c, nil
}

// platformOf is the channel kind named b, without a string of its own
// for the kinds there are.
func platformOf(b []byte) channel.Kind {
	for _, k := range channel.Kinds {
		if string(k) == string(b) {
			return k
		}
	}
	return channel.Kind(b)
}

// LastMessages returns the newest message of each conversation.
func (s *ConversationStore) LastMessages(ctx context.Context, conversationIDs []string) (map[string]conversation.Message, error) {
	out := map[string]conversation.Message{}
	ids := validIDs(conversationIDs)
	if len(ids) == 0 {
		return out, nil
	}
	var rows []messageRow
	err := s.db.WithContext(ctx).Raw(`SELECT DISTINCT ON (conversation_id) * FROM messaging.messages
		WHERE conversation_id IN ? ORDER BY conversation_id, created_at DESC, id DESC`, ids).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("last messages: %w", err)
	}
	for _, r := range rows {
		m, err := r.toDomain()
		if err != nil {
			return nil, err
		}
		out[m.ConversationID] = m
	}
	return out, nil
}

// ListMessages returns a page of a conversation's messages.
func (s *ConversationStore) ListMessages(ctx context.Context, q conversation.MessageQuery) ([]conversation.Message, error) {
	if !validID(q.ConversationID) {
		return nil, nil
	}
	tx := s.db.WithContext(ctx).Model(&messageRow{}).Where("conversation_id = ?", q.ConversationID)
	var rows []messageRow
	if err := tx.Scopes(db.NewestFirst("created_at", "id", q.Before, q.At, q.Limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	out := make([]conversation.Message, len(rows))
	for i, r := range rows {
		m, err := r.toDomain()
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// addSentSQL stores sent messages of one conversation in one statement,
// atomic as one: it moves the conversation forward (every sent message
// answers the customer, Message.Answers) and inserts the messages (then
// the receipt, withReceipt) from the updated row only, so a conversation
// that does not exist stores nothing. It returns how many conversations
// it updated. The messages' values come as a list, whose parameters get
// their columns' types here, as an INSERT of them would give.
func addSentSQL(messages int, withReceipt bool) string {
	var b strings.Builder
	b.WriteString(`WITH v AS (
		UPDATE messaging.conversations SET last_message_at = GREATEST(last_message_at, ?), unanswered = ''
		WHERE id = ? RETURNING id
	), m AS (
		INSERT INTO messaging.messages (id, workspace_id, conversation_id, sender, type, content, metadata, external_id, created_at)
		SELECT x.* FROM v, (VALUES `)
	for i := range messages {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`(?::uuid, ?::uuid, ?::uuid, ?, ?, ?, ?::jsonb, ?, ?::timestamptz)`)
	}
	b.WriteString(`) AS x (id, workspace_id, conversation_id, sender, type, content, metadata, external_id, created_at)
	)`)
	if withReceipt {
		b.WriteString(`, r AS (` + insertReceiptSQL(`SELECT ?, ?, ?, ?, ?, ?, now() FROM v`) + `)`)
	}
	b.WriteString(` SELECT count(*) FROM v`)
	return b.String()
}

// AddSent stores sent messages of one conversation, moves the
// conversation forward to the latest and, when rec is not nil, stores the
// send's idempotency receipt, all in one statement (addSentSQL).
func (s *ConversationStore) AddSent(ctx context.Context, msgs []conversation.Message, rec *receipt.Receipt) error {
	if len(msgs) == 0 {
		return errors.New("add sent: no message")
	}
	if rec != nil && s.receipts == nil {
		return errNoReceiptStore
	}
	conversationID := msgs[0].ConversationID
	latest := msgs[0].CreatedAt
	args := []any{nil, conversationID}
	for _, m := range msgs {
		row, err := messageToRow(m)
		if err != nil {
			return err
		}
		args = append(args, row.ID, row.WorkspaceID, row.ConversationID, row.Sender, row.Type, row.Content,
			row.Metadata, row.ExternalID, row.CreatedAt)
		if m.CreatedAt.After(latest) {
			latest = m.CreatedAt
		}
	}
	args[0] = latest
	if rec != nil {
		args = append(append(args, receiptArgs(*rec)...), s.receipts.ttl.Seconds())
	}
	var updated int64
	if err := s.db.WithContext(ctx).Raw(addSentSQL(len(msgs), rec != nil), args...).Scan(&updated).Error; err != nil {
		return fmt.Errorf("store sent messages of conversation %s: %w", conversationID, err)
	}
	if updated == 0 {
		return conversation.ErrNotFound
	}
	return nil
}

// UpdateChat changes a conversation's chat state under its row's lock.
func (s *ConversationStore) UpdateChat(ctx context.Context, workspaceID, id string, fn func(*conversation.Chat) error) (conversation.Conversation, error) {
	if !validID(workspaceID, id) {
		return conversation.Conversation{}, conversation.ErrNotFound
	}
	var out conversation.Conversation
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []conversationRow
		err := tx.Table("messaging.conversations AS v").Select(conversationColumns).
			Joins("JOIN messaging.contacts AS c ON c.id = v.contact_id").
			Where("v.workspace_id = ? AND v.id = ?", workspaceID, id).
			Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Table: clause.Table{Name: "v"}}).
			Scan(&rows).Error
		if err != nil {
			return fmt.Errorf("lock conversation %s: %w", id, err)
		}
		if len(rows) == 0 {
			return conversation.ErrNotFound
		}
		out = rows[0].toDomain()
		chat := out.Chat
		chat.Tags = append([]string(nil), chat.Tags...)
		if err := fn(&chat); err != nil {
			return err
		}
		chat.Turns = out.Chat.Turns
		tags, err := json.Marshal(nonNil(chat.Tags))
		if err != nil {
			return fmt.Errorf("encode tags: %w", err)
		}
		err = tx.Exec(`UPDATE messaging.conversations
			SET handed_over = ?, handover_reason = ?, unanswered = ?, tags = ?, assignee = ? WHERE id = ?`,
			chat.HandedOver, chat.HandoverReason, chat.Unanswered, string(tags), chat.Assignee, id).Error
		if err != nil {
			return fmt.Errorf("update conversation %s: %w", id, err)
		}
		out.Chat = chat
		return nil
	})
	return out, err
}

// nonNil is list, or an empty one for nil, which JSON would write null.
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// AddReceipt stores a send's idempotency receipt alone.
func (s *ConversationStore) AddReceipt(ctx context.Context, rec receipt.Receipt) error {
	return s.receipts.insert(ctx, s.db, rec)
}

// FindContact returns the channel's contact with the platform id senderID.
func (s *ConversationStore) FindContact(ctx context.Context, channelID, senderID string) (conversation.Contact, error) {
	if !validID(channelID) {
		return conversation.Contact{}, conversation.ErrContactNotFound
	}
	var rows []contactRow
	err := s.db.WithContext(ctx).Table("messaging.contacts").
		Select("id, workspace_id, channel_id, sender_id, name, profile_pic").
		Where("channel_id = ? AND sender_id = ?", channelID, senderID).Limit(1).Scan(&rows).Error
	if err != nil {
		return conversation.Contact{}, fmt.Errorf("load contact %s of channel %s: %w", senderID, channelID, err)
	}
	if len(rows) == 0 {
		return conversation.Contact{}, conversation.ErrContactNotFound
	}
	return rows[0].toDomain(), nil
}

// receiveTx is one delivery's transaction.
type receiveTx struct {
	tx *gorm.DB
}

func (r receiveTx) Claim(ctx context.Context, channelID, key string) (bool, error) {
	res := r.tx.WithContext(ctx).Exec(`INSERT INTO messaging.ingress_receipts (channel_id, key) VALUES (?, ?) ON CONFLICT DO NOTHING`, channelID, key)
	if res.Error != nil {
		return false, fmt.Errorf("claim delivery %s: %w", key, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// upsertConversationSQL stores the contact and the conversation in one
// statement. A platform may send an empty name or picture (privacy
// settings): what we knew is kept rather than erased. A retried, older
// delivery must not move the conversation back in time nor redirect
// replies to an older chat.
const upsertConversationSQL = `
	WITH c AS (
		INSERT INTO messaging.contacts AS k (id, workspace_id, channel_id, sender_id, name, profile_pic)
		VALUES (@contact_id, @workspace_id, @channel_id, @sender_id, @name, @profile_pic)
		ON CONFLICT (channel_id, sender_id) DO UPDATE SET
			name = CASE WHEN excluded.name <> '' THEN excluded.name ELSE k.name END,
			profile_pic = CASE WHEN excluded.profile_pic <> '' THEN excluded.profile_pic ELSE k.profile_pic END,
			updated_at = now()
		RETURNING id, sender_id, name, profile_pic
	), v AS (
		INSERT INTO messaging.conversations AS v
			(id, workspace_id, channel_id, contact_id, platform, reply_to, last_message_at, last_customer_message_at)
		SELECT @id, @workspace_id, @channel_id, c.id, @platform, @reply_to, @last_message_at, @last_customer_message_at FROM c
		ON CONFLICT (channel_id, contact_id) DO UPDATE SET
			reply_to = CASE WHEN excluded.last_message_at >= v.last_message_at THEN excluded.reply_to ELSE v.reply_to END,
			last_message_at = GREATEST(v.last_message_at, excluded.last_message_at),
			last_customer_message_at = GREATEST(v.last_customer_message_at, excluded.last_customer_message_at)
		RETURNING id, workspace_id, channel_id, platform, reply_to, last_message_at, last_customer_message_at, created_at, contact_id,
			` + conversationChatColumns + `
	)
	SELECT ` + conversationColumns + ` FROM v JOIN c ON c.id = v.contact_id`

func (r receiveTx) UpsertConversation(ctx context.Context, conv conversation.Conversation) (conversation.Conversation, error) {
	var lastCustomer *time.Time
	if !conv.LastCustomerMessageAt.IsZero() {
		lastCustomer = &conv.LastCustomerMessageAt
	}
	k := conv.Contact
	var rows []conversationRow
	err := r.tx.WithContext(ctx).Raw(upsertConversationSQL,
		sql.Named("contact_id", k.ID), sql.Named("workspace_id", conv.WorkspaceID), sql.Named("channel_id", conv.ChannelID),
		sql.Named("sender_id", k.SenderID), sql.Named("name", k.Name), sql.Named("profile_pic", k.ProfilePic),
		sql.Named("id", conv.ID), sql.Named("platform", string(conv.Platform)), sql.Named("reply_to", conv.ReplyTo),
		sql.Named("last_message_at", conv.LastMessageAt), sql.Named("last_customer_message_at", lastCustomer),
	).Scan(&rows).Error
	if err != nil {
		return conversation.Conversation{}, fmt.Errorf("upsert contact and conversation: %w", err)
	}
	if len(rows) != 1 {
		return conversation.Conversation{}, errors.New("upsert contact and conversation: no row returned")
	}
	return rows[0].toDomain(), nil
}

// addMessageWithEventSQL stores a message and the outbox event telling of
// it in one statement.
const addMessageWithEventSQL = `
	WITH m AS (
		INSERT INTO messaging.messages (id, workspace_id, conversation_id, sender, type, content, metadata, external_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	)
	INSERT INTO messaging.outbox (event_id, subject, payload, created_at) VALUES (?, ?, ?, ?)`

func (r receiveTx) AddMessage(ctx context.Context, m conversation.Message, ev *outbox.Event) error {
	row, err := messageToRow(m)
	if err != nil {
		return err
	}
	if m.Answers() {
		// A private reply's DM: the commenter's conversation is answered.
		if err := r.tx.WithContext(ctx).Exec(`UPDATE messaging.conversations SET unanswered = '' WHERE id = ? AND unanswered <> ''`,
			m.ConversationID).Error; err != nil {
			return fmt.Errorf("clear unanswered of conversation %s: %w", m.ConversationID, err)
		}
	}
	if ev == nil {
		if err := r.tx.WithContext(ctx).Create(&row).Error; err != nil {
			return fmt.Errorf("insert message: %w", err)
		}
		return nil
	}
	err = r.tx.WithContext(ctx).Exec(addMessageWithEventSQL,
		row.ID, row.WorkspaceID, row.ConversationID, row.Sender, row.Type, row.Content, row.Metadata, row.ExternalID, row.CreatedAt,
		ev.ID, ev.Subject, ev.Payload, ev.CreatedAt).Error
	if err != nil {
		return fmt.Errorf("insert message and its event: %w", err)
	}
	return nil
}

// addTurnSQL stores a customer message, moves its conversation's turn
// counter to the turn's number and writes the turn's outbox row, in one
// statement. The counter moves only from the number before the turn's
// (the row is locked by the upsert of this transaction, so it cannot have
// moved meanwhile); otherwise no outbox row is written, and AddTurn fails.
const addTurnSQL = `
	WITH m AS (
		INSERT INTO messaging.messages (id, workspace_id, conversation_id, sender, type, content, metadata, external_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	), t AS (
		UPDATE messaging.conversations SET turns = ? WHERE id = ? AND turns = ? RETURNING id
	)
	INSERT INTO messaging.outbox (event_id, subject, payload, created_at) SELECT ?, ?, ?, ? FROM t`

func (r receiveTx) AddTurn(ctx context.Context, m conversation.Message, turn conversation.Turn) error {
	row, err := messageToRow(m)
	if err != nil {
		return err
	}
	ev := turn.Event
	res := r.tx.WithContext(ctx).Exec(addTurnSQL,
		row.ID, row.WorkspaceID, row.ConversationID, row.Sender, row.Type, row.Content, row.Metadata, row.ExternalID, row.CreatedAt,
		turn.Seq, m.ConversationID, turn.Seq-1,
		ev.ID, ev.Subject, ev.Payload, ev.CreatedAt)
	if res.Error != nil {
		return fmt.Errorf("insert message and its chat turn: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("chat turn %d of conversation %s: the turn counter is not at %d", turn.Seq, m.ConversationID, turn.Seq-1)
	}
	return nil
}

func (r receiveTx) AddEvent(ctx context.Context, e outbox.Event) error {
	row := outboxRow{EventID: e.ID, Subject: e.Subject, Payload: e.Payload, CreatedAt: e.CreatedAt}
	if err := r.tx.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("insert outbox event: %w", err)
	}
	return nil
}
