package adapters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/parleyhq/parley/pkg/db"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
)

// MaxHeldChats bounds the conversations one process holds at once. Each
// hold keeps a pooled connection for the whole answer (its lock's
// transaction) and needs others meanwhile (the chat flow, a knowledge
// search); with the continues' half (MaxHeldContinues) of db.Open's 20
// connections, this leaves four free, so those reads never all wait on
// each other. A turn past the bound waits for a place; instances add
// places (docs/chat.md "Operating it").
const MaxHeldChats = 6

// ChatStore keeps the conversations the chat runs answer
// (flows.chat_conversations) with their runs, on PostgreSQL.
type ChatStore struct {
	db    *gorm.DB
	holds chan struct{}
}

var _ catalog.ChatStore = (*ChatStore)(nil)

// NewChatStore returns a store on gdb.
func NewChatStore(gdb *gorm.DB) *ChatStore {
	return &ChatStore{db: gdb, holds: make(chan struct{}, MaxHeldChats)}
}

type chatConversationRow struct {
	ConversationID string     `gorm:"column:conversation_id;primaryKey"`
	WorkspaceID    string     `gorm:"column:workspace_id"`
	AnsweredSeq    int64      `gorm:"column:answered_seq"`
	Mode           string     `gorm:"column:mode"`
	WaitingRunID   *string    `gorm:"column:waiting_run_id"`
	WaitingSince   *time.Time `gorm:"column:waiting_since"`
	UpdatedAt      time.Time  `gorm:"column:updated_at"`
}

func (chatConversationRow) TableName() string { return Schema + ".chat_conversations" }

// Hold implements catalog.ChatStore. The conversation's row is locked with
// FOR UPDATE NOWAIT in a transaction held while fn runs, for the reasons
// RunStore.Continue gives: PostgreSQL drops the lock the moment its holder
// dies, so the turn's redelivery finds the conversation free, and a second
// instance is told at once that the conversation is busy. What fn decided
// is written in that transaction; a caller gone meanwhile (the instance
// stopping) writes nothing, and the turn is answered again.
//
// The channel's chat flow is read in the statement that locks the row
// (ChatFlowStore.ChatFlow's conditions, joined), so that a turn costs no
// round trip of its own for it; the transaction is a db.HeldTx, whose
// BEGIN goes with that statement and whose COMMIT goes with the last.
func (s *ChatStore) Hold(ctx context.Context, workspaceID, conversationID, channelID string, fn func(c *catalog.ChatConversation) (*catalog.ChatRun, error)) error {
	if !validID(workspaceID) || !validID(conversationID) {
		return fmt.Errorf("conversation %q of workspace %q: not an id", conversationID, workspaceID)
	}
	select {
	case s.holds <- struct{}{}:
		defer func() { <-s.holds }()
	case <-ctx.Done():
		return ctx.Err()
	}
	held, err := db.BeginHeld(ctx, s.db)
	if err != nil {
		return fmt.Errorf("hold chat conversation: %w", err)
	}
	defer held.Rollback()
	row, err := lockConversation(ctx, held, workspaceID, conversationID, channelID)
	if err != nil {
		return err
	}
	tx, err := held.DB()
	if err != nil {
		return err
	}
	c := &catalog.ChatConversation{WorkspaceID: row.WorkspaceID, ConversationID: row.ConversationID, AnsweredSeq: row.AnsweredSeq, Mode: row.Mode,
		ChatFlowID: row.ChatFlowID, ChatFlowVersion: row.ChatFlowVersion, WakeTries: row.WakeTries}
	if row.WakeRetryAt != nil {
		c.WakeRetryAt = row.WakeRetryAt.UTC()
	}
	if row.AnsweredSeq > 0 {
		// The row is written when a turn is answered or a run woken; its
		// insert for a first turn not answered yet is neither.
		c.MovedAt = row.UpdatedAt.UTC()
	}
	if row.WaitingRunID != nil {
		if c.Waiting, err = LoadRun(tx, *row.WaitingRunID); err != nil {
			return fmt.Errorf("load waiting run: %w", err)
		}
		if row.WaitingSince != nil {
			c.WaitingSince = row.WaitingSince.UTC()
		}
	}
	changed, err := fn(c)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	conversation := conversationArgs(c)
	switch {
	case changed != nil && changed.New:
		// A new run is stored with the conversation, in one statement,
		// sent with the COMMIT.
		args, err := insertRunArgs(changed.Run, changed.NodeRuns)
		if err != nil {
			return err
		}
		if err := held.Commit(ctx, insertRunAndConversationStatement, append(args, conversation...)...); err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		return nil
	case changed != nil:
		if err := UpdateRun(tx, changed.Run, changed.NodeRuns); err != nil {
			return err
		}
	}
	if err := held.Commit(ctx, updateConversation(1), conversation...); err != nil {
		return fmt.Errorf("update chat conversation: %w", err)
	}
	return nil
}

// updateConversation stores what a turn changed of its conversation, from
// the parameters that start at first (conversationArgs).
func updateConversation(first int) string {
	return fmt.Sprintf(`UPDATE `+Schema+`.chat_conversations
	SET answered_seq = $%d, mode = $%d, waiting_run_id = $%d, waiting_since = $%d, updated_at = $%d,
		wake_tries = $%d, wake_retry_at = $%d
	WHERE conversation_id = $%d`, first, first+1, first+2, first+3, first+4, first+5, first+6, first+7)
}

// insertRunAndConversationStatement stores a turn's new run and its
// conversation ($31–$38).
var insertRunAndConversationStatement = insertRunWith(updateConversation(31))

// conversationArgs are updateConversation's parameters for c.
func conversationArgs(c *catalog.ChatConversation) []any {
	var waitingRunID *string
	var waitingSince *time.Time
	if c.Waiting != nil {
		since := c.WaitingSince.UTC()
		waitingRunID, waitingSince = &c.Waiting.ID, &since
	}
	var retryAt *time.Time
	if !c.WakeRetryAt.IsZero() {
		at := c.WakeRetryAt.UTC()
		retryAt = &at
	}
	return []any{c.AnsweredSeq, c.Mode, waitingRunID, waitingSince, time.Now().UTC(), c.WakeTries, retryAt, c.ConversationID}
}

// firstTurnLockClass is the first key of the advisory locks that guard a
// conversation's creation (the second is its id's hash): a key of the
// chat store's own.
const firstTurnLockClass = 0x63686174 // "chat"

// heldConversation is a conversation's row as lockConversation reads it,
// with its channel's chat flow ("" when the assistant answers).
type heldConversation struct {
	WorkspaceID, ConversationID string
	AnsweredSeq                 int64
	Mode                        string
	WaitingRunID                *string
	WaitingSince                *time.Time
	UpdatedAt                   time.Time
	WakeTries                   int
	WakeRetryAt                 *time.Time
	ChatFlowID                  string
	ChatFlowVersion             int
}

// lockConversationStatement locks the conversation's row ($3, of
// workspace $4), only it (the chat flow's rows are read, not locked), and
// reads the chat flow of channel $5 (NULL for none) with it.
var lockConversationStatement = `SELECT c.workspace_id, c.conversation_id, c.answered_seq, c.mode, c.waiting_run_id, c.waiting_since, c.updated_at,
		c.wake_tries, c.wake_retry_at, coalesce(cf.flow_id::text, ''), coalesce(f.published_version, 0)
	FROM ` + Schema + `.chat_conversations c
	LEFT JOIN (` + chatFlowJoin(1) + `) ON cf.channel_id = $5 AND cf.workspace_id = c.workspace_id
	WHERE c.conversation_id = $3 AND c.workspace_id = $4
	FOR UPDATE OF c NOWAIT`

// lockConversation locks the conversation's row, creating it for the
// conversation's first turn, and reads the chat flow of channelID ("" for
// none) with it, as held's first statement (the one that begins it).
func lockConversation(ctx context.Context, held *db.HeldTx, workspaceID, conversationID, channelID string) (heldConversation, error) {
	var channel *string
	if validID(channelID) {
		channel = &channelID
	}
	for range 2 {
		var row heldConversation
		err := held.QueryRow(ctx, lockConversationStatement,
			append(chatFlowArgs(), conversationID, workspaceID, channel),
			&row.WorkspaceID, &row.ConversationID, &row.AnsweredSeq, &row.Mode, &row.WaitingRunID, &row.WaitingSince, &row.UpdatedAt,
			&row.WakeTries, &row.WakeRetryAt, &row.ChatFlowID, &row.ChatFlowVersion)
		switch {
		case err == nil:
			return row, nil
		case lockNotAvailable(err):
			return heldConversation{}, catalog.ErrConversationBusy
		case !errors.Is(err, sql.ErrNoRows):
			return heldConversation{}, fmt.Errorf("lock chat conversation: %w", err)
		}
		// A first turn has no row to lock, and its insert would wait for
		// another instance's insert of the same conversation until that
		// instance's whole answer is stored: the conversation's first
		// insert is taken under a transaction's advisory lock instead,
		// which another instance is refused at once.
		tx, err := held.DB()
		if err != nil {
			return heldConversation{}, err
		}
		var free bool
		if err := tx.Raw("SELECT pg_try_advisory_xact_lock(?, hashtext(?))", firstTurnLockClass, conversationID).Scan(&free).Error; err != nil {
			return heldConversation{}, fmt.Errorf("lock chat conversation's creation: %w", err)
		}
		if !free {
			return heldConversation{}, catalog.ErrConversationBusy
		}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&chatConversationRow{
			ConversationID: conversationID, WorkspaceID: workspaceID, Mode: "auto", UpdatedAt: time.Now().UTC(),
		}).Error; err != nil {
			return heldConversation{}, fmt.Errorf("create chat conversation: %w", err)
		}
	}
	// Only another workspace's conversation of the same id gets here.
	return heldConversation{}, fmt.Errorf("conversation %s is not workspace %s's", conversationID, workspaceID)
}

// DueWakes implements catalog.ChatStore. greatest skips a NULL
// wake_retry_at: a wake never tried takes its place by its wake time.
func (s *ChatStore) DueWakes(ctx context.Context, now time.Time, limit int) ([]catalog.Wakeup, error) {
	var rows []struct {
		WorkspaceID    string
		ConversationID string
		RunID          string
	}
	err := s.db.WithContext(ctx).Raw(`
		SELECT c.workspace_id, c.conversation_id, r.id AS run_id
		FROM `+Schema+`.runs r JOIN `+Schema+`.chat_conversations c ON c.waiting_run_id = r.id
		WHERE r.status = 'waiting' AND r.wake_at <= @now AND (c.wake_retry_at IS NULL OR c.wake_retry_at <= @now)
		ORDER BY greatest(r.wake_at, c.wake_retry_at), r.id
		LIMIT @limit`, sql.Named("now", now.UTC()), sql.Named("limit", limit)).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("due chat runs: %w", err)
	}
	out := make([]catalog.Wakeup, len(rows))
	for i, r := range rows {
		out[i] = catalog.Wakeup{WorkspaceID: r.WorkspaceID, ConversationID: r.ConversationID, RunID: r.RunID}
	}
	return out, nil
}
